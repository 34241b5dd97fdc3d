"""CPU engine: WFA2-lib through pywfa, over a pool of worker processes.

Exact, end-to-end, no heuristic: every WFA2-lib attribute comes from
``AlignConfig.to_pywfa_kwargs``. Also the rescue engine of the GPU paths.
WFA2-lib's CIGAR uses the opposite I/D orientation to SAM: converted here.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from itertools import chain

import numpy as np

from .. import pack
from ..cigar import MAX_OP
from ..config import AlignConfig
from ..records import ENGINE_CODE, FAILED, OK, AlignBatch, PairBatch, offsets_from_lengths
from . import affine_plan
from ._pool import INLINE_BASES, ChunkPool, as_lists

NAME = "cpu-wfa"
# WFA2-lib pads the pattern with '!' and the text with '?': a text holding '!'
# (or a pattern holding '?') would extend past the end. Move both out of the way.
WFA_SAFE = bytes.maketrans(b"!?", b"\x03\x04")


def wfa_text(raw: bytes) -> str:
    """raw as the str pywfa takes, '!' and '?' moved out of the way (translated only where present: looking
    for them costs a third of the translation)."""
    return (raw.translate(WFA_SAFE) if b"!" in raw or b"?" in raw else raw).decode("ascii")


# pywfa cigartuple codes (WFA orientation) -> BAM op codes (SAM orientation)
OPMAP = {0: 7, 8: 8, 1: 2, 2: 1}
LONG_PAIR = 10_000  # above this length use WFA2-lib's medium memory mode
INT32_MAX = (1 << 31) - 1
# WFA2-lib's high memory mode keeps every wavefront (~8 bytes a cell): a pair whose cost may take more than this
# many cells of them takes the medium mode (4/6/2 pairs up to LONG_PAIR stay within it)
HIGH_CELLS = 1 << 29

# A costly pair (unrelated sequences, large penalties) takes WFA2-lib up to ~6 ns times steps^2 / e (each step's
# wavefronts widen by 2 / e diagonals; less where the sequences are related), where parasail's DP takes ~1 ns a
# cell with its traceback and ~40 us a call (one core): an end-to-end affine pair whose cost could pass
# DP_BREAK_EVEN * sqrt(e * (cells + DP_CALL_CELLS)) steps is tried with its steps capped there and, when WFA2-lib
# reaches the cap, aligned by parasail's DP. The cap is set high enough to leave related pairs of moderate
# divergence, whose wavefronts stay narrow, to WFA2-lib. Pairs of at most DP_CELLS cells: the traceback takes ~4.5
# bytes a cell, and every pair of a batch aligned inline (_pool.INLINE_BASES) is within it. The DP scores the same
# alignments; of co-optimal CIGARs it may pick another.
DP_BREAK_EVEN = 0.8
DP_CALL_CELLS = 40_000
DP_CELLS = (INLINE_BASES // 2) ** 2
MAX_STEPS_REACHED = -100  # WFA2-lib's WF_STATUS_MAX_STEPS_REACHED

_aligners: dict = {}


def _aligner(kwargs: dict):
    """This thread's WavefrontAligner for kwargs (one per thread: a batch aligned inline may come from several
    threads at once, the concurrent batches of a GPU engine's rescue or of device slots, devices.py)."""
    key = (threading.get_ident(), *sorted(kwargs.items()))
    al = _aligners.get(key)
    if al is None:
        from pywfa import WavefrontAligner

        al = _aligners[key] = WavefrontAligner(**kwargs)
    return al


_NO_OP = np.uint32(0xF)
_SAM_OP = np.full(max(OPMAP) + 1, _NO_OP, np.uint32)
_SAM_OP[list(OPMAP)] = list(OPMAP.values())


def sam_codes(wfa_ops: np.ndarray) -> np.ndarray:
    """pywfa's cigartuples op codes (WFA's I/D orientation) as BAM op codes (SAM's), in bulk."""
    if len(wfa_ops) and (wfa_ops.min() < 0 or wfa_ops.max() >= len(_SAM_OP) or (_SAM_OP[wfa_ops] == _NO_OP).any()):
        raise RuntimeError(f"WFA2-lib returned a CIGAR op outside {sorted(OPMAP)}")
    return _SAM_OP[wfa_ops]


def reduced(kwargs: dict) -> tuple[dict, int]:
    """kwargs with the affine penalties divided by their common divisor, and that divisor: WFA2-lib takes a
    step per unit of cost, so 40/60/1000 runs as 2/3/50 in twenty times fewer steps. Every cost is a multiple of
    the divisor: the same alignments, the scores times it."""
    if kwargs["distance"] != "affine":
        return kwargs, 1
    (x, o, e), g = affine_plan.reduced(kwargs["mismatch"], kwargs["gap_opening"], kwargs["gap_extension"])
    return (dict(kwargs, mismatch=x, gap_opening=o, gap_extension=e), g) if g > 1 else (kwargs, 1)


def _worst_steps(kwargs: dict, ql: np.ndarray, tl: np.ndarray, free) -> np.ndarray:
    """Per affine pair, the most score steps its cost may take: that of its bases mismatched and its length
    difference one gap beyond the free target bases."""
    gap = np.maximum(np.maximum(ql - tl, tl - ql - free), 0)
    return kwargs["mismatch"] * np.minimum(ql, tl) + np.where(gap > 0, kwargs["gap_opening"], 0) \
        + kwargs["gap_extension"] * gap


def _high_fits(kwargs: dict, ql, tl, free) -> np.ndarray:
    """Per pair (lengths and free target bases as arrays), whether WFA2-lib's high memory mode can take it: the
    score steps its cost may take (_worst_steps) times the widest wavefront they reach stay within HIGH_CELLS.
    Two unrelated 2 kbp sequences at 97/100/89 held 2.5 GB; at -O 10000 -E 10000, 100 bases in 9 kbp take ~89
    million steps."""
    ql, tl, free = (np.asarray(a, np.int64) for a in (ql, tl, free))
    if kwargs["distance"] != "affine":  # (edit: a step a base of difference, at most LONG_PAIR)
        return np.ones(len(ql), bool)
    steps = _worst_steps(kwargs, ql, tl, free)
    return steps * np.minimum(ql + tl + 1, 2 * steps // max(1, kwargs["gap_extension"]) + 1) <= HIGH_CELLS


def _dp_caps(kwargs: dict, ql, tl) -> np.ndarray:
    """Per pair, WFA2-lib's step cap before parasail's DP takes it (DP_BREAK_EVEN), rounded up to eighths of a
    power of two (pairs of about one length share it: WFA2-lib's setting changes seldom), or INT32_MAX where it
    goes uncapped: edit distance, ends-free, a pair over DP_CELLS, or one whose cost cannot pass the cap."""
    ql, tl = np.asarray(ql, np.int64), np.asarray(tl, np.int64)
    caps = np.full(len(ql), INT32_MAX, np.int64)
    if kwargs["distance"] != "affine" or kwargs["span"] != "end-to-end":
        return caps
    cells = ql * tl
    cap = np.ceil(DP_BREAK_EVEN * np.sqrt(kwargs["gap_extension"] * (cells + DP_CALL_CELLS).astype(np.float64)))
    cap = cap.astype(np.int64)
    step = np.maximum(1, 1 << np.maximum(0, _bit_length(cap) - 4))
    cap = -(-cap // step) * step
    use = (cells <= DP_CELLS) & (ql > 0) & (tl > 0) & (_worst_steps(kwargs, ql, tl, 0) > cap)
    caps[use] = cap[use]
    return caps


def _bit_length(a: np.ndarray) -> np.ndarray:
    """Per entry (positive int64 below 2^53), its bit length."""
    return np.floor(np.log2(np.maximum(a, 1))).astype(np.int64) + 1


_WFA_OP = {v: k for k, v in OPMAP.items()}  # parasail's BAM op codes (SAM orientation) as WFA2-lib's
_dp_matrices: dict = {}  # (letters, mismatch) -> parasail matrix, per process


def _dp_align(kwargs: dict, q: str, t: str, want_cigar: bool) -> tuple[int, list] | None:
    """parasail's global affine DP of one pair under kwargs (reduced penalties, match 0): (its cost, its CIGAR
    as (WFA op, length) runs, flat), or None where parasail cannot give it (its values could pass its 32-bit
    lanes, they saturated, or it could not allocate the pair)."""
    import parasail

    from .cpu_dp import NoMemory, lanes, reach, run_pair

    x, gaps = kwargs["mismatch"], (kwargs["gap_opening"] + kwargs["gap_extension"], kwargs["gap_extension"])
    letters = "".join(sorted(set(q) | set(t)))
    matrix = _dp_matrices.get((letters, x))
    if matrix is None:
        matrix = _dp_matrices[(letters, x)] = parasail.matrix_create(letters, 0, -x)
    try:
        r = run_pair(lanes("global", want_cigar, gaps), q, t, gaps, matrix, reach(len(q), len(t), x, gaps))
        if r is None or r.saturated:
            return None
        runs = []
        if want_cigar:
            for v in r.get_cigar().seq:
                op = _WFA_OP.get(int(v) & 15)
                if op is None:
                    raise RuntimeError(f"parasail returned a CIGAR op outside {sorted(_WFA_OP)}")
                runs.extend((op, int(v) >> 4))
    except NoMemory:
        return None
    return -r.score, runs


def gap_cost(kwargs: dict, length: int) -> int:
    """The cost of one gap of length bases under kwargs' end-to-end metric (0 for none)."""
    if not length:
        return 0
    if kwargs["distance"] == "levenshtein":
        return length
    return kwargs["gap_opening"] + length * kwargs["gap_extension"]


def _align_chunk(kwargs: dict, long_kwargs: dict, seq, q_off, q_len, t_off, t_len, free_b, free_e,
                 want_cigar: bool):
    """Align pairs whose sequences are slices of seq (the chunk's bytes as a uint8 array, or the str pywfa
    takes; the columns int arrays or lists); runs in a worker process, which makes the str and the lists (the
    parent, one thread for every worker, only sends the arrays). The loop fills Python lists and the arrays are
    made once, after it (numpy scalar stores and a generator per CIGAR op made the Python around each call cost
    as much as WFA2-lib's own work on 150 bp pairs)."""
    text = seq if isinstance(seq, str) else wfa_text(seq.tobytes())
    (kwargs, unit), (long_kwargs, _) = reduced(kwargs), reduced(long_kwargs)
    ends_free = kwargs["span"] == "ends-free"
    tl_ = np.asarray(t_len, np.int64)
    free = np.minimum(tl_, free_b) + np.minimum(tl_, free_e) if ends_free else 0
    high = _high_fits(kwargs, q_len, tl_, free).tolist()
    caps = _dp_caps(kwargs, q_len, tl_).tolist()
    q_off, q_len, t_off, t_len, free_b, free_e = as_lists(q_off, q_len, t_off, t_len, free_b, free_e)
    n = len(q_len)
    scores = [0] * n
    reason = {}
    runs: list = []  # (WFA op, length) of every pair's CIGAR, one after another
    clen = [0] * n
    t_start, t_end = ([0] * n, list(t_len)) if ends_free else (None, None)
    short_al, long_al = _aligner(kwargs), _aligner(long_kwargs)
    safe_al = _aligner(dict(kwargs, memory_mode="medium"))  # pairs the other modes cannot take, or gave up on
    als = list({id(a): a for a in (short_al, long_al, safe_al)}.values())  # (the same object where kwargs agree)
    at = {id(a): j for j, a in enumerate(als)}
    a_short, a_long, a_safe = at[id(short_al)], at[id(long_al)], at[id(safe_al)]
    cur = [INT32_MAX] * len(als)  # each aligner's step cap now (_dp_caps); uncapped first (a chunk before may
    for a in als:  # have ended with one capped)
        a.max_steps = INT32_MAX

    def uncapped(al, a: int, i: int) -> int:
        """Pair i aligned again by al (index a in als) without a step cap (the rare second tries)."""
        if cur[a] != INT32_MAX:
            al.max_steps = cur[a] = INT32_MAX
        tl = t_len[i]
        if ends_free:
            al.text_begin_free, al.text_end_free = min(tl, free_b[i]), min(tl, free_e[i])
        return al.wavefront_align(text[t_off[i] : t_off[i] + tl], text[q_off[i] : q_off[i] + q_len[i]])

    for i in range(n):
        qo, ql, to, tl = q_off[i], q_len[i], t_off[i], t_len[i]
        if not (ql and tl or ends_free):  # one gap (or nothing), without WFA2-lib: BiWFA, which takes pairs
            # over LONG_PAIR, scores an empty side INT_MIN
            cost = gap_cost(kwargs, ql + tl) * unit
            if cost >= INT32_MAX:
                reason[i] = f"its cost reaches {INT32_MAX:,} (32-bit scores)"
            else:
                scores[i] = cost
                if want_cigar and ql + tl:
                    runs.extend((2 if tl == 0 else 1, ql + tl))  # (WFA ops: 1 a target base alone, 2 a query's)
                    clen[i] = 1
            continue
        if max(ql, tl) > LONG_PAIR:
            al, a = long_al, a_long
        else:
            al, a = (short_al, a_short) if high[i] else (safe_al, a_safe)
        cap = caps[i]
        if cur[a] != cap:
            al.max_steps = cur[a] = cap
        if ends_free:
            al.text_begin_free, al.text_end_free = min(tl, free_b[i]), min(tl, free_e[i])
        s = al.wavefront_align(text[to : to + tl], text[qo : qo + ql])
        if al.status != 0:
            if al.status == MAX_STEPS_REACHED and cap != INT32_MAX:  # a costly pair: parasail's DP (_dp_caps)
                dp = _dp_align(kwargs, text[qo : qo + ql], text[to : to + tl], want_cigar)
                if dp is not None:
                    if dp[0] * unit >= INT32_MAX:
                        reason[i] = f"its cost reaches {INT32_MAX:,} (32-bit scores)"
                    else:
                        scores[i] = dp[0] * unit
                        runs.extend(dp[1])
                        clen[i] = len(dp[1]) // 2
                    continue
                s = uncapped(al, a, i)  # (the DP could not: WFA2-lib to the end)
            if al.status != 0 and al.memory_mode != "medium":  # BiWFA gives up on some costly pairs (status
                al, a = safe_al, a_safe  # -300); the medium mode does not
                s = uncapped(al, a, i)
        if al.status != 0:
            reason[i] = f"WFA2-lib status {al.status}"
        elif abs(s) * unit >= INT32_MAX:  # (WFA2-lib's int scores: a cost past them comes back as INT_MIN)
            reason[i] = f"its cost reaches {INT32_MAX:,} (32-bit scores)"
        else:
            scores[i] = abs(s) * unit
            if want_cigar:
                tup = al.cigartuples
                if ends_free:  # free target ends come back as leading/trailing WFA 'I' (target-only): trim
                    tup = list(tup)  # the free part only; a longer run keeps its paid remainder as a gap
                    if tup and tup[0][0] == 1:
                        cut = min(tup[0][1], free_b[i])
                        t_start[i] = cut
                        tup[0] = (1, tup[0][1] - cut)
                    if tup and tup[-1][0] == 1:
                        cut = min(tup[-1][1], free_e[i])
                        t_end[i] -= cut
                        tup[-1] = (1, tup[-1][1] - cut)
                    tup = [x for x in tup if x[1]]
                runs.extend(chain.from_iterable(tup))  # (flat: keeping each pair's tuples to the end measured
                clen[i] = len(tup)  # slower than the generator before)
    status = np.full(n, OK, np.uint8)
    status[list(reason)] = FAILED
    runs = np.array(runs, np.int64).reshape(-1, 2)
    if len(runs) and int(runs[:, 1].max()) > MAX_OP:  # (a run that long does not pack in 28 bits)
        raise RuntimeError(f"WFA2-lib returned a CIGAR op of {int(runs[:, 1].max()):,} bases (over {MAX_OP:,})")
    ops = (runs[:, 1].astype(np.uint32) << 4) | sam_codes(runs[:, 0])
    t_start = np.array(t_start, np.int64) if ends_free else np.zeros(n, np.int64)
    t_end = np.array(t_end, np.int64) if ends_free else np.array(t_len, dtype=np.int64)
    return np.array(scores, np.int32), status, ops, np.array(clen, np.int64), reason, t_start, t_end


def _assemble(parts, has_cigar: bool, ends_free: bool = False) -> AlignBatch:
    score = np.concatenate([p[0] for p in parts])
    status = np.concatenate([p[1] for p in parts])
    cigar = np.concatenate([p[2] for p in parts])
    clen = np.concatenate([p[3] for p in parts])
    reason, base = {}, 0
    for p in parts:
        reason.update({base + k: v for k, v in p[4].items()})
        base += len(p[0])
    engine = np.full(len(score), ENGINE_CODE[NAME], np.uint8)
    res = AlignBatch(score, status, engine, cigar, offsets_from_lengths(clen), clen, has_cigar, reason)
    if ends_free:
        res.t_start = np.concatenate([p[5] for p in parts])
        res.t_end = np.concatenate([p[6] for p in parts])
    return res


class CpuWfaEngine(ChunkPool):
    """Batch in, scores/CIGARs out. ``submit`` returns a future so callers overlap work."""

    name = NAME
    requires = "pywfa"

    def submit(self, batch: PairBatch, cfg: AlignConfig) -> Future:
        kw = (cfg.to_pywfa_kwargs(), cfg.to_pywfa_kwargs(long_pairs=True))
        want = not cfg.distance_only

        def chunk_args(sub: PairBatch):
            free = sub.t_free if sub.t_free is not None else np.stack([sub.t_len, sub.t_len], axis=1)
            return (*kw, pack.compare_view(sub, cfg.n_mismatch), sub.q_off, sub.q_len, sub.t_off, sub.t_len,
                    free[:, 0], free[:, 1], want)

        return self.run_chunks(batch, _align_chunk, chunk_args,
                               lambda parts: _assemble(parts, want, cfg.ends_free_target))
