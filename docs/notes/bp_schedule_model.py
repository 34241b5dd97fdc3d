#!/usr/bin/env python3
"""A fluid model of bp_long's strip pipeline (docs/notes/pruned-band.md): which order of strips, over one pass
or two parts met at a column fraction alpha, finishes G3's shape first. Not part of the package.

Units: a tick is the ~1,055 steps by which a strip starts after the strip above it. A strip at row fraction t
of its part computes a pruned width U - d * t of diagonals (U = d: one pass keeps half the band, as measured),
i.e. that many steps. W warps hold tickets (taken in the given order, each kept until its strip ends); a strip
runs once its upper strip has run a tick; A running strips advance min(1, A0 / A) steps a step each (A0:
what the SMs issue at full pace). Two parts: forward strips 0..alpha*R-1 in order; the backward part's strip b
gets the ticket after forward strip offset * alpha * R + b * pace. Scaled down 10x (strips, widths, warps).

  python docs/notes/bp_schedule_model.py
"""
import numpy as np


def run(alpha, offset=0.0, pace=1.0, R=4700, U=3.77e6, d=3.77e6, W=211, A0=211, wide=1.0):
    per_tick = 1055 * 10  # steps per tick, scaled with the strips
    parts = [round(alpha * R), R - round(alpha * R)]
    widths = [(wide * U - d * np.arange(k) / R) / per_tick for k in parts if k]
    keys = [np.arange(parts[0], dtype=float)] + ([offset * parts[0] + np.arange(parts[1]) * pace] if parts[1] else [])
    job = np.concatenate([np.full(len(k), j) for j, k in enumerate(keys)])
    strip = np.concatenate([np.arange(len(k)) for k in keys])
    order = np.lexsort((job, np.concatenate(keys)))
    job, strip = job[order], strip[order]
    base = np.concatenate([[0], np.cumsum([len(w) for w in widths])])
    where = np.empty(len(job), int)
    where[base[job] + strip] = np.arange(len(job))  # a strip's ticket
    up = np.where(strip > 0, where[np.maximum(base[job] + strip - 1, 0)], -1)
    left = np.concatenate(widths)[base[job] + strip]
    start = np.full(len(job), np.inf)
    held, taken, t = np.array([], int), 0, 0.0
    while taken < len(job) or len(held):
        k = min(W - len(held), len(job) - taken)
        held = np.concatenate([held, np.arange(taken, taken + k)])
        taken += k
        u = up[held]
        go = np.isfinite(start[held]) | (u < 0) | (start[np.maximum(u, 0)] + 1 <= t)
        start[held[go & ~np.isfinite(start[held])]] = t
        left[held[go]] -= min(1.0, A0 / max(1, go.sum()))
        held = held[left[held] > 0]
        t += 1
    return t


if __name__ == "__main__":
    for a0 in (211, 150):
        unpruned = run(1.0, d=0.0, A0=a0)
        print(f"A0 {a0}: unpruned {unpruned:.0f} ticks; one pass {run(1.0, A0=a0) / unpruned:.3f}; halves in one "
              f"order {run(0.5, A0=a0) / unpruned:.3f}")
        for alpha in (0.6, 0.7, 0.75, 0.8, 0.83, 0.86, 0.9):
            got = {f"{o},{p}": run(alpha, o, p, A0=a0) / unpruned
                   for o, p in ((0, 1), (0.3, 1), (0.5, 1), (0.2, 2), (0.3, 2), (0.3, 3), (0.45, 3), (0, 4))}
            best = min(got, key=got.get)
            print(f"  alpha {alpha}: best order (offset,pace) {best}: {got[best]:.3f}; "
                  + " ".join(f"{k}:{v:.3f}" for k, v in got.items()))
