"""From end positions to hits: the engines report every end position j with D[m][j] <= k (candidates);
here they become hits (one per run of consecutive end positions, or one per end with all_ends), each
with an optimal alignment found by one deterministic traceback, whichever engine found the candidates
(so GPU and CPU output are the same bytes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import cigar as C
from ..records import offsets_from_lengths, segment_index
from . import alphabet as A

BIG = 16000  # int16 "no alignment starts here"
TRACE_BATCH = 1 << 15  # hits aligned at once at most on the host
TRACE_BYTES = 1 << 28  # and a batch's DP (either aligner) at most this big: (m + 1) * (m + k + 1) int16 a hit


@dataclass
class Cands:
    """End positions found by an engine in one chunk: pattern-strand, chunk piece, record coordinate of
    the end base (0-based, inclusive), edit distance."""

    ps: np.ndarray
    piece: np.ndarray
    pos: np.ndarray
    d: np.ndarray

    @classmethod
    def empty(cls) -> "Cands":
        z = np.zeros(0, np.int64)
        return cls(z.astype(np.int32), z, z, z.astype(np.int32))

    @classmethod
    def concat(cls, parts: list) -> "Cands":
        parts = [p for p in parts if len(p.ps)] or [cls.empty()]
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("ps", "piece", "pos", "d")))


@dataclass
class Hits:
    """Hits with alignments. start/end: record coordinates, half-open; cigar: packed ops (cigar.py)
    with cig_off/cig_len per hit; matched: the text's codes [start, end) one hit after another."""

    ps: np.ndarray
    record: np.ndarray
    start: np.ndarray
    end: np.ndarray
    d: np.ndarray
    mismatches: np.ndarray
    ins: np.ndarray
    dels: np.ndarray
    cigar: np.ndarray
    cig_off: np.ndarray
    cig_len: np.ndarray
    matched: np.ndarray
    mat_off: np.ndarray

    @property
    def n(self) -> int:
        return len(self.ps)

    @classmethod
    def concat(cls, parts: list) -> "Hits":
        parts = [p for p in parts if p is not None and p.n]
        if not parts:
            z = np.zeros(0, np.int64)
            return cls(z, z, z, z, z, z, z, z, np.zeros(0, np.uint32), z, z, np.zeros(0, np.uint8), z)
        cig = np.concatenate([p.cigar for p in parts])
        mat = np.concatenate([p.matched for p in parts])
        shift_c = np.cumsum([0] + [len(p.cigar) for p in parts[:-1]])
        shift_m = np.cumsum([0] + [len(p.matched) for p in parts[:-1]])
        cols = {f: np.concatenate([getattr(p, f) for p in parts])
                for f in ("ps", "record", "start", "end", "d", "mismatches", "ins", "dels", "cig_len")}
        return cls(**cols, cigar=cig, matched=mat,
                   cig_off=np.concatenate([p.cig_off + s for p, s in zip(parts, shift_c)]),
                   mat_off=np.concatenate([p.mat_off + s for p, s in zip(parts, shift_m)]))

    def rows(self, a: int, b: int) -> "Hits":
        """Hits a to b (views: nothing copied)."""
        c0 = int(self.cig_off[a]) if b > a else 0
        m0 = int(self.mat_off[a]) if b > a else 0
        c1 = int(self.cig_off[b - 1] + self.cig_len[b - 1]) if b > a else 0
        m1 = int(self.mat_off[b - 1] + self.end[b - 1] - self.start[b - 1]) if b > a else 0
        return Hits(self.ps[a:b], self.record[a:b], self.start[a:b], self.end[a:b], self.d[a:b],
                    self.mismatches[a:b], self.ins[a:b], self.dels[a:b], self.cigar[c0:c1], self.cig_off[a:b] - c0,
                    self.cig_len[a:b], self.matched[m0:m1], self.mat_off[a:b] - m0)

    def take(self, idx: np.ndarray) -> "Hits":
        """The hits idx, in that order, their CIGARs and matched text copied out (nothing else kept)."""
        cig_len, span = self.cig_len[idx], (self.end - self.start)[idx]
        return Hits(self.ps[idx], self.record[idx], self.start[idx], self.end[idx], self.d[idx],
                    self.mismatches[idx], self.ins[idx], self.dels[idx],
                    self.cigar[segment_index(self.cig_off[idx], cig_len)], offsets_from_lengths(cig_len), cig_len,
                    self.matched[segment_index(self.mat_off[idx], span)], offsets_from_lengths(span))


def align(pattern: np.ndarray, window: np.ndarray, first: np.ndarray, table: np.ndarray):
    """Optimal alignments of patterns (uint8 [n, m]) ending at the last column of their text windows
    (uint8 [n, L], real text from column first[i], PAD before), with a free start.
    Returns (cost, start column, ops: int8 [n, S] in reverse order, -1 padded, steps per hit).
    Traceback preference: diagonal, then pattern-only base (I), then text-only base (D)."""
    n, m = pattern.shape
    L = window.shape[1]
    cols = np.arange(L + 1, dtype=np.int16)[:, None]
    # D[i][j][h]: hits last, so that every step below is a vector operation over the hits
    D = np.empty((m + 1, L + 1, n), np.int16)
    D[0] = np.where(cols >= first[None, :], 0, BIG)
    # bit p of matches[t]: pattern code p matches text code t
    matches = (table.astype(np.uint16) << np.arange(16, dtype=np.uint16)[:, None]).sum(axis=0).astype(np.uint16)
    pt = np.ascontiguousarray(pattern.T).astype(np.uint16)
    mb = matches[np.ascontiguousarray(window.T)]  # [L][n]
    run = np.empty((L + 1, n), np.int16)  # (each row's running minimum, in one buffer)
    for i in range(1, m + 1):
        prev, cur = D[i - 1], D[i]
        sub = ((mb >> pt[i - 1]) & 1) ^ 1
        np.minimum(prev[:-1] + sub.astype(np.int16), prev[1:] + 1, out=cur[1:])
        cur[0] = prev[0] + 1
        # text-only bases (D) from the left: cur[c] = min over c' <= c of cur[c'] + (c - c'), one running minimum
        np.subtract(cur, cols, out=run)
        np.minimum.accumulate(run, axis=0, out=cur)
        cur += cols
    flat = D.reshape(-1)
    miss = (~table).reshape(-1)
    i = np.full(n, m, np.int64)
    j = np.full(n, L, np.int64)
    ops = np.full((n, m + L), -1, np.int8)
    steps = np.zeros(n, np.int64)
    cost = D[m][L].astype(np.int64)
    act = np.arange(n)
    plane, row = (L + 1) * n, n
    for s in range(m + L):
        act = act[i[act] > 0]
        if not len(act):
            break
        ii, jj = i[act], j[act]
        at = ii * plane + jj * row + act
        cur = flat[at]
        jm = np.maximum(jj - 1, 0)
        sb = miss[pattern[act, ii - 1].astype(np.int64) * 16 + window[act, np.minimum(jm, L - 1)]]
        diag = (jj > 0) & (flat[at - plane - row] + sb == cur)
        up = ~diag & (flat[at - plane] + 1 == cur)
        op = np.where(diag, np.where(sb == 0, C.EQ, C.X), np.where(up, C.I, C.D)).astype(np.int8)
        ops[act, s] = op
        steps[act] += 1
        i[act] = ii - (op != C.D)
        j[act] = jj - (op != C.I)
    return cost, j, ops, steps


def packed_cigars(ops: np.ndarray, steps: np.ndarray):
    """Run-length packed CIGARs (len << 4 | op) of align()'s reversed ops: (cigar, off, len per hit)."""
    n, S = ops.shape
    fwd = ops[:, ::-1]
    keep = np.arange(S)[None, :] >= (S - steps)[:, None]
    flat = fwd[keep].astype(np.int64)
    hit = np.repeat(np.arange(n), steps)
    new = np.ones(len(flat), bool)
    new[1:] = (flat[1:] != flat[:-1]) | (hit[1:] != hit[:-1])
    starts = np.flatnonzero(new)
    lens = np.diff(np.append(starts, len(flat)))
    cigar = (lens << 4 | flat[starts]).astype(np.uint32)
    per = np.bincount(hit[starts], minlength=n)
    off = np.concatenate([[0], np.cumsum(per)[:-1]]).astype(np.int64)
    counts = {op: np.bincount(hit[flat == op], minlength=n) for op in (C.X, C.I, C.D)}
    return cigar, off, per.astype(np.int64), counts


def align_job(job: tuple) -> tuple:
    """One batch's alignments (in a worker process when there is a pool)."""
    pattern, window, first, table = job
    cost, startcol, ops, steps = align(pattern, window, first, table)
    return (cost, startcol, *packed_cigars(ops, steps))


class FallbackAligner:
    """An aligner (search/gpu_align.py's) that gives way to this module's own, here, for good once its device
    fails (devices.is_device_failure: a --gpus device lost mid-run); the same alignments either way."""

    def __init__(self, aligner):
        self.aligner = aligner

    def __call__(self, job: tuple) -> tuple:
        if self.aligner is not None:
            from ..devices import is_device_failure

            try:
                return self.aligner(job)
            except Exception as err:  # noqa: BLE001 - only a device's failure is let go
                if not is_device_failure(err):
                    raise
                self.aligner = None
        return align_job(job)


def trace(chunk, pats, rows: "Cands", k: int, table: np.ndarray, pool=None, aligner=None) -> Hits:
    """Alignments of the candidates `rows` (their windows lie in chunk): by aligner (search/gpu_align.py's)
    when given, else here, batches going to pool (an executor) when one is given and there is more than one."""
    groups = []
    lengths = pats.lengths[rows.ps]
    for m in np.unique(lengths).tolist():
        sel = np.flatnonzero(lengths == m)
        size = max(1, TRACE_BYTES // (2 * (m + 1) * (m + k + 1)))
        if aligner is None:
            size = min(size, TRACE_BATCH if pool is None else TRACE_BATCH // 4)
        groups += [(sel[a:a + size], m) for a in range(0, len(sel), size)]
    if not groups:
        return Hits.concat([])
    jobs = [_window(chunk, pats, rows, sel, m, k) for sel, m in groups]
    work = [(j["pattern"], j["window"], j["first"], table) for j in jobs]
    if aligner is not None:
        done = map(aligner, work)
    elif pool is not None and len(work) > 1:
        done = pool.map(align_job, work)
    else:
        done = map(align_job, work)
    hits = Hits.concat([_assemble(chunk, j, r) for j, r in zip(jobs, done)])
    if len(groups) == 1:  # (rows' order already)
        return hits
    return hits.take(np.argsort(np.concatenate([sel for sel, _ in groups]), kind="stable"))  # rows' order


def _window(chunk, pats, rows: "Cands", sel: np.ndarray, m: int, k: int) -> dict:
    """A batch's patterns and text windows text[end - m - k, end) (PAD before the record's start)."""
    L = m + k
    ps, piece, pos, d = rows.ps[sel], rows.piece[sel], rows.pos[sel], rows.d[sel]
    end = pos + 1
    w = np.minimum(L, end - chunk.rec_start[piece])  # bases of the record available before end
    first = L - w
    at = chunk.buf[piece] + (end - chunk.rec_start[piece])  # buffer offset of the end (exclusive)
    codes = chunk.codes if len(chunk.codes) >= L else np.concatenate([chunk.codes, np.full(L, A.PAD, np.uint8)])
    window = np.lib.stride_tricks.sliding_window_view(codes, L)[np.maximum(at - L, 0)]
    near = np.flatnonzero(first > 0)  # windows that begin before their record: PAD there
    if len(near):
        idx = at[near, None] - L + np.arange(L)[None, :]
        window[near] = np.where(np.arange(L)[None, :] >= first[near, None], codes[np.maximum(idx, 0)], A.PAD)
    return dict(pattern=pats.matrix(m)[ps], window=window, first=first, L=L, ps=ps, piece=piece, end=end, at=at,
                d=d)


def _assemble(chunk, j: dict, result: tuple) -> Hits:
    cost, startcol, cigar, off, ln, counts = result
    d, end, at = j["d"], j["end"], j["at"]
    if not np.array_equal(cost, d.astype(np.int64)):
        bad = int(np.flatnonzero(cost != d)[0])
        raise AssertionError(f"search: traceback cost {cost[bad]} != engine distance {d[bad]} "
                             f"(pattern-strand {j['ps'][bad]}, end {end[bad]})")
    start = end - (j["L"] - startcol)
    span = end - start
    matched = chunk.codes[segment_index(at - span, span)]
    return Hits(j["ps"].astype(np.int64), chunk.record[j["piece"]], start, end, d.astype(np.int64), counts[C.X],
                counts[C.I], counts[C.D], cigar, off, ln, matched, offsets_from_lengths(span))


def _run_heads(R: np.ndarray, P: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Candidates sorted by record R, pattern-strand P and end X: True where a run of consecutive ends of one
    pattern-strand in one record starts (a run is one hit: Collector._loci)."""
    head = np.ones(len(R), bool)
    head[1:] = (R[1:] != R[:-1]) | (P[1:] != P[:-1]) | (X[1:] != X[:-1] + 1)
    return head


class Collector:
    """Turns each chunk's candidates into hits, holding back the runs that go on in the next chunk, and
    hands out each record's hits once the record is complete (sorted by start, end, pattern, strand).
    pool / aligner: as trace takes them."""

    def __init__(self, pats, k: int, all_ends: bool, rule: str, pool=None, aligner=None):
        self.pats, self.k, self.all_ends, self.pool, self.aligner = pats, k, all_ends, pool, aligner
        self.table = A.match_table(rule)
        self.done: list = []  # Hits of the records not yet complete
        self.carry = None  # (Cands of open runs' best rows as (rec, ps, last pos, d), their Hits)

    def add(self, chunk, cands: Cands, quota: np.ndarray | None = None) -> tuple:
        """Process a chunk's candidates; returns the records it completes (their indices, ascending) and their
        Hits, by record, each record's sorted by start, end, pattern, strand. quota (int64 per pattern, >= 1):
        how many more hits of each pattern the output needs at most (--max-hits-per-pattern: the cap, and one
        to tell it was passed); the candidates of hits that come after that many are not traced (_within)."""
        if quota is not None:
            cands = self._within(chunk, cands, quota)
        rec = chunk.record[cands.piece]
        if self.all_ends:
            hits = trace(chunk, self.pats, cands, self.k, self.table, self.pool, self.aligner)
        else:
            hits = self._loci(chunk, cands, rec)
        self.done.append(hits)
        complete = chunk.record[chunk.last]
        if not len(complete):
            return complete, Hits.concat([])
        allh = Hits.concat(self.done)
        fin = np.isin(allh.record, complete)
        self.done = [allh.take(np.flatnonzero(~fin))]
        rows = np.flatnonzero(fin)
        rec = allh.record[rows]
        order = rows[np.lexsort((self.pats.minus[allh.ps[rows]], self.pats.pattern[allh.ps[rows]], allh.end[rows],
                                 allh.start[rows], rec))]
        return complete, allh.take(order)

    def _within(self, chunk, cands: Cands, quota: np.ndarray) -> Cands:
        """The candidates whose hits could be among the first quota[p] of their pattern p in output order
        (record, start, end, pattern, strand), counting the hits held for the open record: memory and tracing
        bounded by the quota, however many hits a chunk holds. Candidates go by runs (as _loci joins them; one
        each with all_ends), a run's hit starting within [first - m - k + 1, last - m + k + 1] (its first and
        last end, pattern length m). A pattern's items (held hits by their start, runs by their latest start)
        in record order, then start: once quota[p] of them are counted, at (record r, start T), a run of a
        later record, or of r whose earliest start is past T, comes after quota[p] hits and is dropped. Kept
        always: runs that go on from a run the chunk before carried (joined to it, their hit may start before
        this chunk). Runs that end at their piece's last base while their record goes on (carried to the next
        chunk) are not counted (their hit may end further on), and are dropped by the same rule: their hit
        starts past T wherever it ends, and the part of them in the next chunk, carried by nothing, then forms
        a run that starts later still. So a pattern's hits traced are its quota and a few near the cut (the
        edit bound's width), whatever the record's length or the number of its chunks."""
        n = len(cands.ps)
        if n == 0:
            return cands
        pats, k = self.pats, self.k
        rec = chunk.record[cands.piece]
        order = np.lexsort((cands.pos, cands.ps, rec))
        R, P, X, piece = rec[order], cands.ps[order], cands.pos[order], cands.piece[order]
        new_run = np.ones(n, bool) if self.all_ends else _run_heads(R, P, X)
        head = np.flatnonzero(new_run)
        tail = np.append(head[1:] - 1, n - 1)
        r_rec, r_ps, first, last = R[head], P[head], X[head], X[tail]
        m = pats.lengths[r_ps]
        lo, hi = first + 1 - m - k - 1, last + 1 - m + k + 1  # (a base of slack each side)
        p_last = piece[tail]
        open_ = (last == chunk.rec_start[p_last] + chunk.context[p_last] + chunk.length[p_last] - 1) & \
            ~chunk.last[p_last]  # (its hit is the next chunk's, perhaps further on: not counted)
        keep = np.zeros(len(head), bool)  # runs that go on from a run the chunk before carried (_loci joins them)
        if self.carry is not None and len(self.carry[0]["ps"]):
            c = self.carry[0]
            c_key = c["rec"].astype(np.int64) * pats.n + c["ps"]  # (one open run per record and pattern-strand)
            c_order = np.argsort(c_key)
            c_key, c_last = c_key[c_order], c["last"][c_order]
            key = r_rec.astype(np.int64) * pats.n + r_ps
            at = np.minimum(np.searchsorted(c_key, key), len(c_key) - 1)
            keep = (c_key[at] == key) & (c_last[at] == first - 1)
        counted = np.flatnonzero(~open_)
        i_pat = np.concatenate([pats.pattern[h.ps] for h in self.done] + [pats.pattern[r_ps[counted]]]).astype(np.int64)
        i_rec = np.concatenate([h.record for h in self.done] + [r_rec[counted]]).astype(np.int64)
        i_key = np.concatenate([h.start for h in self.done] + [hi[counted]]).astype(np.int64)
        o = np.lexsort((i_key, i_rec, i_pat))
        sp = i_pat[o]
        rank = np.arange(len(o)) - np.searchsorted(sp, sp, side="left")
        fill = o[rank == quota[sp] - 1]  # the item that fills its pattern's quota (one per pattern at most)
        has = np.zeros(len(quota), bool)
        cut_rec = np.zeros(len(quota), np.int64)
        cut_key = np.zeros(len(quota), np.int64)
        has[i_pat[fill]], cut_rec[i_pat[fill]], cut_key[i_pat[fill]] = True, i_rec[fill], i_key[fill]
        rp = pats.pattern[r_ps]
        keep |= ~has[rp] | (r_rec < cut_rec[rp]) | ((r_rec == cut_rec[rp]) & (lo <= cut_key[rp]))
        if keep.all():
            return cands
        run = np.cumsum(new_run) - 1
        idx = np.sort(order[keep[run]])
        return Cands(cands.ps[idx], cands.piece[idx], cands.pos[idx], cands.d[idx])

    def _loci(self, chunk, cands: Cands, rec: np.ndarray) -> Hits:
        old, old_hits = self.carry if self.carry is not None else (None, None)
        n_old = 0 if old is None else len(old["ps"])
        R = np.concatenate([old["rec"], rec]) if n_old else rec
        P = np.concatenate([old["ps"], cands.ps]) if n_old else cands.ps
        X = np.concatenate([old["last"], cands.pos]) if n_old else cands.pos
        Dd = np.concatenate([old["d"], cands.d]) if n_old else cands.d
        order = np.lexsort((X, P, R))
        R, P, X, Dd = R[order], P[order], X[order], Dd[order]
        src = order  # < n_old: carried row, else new candidate (index src - n_old)
        N = len(R)
        if N == 0:
            self.carry = None
            return Hits.concat([])
        new_run = _run_heads(R, P, X)
        run = np.cumsum(new_run) - 1
        n_runs = int(run[-1]) + 1
        best_order = np.lexsort((np.arange(N), Dd, run))
        first_of_run = np.ones(N, bool)
        first_of_run[1:] = run[best_order][1:] != run[best_order][:-1]
        best = best_order[first_of_run]  # one row per run, in run order
        last = np.append(np.flatnonzero(new_run)[1:] - 1, N - 1)  # last row of each run
        # a run is open when its last row is its piece's last reported base and the record goes on
        open_ = np.zeros(n_runs, bool)
        lr = src[last]
        is_new = lr >= n_old
        piece = cands.piece[lr[is_new] - n_old]
        last_base = chunk.rec_start[piece] + chunk.context[piece] + chunk.length[piece] - 1
        open_[np.flatnonzero(is_new)] = (X[last][is_new] == last_base) & ~chunk.last[piece]
        bsrc = src[best]
        new_best = bsrc >= n_old
        want = bsrc[new_best] - n_old
        traced = trace(chunk, self.pats, Cands(cands.ps[want], cands.piece[want], cands.pos[want], cands.d[want]),
                       self.k, self.table, self.pool, self.aligner) if len(want) else Hits.concat([])
        # hits of the runs in run order: traced (new best) or carried
        pieces, where = [], np.empty(n_runs, np.int64)
        pieces.append(traced)
        where[np.flatnonzero(new_best)] = np.arange(len(want))
        if n_old:
            where[np.flatnonzero(~new_best)] = traced.n + (bsrc[~new_best])
            pieces.append(old_hits)
        allh = Hits.concat(pieces)
        closed = np.flatnonzero(~open_)
        op = np.flatnonzero(open_)
        self.carry = None
        if len(op):
            carried = allh.take(where[op])
            self.carry = ({"rec": R[last[op]], "ps": P[last[op]], "last": X[last[op]], "d": Dd[best[op]]}, carried)
        return allh.take(where[closed])
