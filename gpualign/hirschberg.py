"""The exact alignment path of two long strings by divide and conquer (Hirschberg 1975), in O(n + m) memory.

A piece is a sub-problem q[qa:qb] vs t[ta:tb] whose edit distance d is known. A splitter gives, for
each piece, a cell (i, j) on one of its optimal paths and the distance d1 of q[qa:i] vs t[ta:j]; the
other half, q[i:qb] vs t[j:tb], then costs d - d1 exactly, so both halves are pieces again. Pieces
are split a level at a time (a level's pieces go to the splitter together, so that a GPU runs them
at once) until they are small enough for the batched engines, whose CIGARs are stitched in order.
The stitched CIGAR is checked to cost the known distance before it is returned.

Splitters: engines/gpu_long.bp_split (the bit-parallel kernel's last columns, met in the middle) and
dp_split here (plain DP in numpy, for small problems and tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cigar import D, EQ, I, MAX_OP, X, consumed, merged, op_sums, pack_runs
from .records import concatenated, segment_index

# Leaves (the batched engines' pieces): the rule measured best of three on 5 Mbp at 1% and 10% and the
# real E. coli pair (docs/notes/benchmark-history.md)
LEAF_SHORT = 8192  # a piece no longer than this (both sides) is a leaf
LEAF_LONG = 32768  # ... and one no longer than this when its distance is at most LEAF_RATE of its length
LEAF_RATE = 0.125
LEAF_CLOSE = 65536  # ... and one no longer than this when its distance is at most LEAF_EDITS
LEAF_EDITS = 1024


@dataclass
class Pieces:
    """Sub-problems in path order: q[qa:qb] vs t[ta:tb], distance d (int64 arrays)."""

    qa: np.ndarray
    qb: np.ndarray
    ta: np.ndarray
    tb: np.ndarray
    d: np.ndarray

    @classmethod
    def one(cls, n: int, m: int, d: int) -> "Pieces":
        return cls(*(np.array([v], np.int64) for v in (0, n, 0, m, d)))

    def __len__(self) -> int:
        return len(self.d)

    def take(self, idx) -> "Pieces":
        return Pieces(self.qa[idx], self.qb[idx], self.ta[idx], self.tb[idx], self.d[idx])

    def longest(self) -> np.ndarray:
        return np.maximum(self.qb - self.qa, self.tb - self.ta)


def is_leaf(p: Pieces) -> np.ndarray:
    """Pieces the batched engines (or the trivial cases) take as they are."""
    n, m, longest = p.qb - p.qa, p.tb - p.ta, p.longest()
    trivial = (np.minimum(n, m) == 0) | (p.d == 0)
    return (trivial | (longest <= LEAF_SHORT) | ((longest <= LEAF_LONG) & (p.d <= LEAF_RATE * longest))
            | ((longest <= LEAF_CLOSE) & (p.d <= LEAF_EDITS)))


def split_level(p: Pieces, i: np.ndarray, j: np.ndarray, d1: np.ndarray, which: np.ndarray) -> Pieces:
    """The pieces with p[which] replaced, in place, by their halves at the cells (i, j), which cost d1
    from the piece's start (i, j, d1: one entry per piece in which)."""
    count = np.where(which, 2, 1)
    pos = np.cumsum(count) - count  # where each old piece's first child goes
    total = int(count.sum())
    out = Pieces(*(np.repeat(a, count) for a in (p.qa, p.qb, p.ta, p.tb, p.d)))
    first, second = pos[which], pos[which] + 1
    out.qb[first], out.tb[first], out.d[first] = i, j, d1
    out.qa[second], out.ta[second], out.d[second] = i, j, p.d[which] - d1
    assert len(out) == total
    return out


def edits(ops: np.ndarray, sums: np.ndarray | None = None) -> int:
    """Edits of a packed CIGAR (X, I and D bases; sums: its cigar.op_sums, when known)."""
    sums = op_sums(np.asarray(ops, np.uint32)) if sums is None else sums
    return int(sums[X] + sums[I] + sums[D])


def align_path(q: np.ndarray, t: np.ndarray, pieces: Pieces, split, align_leaves, progress=None) -> np.ndarray:
    """The packed CIGAR of an optimal alignment of q and t, given pieces that cover them in path order
    with their distances (Pieces.one(n, m, d) for the whole problem).
    split(q, t, pieces) -> (i, j, d1), for pieces that are not leaves (both sides at least 1 long).
    align_leaves(q, t, pieces) -> (ops, off, len) with each leaf's CIGAR, of cost exactly its d.
    progress(dict(kernel="path", level, pieces, splitting)) after each level."""
    total = int(pieces.d.sum())
    level = 0
    while True:
        leaf = is_leaf(pieces)
        if progress is not None:
            progress(dict(kernel="path", level=level, pieces=len(pieces), splitting=int((~leaf).sum())))
        if leaf.all():
            break
        which = ~leaf
        i, j, d1 = split(q, t, pieces.take(which))
        pieces = split_level(pieces, np.asarray(i, np.int64), np.asarray(j, np.int64), np.asarray(d1, np.int64),
                             which)
        level += 1
    n, m = pieces.qb - pieces.qa, pieces.tb - pieces.ta
    easy = (np.minimum(n, m) == 0) | (pieces.d == 0)  # one op (none when both sides are empty)
    count = ((n + m) > 0).astype(np.int64)
    hard = np.nonzero(~easy)[0]
    if len(hard):
        ops, off, ln = align_leaves(q, t, pieces.take(hard))
        count[hard] = ln
    start = np.cumsum(count) - count
    e = np.nonzero(easy & (count > 0))[0]
    op = np.where(n[e] == 0, D, np.where(m[e] == 0, I, EQ)).astype(np.uint32)
    length = np.where(n[e] == 0, m[e], n[e])
    if len(e) and int(length.max()) > MAX_OP:  # (an op too long to pack: runs, packed with the leaves')
        full_op, full_len = np.empty(int(count.sum()), np.uint32), np.empty(int(count.sum()), np.int64)
        full_op[start[e]], full_len[start[e]] = op, length
        if len(hard):
            at = segment_index(start[hard], ln)
            leaf_ops = concatenated(ops, off, ln)
            full_op[at], full_len[at] = leaf_ops & 15, leaf_ops >> 4
        out = pack_runs(full_op, full_len)
    else:  # packed as they are: the easy pieces' ops at their places, the leaves' ops in the places between
        out = np.empty(int(count.sum()), np.uint32)
        if len(hard):
            rest = np.ones(len(out), bool)
            rest[start[e]] = False
            out[rest] = concatenated(ops, off, ln)
        out[start[e]] = (length.astype(np.uint32) << 4) | op
        out = merged(out)  # (pieces' ops meeting at their borders)
    sums = op_sums(out)
    if edits(out, sums) != total:
        raise RuntimeError(f"alignment path: stitched CIGAR costs {edits(out, sums)}, the distance is {total}")
    qn, tn = consumed(out, sums)
    if (qn, tn) != (len(q), len(t)):
        raise RuntimeError(f"alignment path: stitched CIGAR spans {qn} x {tn} bases, the strings {len(q)} x {len(t)}")
    return out


# -- a plain DP splitter (numpy) ---------------------------------------------------------------------------
def last_column(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """D[i][len(b)] for i = 0..len(a): edit distances of every prefix of a to all of b (O(len(a) len(b)))."""
    n = len(a)
    col = np.arange(n + 1, dtype=np.int64)
    rows = np.arange(n + 1, dtype=np.int64)
    for j in range(1, len(b) + 1):
        diag = col[:-1] + (a != b[j - 1])
        x = np.empty(n + 1, np.int64)
        x[0] = j
        x[1:] = np.minimum(col[1:] + 1, diag)
        col = np.minimum.accumulate(x - rows) + rows  # the vertical moves, D[i-1][j] + 1, as a running min
    return col


def dp_split(q: np.ndarray, t: np.ndarray, pieces: Pieces, pick=None):
    """Hirschberg's split by plain DP: the middle column of the target (of the query when the query is
    longer), the best row by forward and backward last columns. pick(candidates) chooses among tied
    rows (default: the first)."""
    out = []
    for k in range(len(pieces)):
        qa, qb, ta, tb, d = (int(a[k]) for a in (pieces.qa, pieces.qb, pieces.ta, pieces.tb, pieces.d))
        a, b = q[qa:qb], t[ta:tb]
        swap = len(a) > len(b)
        if swap:
            a, b = b, a
        mid = len(b) // 2
        f = last_column(a, b[:mid])
        r = last_column(a[::-1], b[mid:][::-1])[::-1]
        s = f + r
        best = np.nonzero(s == s.min())[0]
        if int(s.min()) != d:
            raise RuntimeError(f"dp_split: piece distance {d}, columns say {int(s.min())}")
        row = int(best[0] if pick is None else pick(best))
        i, j = (qa + mid, ta + row) if swap else (qa + row, ta + mid)
        out.append((i, j, int(f[row])))
    return tuple(np.array(v, np.int64) for v in zip(*out)) if out else (np.zeros(0, np.int64),) * 3
