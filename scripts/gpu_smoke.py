#!/usr/bin/env python3
"""Quick GPU sanity run (device machine): eWFA vs edlib on a few thousand pairs per setting."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from oracles import edit  # noqa: E402
from simulate import simulate  # noqa: E402
from strategies import adversarial, to_batch  # noqa: E402

from gpualign import cigar as C  # noqa: E402
from gpualign.config import AlignConfig  # noqa: E402
from gpualign.engines.gpu_edit import GpuEditEngine  # noqa: E402

e = GpuEditEngine()
t0 = time.time()
e._module()
print(f"compile {time.time() - t0:.1f}s")
total_bad = 0
for ln, rate in ((150, 0.02), (1000, 0.05), (300, 0.3), (2000, 0.1)):
    q, t = simulate(2000, ln, rate, seed=1)
    b = to_batch(list(zip(q, t)) + adversarial())
    for cfg in (AlignConfig(), AlignConfig(distance_only=True), AlignConfig(n_mismatch=True)):
        r = e.align(b, cfg)
        bad = cbad = 0
        for i in range(b.n):
            if r.status[i] != 0:
                continue
            w = edit(b.query(i), b.target(i), cfg.n_mismatch)
            bad += int(w != r.score[i])
            if r.has_cigar:
                ops = r.cigar[r.cigar_off[i]: r.cigar_off[i] + r.cigar_len[i]]
                try:
                    C.check_cigar(b.query(i), b.target(i), ops, cfg.n_mismatch)
                    assert C.score_cigar(ops, cfg.effective_penalties) == w
                except Exception as ex:  # noqa: BLE001
                    cbad += 1
                    if cbad < 3:
                        print("  cigar", i, ex)
        total_bad += bad + cbad
        print(f"{ln}bp {rate:.2f} dist={cfg.distance_only} nmm={cfg.n_mismatch}: ok {(r.status == 0).sum()} "
              f"exceeded {(r.status == 1).sum()} failed {(r.status == 2).sum()} bad {bad} cigarbad {cbad} {e.last_counts}")
print("SMOKE", "PASS" if total_bad == 0 else f"FAIL {total_bad}")
