"""CIGARs: packed <-> text, per-pair totals, and the independent judge.

Packed form: ``len << 4 | op`` with BAM op codes (M0 I1 D2 N3 S4 H5 P6 =7 X8).
SAM orientation: ``I`` = bases only in the query, ``D`` = bases only in the target.
``check_cigar`` and ``score_cigar`` judge any engine's output from the
sequences alone; they share nothing with the engines.
"""

from __future__ import annotations

import re

import numpy as np

from .config import Penalties
from .pack import equal
from .records import offsets_from_lengths, segment_index
from .text import write_ints

OPS = "MIDNSHP=X"
M, I, D, N, S, H, P, EQ, X = range(9)
QUERY_USES = np.array([1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0], np.int64)  # by op: M I S = X consume the query
TARGET_USES = np.array([1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0], np.int64)  # M D N = X the target
_OP_BYTES = np.frombuffer(OPS.encode(), dtype=np.uint8)


MAX_OP = (1 << 28) - 1  # the longest op that packed form (len << 4 | op, uint32) holds
_OP_OF_BYTE = np.full(256, 255, np.uint32)
_OP_OF_BYTE[_OP_BYTES] = np.arange(len(OPS), dtype=np.uint32)
_CIGAR_FULL = re.compile(r"(?:\d{1,18}[MIDNSHP=X])+")


def pack_runs(op: np.ndarray, length: np.ndarray) -> np.ndarray:
    """(op, length) runs -> packed uint32, in bulk: zero lengths dropped, adjacent equal ops merged (e.g.
    pieces' CIGARs meeting at their borders), a run longer than MAX_OP written as several ops (SAM allows
    it; only strings of over 2^28 bases can have one)."""
    op, length = np.asarray(op, np.uint32), np.asarray(length, np.int64)
    keep = length > 0
    if not keep.all():
        op, length = op[keep], length[keep]
    if len(op) == 0:
        return np.zeros(0, np.uint32)
    later = np.flatnonzero(op[1:] != op[:-1]) + 1  # each run's start but the first's
    if len(later) + 1 < len(op):  # runs of equal ops merged: their lengths summed (a running sum's differences)
        total = np.zeros(len(length) + 1, np.int64)
        np.cumsum(length, out=total[1:])
        first = np.concatenate([[0], later])
        op, length = op[first], np.diff(total[np.concatenate([first, [len(total) - 1]])])
    if int(length.max()) > MAX_OP:
        reps = (length + MAX_OP - 1) // MAX_OP
        last = np.cumsum(reps) - 1
        op = np.repeat(op, reps)
        cut = np.full(int(reps.sum()), MAX_OP, np.int64)
        cut[last] = length - (reps - 1) * MAX_OP
        length = cut
    return (length.astype(np.uint32) << 4) | op


def merged(ops: np.ndarray) -> np.ndarray:
    """Packed CIGAR ops with any zero-length op dropped and adjacent equal ops merged (pack_runs); ops
    themselves where there is nothing to do. Where few ops merge (pieces' CIGARs meeting at their borders),
    only those are summed: each run of equal ops into its first, the others dropped."""
    ops = np.asarray(ops, np.uint32)
    code = ops & np.uint32(15)
    if len(ops) < 2:
        return ops if len(ops) == 0 or ops[0] >> 4 else ops[:0]
    later = np.flatnonzero(code[1:] == code[:-1]) + 1  # ops that merge into the one before them
    if not (ops >> 4).all() or len(later) > len(ops) // 4:  # (zero lengths, or many merges: the runs' way)
        return pack_runs(code, ops >> 4)
    if len(later) == 0:
        return ops
    # each group of consecutive merging ops, and the op before it (its head), which takes their lengths
    starts = np.flatnonzero(np.concatenate([[True], later[1:] != later[:-1] + 1]))
    head = later[starts] - 1
    length = (ops[head] >> 4).astype(np.int64) + np.add.reduceat((ops[later] >> 4).astype(np.int64), starts)
    if int(length.max()) > MAX_OP:  # (a merged op too long to pack as one: the runs' way)
        return pack_runs(code, ops >> 4)
    out = ops.copy()
    out[head] = (length.astype(np.uint32) << 4) | code[head]
    keep = np.ones(len(ops), bool)
    keep[later] = False
    return out[keep]


def op_sums(ops: np.ndarray) -> np.ndarray:
    """Bases per op code (int64[16], indexed by M, I, D, ..., EQ, X) of a packed CIGAR: one pass."""
    if len(ops) == 0:
        return np.zeros(16, np.int64)
    sums = np.bincount((ops & np.uint32(15)).astype(np.intp), weights=ops >> np.uint32(4), minlength=16)
    return sums.astype(np.int64)  # (exact: float64 holds integers to 2^53)


def _op_starts(cig: np.ndarray, off, lens, q0, t0) -> tuple:
    """(op, length, pair, [query bytes, target bytes]) per op of CIGARs (pair i's ops cig[off[i]:off[i] +
    lens[i]]), the bytes being each op's first query and target byte (q0, t0: each pair's first aligned
    ones)."""
    lens = np.asarray(lens, np.int64)
    ops = cig[segment_index(np.asarray(off, np.int64), lens)]
    op, ln = (ops & 15).astype(np.int64), (ops >> 4).astype(np.int64)
    pair = np.repeat(np.arange(len(lens)), lens)
    first = offsets_from_lengths(lens)
    at = []
    for start, uses in ((q0, QUERY_USES), (t0, TARGET_USES)):
        used = ln * uses[op]
        before = np.cumsum(used) - used
        at.append(np.asarray(start, np.int64)[pair] + before - before[np.minimum(first, len(before) - 1)][pair]
                  if len(before) else before)
    return op, ln, pair, at


def batch_faults(cig: np.ndarray, off, lens, q0, t0, q_n, t_n, view: np.ndarray) -> tuple:
    """CIGARs checked as check_cigar checks one, at once (pair i's ops cig[off[i]:off[i] + lens[i]] aligning
    q_n[i] query bytes of view from q0[i] with t_n[i] target bytes from t0[i]): (bad, a bool per pair: an op
    other than =/X/I/D, a zero length, adjacent equal ops, other lengths consumed, or an = or X false of the
    bytes; and the =/X columns of the good ones: their pair, query byte, target byte)."""
    n = len(lens)
    op, ln, pair, at = _op_starts(cig, off, lens, q0, t0)
    bad = np.zeros(n, bool)
    bad[pair[~np.isin(op, (EQ, X, I, D)) | (ln == 0)]] = True
    bad[pair[1:][(op[1:] == op[:-1]) & (pair[1:] == pair[:-1])]] = True
    bad |= (np.bincount(pair, ln * QUERY_USES[op], n) != q_n) | (np.bincount(pair, ln * TARGET_USES[op], n) != t_n)
    m = ((op == EQ) | (op == X)) & ~bad[pair]  # (a good pair's columns lie inside its ranges)
    reps = ln[m]
    k = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
    c_pair = np.repeat(pair[m], reps)
    qi, ti = np.repeat(at[0][m], reps) + k, np.repeat(at[1][m], reps) + k
    bad[c_pair[(view[qi] == view[ti]) != np.repeat(op[m] == EQ, reps)]] = True
    keep = ~bad[c_pair]
    return bad, c_pair[keep], qi[keep], ti[keep]


def recompare(cig: np.ndarray, off: np.ndarray, lens: np.ndarray, q0: np.ndarray, t0: np.ndarray,
              view: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CIGARs (packed; pair i's ops cig[off[i]:off[i] + lens[i]]) with each =/X base said again by comparing
    view[q] with view[t] (q0, t0: each pair's first aligned query and target byte in view), adjacent equal ops
    merged within a pair; the other ops kept. Returns (ops, their offsets, their counts)."""
    n = len(lens)
    op, ln, pair, at = _op_starts(cig, off, lens, q0, t0)
    m = (op == EQ) | (op == X)
    cnt = np.where(m, ln, 1)
    base = np.repeat(np.cumsum(cnt) - cnt, cnt)
    k = np.arange(int(cnt.sum())) - base  # each element's place in its op
    e_op, e_len, e_pair = np.repeat(op, cnt), np.repeat(np.where(m, 1, ln), cnt), np.repeat(pair, cnt)
    e_m = np.repeat(m, cnt)
    same = view[np.repeat(at[0], cnt)[e_m] + k[e_m]] == view[np.repeat(at[1], cnt)[e_m] + k[e_m]]
    e_op[e_m] = np.where(same, EQ, X)
    if len(e_op) == 0:
        return np.zeros(0, np.uint32), np.zeros(n, np.int64), np.zeros(n, np.int64)
    cut = np.flatnonzero(np.concatenate([[True], (e_op[1:] != e_op[:-1]) | (e_pair[1:] != e_pair[:-1])]))
    r_len = np.add.reduceat(e_len, cut)
    r_pair = e_pair[cut]
    out = (r_len.astype(np.uint32) << 4) | e_op[cut].astype(np.uint32)
    counts = np.bincount(r_pair, minlength=n).astype(np.int64)
    return out, offsets_from_lengths(counts), counts


def pack(pairs) -> np.ndarray:
    """[(op, len), ...] -> packed uint32 (merges adjacent equal ops, drops zero lengths)."""
    runs = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
    return pack_runs(runs[:, 0], runs[:, 1])


def from_text(text: str) -> np.ndarray:
    """A CIGAR string -> packed uint32, parsed in bulk (chromosome-scale CIGARs have millions of ops)."""
    if text in ("", "*"):
        return np.zeros(0, dtype=np.uint32)
    if not _CIGAR_FULL.fullmatch(text):
        raise ValueError(f"not a CIGAR string: {text[:200]!r}")
    b = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    is_op = (b < 48) | (b > 57)
    pos = np.nonzero(is_op)[0]
    starts = np.concatenate([[0], pos[:-1] + 1])
    place = np.repeat(pos, pos - starts + 1) - np.arange(len(b)) - 1  # a digit's power of ten (op: -1)
    value = np.where(is_op, 0, (b.astype(np.int64) - 48) * np.power(10, np.maximum(place, 0), dtype=np.int64))
    return pack_runs(_OP_OF_BYTE[b[pos]], np.add.reduceat(value, starts))


def to_text(cigar: np.ndarray, off: np.ndarray, length: np.ndarray) -> list[str]:
    """Packed CIGARs of many pairs -> list of strings, built in bulk (no per-op Python)."""
    return text_list(*to_text_buffer(cigar, off, length))


def text_list(buf: np.ndarray, start: np.ndarray, size: np.ndarray) -> list[str]:
    """The strings of a text buffer (to_text_buffer's form)."""
    text = buf.tobytes().decode("ascii")
    return [text[a:a + b] for a, b in zip(start.tolist(), size.tolist())]


_UNITS = (48 + np.arange(100) % 10).astype(np.uint8)  # digit characters of 0..99
_TENS = (48 + np.arange(100) // 10).astype(np.uint8)


def to_text_buffer(cigar: np.ndarray, off: np.ndarray, length: np.ndarray):
    """Packed CIGARs of many pairs -> (text bytes as uint8, start and length of each pair's text)."""
    n = len(length)
    off = np.asarray(off, dtype=np.int64)
    if len(cigar) == 0:
        z = np.zeros(n, np.int64)
        return np.zeros(0, np.uint8), z, z
    lens = (cigar >> 4).astype(np.uint32, copy=False)
    top = int(lens.max())
    chars = np.full(len(lens), 2, dtype=np.uint8)  # each op's characters: its digits and its letter
    p = 10
    while p <= top:
        chars += lens >= p
        p *= 10
    start = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(chars, out=start[1:])
    buf = np.empty(int(start[-1]) + 3, dtype=np.uint8)  # three bytes of room in front (see below)
    at = start[1:]  # one past each op's letter in the text (buf[3:])
    if top >= 100:  # the few with 3 or more digits first, written exactly
        big = np.flatnonzero(lens >= 100)
        write_ints(buf, start[big] + 3, lens[big], chars[big].astype(np.int64) - 1)
    # then the last two digits of every op, without selecting who has them: a 1-digit length's "tens" lands on
    # the previous op's letter (or the room bytes), which is written last. Views of buf one and two bytes on
    # take the same positions: no shifted copies of them.
    low = lens % 100 if top >= 100 else lens
    buf[at] = _TENS[low]
    buf[1:][at] = _UNITS[low]
    buf[2:][at] = _OP_BYTES[cigar & 15]
    stop = off + np.asarray(length, dtype=np.int64)
    return buf[3:], start[off], start[stop] - start[off]


def op_totals(cigar: np.ndarray, off: np.ndarray, length: np.ndarray) -> dict:
    """Per pair: matches (=), mismatches (X), ins (I), dels (D) in bases, as int64 arrays.

    CIGARs are stored contiguously in pair order (the AlignBatch invariant). One bincount over
    (pair, op) keys: faster than four running sums."""
    n = len(length)
    if n == 1 and len(cigar) == int(length[0]):  # (one pair, a chromosome's: no pair keys)
        sums = op_sums(np.asarray(cigar, np.uint32))[None, :]
        return {"matches": sums[:, EQ], "mismatches": sums[:, X], "ins": sums[:, I], "dels": sums[:, D]}
    pair = np.repeat(np.arange(n, dtype=np.int64), np.asarray(length, dtype=np.int64))
    key = pair * 16 + (cigar & 15)
    sums = np.bincount(key, weights=(cigar >> 4), minlength=16 * n).reshape(n, 16).astype(np.int64)
    return {"matches": sums[:, EQ], "mismatches": sums[:, X], "ins": sums[:, I], "dels": sums[:, D]}


def gap_opens(cigar: np.ndarray, off: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Per pair: the number of I and D runs (gap openings), as an int64 array (a running sum: faster
    than a bincount over a per-op pair index)."""
    op = cigar & 15
    run = np.zeros(len(cigar) + 1, np.int64)  # running count of gap ops: per pair, a difference of two
    np.cumsum((op == I) | (op == D), out=run[1:])
    off = np.asarray(off, dtype=np.int64)
    return run[off + np.asarray(length, dtype=np.int64)] - run[off]


_TAKES_Q = np.zeros(16, np.int64)  # per op code: 1 where the op consumes query bases (M I S = X)
_TAKES_Q[[M, I, S, EQ, X]] = 1
_TAKES_T = np.zeros(16, np.int64)  # ... target bases (M D N = X)
_TAKES_T[[M, D, N, EQ, X]] = 1


def consumed(ops: np.ndarray, sums: np.ndarray | None = None) -> tuple[int, int]:
    """(query bases, target bases) consumed by a packed CIGAR (sums: its op_sums, when known)."""
    sums = op_sums(np.asarray(ops, np.uint32)) if sums is None else sums
    return int(sums @ _TAKES_Q), int(sums @ _TAKES_T)


def check_cigar(query: bytes, target: bytes, ops: np.ndarray, n_mismatch: bool = False) -> None:
    """Raise ValueError unless ops is a valid global alignment of query to target.

    Checks: only =/X/I/D, no zero-length or unmerged ops, consumes exactly both
    sequences, and every = / X agrees with a real comparison under the rule.
    """
    ops = np.asarray(ops, dtype=np.uint32)
    op = ops & 15
    ln = (ops >> 4).astype(np.int64)
    if not np.isin(op, (I, D, EQ, X)).all():
        raise ValueError("CIGAR holds ops other than =/X/I/D")
    if (ln == 0).any():
        raise ValueError("CIGAR holds a zero-length op")
    if len(op) > 1 and (op[1:] == op[:-1]).any():
        raise ValueError("CIGAR holds adjacent equal ops (not merged)")
    qn, tn = consumed(ops)
    if qn != len(query) or tn != len(target):
        raise ValueError(f"CIGAR consumes {qn}/{tn} bases, sequences have {len(query)}/{len(target)}")
    # positions of every aligned (=/X) column
    qadv = np.where(np.isin(op, (EQ, X, I)), ln, 0)
    tadv = np.where(np.isin(op, (EQ, X, D)), ln, 0)
    qstart = np.concatenate([[0], np.cumsum(qadv)[:-1]])
    tstart = np.concatenate([[0], np.cumsum(tadv)[:-1]])
    col = np.isin(op, (EQ, X))
    reps = ln[col]
    if reps.sum():
        step = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
        qi = np.repeat(qstart[col], reps) + step
        ti = np.repeat(tstart[col], reps) + step
        q = np.frombuffer(query, dtype=np.uint8)[qi]
        t = np.frombuffer(target, dtype=np.uint8)[ti]
        want = np.repeat(op[col] == EQ, reps)
        got = equal(q, t, n_mismatch)
        if (want != got).any():
            k = int(np.argmax(want != got))
            raise ValueError(f"CIGAR says {'=' if want[k] else 'X'} at query {qi[k]} / target {ti[k]} "
                             f"({chr(q[k])} vs {chr(t[k])})")


def score_cigar(ops: np.ndarray, penalties: Penalties) -> int:
    """Penalty of a packed CIGAR: x per mismatch, o + l*e per gap run of length l."""
    ops = np.asarray(ops, dtype=np.uint32)
    op = ops & 15
    ln = (ops >> 4).astype(np.int64)
    gaps = np.isin(op, (I, D))
    return int(penalties.mismatch * ln[op == X].sum() + penalties.gap_open * gaps.sum()
               + penalties.gap_extend * ln[gaps].sum())
