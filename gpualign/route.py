"""Routing policy: which engine takes which pair first, and the rescue chain.

Pure functions of lengths, character content, metric and the engines present
(no cupy import). The rule:
1. The chain is the ordered list of engines for the config (GPU engines first
   when present, the CPU engine last: it accepts every pair).
2. A pair starts at the first engine of the chain that accepts it (its
   ``accepts(batch, cfg)`` says so from lengths/characters/metric alone).
3. A pair whose result is ``exceeded`` moves to the next engine that accepts it.
Results stay exact whatever the routing: routing only chooses who computes. One rule applies to every
engine's result after it: an alignment of insertions only is placed inside its target (_inside_target).
"""

from __future__ import annotations

import numpy as np

from . import interrupt, scoring, trace
from .records import EXCEEDED, FAILED, OK, AlignBatch, PairBatch


def prefetch(batch: PairBatch, chain, cfg) -> None:
    """Let the chain's first engine (the one most pairs start on) begin moving batch to the device,
    while the batch before it aligns; run_chain(batch, ...) then finds it there."""
    if chain:
        chain[0].prefetch(batch, cfg)


@trace.traced("align")
def run_chain(batch: PairBatch, chain, cfg) -> tuple[AlignBatch, dict]:
    """Align a batch through the chain; returns the merged result and per-engine pair counts.
    An engine's accepts() is asked only while some pair still needs an engine (as a rule the first
    takes every pair and the rest are never asked)."""
    n = batch.n
    need = np.ones(n, dtype=bool)  # no engine has aligned it yet: none accepted it, or it exceeded those that did
    seen = np.zeros(n, dtype=bool)  # accepted by an engine so far
    parts, counts = [], {}
    for engine in chain:
        if not need.any():
            break
        ok = engine.accepts(batch, cfg)
        here = need & ok
        seen |= ok
        idx = None if here.all() else np.nonzero(here)[0]  # None: the whole batch
        if idx is not None and len(idx) == 0:
            continue
        interrupt.phase("align" if engine is chain[0] else "rescue")
        res = engine.align(batch if idx is None else batch.take(idx), cfg)
        parts.append((idx, res))
        counts[engine.name] = counts.get(engine.name, 0) + (n if idx is None else len(idx))
        for key, v in getattr(engine, "last_counts", {}).items():  # per-kernel counts, if the engine has them
            counts[key] = counts.get(key, 0) + v
        exceeded = res.status == EXCEEDED
        if idx is None:
            need = exceeded
        else:
            need[idx] = exceeded
        rescued = int(np.count_nonzero(exceeded))
        if rescued:
            counts["rescued"] = counts.get("rescued", 0) + rescued
    if len(parts) == 1 and parts[0][0] is None:
        out = parts[0][1]  # one engine took every pair, in order: nothing to move
    else:
        out = AlignBatch.merge(n, [(np.arange(n) if i is None else i, r) for i, r in parts], not cfg.distance_only)
    if cfg.general and cfg.scoring.unknown is not None:  # (=/X by the characters, not by --unknown's letter)
        out = scoring.restate_matches(batch, out, cfg)
    if out.t_start is not None and out.t_end is not None:
        _inside_target(out, batch.t_len)
    if need.any():
        for i in np.nonzero(need & ~seen)[0].tolist():
            out.reason[i] = "no engine accepts this pair"
        for i in np.nonzero(need & seen)[0].tolist():
            out.status[i] = FAILED
            out.reason[i] = "exceeded the bounds of every engine"
    return out, counts


def _inside_target(res: AlignBatch, t_len: np.ndarray) -> None:
    """An alignment that consumes no target base (all insertion: the target's ends are free) placed after the
    target's last base would stand at SAM POS LN + 1, past the reference's end: it is placed before that base
    instead, at the same score (free ends score every placement alike)."""
    past = (res.t_start == t_len) & (res.t_end == t_len) & (t_len > 0) & (res.status == OK)
    if past.any():
        res.t_start = np.where(past, res.t_start - 1, res.t_start)
        res.t_end = np.where(past, res.t_end - 1, res.t_end)
