"""CPU engine for general scoring: parasail (SIMD DP) over the shared pool of worker processes.

Modes: global = parasail's nw, local = sw, semi-global = sg_dx (the database's, i.e. the target's, two
ends free; the query end to end: checked in tests/test_dp.py with a hand-made pair). Striped vectors
for local, scan for global/semi-global (parasail's advice), scan for local too where the gap open is 0
(parasail 1.3.4's sw_striped scores wrong when open equals extend). 16-bit lanes where every value of the
pair's DP provably fits them (reach: its scan kernels wrap without reporting saturation past them), else, or
when parasail reports saturation, 32-bit lanes; a pair whose values could pass those (RANGE32) fails with its
reason (parasail's scores are C ints: 64-bit lanes give no larger score). The ``_trace`` variants give the CIGAR (parasail writes SAM
orientation with =/X, BAM op codes); free ends come back as leading and trailing gap runs (D for
semi-global's target ends; sw's CIGAR may begin with a zero-score gap run) and are cut off here, so
the CIGAR covers the aligned part only and [q_start, q_end), [t_start, t_end) say where it lies. A
local best score <= 0 gives the empty alignment (score 0, no CIGAR, all ranges empty). A pair whose
traceback would pass config.DP_TRACE_CELLS fails with its reason. Empty sequences never reach
parasail (it refuses them): their alignments are written down here. Scores are scores (higher is
better); gaps come from ``AlignConfig.parasail_gaps`` (open = o + e, extend = e).
"""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np

from .. import pack, scoring
from ..cigar import QUERY_USES, TARGET_USES
from ..config import DP_TRACE_CELLS, AlignConfig
from ..records import ENGINE_CODE, FAILED, OK, AlignBatch, PairBatch, offsets_from_lengths
from ._pool import ChunkPool, as_lists

NAME = "cpu-dp"
FAMILY = {"global": ("nw", "scan"), "local": ("sw", "striped"), "semi-global": ("sg_dx", "scan")}
_I, _D = 1, 2  # BAM op codes

_matrices: dict = {}


def _matrix(sub: scoring.Substitution):
    """The parasail matrix of a substitution table, built once per process."""
    m = _matrices.get(sub)
    if m is None:
        import parasail

        m = parasail.matrix_create(sub.letters, 0, 0)
        for i, row in enumerate(sub.scores):
            for j, v in enumerate(row):
                m.set_value(i, j, v)
        _matrices[sub] = m
    return m


def _function(mode: str, trace: bool, bits: int, gaps: tuple):
    import parasail

    fam, vec = FAMILY[mode]
    vec = "scan" if gaps[0] == gaps[1] else vec  # (parasail's open = o + e, extend = e: o = 0)
    return getattr(parasail, f"{fam}{'_trace' if trace else ''}_{vec}_{bits}")


RANGE16 = 1 << 14  # the most |value| a pair's DP may reach on 16-bit lanes (parasail's -infinity: -2^15 / 2)
RANGE32 = 1 << 30  # ... on 32-bit lanes (-2^31 / 2)
INT32_MAX = (1 << 31) - 1  # the largest |score| of a result (AlignBatch.score: int32)


def reach(ql: int, tl: int, smax: int, gaps: tuple, mode: str = "global") -> int:
    """A bound on |H|, |E| and |F| in the DP of a pair of lengths ql, tl (smax: the largest |score| of the
    matrix; gaps: parasail's open, extend), and on how far parasail's -infinity falls below its own value:
    a cell's value is at most a diagonal's substitutions, and at least global, its all-gap path's (two opens
    and every base's extension); semi-global, a path from the first row (free) down a diagonal and one gap in
    the query; local, minus an open (H is at least 0). parasail's scan and striped kernels extend -infinity
    along the query, an extension a base (16-bit lanes wrapped where that passed their range, unreported)."""
    gap_bases = {"global": ql + tl, "semi-global": ql}.get(mode, 0)
    return max(smax * min(ql, tl) + gaps[1] * gap_bases, gaps[1] * ql) + 2 * gaps[0]


class NoMemory(Exception):
    """parasail could not allocate a pair's matrices or traceback: its result is NULL (it prints
    'posix_memalign failed'; under `ulimit -v`, a scheduler's memory limit)."""


def lanes(mode: str, trace: bool, gaps: tuple) -> tuple:
    """parasail's 16- and 32-bit functions for mode (with the traceback or not), as run_pair takes them."""
    return _function(mode, trace, 16, gaps), _function(mode, trace, 32, gaps)


def run_pair(fns: tuple, q: str, t: str, gaps, matrix, bound: int):
    """parasail's result for one pair on the narrowest lanes its values fit (bound: reach's), 16-bit first and
    32-bit where those saturated; None where the values could pass even the 32-bit lanes (the result may still
    say saturated); NoMemory where parasail could not allocate it."""
    if bound >= RANGE32:
        return None
    fn16, fn32 = fns
    if bound < RANGE16:
        r = fn16(q, t, gaps[0], gaps[1], matrix)
        if not r.pointer:
            raise NoMemory
        if not r.saturated:
            return r
    r = fn32(q, t, gaps[0], gaps[1], matrix)
    if not r.pointer:
        raise NoMemory
    return r


def empty_side(mode: str, ql: int, tl: int, gaps) -> tuple[int, list, str | None]:
    """(score, [(op, len)], None) when one sequence is empty (the alignment starts at 0, 0); (0, [], the reason)
    when that score, one gap's cost, does not fit the results' 32-bit scores."""
    if mode == "local" or (mode == "semi-global" and ql == 0):
        return 0, [], None
    gap = ql or tl
    cost = gaps[0] + (gap - 1) * gaps[1] if gap else 0
    if cost > INT32_MAX:
        return 0, [], (f"its score, -{cost:,} (one gap of {gap:,} bases against an empty sequence), passes the "
                       f"{INT32_MAX:,} a 32-bit score holds: lower the penalties")
    return -cost, ([(_I, ql)] if ql else [(_D, tl)] if tl else []), None


def _trim(seq: np.ndarray, qs: int, ts: int, free: tuple) -> tuple[np.ndarray, int, int]:
    """seq without its leading and trailing runs of the free ops, and the moved starts. parasail's sg_dx
    CIGAR spans the whole target (its free ends as D), and its sw CIGAR can begin with a gap run through
    zero-score cells (seen with parasail 1.3.4): neither is part of the alignment."""
    a, b = 0, len(seq)
    while a < b and int(seq[a]) & 15 in free:
        v = int(seq[a])
        qs, ts = (qs + (v >> 4), ts) if v & 15 == _I else (qs, ts + (v >> 4))
        a += 1
    while b > a and int(seq[b - 1]) & 15 in free:
        b -= 1
    return seq[a:b], qs, ts


def _align_chunk(sub: scoring.Substitution, mode: str, gaps: tuple, want_cigar: bool, seq, remap,
                 q_off, q_len, t_off, t_len):
    """Align pairs whose sequences are slices of seq (the chunk's bytes as a uint8 array, or the str parasail
    takes; remap: a translate table for the array's bytes, or None; the columns int arrays or lists); runs in a
    worker process, which makes the str and the lists (the parent, one thread for every worker, only sends the
    arrays). Returns scores, the ranges (n, 4: q_start, q_end, t_start, t_end), the packed CIGAR ops and their
    count per pair."""
    text = seq if isinstance(seq, str) else \
        (seq.tobytes().translate(remap) if remap else seq.tobytes()).decode("latin-1")
    q_off, q_len, t_off, t_len = as_lists(q_off, q_len, t_off, t_len)
    n = len(q_len)
    matrix = _matrix(sub)
    fns = lanes(mode, want_cigar, gaps)
    smax = int(np.abs(sub.array()).max())
    score = [0] * n
    starts = [(0, 0)] * n  # (q_start, t_start); the ends follow from the CIGAR (or the lengths)
    clen = [0] * n
    failed = {}  # pair -> reason
    ops: list = []  # uint32 arrays, one per pair with a CIGAR
    for i in range(n):
        qo, ql, to, tl = q_off[i], q_len[i], t_off[i], t_len[i]
        if want_cigar and ql * tl > DP_TRACE_CELLS:
            failed[i] = f"{ql} x {tl} cells exceed the CPU traceback's {DP_TRACE_CELLS} (use --distance-only)"
            continue
        if ql == 0 or tl == 0:
            score[i], cig, why = empty_side(mode, ql, tl, gaps)
            if why:
                failed[i] = why
                continue
            if want_cigar and cig:
                ops.append(np.array([ln << 4 | op for op, ln in cig], dtype=np.uint32))
                clen[i] = len(cig)
            continue
        bound = reach(ql, tl, smax, gaps, mode)
        try:
            r = run_pair(fns, text[qo:qo + ql], text[to:to + tl], gaps, matrix, bound)
            c = r.get_cigar() if want_cigar and r is not None and not r.saturated and \
                not (mode == "local" and r.score <= 0) else None
        except NoMemory:
            failed[i] = (f"the CPU aligner could not allocate the memory of {ql} x {tl} cells"
                         + (" and their traceback (use --distance-only, fewer threads: -t)" if want_cigar else ""))
            continue
        if r is None or r.saturated:
            failed[i] = (f"its scores could reach {bound:,} in magnitude, past the {RANGE32:,} the CPU aligner's "
                         "32-bit lanes hold" if r is None else "the CPU aligner's 32-bit lanes saturated") + \
                ": lower the penalties or the matrix's scores"
            continue
        score[i] = r.score
        if (mode == "local" and r.score <= 0) or not want_cigar:
            score[i] = max(r.score, 0) if mode == "local" else r.score  # local <= 0: the empty alignment
            continue
        seq = np.array(c.seq, dtype=np.uint32)  # a copy: the result's memory goes with r
        qs, ts = c.beg_query, c.beg_ref
        if mode != "global":  # free ends come back as leading/trailing gap runs: cut them off
            seq, qs, ts = _trim(seq, qs, ts, (_D,) if mode == "semi-global" else (_I, _D))
        starts[i] = (qs, ts)
        ops.append(seq)
        clen[i] = len(seq)
    flat = np.concatenate(ops) if ops else np.zeros(0, np.uint32)
    return np.array(score, np.int32), ranges(mode, want_cigar, starts, flat, clen, q_len, t_len), flat, \
        np.array(clen, np.int64), failed


def ranges(mode: str, want_cigar: bool, starts, flat: np.ndarray, clen, q_len, t_len) -> np.ndarray:
    """(n, 4) int64 q_start, q_end, t_start, t_end. With CIGARs: the starts plus the bases each CIGAR
    consumes (summed over all ops at once); score-only: score_only_ranges."""
    if not want_cigar:
        return np.stack(score_only_ranges(mode, q_len, t_len), axis=1)
    rng = np.zeros((len(clen), 4), np.int64)
    op, ln = flat & 15, (flat >> 4).astype(np.int64)
    ends = np.cumsum(clen)
    for col, uses in ((0, QUERY_USES), (2, TARGET_USES)):
        cs = np.concatenate([[0], np.cumsum(ln * uses[op])])
        rng[:, col] = [s[col // 2] for s in starts]
        rng[:, col + 1] = rng[:, col] + cs[ends] - cs[ends - np.asarray(clen, np.int64)]
    return rng


def score_only_ranges(mode: str, q_len, t_len) -> tuple:
    """int64 q_start, q_end, t_start, t_end without CIGARs: whole sequences for global, the query for
    semi-global, -1 (unknown: the writers print '*') for the rest."""
    q_len, t_len = np.asarray(q_len, np.int64), np.asarray(t_len, np.int64)
    zero, unknown = np.zeros(len(q_len), np.int64), np.full(len(q_len), -1, np.int64)
    if mode == "global":
        return zero, q_len.copy(), zero.copy(), t_len.copy()
    if mode == "semi-global":
        return zero, q_len.copy(), unknown, unknown.copy()
    return unknown, unknown.copy(), unknown.copy(), unknown.copy()


def _assemble(parts, has_cigar: bool) -> AlignBatch:
    score = np.concatenate([p[0] for p in parts])
    rng = np.concatenate([p[1] for p in parts])
    cigar = np.concatenate([p[2] for p in parts])
    clen = np.concatenate([p[3] for p in parts])
    n = len(score)
    status, reason, base = np.full(n, OK, np.uint8), {}, 0
    for p in parts:
        reason.update({base + k: v for k, v in p[4].items()})
        base += len(p[0])
    status[list(reason)] = FAILED
    res = AlignBatch(score, status, np.full(n, ENGINE_CODE[NAME], np.uint8), cigar,
                     offsets_from_lengths(clen), clen, has_cigar, reason)
    res.q_start, res.q_end, res.t_start, res.t_end = (rng[:, k].copy() for k in range(4))
    return res


class CpuDpEngine(ChunkPool):
    """General scoring (cfg.general): every pair of such a config, none of any other."""

    name = NAME
    requires = "parasail"

    def accepts(self, batch: PairBatch, cfg: AlignConfig) -> np.ndarray:
        return np.full(batch.n, cfg.general, dtype=bool)

    def submit(self, batch: PairBatch, cfg: AlignConfig) -> Future:
        sub = scoring.substitution(cfg)
        remap = scoring.input_map(sub, cfg.scoring.unknown)
        want = not cfg.distance_only
        head = (sub, cfg.scoring.mode, cfg.parasail_gaps(), want)

        def chunk_args(part: PairBatch):
            return (*head, pack.compare_view(part, cfg.n_mismatch), remap, part.q_off, part.q_len, part.t_off,
                    part.t_len)

        return self.run_chunks(batch, _align_chunk, chunk_args, lambda parts: _assemble(parts, want))
