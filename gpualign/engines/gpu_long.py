"""GPU engine 3: exact edit distance of chromosome-scale strings (kernels/wfa_long.cu).

One persistent kernel runs every wavefront step, separated by a software grid barrier; the host
only polls a small progress record from another stream. Two int32 columns of 2*max(n,m)+3 entries
are allocated once. ``prune`` selects the dynamic-diamond band (default) or the plain version.
"""

from __future__ import annotations

import time

import numpy as np

from ._cuda import load_module

MAX_LEN = (1 << 31) - 64


def distance(q: np.ndarray, t: np.ndarray, prune: bool = True, progress=None, poll: float = 0.2) -> dict:
    """q, t: uint8 arrays (folded, rule applied). Returns dict(distance, cells, seconds, steps)."""
    import cupy

    n, m = len(q), len(t)
    if max(n, m) > MAX_LEN or n + m + 128 >= 1 << 32:
        raise ValueError("strings too long for the GPU long-string engine (2^31 bytes each)")
    mod = load_module("wfa_long.cu", ("wfa_long",))
    kern = mod.get_function("wfa_long")
    tp = (n + 63) // 64 * 64
    size = (tp + m + 127) // 64 * 64 + 64
    host = np.zeros(size, np.uint8)
    host[:n] = q
    host[tp:tp + m] = t
    t0 = time.perf_counter()
    d_seq = cupy.asarray(host).view(cupy.uint32)
    center = max(n, m) + 1
    col_a = cupy.empty(2 * center + 1, dtype=cupy.int32)
    col_b = cupy.empty(2 * center + 1, dtype=cupy.int32)
    bar = cupy.zeros(2, dtype=cupy.uint32)
    out = cupy.zeros(8, dtype=cupy.int64)
    dev = cupy.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    run = cupy.cuda.Stream(non_blocking=True)
    watch = cupy.cuda.Stream(non_blocking=True)
    dev.synchronize()
    with run:
        # every block must be resident at once (software grid barrier): one 1024-thread block per SM
        kern((sms,), (1024,), (d_seq, np.uint32(0), np.int32(n), np.uint32(tp), np.int32(m), col_a, col_b,
                               np.int32(center), np.int32(1 if prune else 0), bar, out))
    done_event = run.record()
    import cupyx

    snap = cupyx.empty_pinned(8, dtype=np.int64)  # pinned: the poll must not wait for the kernel
    while not done_event.done:
        time.sleep(poll)
        if progress is not None:
            out.get(stream=watch, out=snap)
            watch.synchronize()
            progress(dict(score=int(snap[1]), bound=int(snap[2]), diagonals=int(snap[3]), final_offset=int(snap[4]),
                          target_len=m, elapsed=time.perf_counter() - t0))
    run.synchronize()
    res = out.get()
    if res[7] != 1:
        raise RuntimeError("GPU long-string kernel ended without a result")
    return dict(distance=int(res[0]), cells=int(res[5]), seconds=time.perf_counter() - t0, steps=int(res[1]))
