"""Device array operations from kernels/arrays.cu: what the engines would otherwise ask of CuPy's own
elementwise, reduction, scan and sort kernels, which CuPy compiles on first use (about a second each on a
fresh machine, dozens of them for `genome`) and which `gpualign cache build` cannot build ahead.

Every function runs on the current stream. Allocation (cupy.empty, cupy.zeros: a memset), copies
(set, get, asarray of a host array) and views are CuPy's and compile nothing."""

from __future__ import annotations

import numpy as np

from .kernels import Kernels

THREADS = 256  # kernels/arrays.cu's THREADS and TILE
TILE = THREADS * 16
_TYPES = {np.dtype(np.uint8): "unsigned char", np.dtype(np.uint16): "unsigned short", np.dtype(np.int32): "int",
          np.dtype(np.uint32): "unsigned int", np.dtype(np.int64): "long long",
          np.dtype(np.uint64): "unsigned long long"}
_KEYS = ("unsigned int", "unsigned long long")


def _names() -> tuple:
    each = [f"{op}<{c}>" for op in ("fill", "iota", "gather", "scatter", "reverse") for c in _TYPES.values()]
    each += [f"translate<{c}>" for c in ("unsigned char", "unsigned short")]
    each += [f"radix_{op}<{k}>" for op in ("hist", "scatter") for k in _KEYS]
    return (*each, "byte_counts", "scan_tiles", "scan_top", "scan_apply", "narrow_rows")


KERNELS = ("arrays.cu", _names(), ())  # (file, names, defines): engines/variants.py builds them ahead


_kernel = Kernels(KERNELS, per_device=True)  # name -> kernel function on the current device


def grid(n: int) -> tuple:
    """(blocks, threads) of a grid-stride launch over n elements."""
    return (max(1, min(65536, -(-n // THREADS))),), (THREADS,)


def _type(dtype) -> str:
    try:
        return _TYPES[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"no device array kernel for {np.dtype(dtype)}") from None


def fill(a, value):
    """a[:] = value (a contiguous device array); returns a."""
    if a.size:
        _kernel(f"fill<{_type(a.dtype)}>")(*grid(a.size), (a, np.int64(a.size), a.dtype.type(value)))
    return a


def full(n: int, value, dtype):
    """cupy.full(n, value, dtype), made without CuPy's fill kernel."""
    import cupy

    return fill(cupy.empty(n, dtype=dtype), value)


def copy(a):
    """A copy of the contiguous device array a, by a device-to-device copy on the current stream (CuPy's
    ndarray.copy() runs an elementwise kernel of its own)."""
    import cupy

    if not a.flags.c_contiguous:
        raise ValueError("arrays.copy takes a contiguous array")
    out = cupy.empty_like(a)
    if a.nbytes:
        out.data.copy_from_device_async(a.data, a.nbytes)
    return out


def arange(start: int, stop: int, step: int = 1, dtype=np.int32):
    """cupy.arange(start, stop, step, dtype) for a positive step."""
    import cupy

    n = max(0, -(-(stop - start) // step))
    out = cupy.empty(n, dtype=dtype)
    if n:
        t = out.dtype.type
        _kernel(f"iota<{_type(dtype)}>")(*grid(n), (out, np.int64(n), t(start), t(step)))
    return out


def gather(src, idx):
    """src[idx] (idx: int64 device array of places in the contiguous src)."""
    import cupy

    out = cupy.empty(len(idx), dtype=src.dtype)
    if len(idx):
        _kernel(f"gather<{_type(src.dtype)}>")(*grid(len(idx)), (src, idx, np.int64(len(idx)), out))
    return out


def scatter(dst, idx, values) -> None:
    """dst[idx] = values (idx int64, values of dst's type, both device arrays)."""
    if len(idx):
        _kernel(f"scatter<{_type(dst.dtype)}>")(*grid(len(idx)), (dst, idx, values, np.int64(len(idx))))


def translate(a, table, out=None):
    """table[a] for a uint8 device array and a table of 256 entries (uint8 or uint16; host, or contiguous
    on the device), into out (a contiguous device array of len(a)) or a new array."""
    import cupy

    if table.shape != (256,) or table.dtype not in (np.uint8, np.uint16):
        raise TypeError("translate takes a table of 256 uint8 or uint16 entries")
    if out is None:
        out = cupy.empty(len(a), dtype=table.dtype)
    if len(a):
        d_table = table if isinstance(table, cupy.ndarray) else cupy.asarray(np.ascontiguousarray(table))
        _kernel(f"translate<{_type(table.dtype)}>")(*grid(len(a)), (a, np.int64(len(a)), d_table, out))
    return out


def reverse(a):
    """a[::-1] as a new contiguous device array."""
    import cupy

    out = cupy.empty(len(a), dtype=a.dtype)
    if len(a):
        _kernel(f"reverse<{_type(a.dtype)}>")(*grid(len(a)), (a, np.int64(len(a)), out))
    return out


def narrow_rows(rows):
    """Four int64 device arrays of one length n as one int32 device array (4, n), row by row (values are
    taken as they fit: a batch's offsets and lengths, which are below 2^31 on the device)."""
    import cupy

    n = len(rows[0])
    out = cupy.empty((4, n), dtype=cupy.int32)
    if n:
        _kernel("narrow_rows")(*grid(4 * n), (*rows, np.int64(n), out))
    return out


def byte_counts(a) -> np.ndarray:
    """How many bytes of the uint8 device array a equal each value: a host int64 array of 256 (waits for
    the stream)."""
    import cupy

    counts = cupy.zeros(256, dtype=cupy.uint64)
    if len(a):
        _kernel("byte_counts")(*grid(len(a)), (a, np.int64(len(a)), counts))
    return counts.get().astype(np.int64)


def cumsum(a, exclusive: bool = False, out=None):
    """Prefix sums of an int64 device array (inclusive, or exclusive: each entry the sum before it), into
    out (may be a itself) or a new array."""
    import cupy

    if a.dtype != np.int64:
        raise TypeError("cumsum takes int64")
    n = len(a)
    if out is None:
        out = cupy.empty(n, dtype=cupy.int64)
    if n == 0:
        return out
    tiles = -(-n // TILE)
    sums = cupy.empty(tiles, dtype=cupy.int64)
    _kernel("scan_tiles")((tiles,), (THREADS,), (a, np.int64(n), sums))
    _kernel("scan_top")((1,), (THREADS,), (sums, np.int64(tiles)))
    _kernel("scan_apply")((tiles,), (THREADS,), (a, np.int64(n), sums, np.int32(exclusive), out))
    return out


def sort_pairs(keys, values, bits: int | None = None):
    """(keys, values) sorted by key, stably (an LSD radix sort, 8 bits a pass): keys uint32 or uint64,
    values int64, both device arrays (left as they are). bits: how many low bits of the keys can be set
    (default: all)."""
    import cupy

    if keys.dtype not in (np.uint32, np.uint64) or values.dtype != np.int64 or len(keys) != len(values):
        raise TypeError("sort_pairs takes uint32 or uint64 keys and as many int64 values")
    n = len(keys)
    bits = 8 * keys.itemsize if bits is None else bits
    ktype = _type(keys.dtype)
    tiles = max(1, -(-n // TILE))
    k_in, v_in = keys, values
    k_out, v_out = cupy.empty_like(keys), cupy.empty_like(values)
    hist = cupy.empty(256 * tiles, dtype=cupy.int64)
    if bits < 1:
        raise ValueError("sort_pairs sorts on 1 bit or more")
    if n == 0:
        return k_out, v_out
    spare = None
    for shift in range(0, bits, 8):
        _kernel(f"radix_hist<{ktype}>")((tiles,), (THREADS,), (k_in, np.int64(n), np.int32(shift), hist))
        cumsum(hist, exclusive=True, out=hist)
        _kernel(f"radix_scatter<{ktype}>")((tiles,), (THREADS,), (k_in, v_in, np.int64(n), np.int32(shift), hist,
                                                                  k_out, v_out))
        if spare is None:  # the input stays as it was: the second pass writes into a buffer of its own
            spare = (cupy.empty_like(keys), cupy.empty_like(values))
            k_in, v_in, (k_out, v_out) = k_out, v_out, spare
        else:
            k_in, v_in, k_out, v_out = k_out, v_out, k_in, v_in
    return k_in, v_in


def argsort(keys, bits: int | None = None):
    """The stable order of keys (uint32 or uint64 device array): an int64 device array."""
    return sort_pairs(keys, arange(0, len(keys), dtype=np.int64), bits)[1]
