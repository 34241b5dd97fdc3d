"""The arrays that flow between reader, engines and writers (see DESIGN.md).

PairBatch: what every engine receives. AlignBatch: what every engine returns.
Both are plain numpy arrays on the host (a GPU engine's CIGARs brought over when first read:
AlignBatch.defer); nothing here is per base in Python.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from . import trace

# status codes
OK, EXCEEDED, FAILED = 0, 1, 2
# a `paf` record's rank among its read's (batch.meta[RANK_KEY], int8; realign_primary decides them): SAM FLAG 0,
# 2048, 256; batch.meta[SA_KEY]: each record's SA:Z value or None
PRIMARY, SUPPLEMENTARY, SECONDARY = 0, 1, 2
RANK_KEY, SA_KEY = "rank", "sa"
STATUS_NAMES = ("ok", "exceeded", "failed")

# engine codes: one registry, the same strings in CLI, logs and outputs
ENGINE_NAMES = ("none", "cpu-wfa", "gpu-edit", "gpu-affine", "gpu-long", "cpu-dp", "cpu-long", "gpu-dp")
ENGINE_CODE = {name: i for i, name in enumerate(ENGINE_NAMES)}


def segment_index(off: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Flat indices of the segments [off[i], off[i]+length[i]) concatenated in order."""
    length = np.asarray(length, dtype=np.int64)
    total = int(length.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(np.asarray(off, dtype=np.int64) - np.cumsum(length) + length, length)
    return starts + np.arange(total, dtype=np.int64)


def concatenated(seq: np.ndarray, off: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The segments [off[i], off[i]+length[i]) of seq concatenated in order: a view of seq where they lie
    end to end (the readers' batches), else gathered."""
    if len(length) and np.array_equal(off[1:], off[:-1] + length[:-1]):
        return seq[int(off[0]):int(off[-1] + length[-1])]
    return seq[segment_index(off, length)]


def offsets_from_lengths(length: np.ndarray) -> np.ndarray:
    off = np.zeros(len(length), dtype=np.int64)
    if len(length) > 1:
        np.cumsum(length[:-1], out=off[1:])
    return off


SAM_RNAME_NOT_FIRST = "*="  # what SAM's reference names (@SQ SN, RNAME) cannot start with ('*' alone is "none"):
# output/sam.check_rnames and search's text reader refuse such a target name for SAM/BAM


def rname_reason(first: str) -> str:
    """Why a SAM reference name cannot start with first (one of SAM_RNAME_NOT_FIRST), in brackets."""
    return ("('*' reads as no reference: its records would read as unmapped)" if first == "*" else
            "('=' is RNEXT's mark for the same reference as RNAME)")


SAM_RNAME_NEVER = "\\,\"'`()[]{}<>"  # what SAM 1.6's reference names cannot hold anywhere (its RNAME rule)


def rname_odd(name: str) -> str | None:
    """The first character of name that SAM's reference names (@SQ SN, RNAME) cannot hold: one outside printable
    ASCII ('!' to '~') or one of SAM_RNAME_NEVER; None where there is none."""
    if name.isascii() and name.isprintable() and " " not in name and not any(c in name for c in SAM_RNAME_NEVER):
        return None  # (str's own scans: search checks a text's many names joined in one string)
    return next((c for c in name if not "!" <= c <= "~" or c in SAM_RNAME_NEVER), None)


def rname_odd_bytes(buf: np.ndarray) -> np.ndarray:
    """Per byte of buf (uint8): one that rname_odd refuses."""
    return unprintable_bytes(buf) | np.isin(buf, np.frombuffer(SAM_RNAME_NEVER.encode(), np.uint8))


RNAME_RULE = "printable ASCII but " + " ".join(SAM_RNAME_NEVER)  # rname_odd's rule as messages give it


def odd_character(name: str) -> str:
    """The first character of name outside printable ASCII ('!' to '~'), which SAM's names cannot hold (htslib
    reads them, samtools drops some)."""
    return next(c for c in name if not "!" <= c <= "~")


def unprintable_bytes(buf: np.ndarray) -> np.ndarray:
    """Per byte of buf (uint8): outside '!' to '~' (odd_character's rule, on bytes)."""
    return (buf - np.uint8(0x21)) > np.uint8(0x7E - 0x21)


@dataclass(eq=False)
class Names:
    """Record names as one byte buffer, no Python object per name (the reader's form: it pickles and
    joins in bulk): name i is buf[start[i] : start[i] + length[i]], ASCII. Reads as a sequence of str."""

    buf: np.ndarray  # uint8
    start: np.ndarray  # int64
    length: np.ndarray  # int64

    @classmethod
    def of(cls, items) -> "Names":
        """From str items holding no newline (or Names, returned as they are)."""
        if isinstance(items, Names):
            return items
        raw = "".join(items).encode()
        length = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
        if len(raw) != int(length.sum()):  # not all ASCII: lengths in UTF-8 bytes
            length = np.fromiter((len(x.encode()) for x in items), dtype=np.int64, count=len(items))
        return cls.joined(np.frombuffer(raw, dtype=np.uint8), length)

    @classmethod
    def joined(cls, buf: np.ndarray, length: np.ndarray) -> "Names":
        """Names one after another in buf."""
        length = np.asarray(length, dtype=np.int64)
        return cls(buf, offsets_from_lengths(length), length)

    def __len__(self) -> int:
        return len(self.length)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Names(self.buf, self.start[i], self.length[i])
        a = int(self.start[i])
        return self.buf[a:a + int(self.length[i])].tobytes().decode()

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    def take(self, idx: np.ndarray) -> "Names":
        return Names(self.buf, self.start[idx], self.length[idx])

    def __reduce__(self):
        """Pickled as the names' bytes alone (buf may be a whole input block: io/fastx_device.py)."""
        return Names.joined, (self.packed(), self.length)

    def packed(self) -> np.ndarray:
        """The names' bytes one after another (a slice when they lie so already)."""
        n = len(self)
        if n == 0:
            return np.zeros(0, np.uint8)
        a, total = int(self.start[0]), int(self.length.sum())
        if np.array_equal(self.start[1:], self.start[:-1] + self.length[:-1]):
            return self.buf[a:a + total]
        return self.buf[segment_index(self.start, self.length)]

    @classmethod
    def concat(cls, parts: list) -> "Names":
        parts = [p if isinstance(p, Names) else Names.of(p) for p in parts]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.joined(np.zeros(0, np.uint8), np.zeros(0, np.int64))
        return cls.joined(np.concatenate([p.packed() for p in parts]), np.concatenate([p.length for p in parts]))


@dataclass
class PairBatch:
    """A chunk of pairs: one byte buffer (case-folded) plus offsets and lengths."""

    seq: np.ndarray  # uint8, all query and target bytes
    q_off: np.ndarray  # int64
    q_len: np.ndarray  # int64
    t_off: np.ndarray  # int64
    t_len: np.ndarray  # int64
    index: np.ndarray  # int64, position of each pair in the input
    q_names: list | Names = field(default_factory=list)  # str per pair (the reader gives Names)
    t_names: list | Names = field(default_factory=list)
    q_quals: list | Names = field(default_factory=list)  # str or None per pair, or Names (qualities in one buffer)
    # ends-free alignment: at most t_free[i, 0] target bases skipped at the start, t_free[i, 1] at the end
    # (None: the whole target may be skipped at either end)
    t_free: np.ndarray | None = None
    # what a writer needs beside the sequences (`gpualign paf`: each pair's candidate and full query)
    meta: dict | None = None
    _bounds: tuple | None = field(default=None, repr=False, compare=False)
    # the sequences already on the GPU as gpu.staging uploads them (io/fastx_device.py), or None
    device: object = field(default=None, repr=False, compare=False)
    # the writers' columns on the GPU too (io/fastx_device.py; text_device.DeviceLines.paf and .sam read
    # them), or None: names (uint8: the query names, then the target names), q_name and t_name ((offsets,
    # lengths) in names), q_len and t_len (int64 device arrays); for SAM and BAM also q_seq ((`device`, each
    # query's offset in it): kept after `device` is dropped) and, where FASTQ qualities were read, quals
    # ((their bytes, each query's offset in them)); rows (int32 (4, n): q_off, q_len, t_off, t_len as
    # gpu.staging stages them for the engines)
    device_cols: dict | None = field(default=None, init=False, repr=False, compare=False)  # (not copied by replace)

    def __getstate__(self) -> dict:
        """Pickled without `device` and `device_cols` (GPU buffers of this process: the formatting processes
        and Dask workers get the host arrays), `seq` fetched first where deferred."""
        state = {**self.__dict__, "seq": self.seq, "device": None, "device_cols": None}
        state.pop("_seq_fetch", None)
        return state

    def defer_seq(self, fetch, size: int) -> None:
        """seq (size bytes) brought to the host by fetch() when first read, not now: a batch parsed on the
        device (io/fastx_device.py), whose GPU engines and device writers read its bytes there, and whose host
        copy only CPU rescue, a host writer or a check ever reads."""
        self.__dict__.pop("seq", None)
        self.__dict__["_seq_fetch"] = (fetch, threading.Lock(), size)

    @property
    def seq_size(self) -> int:
        """len(seq), a deferred one not fetched for it."""
        pending = self.__dict__.get("_seq_fetch")
        seq = self.__dict__.get("seq")
        return len(seq) if seq is not None else pending[2] if pending is not None else len(self.seq)

    def __getattr__(self, name: str):
        """seq, deferred (defer_seq), fetched now by one thread; only called for attributes not set (also
        when another thread set seq just after this one looked for it)."""
        pending = self.__dict__.get("_seq_fetch")
        if name == "seq" and pending is not None:
            fetch, lock, _ = pending
            with lock:
                if "seq" not in self.__dict__:
                    self.__dict__["seq"] = fetch()
                    del self.__dict__["_seq_fetch"]  # (its device buffer with it)
        if name == "seq" and "seq" in self.__dict__:
            return self.__dict__["seq"]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def n(self) -> int:
        return len(self.q_len)

    def length_bounds(self) -> tuple[int, int, int, int]:
        """(shortest query, longest query, shortest target, longest target), computed once per batch
        (eWFA's prefetch asks first, on the queueing thread; its accepts() reads it); zeros when empty."""
        if self._bounds is None:
            if self.n == 0:
                self._bounds = (0, 0, 0, 0)
            else:
                self._bounds = (int(self.q_len.min()), int(self.q_len.max()), int(self.t_len.min()),
                                int(self.t_len.max()))
        return self._bounds

    @property
    def bases(self) -> int:
        return int(self.q_len.sum() + self.t_len.sum())

    def query(self, i: int) -> bytes:
        o = int(self.q_off[i])
        return self.seq[o : o + int(self.q_len[i])].tobytes()

    def target(self, i: int) -> bytes:
        o = int(self.t_off[i])
        return self.seq[o : o + int(self.t_len[i])].tobytes()

    def take(self, idx: np.ndarray) -> "PairBatch":
        """A batch of the pairs idx (sequences re-packed contiguously)."""
        idx = np.asarray(idx, dtype=np.int64)
        ql, tl = self.q_len[idx], self.t_len[idx]
        qpart = concatenated(self.seq, self.q_off[idx], ql)  # (views where the pairs lie end to end: a run
        tpart = concatenated(self.seq, self.t_off[idx], tl)  # of a reader's batch, as the CPU engines' chunks)
        seq = np.concatenate([qpart, tpart]) if len(idx) else np.zeros(0, np.uint8)  # (a copy either way)
        q_off = offsets_from_lengths(ql)
        t_off = offsets_from_lengths(tl) + int(ql.sum())
        pick = lambda xs: xs.take(idx) if isinstance(xs, Names) else [xs[i] for i in idx] if xs else []  # noqa: E731
        return PairBatch(seq, q_off, ql.copy(), t_off, tl.copy(), self.index[idx].copy(),
                         pick(self.q_names), pick(self.t_names), pick(self.q_quals),
                         None if self.t_free is None else self.t_free[idx].copy())

    @classmethod
    def from_sequences(cls, queries, targets, index_start: int = 0, q_names=None, t_names=None,
                       q_quals=None, alloc=None) -> "PairBatch":
        """Build a batch from bytes (already case-folded and validated); alloc(n, dtype=np.uint8): where
        the sequence bytes go (engines.host_allocator: pinned memory for the GPU engines)."""
        ql = np.fromiter((len(q) for q in queries), dtype=np.int64, count=len(queries))
        tl = np.fromiter((len(t) for t in targets), dtype=np.int64, count=len(targets))
        if alloc is None:
            seq = np.frombuffer(b"".join([*queries, *targets]), dtype=np.uint8)  # one copy
        else:  # each sequence copied once, straight to its place
            seq = alloc(int(ql.sum() + tl.sum()), dtype=np.uint8)
            view, at = memoryview(seq), 0
            for s in (*queries, *targets):
                view[at:at + len(s)] = s
                at += len(s)
        return cls.from_joined(seq, ql, tl, index_start, q_names, t_names, q_quals)

    @classmethod
    def of_pieces(cls, q: np.ndarray, t: np.ndarray, qa: np.ndarray, ql: np.ndarray, ta: np.ndarray,
                  tl: np.ndarray, share: float) -> "PairBatch":
        """Pairs q[qa:qa + ql] vs t[ta:ta + tl] (uint8 arrays; index 0, 1, ...): where the pieces follow one
        another along both strings and their bases are at least `share` of the stretches of q and t they lie in
        (a long pair's gaps between anchors), those two stretches copied whole, the pairs at offsets into them;
        else each piece's bases gathered (its int64 index: several times the copy's time)."""
        qa, ql, ta, tl = (np.asarray(a, np.int64) for a in (qa, ql, ta, tl))
        if len(ql) == 0:
            return cls.from_joined(np.zeros(0, np.uint8), ql, tl)
        q0, q1, t0, t1 = int(qa[0]), int(qa[-1] + ql[-1]), int(ta[0]), int(ta[-1] + tl[-1])
        in_order = bool((qa[1:] >= qa[:-1] + ql[:-1]).all() and (ta[1:] >= ta[:-1] + tl[:-1]).all())
        if in_order and int(ql.sum() + tl.sum()) >= share * (q1 - q0 + t1 - t0):
            return cls(np.concatenate([q[q0:q1], t[t0:t1]]), qa - q0, ql, ta - t0 + (q1 - q0), tl,
                       np.arange(len(ql), dtype=np.int64))
        return cls.from_joined(np.concatenate([q[segment_index(qa, ql)], t[segment_index(ta, tl)]]), ql, tl)

    @classmethod
    def from_joined(cls, seq: np.ndarray, ql: np.ndarray, tl: np.ndarray, index_start: int = 0, q_names=None,
                    t_names=None, q_quals=None) -> "PairBatch":
        """A batch whose sequence bytes are already joined in seq: the queries (lengths ql), then the
        targets (tl), in pair order."""
        ql, tl = np.asarray(ql, dtype=np.int64), np.asarray(tl, dtype=np.int64)
        q_off = offsets_from_lengths(ql)
        t_off = offsets_from_lengths(tl) + int(ql.sum())
        n = len(ql)
        return cls(seq, q_off, ql, t_off, tl, np.arange(index_start, index_start + n, dtype=np.int64),
                   list(q_names or []), list(t_names or []), list(q_quals or []))


DEFERRED = ("cigar", "cigar_text", "cigar_stats")  # AlignBatch's fields a GPU engine may bring over late


@dataclass
class AlignBatch:
    """Results for a PairBatch, pair i of the result = pair i of the batch.

    CIGAR ops are packed ``len << 4 | op`` (BAM op codes, = is 7, X is 8) in one
    flat uint32 buffer; cigar_off/cigar_len index it per pair (in ops).
    """

    score: np.ndarray  # int32 penalty >= 0 (valid where status == OK)
    status: np.ndarray  # uint8
    engine: np.ndarray  # uint8 (ENGINE_NAMES)
    cigar: np.ndarray  # uint32 packed ops
    cigar_off: np.ndarray  # int64
    cigar_len: np.ndarray  # int64
    has_cigar: bool = True
    reason: dict = field(default_factory=dict)  # pair -> text, for failed pairs
    # aligned target window [t_start, t_end) within the pair's target (ends-free); None = all of it
    t_start: np.ndarray | None = None
    t_end: np.ndarray | None = None
    # aligned query range [q_start, q_end) (local alignment); None = all of it
    q_start: np.ndarray | None = None
    q_end: np.ndarray | None = None
    # made by an engine on the device (None: the writers derive them from the ops): the CIGARs as text
    # (buffer, start, length per pair: cigar.to_text_buffer's form) and per-pair int64 counts
    # (n, 5): = bases, X bases, I bases, D bases, I/D runs. take() and merge() leave them out.
    # (default_factory: no class attribute, so that a deferred copy reaches __getattr__)
    cigar_text: tuple | None = field(default_factory=lambda: None)
    cigar_stats: np.ndarray | None = field(default_factory=lambda: None)
    # the same on the device, where a GPU engine made them (text_device.DeviceLines.paf reads them), or None: text,
    # start, length (the text's), stats (int64 device arrays but text), done (an event: the text written, or
    # None). take() and merge() leave it out.
    device_cigar: dict | None = field(default=None, init=False, repr=False, compare=False)  # (not copied by replace)

    def defer(self, fetch) -> None:
        """cigar, cigar_text and cigar_stats brought to the host by fetch() (a dict of them) when one is first
        read, not now: a GPU engine's, which the lines made on the device never read. A field set meanwhile
        is kept."""
        for name in DEFERRED:
            self.__dict__.pop(name, None)
        self.__dict__["_fetch"] = (fetch, threading.Lock())

    def __getattr__(self, name: str):
        """A deferred field (defer), fetched now (by one thread; kept to fetch again if fetching failed); only
        called for attributes not set."""
        pending = self.__dict__.get("_fetch")
        if name in DEFERRED and pending is not None:
            fetch, lock = pending
            with lock:
                if self.__dict__.get("_fetch") is pending:
                    for k, v in fetch().items():
                        self.__dict__.setdefault(k, v)
                    del self.__dict__["_fetch"]
        if name in DEFERRED and name in self.__dict__:
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate__(self) -> dict:
        """Pickled with the deferred fields fetched, without `device_cigar` (GPU buffers of this process)."""
        for name in DEFERRED:
            getattr(self, name)
        return {**self.__dict__, "device_cigar": None}

    @property
    def n(self) -> int:
        return len(self.score)

    def ranges(self, q_len: np.ndarray, t_len: np.ndarray) -> tuple:
        """(q_start, q_end, t_start, t_end), int64 per pair of a batch of these lengths: the engine's (local,
        ends-free), else the whole sequences (an end of -1, merge's mark, too); a start of -1 where the
        engine does not know it (score-only local alignment)."""
        q_len, t_len = np.asarray(q_len, np.int64), np.asarray(t_len, np.int64)
        qs = np.zeros(self.n, np.int64) if self.q_start is None else self.q_start.astype(np.int64)
        qe = q_len if self.q_end is None else np.where(self.q_end < 0, q_len, self.q_end).astype(np.int64)
        ts = np.zeros(self.n, np.int64) if self.t_start is None else self.t_start.astype(np.int64)
        te = t_len if self.t_end is None else np.where(self.t_end < 0, t_len, self.t_end).astype(np.int64)
        return qs, qe, ts, te

    @classmethod
    def empty(cls, n: int, has_cigar: bool) -> "AlignBatch":
        return cls(np.zeros(n, np.int32), np.full(n, FAILED, np.uint8), np.zeros(n, np.uint8),
                   np.zeros(0, np.uint32), np.zeros(n, np.int64), np.zeros(n, np.int64), has_cigar)

    def take(self, idx: np.ndarray) -> "AlignBatch":
        idx = np.asarray(idx, dtype=np.int64)
        lens = self.cigar_len[idx]
        cig = self.cigar[segment_index(self.cigar_off[idx], lens)]
        pos = {int(j): i for i, j in enumerate(idx)}
        reason = {pos[k]: v for k, v in self.reason.items() if k in pos}
        sub = lambda a: None if a is None else a[idx].copy()  # noqa: E731
        return AlignBatch(self.score[idx].copy(), self.status[idx].copy(), self.engine[idx].copy(), cig,
                          offsets_from_lengths(lens), lens.copy(), self.has_cigar, reason, sub(self.t_start),
                          sub(self.t_end), sub(self.q_start), sub(self.q_end))

    @classmethod
    @trace.traced("merge")
    def merge(cls, n: int, parts, has_cigar: bool) -> "AlignBatch":
        """Assemble results computed for index subsets into one batch of n pairs.

        parts: iterable of (idx, AlignBatch); a later part overrides an earlier one.
        """
        parts = list(parts)
        if len(parts) == 1 and len(parts[0][0]) == n and np.array_equal(parts[0][0], np.arange(n)):
            return parts[0][1]  # one part covering every pair in order: nothing to move
        out = cls.empty(n, has_cigar)
        src_part = np.full(n, -1, np.int64)
        src_pos = np.zeros(n, np.int64)
        if any(r.t_start is not None for _, r in parts):
            out.t_start = np.zeros(n, np.int64)
            out.t_end = np.full(n, -1, np.int64)  # -1: whole target (filled by the caller's lengths)
        if any(r.q_start is not None for _, r in parts):
            out.q_start = np.zeros(n, np.int64)
            out.q_end = np.full(n, -1, np.int64)  # -1: whole query
        for p, (idx, res) in enumerate(parts):
            idx = np.asarray(idx, dtype=np.int64)
            if res.t_start is not None:
                out.t_start[idx] = res.t_start
                out.t_end[idx] = res.t_end
            if res.q_start is not None:
                out.q_start[idx] = res.q_start
                out.q_end[idx] = res.q_end
            out.score[idx] = res.score
            out.status[idx] = res.status
            out.engine[idx] = res.engine
            src_part[idx] = p
            src_pos[idx] = np.arange(len(idx))
            for k, v in res.reason.items():
                out.reason[int(idx[k])] = v
        out.reason = {k: v for k, v in out.reason.items() if out.status[k] != OK}
        # CIGARs: concatenate all parts' buffers, then gather in output order
        if parts:
            bases = offsets_from_lengths(np.array([len(r.cigar) for _, r in parts], dtype=np.int64))
            flat = np.concatenate([r.cigar for _, r in parts])
            offs = np.zeros(n, np.int64)
            lens = np.zeros(n, np.int64)
            for p, (idx, res) in enumerate(parts):
                mine = np.nonzero(src_part == p)[0]
                offs[mine] = res.cigar_off[src_pos[mine]] + bases[p]
                lens[mine] = res.cigar_len[src_pos[mine]]
            out.cigar = flat[segment_index(offs, lens)]
            out.cigar_len = lens
            out.cigar_off = offsets_from_lengths(lens)
        return out
