"""long_bound.py's exact 16-mer anchors found on the device (kernels/anchors.cu, with the sort and prefix
sums of gpu/arrays.py): the same anchors as long_bound's numpy version, none of CuPy's own kernels."""

from __future__ import annotations

import numpy as np

from .. import long_bound
from ..gpu import arrays
from ..gpu.kernels import load_module
from ..pack import CODE2

KERNELS = ("anchors.cu", ("kmer_sample", "kmer_match"), ())  # (file, names, defines): engines/variants.py


def _kmers(mod, d_s, n: int, d_code):
    """(codes, positions) of s's sampled ACGT 16-mers, sorted by code (device uint32, int64)."""
    import cupy

    count = cupy.zeros(1, dtype=cupy.uint64)
    null = np.uint64(0)
    mod.get_function("kmer_sample")(*arrays.grid(n), (d_s, np.int64(n), d_code, count, null, null))
    room = int(count.get()[0])
    codes, pos = cupy.empty(room, dtype=cupy.uint32), cupy.empty(room, dtype=cupy.int64)
    if room:
        count.data.memset_async(0, 8)
        mod.get_function("kmer_sample")(*arrays.grid(n), (d_s, np.int64(n), d_code, count, codes, pos))
    return arrays.sort_pairs(codes, pos, bits=2 * long_bound.K)


def anchors(q: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The k-mers occurring once in each of q and t (host uint8 arrays) and in both: (query starts, target
    starts) as host int64 arrays, by query start (long_bound.raw_anchors' result)."""
    import cupy

    mod = load_module(*KERNELS)
    d_code = cupy.asarray(CODE2)
    cq, pq = _kmers(mod, cupy.asarray(q), len(q), d_code)
    ct, pt = _kmers(mod, cupy.asarray(t), len(t), d_code)
    empty = np.zeros(0, np.int64)
    if len(cq) == 0 or len(ct) == 0:
        return empty, empty
    count = cupy.zeros(1, dtype=cupy.uint64)
    aq, at = cupy.empty(len(cq), dtype=cupy.uint32), cupy.empty(len(cq), dtype=cupy.int64)
    mod.get_function("kmer_match")(*arrays.grid(len(cq)), (cq, pq, np.int64(len(cq)), ct, pt, np.int64(len(ct)), count,
                                                     aq, at))
    k = int(count.get()[0])
    if k == 0:
        return empty, empty
    bits = max(1, len(q).bit_length())
    sq, st = arrays.sort_pairs(aq[:k], at[:k], bits=bits)
    return sq.get().astype(np.int64), st.get()
