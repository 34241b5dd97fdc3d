"""GPU engine 4: general scoring (kernels/dp.cu) -- global, local and semi-global alignment with a match
bonus or a substitution matrix and affine gaps, DNA or protein, scores and CIGARs as the cpu-dp engine
gives them (the same score; on ties the CIGAR may differ, both optimal).

Short pairs, one thread each (dp_fill; where their values fit int16, dp_fill16, two cells an
instruction): the pairs of a batch are sorted by length on the device (_plan) so that a warp's 32
pairs need about the same room, and launched a group of warps at a time, so that the direction bits (4
per cell, for the traceback) of a launch stay within DIR_BYTES (a quarter of the free device memory:
as a rule the whole batch is one launch). The host's work per batch is kept to numbers per warp and a
few passes over the lengths (split, fits16_all): on a million short pairs, sorting and planning them on
the host took longer than the kernels. Long pairs (is_long), a team of warps each (dp_long): a
thread walking a long pair alone would keep few threads busy; a warp's lanes take 32 stripes of its rows
at once; where a launch has few pairs, a team of 4 warps takes each, the warps the next tiles of 32
stripes (team_size). Launches hold as many pairs as half the free device memory takes. Long pairs
whose every value fits int16 (fits16) take dp_long16, two cells an instruction (with CIGARs: global and
semi-global).
Pairs whose directions would pass LONG_MAX_CELLS cells, or whose scores could reach SCORE_LIMIT, and
matrices of more than MAX_LETTERS letters, are left to cpu-dp. Empty sequences are written down here,
as cpu-dp does.
"""

from __future__ import annotations

import threading

import numpy as np

from .. import scoring, text_device, trace
from ..config import AlignConfig
from ..gpu import arrays
from ..gpu.kernels import load_module
from ..gpu.staging import Staging, pinned_empty, to_device
from ..records import ENGINE_CODE, FAILED, OK, AlignBatch, PairBatch, offsets_from_lengths
from ._device import BatchEngine, align_split
from ._results import text_kernels
from .cpu_dp import empty_side, score_only_ranges

NAME = "gpu-dp"
MODES = {"global": 0, "local": 1, "semi-global": 2}
ROWS = 16  # query rows per stripe (dp.cu's ROWS): 16 cells per direction word
COLS = 2  # dp_long's columns per lane and step (dp.cu's COLS, passed to it)
COLS16 = 8  # dp_long16's (dp.cu's COLS16; chosen by timing, docs/notes/benchmark-history.md)
MAX_LETTERS = 32  # the matrix lives in shared memory
MAX_CELLS = 1 << 22  # the most cells of a pair for dp_fill
LONG_ROWS, LONG_CELLS = 384, 1 << 17  # pairs with at least these query rows and cells go to dp_long (measured)
LONG_MAX_CELLS = 1 << 30  # dp_long pairs with CIGARs over this many cells (whole tiles) go to cpu-dp
SCORE_LIMIT = 1 << 28  # and pairs whose scores could reach it (dp.cu's -infinity is -2^29, int32 lanes)
DIR_BYTES = None  # direction words per dp_fill launch; None: a quarter of the device's free memory
LONG_DIR_BYTES = None  # ... per dp_long launch; None: half the device's free memory
TEAM = None  # dp_long's warps per pair (1, 2 or 4); None: team_size's choice
TEAM_PAIRS_PER_SM = 2  # dp_long takes teams of 4 warps up to this many pairs per SM (team_size)
INT16 = True  # pairs on dp_fill16 and dp_long16 (one warp a pair) where fits16 (dp_long16 with CIGARs: not local)
TRACE16 = True  # with CIGARs too, short pairs on dp_fill16 where fits16 (else dp_fill)
PINNED_CIGARS = True  # a batch's CIGARs come back into page-locked memory (_gather)
NEG16 = -32000  # -infinity in int16 lanes (dp.cu's NEG16, passed to it)
BLOCK = 128
SHARED_DEFAULT = 48 << 10  # dynamic shared memory a block gets without asking (CUDA's opt-in above it)
CONCURRENT = 2  # batches aligned at once (GpuDpEngine.concurrent)
LANE_BLOCKS = 4  # dp_fill16 keeps its matrix a copy per lane where an SM holds this many blocks of them
LONGEST_FIRST = True  # dp_fill's warps in descending length order (the shortest last, in a launch's last wave)


def _flag(x: bool) -> str:
    return "true" if x else "false"


def _long_name(mode: int, trace: bool, team: int) -> str:
    """dp_long's instance: its TEAM flag compiles the hand-over between warps in (teams of 2 or 4)."""
    return f"dp_long<{mode}, {_flag(trace)}, {_flag(team > 1)}>"


def _kernel(mode: int, trace: bool, team: int, wide: bool, sub: scoring.Substitution) -> tuple[str, int, int]:
    """A launch's kernel, threads per block and dynamic shared-memory ints (dp.cu's): dp_fill (team 0; wide
    False: dp_fill16), dp_long (team warps a pair) or, wide False, dp_long16 (one warp a pair)."""
    k = len(sub.letters)
    if not team:
        if not wide:
            if equality_scores(sub):  # (no matrix read)
                return f"dp_fill16<{mode}, true, false, {_flag(trace)}>", BLOCK, 0
            lanes = _lane_copies(k)
            return (f"dp_fill16<{mode}, false, {_flag(lanes)}, {_flag(trace)}>", BLOCK,
                    lane_ints(k) if lanes else (k + 1) * (k + 1))
        return f"dp_fill<{mode}, {_flag(trace)}>", BLOCK, k * k
    if wide:
        return _long_name(mode, trace, team), 32 * team, k * k + team * (4 * COLS + 3)
    return f"dp_long16<{mode}, {_flag(equality_scores(sub))}, {_flag(trace)}>", 32, (k + 1) * (k + 1)


def lane_ints(k: int) -> int:
    """dp_fill16's shared ints for a matrix of k letters a copy per lane (dp.cu's load_matrix16_lanes)."""
    return (k + 1) * ((k + 2) // 2) * 32


def _lane_copies(k: int) -> bool:
    """Whether dp_fill16 keeps a matrix of k letters a copy per lane on the current device: where an SM's
    shared memory holds LANE_BLOCKS blocks of them (an H100's or H200's 228 KB: 4 of BLOSUM62's 41.6 KB), so that the
    copies cost no blocks; else one copy, whose lookups wait on the banks' conflicts (docs/benchmarks.md)."""
    import cupy

    per_sm = cupy.cuda.Device().attributes.get("MaxSharedMemoryPerMultiprocessor", 0)
    return per_sm >= LANE_BLOCKS * (4 * lane_ints(k) + 1024)  # (1 KB a block the driver keeps)


def _trace_name(mode: int, team: int, wide: bool) -> str:
    """dp_trace's instance for the directions of dp_fill or dp_fill16 (team 0; wide False), dp_long or
    dp_long16 (wide False)."""
    return f"dp_trace<{mode}, {(0 if wide else 3) if not team else 1 if wide else 2}>"


def _names() -> tuple:
    modes = MODES.values()
    names = [f"dp_fill<{m}, {_flag(t)}>" for m in modes for t in (True, False)]
    names += [_trace_name(m, team, wide) for m in modes for team, wide in ((0, True), (0, False), (1, True), (1, False))
              if wide or not team or m != MODES["local"]]
    names += [_long_name(m, t, team) for m in modes for t in (True, False) for team in (1, 2)]
    names += [f"dp_long16<{m}, {_flag(eq)}, {_flag(t)}>" for m in modes for eq in (True, False) for t in (True, False)
              if not t or m != MODES["local"]]
    names += [f"dp_fill16<{m}, {_flag(eq)}, {_flag(lanes)}, {_flag(t)}>" for m in modes for eq, lanes in
              ((True, False), (False, False), (False, True)) for t in (True, False)]
    return tuple(names + ["dp_gather", "dp_keys", "dp_warps"])


def kernels() -> tuple:
    """(file, names, defines): every kernel this engine loads (engines/variants.py), with the defines of the
    constants as they are now (tests change COLS: the module then compiles on first use)."""
    return "dp.cu", _names(), (f"COLS={COLS}", f"COLS16={COLS16}", f"NEG16=({NEG16})")


def is_long(ql: np.ndarray, tl: np.ndarray) -> np.ndarray:
    """Pairs for dp_long (a block each: one warp or a team of 4) rather than dp_fill (a thread each)."""
    cells = ql * tl
    return (cells > MAX_CELLS) | ((ql >= LONG_ROWS) & (cells >= LONG_CELLS))


def split(ql: np.ndarray, tl: np.ndarray) -> tuple:
    """(short, long): the batch indices of its pairs for dp_fill and for dp_long, both sequences not empty;
    short is None where that is every pair (checked on the lengths' extremes: is_long grows with both
    lengths)."""
    if len(ql) and min(int(ql.min()), int(tl.min())) > 0 and not is_long(int(ql.max()), int(tl.max())):
        return None, np.zeros(0, np.int64)
    live = np.flatnonzero((ql > 0) & (tl > 0))
    big = is_long(ql[live], tl[live])
    return live[~big], live[big]


def long_words(ql: np.ndarray, tl: np.ndarray, wide: bool = True) -> np.ndarray:
    """The long kernels' direction words (8 bytes) per pair: dp_long's, per tile of 32 stripes, COLS
    words per lane and step; dp_long16's (wide False), per tile of 64 stripes, 2 COLS16 words per lane and
    step."""
    if wide:
        return -(-ql // (32 * ROWS)) * (-(-tl // COLS) + 31) * COLS * 32
    return -(-ql // (64 * ROWS)) * (-(-tl // COLS16) + 63) * COLS16 * 64


def fill_words(maxn: np.ndarray, stripes: np.ndarray, wide: bool = True) -> np.ndarray:
    """dp_fill's direction words (8 bytes) per warp (its longest target maxn, its longest query's stripes):
    a word per lane, stripe and column; dp_fill16's (wide False), two words per lane, double stripe (two
    stripes) and step (maxn + 1 of them)."""
    maxn, stripes = maxn.astype(np.int64), stripes.astype(np.int64)
    return stripes * maxn * 32 if wide else (stripes + 1) // 2 * (maxn + 1) * 64


def team_size(pairs: int, sms: int) -> int:
    """dp_long's warps per pair for a launch of `pairs` on a device of `sms` SMs: 4 where the pairs leave
    most warp slots idle (at most TEAM_PAIRS_PER_SM a SM), else 1. Measured (H200, 10 kbp, scores only):
    teams of 4 take 100, 250 and 500 pairs 1.8, 1.6 and 1.06 times faster than one warp each, 1,000 pairs
    1.3 times slower (the hand-over's instructions); teams of 2 gained nothing."""
    return 4 if pairs <= TEAM_PAIRS_PER_SM * sms else 1


def h_range(mode: int, ql: np.ndarray, tl: np.ndarray, sub: scoring.Substitution, o: int, e: int) -> tuple:
    """Bounds (lo, hi) of every H[i][j] of a pair's DP: hi = max(S, 0) min(m, n); local lo = 0, else the
    path of min(i, j) diagonal steps and one gap of |i - j| bounds H[i][j] from below:
    lo = -(o + max(|min(S, 0)| min(m, n) + e |m - n|, e max(m, n)))."""
    a = sub.array()
    smin, smax = min(int(a.min()), 0), max(int(a.max()), 0)
    mn, mx = np.minimum(ql, tl), np.maximum(ql, tl)
    lo = np.zeros_like(mn) if mode == MODES["local"] else -(o + np.maximum(-smin * mn + e * (mx - mn), e * mx))
    return lo, smax * mn


def fits16(mode: int, ql: np.ndarray, tl: np.ndarray, sub: scoring.Substitution, o: int, e: int) -> np.ndarray:
    """Pairs whose real cells' values in dp_long16's or dp_fill16's walk fit an int16 lane above NEG16 - e:
    H in h_range, and what the walk computes from it: H + S (a diagonal candidate), G = H - (o + e), V and
    Z (>= G), their - e; and what it computes from -infinity, NEG16 - e and NEG16 + S + o + e (a diagonal
    from outside the matrix), without wrapping. (Cells past row m or column n may wrap: nothing real reads
    them.)"""
    return _fits16(*h_range(mode, ql, tl, sub, o, e), sub, o, e)


def fits16_all(mode: int, ql: np.ndarray, tl: np.ndarray, sub: scoring.Substitution, o: int, e: int) -> bool:
    """Whether fits16 holds for every pair (lengths ql, tl), from the lengths' maxima Q, T alone: h_range's
    bounds of any pair lie within hi = max(S, 0) min(Q, T) and lo = -(o + |min(S, 0)| min(Q, T) + e max(Q,
    T)) (False where that does not prove it)."""
    if not len(ql):
        return True
    q, t = int(ql.max()), int(tl.max())
    a = sub.array()
    smin, smax = min(int(a.min()), 0), max(int(a.max()), 0)
    lo = 0 if mode == MODES["local"] else -(o - smin * min(q, t) + e * max(q, t))
    return bool(_fits16(np.int64(lo), np.int64(smax * min(q, t)), sub, o, e))


def _fits16(lo, hi, sub: scoring.Substitution, o: int, e: int):
    """fits16's test of the bounds (lo, hi) of H."""
    a = sub.array()
    smin, go = min(int(a.min()), 0), o + e
    small = e <= 768 and smin + go >= -768 and int(np.abs(a).max()) + go < 1 << 15
    return small & (hi < 1 << 15) & (np.minimum(lo + smin, lo - go - e) > NEG16)


def narrow(mode: int, want: bool, ql: np.ndarray, tl: np.ndarray, sub: scoring.Substitution,
           cfg: AlignConfig) -> np.ndarray:
    """The long pairs (lengths ql, tl) that run on dp_long16: INT16 on, their values fit int16 (fits16),
    and with CIGARs (want) global or semi-global."""
    if not INT16 or not len(ql) or (want and mode == MODES["local"]):
        return np.zeros(len(ql), bool)
    p = cfg.effective_penalties
    return fits16(mode, ql, tl, sub, p.gap_open, p.gap_extend)


def equality_scores(sub: scoring.Substitution) -> bool:
    """Whether sub is M on its diagonal and X elsewhere, X <= 0 <= M - X <= 1024, over at most 30 letters
    (codes below the padding codes 30 and 31): dp_long16's EQ instance then scores cells from the letters'
    codes alone (fits16 keeps M + o + e and X + o + e within int16)."""
    a = sub.array()
    k = len(a)
    if not 2 <= k <= 30:
        return False
    m, x = int(a[0, 0]), int(a[0, 1])
    return bool(np.array_equal(a, np.where(np.eye(k, dtype=bool), m, x))) and x <= 0 <= m - x <= 1024


def letter_table(cfg: AlignConfig, sub: scoring.Substitution) -> np.ndarray:
    """uint8[256]: a byte's letter index in sub (--unknown's mapping applied; characters the table
    lacks were refused by scoring.check_batch before)."""
    lut = np.zeros(256, np.uint8)
    lut[[ord(c) for c in sub.letters]] = np.arange(len(sub.letters), dtype=np.uint8)
    remap = scoring.input_map(sub, cfg.scoring.unknown)
    return lut if remap is None else lut[np.frombuffer(remap, np.uint8)]


def launches(words: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Ranges [w0, w1) of warps (dp_fill) or of pairs (dp_long) whose direction words fit limit bytes (at
    least one each)."""
    ends = np.cumsum(np.asarray(words, np.int64) * 8)
    out, w0 = [], 0
    while w0 < len(ends):
        base = int(ends[w0 - 1]) if w0 else 0
        w1 = max(w0 + 1, int(np.searchsorted(ends, base + limit, side="right")))
        out.append((w0, w1))
        w0 = w1
    return out


def _starts_on_device(*sizes: np.ndarray) -> tuple:
    """Where each warp's or pair's boundary ints and direction words start (exclusive sums), on the device."""
    return tuple(to_device(_exclusive(x), np.int64) for x in sizes)


def _sm_count() -> int:
    """The current device's SMs."""
    import cupy

    return cupy.cuda.Device().attributes["MultiProcessorCount"]


def _free_bytes() -> int:
    """The current device's free memory, with what CuPy's pool holds unused."""
    import cupy

    return cupy.cuda.Device().mem_info[0] + cupy.get_default_memory_pool().free_bytes()


def _exclusive(x: np.ndarray) -> np.ndarray:
    out = np.zeros(len(x), np.int64)
    np.cumsum(x[:-1], out=out[1:])
    return out


class GpuDpEngine(BatchEngine):
    """General scoring (cfg.general) on the GPU: the pairs within its size limits."""

    name = NAME
    pinned_input = True  # batches' bytes in page-locked memory (engines.host_allocator), staged ahead
    # batches aligned at once (dispatch.Here: a thread each, each on a CUDA stream of its own): one
    # batch's host work (launch plan, results, copies: about half of a short-pair batch) overlaps the
    # other's kernels
    concurrent = CONCURRENT

    def __init__(self):
        self._local = threading.local()  # per aligning thread: its CUDA stream
        self._mod = self._text_mod = None
        self._staging = Staging()
        self._tables: dict = {}  # cfg -> its substitution table (a matrix file is read once)
        self._on_device: dict = {}  # (cfg, device) -> its letter table and matrix on that device
        self._lock = threading.Lock()
        self._shared_asked: dict = {}  # kernel name -> the dynamic shared memory asked of it (past 48 KB)

    def _module(self):
        if self._mod is None:
            self._mod = load_module(*kernels())
        return self._mod

    def _table(self, cfg: AlignConfig) -> scoring.Substitution:
        sub = self._tables.get(cfg)
        if sub is None:
            sub = self._tables[cfg] = scoring.substitution(cfg)
        return sub

    def _device_tables(self, cfg: AlignConfig, sub: scoring.Substitution) -> tuple:
        """cfg's letter table (letter_table) and matrix ([target][query], int32) on the current device, made
        once."""
        import cupy

        key = (cfg, cupy.cuda.Device().id)
        tables = self._on_device.get(key)
        if tables is None:
            tables = (to_device(letter_table(cfg, sub), np.uint8), to_device(sub.array(), np.int32))
            cupy.cuda.get_current_stream().synchronize()  # copied before another thread's stream reads them
            self._on_device[key] = tables
        return tables

    def accepts_cfg(self, cfg: AlignConfig) -> bool:
        return cfg.general and len(self._table(cfg).letters) <= MAX_LETTERS

    def accepts(self, batch: PairBatch, cfg: AlignConfig) -> np.ndarray:
        if not self.accepts_cfg(cfg) or not batch.n:
            return np.zeros(batch.n, dtype=bool)
        p = cfg.effective_penalties  # |a path's score| <= (n + m) (max |S| + o + e)
        per_base = int(np.abs(self._table(cfg).array()).max()) + p.gap_open + p.gap_extend
        ql, tl = np.asarray(batch.q_len, np.int64), np.asarray(batch.t_len, np.int64)
        qmax, tmax = int(ql.max()), int(tl.max())
        room = np.ones(batch.n, bool) if (qmax + tmax) * per_base < SCORE_LIMIT else (ql + tl) * per_base < SCORE_LIMIT
        if cfg.distance_only or not is_long(qmax, tmax):
            return room
        # the long pairs' directions: 16 cells per word, whole tiles (dp_long16's where the pair goes there)
        big = np.flatnonzero(is_long(ql, tl))
        sixteen = narrow(MODES[cfg.scoring.mode], True, ql[big], tl[big], self._table(cfg), cfg)
        words = np.where(sixteen, long_words(ql[big], tl[big], False), long_words(ql[big], tl[big]))
        room[big] &= words * ROWS <= LONG_MAX_CELLS
        return room

    def align(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        with self._stream():
            return align_split(self._align_device, batch, cfg)

    def _align_device(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        import cupy

        sub = self._table(cfg)
        mode, want = MODES[cfg.scoring.mode], not cfg.distance_only
        n = batch.n
        ql, tl = np.asarray(batch.q_len, np.int64), np.asarray(batch.t_len, np.int64)
        short, long = split(ql, tl)  # (short None: every pair)
        d_raw, d_meta = self._staging.upload(batch, cfg)  # (prefetched while the batch before aligned)
        d_lut, d_matrix = self._device_tables(cfg, sub)
        d_codes = arrays.translate(d_raw, d_lut)  # letter indices, made on the device
        scoring_args = (d_matrix, np.int32(len(sub.letters)), *(np.int32(g) for g in cfg.parasail_gaps()))
        d_out = cupy.zeros((6, n), cupy.int32)  # by pair, one memset and one copy back:
        ends = tuple(d_out[:3])  # score, end row, end column
        starts = tuple(d_out[3:])  # op count, start row, start column
        traced = []  # per launch: its threads' pairs, and where their CIGARs are (dp_trace's output)
        for sel, args, bound, words, grid, team, wide in self._launches(mode, want, sub, cfg, ql, tl, short, long,
                                                                        d_codes, d_meta):
            d_dir = self._fill(*_kernel(mode, want, team, wide, sub), grid, args, bound, words, scoring_args, ends)
            if want:
                room = np.where(sel >= 0, ql[sel] + tl[sel], 0)
                traced.append((args[1], args[2], *self._trace(_trace_name(mode, team, wide), 32 if team else 1,
                                                              args, room, d_dir, scoring_args, ends, starts)))
            del d_dir
        host = d_out.get()
        gather = lambda dst, lens, total, text: self._gather(traced, starts[0], dst, lens, total, text)  # noqa: E731
        return self._results(cfg, want, ql, tl, host, gather, short is None)

    def _launches(self, mode: int, want: bool, sub, cfg, ql, tl, short, long, d_codes, d_meta):
        """The kernels' launches: (each thread's or team's pair, -1 for none (dp_fill's scores only: None); the
        kernel's pair arguments; boundary ints; direction words; blocks; dp_long's warps per pair, 0 for
        dp_fill; int32 lanes: False for dp_fill16 and dp_long16), dp_fill's short pairs first. The short pairs
        whose values fit int16 go to dp_fill16 (fits16; every pair at once where fits16_all proves it from the
        lengths' maxima; with CIGARs where TRACE16), the long ones likewise to dp_long16 (narrow)."""
        import cupy

        p = cfg.effective_penalties
        sq, st = (ql, tl) if short is None else (ql[short], tl[short])
        if not INT16 or (want and not TRACE16):
            groups = ((True, short),)
        elif fits16_all(mode, sq, st, sub, p.gap_open, p.gap_extend):
            groups = ((False, short),)
        else:
            fit = fits16(mode, sq, st, sub, p.gap_open, p.gap_extend)
            every = np.arange(len(ql)) if short is None else short
            groups = ((True, every[~fit]), (False, every[fit]))
        for wide, group in groups:
            if group is not None and not len(group):
                continue
            d_slots, maxn, stripes = self._plan(group, len(ql), d_meta, int(sq.max()), int(st.max()))
            slots = d_slots.get() if want else None
            bound = (maxn.astype(np.int64) + 1) * 32
            words = fill_words(maxn, stripes, wide) if want else np.zeros(len(maxn), np.int64)
            for w0, w1 in launches(words, DIR_BYTES or _free_bytes() // 4):
                d_sel = d_slots[w0 * 32:w1 * 32]
                args = (d_codes, d_sel, np.int32(len(d_sel)), *d_meta, to_device(maxn[w0:w1], np.int32),
                        *_starts_on_device(bound[w0:w1], words[w0:w1]))
                sel = None if slots is None else slots[w0 * 32:w1 * 32]
                yield sel, args, int(bound[w0:w1].sum()), int(words[w0:w1].sum()), -(-len(d_sel) // BLOCK), 0, wide
        sixteen = narrow(mode, want, ql[long], tl[long], sub, cfg)  # long pairs for dp_long16
        for wide in (True, False):
            some = long[sixteen != wide]
            if not len(some):
                continue
            order = some[np.argsort(-ql[some] * tl[some], kind="stable")]  # the largest first
            words = long_words(ql[order], tl[order], wide) if want else np.zeros(len(order), np.int64)
            bound = tl[order] + 1
            for a, b in launches(words, LONG_DIR_BYTES or _free_bytes() // 2):
                sel = order[a:b]
                args = (d_codes, to_device(sel, np.int32), np.int32(len(sel)), *d_meta, cupy.zeros(1, cupy.int32),
                        *_starts_on_device(bound[a:b], words[a:b]))
                team = (TEAM or team_size(len(sel), _sm_count())) if wide else 1
                yield sel, args, int(bound[a:b].sum()), int(words[a:b].sum()), len(sel), team, wide

    @trace.traced("dp plan")
    def _plan(self, group, n: int, d_meta, qmax: int, tmax: int) -> tuple:
        """dp_fill's (or dp_fill16's) order of the pairs `group` (batch indices; None: all n of the batch), made
        on the device: sorted by query length, then target length (stable; LONGEST_FIRST: descending), padded
        to whole warps with -1 (device int32), and per warp its longest target and its longest query's stripes
        (host int32). qmax, tmax: at least the group's longest query and target (the keys' bits: a radix pass
        for each 8 of them, 3 for 300 bp pairs, not 8)."""
        import cupy

        count = n if group is None else len(group)
        nwarps = -(-count // 32)
        d_idx = d_meta[1] if group is None else to_device(group, np.int32)  # (None: not read)
        picked = (d_meta[1], d_meta[3], d_idx, np.int32(group is not None))
        tbits = max(1, tmax.bit_length())
        bits = tbits + qmax.bit_length()
        d_key = cupy.empty(count, cupy.uint64)
        self._module().get_function("dp_keys")((-(-count // BLOCK),), (BLOCK,),
                                               (*picked, np.int32(count), np.int32(LONGEST_FIRST), np.int32(tbits),
                                                np.int32(bits), d_key))
        d_sorted = arrays.argsort(d_key, bits)
        d_slots, d_warps = cupy.empty(nwarps * 32, cupy.int32), cupy.empty((2, nwarps), cupy.int32)
        self._module().get_function("dp_warps")((-(-nwarps // BLOCK),), (BLOCK,),
                                                (*picked, d_sorted, np.int32(count), np.int32(nwarps), d_slots,
                                                 d_warps[0], d_warps[1]))
        maxn, stripes = d_warps.get()
        return d_slots, maxn, stripes

    @trace.traced("dp fill")
    def _fill(self, name: str, block: int, shared: int, grid: int, args: tuple, bound: int, words: int,
              scoring_args: tuple, ends: tuple):
        """One launch of dp_fill, dp_long or dp_long16 (name, block and shared ints: _kernel's): ends (score,
        row, column by pair) filled; returns the direction words (with CIGARs)."""
        import cupy

        d_bh = cupy.empty(bound, cupy.int32)
        d_bv = cupy.empty_like(d_bh)
        d_dir = cupy.empty(max(1, words), cupy.uint64)
        kernel = self._module().get_function(name)
        with self._lock:  # (dp_fill16's copies of a matrix of 27 or 28 letters: 50-56 KB; raised, never lowered)
            if 4 * shared > max(SHARED_DEFAULT, self._shared_asked.get(name, 0)):
                kernel.max_dynamic_shared_size_bytes = self._shared_asked[name] = 4 * shared
        kernel((grid,), (block,), (*args, *scoring_args, d_bh, d_bv, d_dir, *ends), shared_mem=4 * shared)
        return d_dir

    @trace.traced("dp trace")
    def _trace(self, name: str, lanes: int, args: tuple, room: np.ndarray, d_dir, scoring_args: tuple, ends: tuple,
               starts: tuple):
        """dp_trace (name: `lanes` threads a pair) over one launch's pairs (room: each pair's most ops):
        starts (op count, start row, start column by pair) filled; returns (each pair's first op in d_ops,
        d_ops: the CIGARs)."""
        import cupy

        d_off = to_device(_exclusive(room), np.int64)
        d_ops = cupy.empty(max(1, int(room.sum())), cupy.uint32)
        self._module().get_function(name)((-(-len(room) * lanes // BLOCK),), (BLOCK,),
                                          (*args, *scoring_args, d_dir, *ends, d_off, d_ops, *starts))
        return d_off, d_ops

    @trace.traced("dp gather")
    def _gather(self, traced: list, d_count, dst: np.ndarray, lens: np.ndarray, total: int, text: bool) -> tuple:
        """Every launch's CIGARs packed in pair order (dst: each pair's first op, lens: its ops, by pair), to
        the host: into page-locked memory (pinned_empty, from cupy's pool: a batch's block is reused by a later
        batch of about its size once the first is dropped) where PINNED_CIGARS, else a new pageable array; and
        (text) host_text() -> their text and counts (AlignBatch.cigar_text, cigar_stats) made on the device
        (_results.text_kernels: numpy passes over every op on the host else), or None."""
        import cupy

        d_dst, d_out = to_device(dst, np.int64), cupy.empty(max(1, total), cupy.uint32)
        for order, nthreads, d_off, d_ops in traced:
            self._module().get_function("dp_gather")((-(-int(nthreads) // BLOCK),), (BLOCK,),
                                                     (order, nthreads, d_off, d_count, d_dst, d_ops, d_out))
        host_text = text_kernels(self._text_module())(d_out, d_dst, to_device(lens, np.int64))[1] if text else None
        if not PINNED_CIGARS:
            return cupy.asnumpy(d_out)[:total], host_text
        host = pinned_empty(max(1, total), np.uint32)
        d_out.get(out=host)
        return host[:total], host_text

    def _text_module(self):
        """The module holding cigar_text.cuh's cigar_measure and cigar_write (lines.cu's, the writers')."""
        if self._text_mod is None:
            self._text_mod = load_module(*text_device.KERNELS)
        return self._text_mod

    @staticmethod
    def _results(cfg: AlignConfig, want: bool, ql, tl, host: np.ndarray, gather, all_live: bool) -> AlignBatch:
        """The AlignBatch from the kernels' per-pair arrays (host rows: score, end row, end column, op count,
        start row, start column), the empty sequences (none where all_live) written down here; gather(dst,
        lens, total, text) gives the kernels' CIGARs packed in pair order, pair p's lens[p] from dst[p], and
        (text: where no empty sequence's run is written here) a function giving their text and counts."""
        n, gaps, mode = len(ql), cfg.parasail_gaps(), cfg.scoring.mode
        score = host[0].copy()
        if want:
            i_end, j_end, clen, i_start, j_start = (x.astype(np.int64) for x in host[1:])
        else:
            clen = np.zeros(n, np.int64)
            i_start, i_end, j_start, j_end = score_only_ranges(mode, ql, tl)
        runs, status, failed = {}, np.full(n, OK, np.uint8), {}
        for p in ([] if all_live else np.flatnonzero((ql == 0) | (tl == 0)).tolist()):
            score[p], run, why = empty_side(mode, int(ql[p]), int(tl[p]), gaps)
            if why:
                status[p], failed[p] = FAILED, why
            whole = (bool(run) or mode == "global") and not why
            if want:  # (scores only: score_only_ranges' ranges)
                i_start[p], i_end[p], j_start[p], j_end[p] = (0, ql[p], 0, tl[p]) if whole else (0, 0, 0, 0)
                if run:
                    runs[p] = np.array([ln << 4 | op for op, ln in run], np.uint32)
                    clen[p] = len(run)
        off = offsets_from_lengths(clen) if want else clen.copy()  # (scores only: every length 0)
        cigar, host_text = np.zeros(0, np.uint32), None
        if want:
            cigar, host_text = gather(off, clen, int(clen.sum()), not runs)
            for p, ops in runs.items():
                cigar[off[p]:off[p] + len(ops)] = ops
        res = AlignBatch(score, status, np.full(n, ENGINE_CODE[NAME], np.uint8), cigar, off, clen, want, failed)
        if host_text is not None:
            res.cigar_text, res.cigar_stats = host_text()
        res.q_start, res.q_end, res.t_start, res.t_end = i_start, i_end, j_start, j_end
        return res
