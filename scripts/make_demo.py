#!/usr/bin/env python3
"""Regenerate data/demo/a.fa and b.fa (the README example): 300 small pairs."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from simulate import simulate  # noqa: E402

out = os.path.join(os.path.dirname(__file__), "..", "data", "demo")
q1, t1 = simulate(200, 150, 0.02, seed=11)
q2, t2 = simulate(80, 1000, 0.05, seed=12)
q3, t3 = simulate(20, 300, 0.05, seed=13, profile="long")
# a few with soft-masked (lowercase) stretches and N runs, as real assemblies have
q3 = [q[:20].lower() + q[20:40] + b"NNNNN" + q[45:] for q in q3]
with open(os.path.join(out, "a.fa"), "wb") as fa, open(os.path.join(out, "b.fa"), "wb") as fb:
    for i, (q, t) in enumerate(zip(q1 + q2 + q3, t1 + t2 + t3)):
        fa.write(b">read%d\n%s\n" % (i + 1, q))
        fb.write(b">ref%d\n%s\n" % (i + 1, t))
