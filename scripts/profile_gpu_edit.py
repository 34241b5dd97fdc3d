#!/usr/bin/env python3
"""Where the eWFA engine's time goes (device machine): upload, kernels, host work, per setting."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import cupy  # noqa: E402
import numpy as np  # noqa: E402
from simulate import simulate  # noqa: E402

from gpualign.config import AlignConfig  # noqa: E402
from gpualign.engines.gpu_edit import GpuEditEngine  # noqa: E402
from gpualign.records import PairBatch  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
BATCH_BASES = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 26
e = GpuEditEngine()
e._module()
print(f"{'set':>14} {'mode':>8} {'align_s':>8} {'Mpairs/s':>9} {'kernel_s':>9} {'upload_s':>9}")
for ln, rate in ((150, 0.02), (150, 0.10), (1000, 0.02), (1000, 0.10)):
    q, t = simulate(N, ln, rate, seed=5)
    per = max(1, BATCH_BASES // (2 * ln))
    batches = [PairBatch.from_sequences(q[i:i + per], t[i:i + per]) for i in range(0, N, per)]
    for cfg in (AlignConfig(), AlignConfig(distance_only=True)):
        e.align(batches[0].take(np.arange(min(2000, batches[0].n))), cfg)  # warm
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for b in batches:
            e.align(b, cfg)
        cupy.cuda.Device().synchronize()
        dt = time.perf_counter() - t0
        # kernel only: the main level on resident data, timed with events
        b = batches[0]
        dev_t0 = time.perf_counter()
        d_packed, d_raw, d_meta = e._upload(b, cfg)
        cupy.cuda.Device().synchronize()
        up = (time.perf_counter() - dev_t0) * len(batches)
        dev = (d_packed, d_raw, d_meta[0], d_meta[1], d_meta[2], d_meta[3])
        ids = cupy.arange(b.n, dtype=cupy.int32)
        lvl = e.levels(cfg)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        best = None
        for lv in lvl:
            start.record()
            s = e._run_level(lv, dev, ids, b.n, not cfg.distance_only)[0]
            end.record()
            end.synchronize()
            if float((s >= 0).mean()) > 0.99:
                best = cupy.cuda.get_elapsed_time(start, end) / 1000 * len(batches)
                break
        mode = "dist" if cfg.distance_only else "cigar"
        print(f"{ln:>6}bp {rate:.2f} {mode:>8} {dt:8.3f} {N / dt / 1e6:9.2f} {best or float('nan'):9.3f} {up:9.3f}",
              flush=True)
