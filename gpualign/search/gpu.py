"""GPU search engine: kernels/myers_search.cu over each chunk, one launch per pattern width (32-bit words
per pattern), the chunk uploaded once, while the chunk before is searched (submit, then collect).
Candidates come back compacted (end offset, pattern, distance). One-word patterns go through the seed
filter (search/seeds.py) where it costs less than scanning every column."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import trace
from ..errors import ConfigError, DeviceError, GpualignError
from ..gpu import arrays
from ..gpu.kernels import is_out_of_memory, load_module
from ..gpu.staging import copy_host, pinned_empty
from . import alphabet as A
from . import patterns as PT
from . import seeds as SD
from .engines import SearchEngine
from .hits import Cands

TILE = 4096  # reported bases per thread (a tile); the warm-up before it is 32 * W + k - 1 bases
MAX_PS = 65_535 * 64  # pattern-strands per width: the grid's 65,535 blocks in y of at least 64 patterns
# (_group), under the 2^22 that the kernel's hits hold (pattern << 10 | D in 32 bits)
MAX_GRID_Y = 65_535
MAX_CANDS = 1 << 28  # end positions with D <= k per launch at most (2 GiB of device memory)
FIRST_CAP = 1 << 24  # end positions (8 bytes each) the launches of a chunk have room for at first, shared by
# the pattern widths; a launch that finds more runs again with room for them, and so do its width's later ones
SHARED_MAX_W = 8
PER_THREAD = 8  # one-word patterns per thread (kernels/myers_search.cu's P: 1, 2, 4 or 8)
SEEDS = True  # one-word patterns through the seed filter where it pays (search/seeds.py)
MAX_SEED_CANDS = 1 << 28  # seed candidates per chunk at most (8 bytes each); past it, or half of it expected
# (search/seeds.py's per_base), the chunk is scanned
STAGE_STEP = 4 << 20  # _upload's page-locked buffers are made in multiples of this many bytes
SEED_SHARED = 48 << 10  # bytes of shared memory the seed kernels' tables may take (else read through L1)


def per_thread(w: int, n_ps: int) -> int:
    """Patterns per thread for n_ps pattern-strands of w words: PER_THREAD for one-word patterns (masks in
    shared memory), as a power of two no larger than n_ps (a thread's empty patterns cost as much as
    real ones); 1 otherwise."""
    if w != 1 or SHARED_MAX_W < 1:
        return 1
    return min(PER_THREAD, 1 << (max(1, n_ps).bit_length() - 1))


def kernel_name(w: int, p: int) -> str:
    """The search kernel's instance for patterns of w words, p patterns per thread."""
    return f"search<{w}, {'true' if w <= SHARED_MAX_W else 'false'}, {p}>"


def seed_names(dense: bool, table_shared: bool, peq_shared: bool) -> tuple:
    """A seed filter's kernels: count, emit, verify (dense: seed_warps)."""
    if dense:
        return ("seed_warps",)
    t, p = str(table_shared).lower(), str(peq_shared).lower()
    return f"seeds<false, {t}>", f"seeds<true, {t}>", f"seed_verify<{p}>"


def _all_names() -> tuple:
    names = [kernel_name(w, p) for w in PT.WORDS for p in sorted({per_thread(w, 1 << i) for i in range(32)})]
    seeds = {n for d in (False, True) for t in (False, True) for p in (False, True) for n in seed_names(d, t, p)}
    return tuple(names + sorted(seeds))


THREADS = 256  # threads per block for patterns of one or two words (fewer for wider ones)


def _threads(w: int) -> int:
    return THREADS if w <= 2 else 128 if w <= 4 else 64


def _group(n_ps: int, per: int, threads: int) -> int:
    """Patterns per block (the kernel's group: per x the threads per tile, a power of two): the one whose
    blocks hold the fewest idle pattern slots, a warp with any live thread costing as much as a full one
    (ties to the larger group), with at least 8 threads per tile where there are patterns for them (the
    lanes of a tile read one code's masks: fewer tiles per warp, fewer shared-memory bank conflicts), and
    no more than MAX_GRID_Y groups (the launch's blocks in y)."""
    live = -(-n_ps // per)  # threads with patterns
    top = max(1, threads // per)  # (a block's masks: threads x W x 64 bytes at most)
    low = min(8, 1 << (live - 1).bit_length(), top)  # (threads, per: powers of two)
    best, best_cost = per * top, None  # (the largest: MAX_PS keeps it within the grid)
    for lanes in (1 << i for i in range(low.bit_length() - 1, top.bit_length())):
        group = per * lanes
        full, rest = divmod(n_ps, group)
        if full + (rest > 0) > MAX_GRID_Y:
            continue
        last = -(-rest // per)  # live threads per tile of the last group
        if rest and lanes >= 32:  # whole warps of it run
            last = -(-last // 32) * 32
        elif rest:
            last = lanes
        cost = full * group + last * per
        if best_cost is None or cost <= best_cost:
            best, best_cost = group, cost
    return best


@dataclass(eq=False)
class _Launch:
    """One pattern width's kernel over a chunk: its inputs on the device, and its output buffers."""

    chunk: object
    w: int
    ids: np.ndarray
    peq: object
    text: object
    tiles: list  # the scan's warm, report, end (empty through the seed filter)
    seed_tiles: list = None  # the seed filter's tiles (seeds.tiles) and the pieces' lo, rep, hi (None: the scan)
    n_ft: int = 0  # the seed filter's threads (dense: warps)
    count: object = None
    hits: object = None
    seeds: object = None  # the group's _Seeds (device tables), or None: the scan
    cum: object = None  # the sparse seed filter: candidates per tile, summed
    room: int = 0  # the sparse seed filter: candidates the launch has room for
    cands: object = None  # the sparse seed filter's candidates (kept until the job is collected)


@dataclass(eq=False)
class _Seeds:
    """A pattern width's seed filter: its plan (search/seeds.py) and its tables and strand lengths on the
    device."""

    plan: SD.Seeds
    table: object  # Seeds.table(): offsets then entries (dense: then the longer pieces' offsets and entries)
    lengths: object
    table_shared: bool  # the kernels' copies in shared memory (SEED_SHARED)
    peq_shared: bool

    @property
    def names(self) -> tuple:
        """Its kernels: count, emit, verify (dense: seed_warps)."""
        return seed_names(self.plan.dense, self.table_shared, self.peq_shared)


# (file, names, defines): every kernel this engine loads, as engines/variants.py builds them ahead (a
# benchmark's defines compile on first use)
KERNELS = ("myers_search.cu", _all_names(), ())


class GpuSearchEngine(SearchEngine):
    name = "gpu-myers"
    gpu = True

    @classmethod
    def make(cls, pats, cfg) -> "GpuSearchEngine":
        return cls(pats, cfg.k, cfg.rule)

    def __init__(self, pats, k: int, rule: str, defines: tuple = ()):
        import cupy

        self.cp, self.k, self.rule = cupy, k, rule
        # kernels on one stream, the text's upload on another, results fetched on a third: none of them waits
        # for work on the others that it does not need
        self.stream, self.upload, self.fetch = (cupy.cuda.Stream(non_blocking=True) for _ in range(3))
        self.groups = []  # (W, pattern-strand ids, device masks)
        self.seeds = {}  # W -> _Seeds where the seed filter runs
        widths = np.array([PT.words(int(m)) for m in pats.lengths])
        for w in sorted(set(widths.tolist())):
            ids = np.flatnonzero(widths == w)
            if len(ids) >= MAX_PS:
                raise ConfigError(f"search: {len(ids):,} pattern-strands of {32 * w} bases or less; the GPU engine "
                                  f"takes fewer than {MAX_PS:,} per length class (split the patterns)")
            codes = [pats.codes[i] for i in ids.tolist()]
            peq = PT.masks(codes, w, rule)
            plan = SD.plan(codes, k, rule) if SEEDS and w == 1 else None
            with self.stream:
                self.groups.append((w, ids, cupy.asarray(peq)))
                if plan is not None:
                    table = cupy.asarray(plan.table())
                    self.seeds[w] = _Seeds(plan, table, cupy.asarray(pats.lengths[ids].astype(np.int32)),
                                           4 * len(table) <= SEED_SHARED and not plan.dense,
                                           64 * len(ids) <= SEED_SHARED and not plan.dense)
        self.per_thread = {w: per_thread(w, len(ids)) for w, ids, _ in self.groups}
        names = tuple(kernel_name(w, self.per_thread[w]) for w, _, _ in self.groups)
        seeding = tuple(sorted({n for sd in self.seeds.values() for n in sd.names}))
        self.mod = load_module(KERNELS[0], names + seeding, (*KERNELS[2], *defines))
        self.kernels = {w: self.mod.get_function(n) for (w, _, _), n in zip(self.groups, names)}
        self.kernels.update({n: self.mod.get_function(n) for n in seeding})
        self.context, self.gap = self.geometry(pats, k)
        self.cap = {w: max(1, FIRST_CAP // len(self.groups)) for w, _, _ in self.groups}
        self.verify_blocks = 16 * cupy.cuda.Device().attributes["MultiProcessorCount"]  # (seed_verify's grid)
        self.staged = [(None, None), (None, None)]  # _upload's page-locked buffers: (buffer, its upload's event)
        self.locked: dict = {}  # the reader's shared-memory slots page-locked here: address -> the slot's array
        self.lock_failed = False  # (a slot that cannot be page-locked: every chunk copied, as before)

    @staticmethod
    def geometry(pats, k: int) -> tuple[int, int]:
        """(context, gap) of the text chunks this engine needs: the widest instance's warm-up, and its free
        rows + 16 PAD bytes before each piece (also enough for the CPU engine)."""
        rows = 32 * PT.words(int(pats.lengths.max()))
        return rows + k - 1, rows + 16

    def start(self) -> None:
        pass

    def close(self) -> None:
        """The slots page-locked by _upload given back (their uploads done first)."""
        if self.locked:
            self.upload.synchronize()
            for address in self.locked:
                try:
                    self.cp.cuda.runtime.hostUnregister(address)
                except self.cp.cuda.runtime.CUDARuntimeError:  # (the context is going: the driver frees them)
                    pass
            self.locked.clear()

    def aligner(self):
        """The hits' aligner to use beside this engine (search/gpu_align.py)."""
        from .gpu_align import GpuHitAligner

        return GpuHitAligner(A.match_table(self.rule))

    def search(self, chunk) -> Cands:
        return self.collect(self.submit(chunk))

    @trace.traced("search submit")
    def submit(self, chunk) -> tuple:
        """Upload chunk and launch its kernels, without waiting for them: what collect() takes. The upload
        has its own stream, so it runs while the kernels launched before it do."""
        if len(chunk.codes) >= 1 << 32:  # the kernel's offsets are 32-bit (the reader keeps chunks smaller)
            raise GpualignError(f"search: a text chunk of {len(chunk.codes):,} bytes (at most 2^32)")
        return self._with_memory(lambda: self._submit(chunk), f"a text chunk of {len(chunk.codes):,} bytes")

    def _with_memory(self, fn, what: str):
        """fn(); out of device memory, again once the memory pool's unused blocks are freed, then a
        DeviceError naming `what`."""
        for again in (True, False):
            try:
                return fn()
            except Exception as err:  # noqa: BLE001 - only memory errors are handled, the rest re-raised
                if not is_out_of_memory(err):
                    raise
            if again:
                self.cp.get_default_memory_pool().free_all_blocks()
        raise DeviceError(f"search: out of GPU memory for {what} (another process may hold it): run with "
                          "--device cpu")

    def _submit(self, chunk) -> tuple:
        cp = self.cp
        launches = []
        with self.upload:
            text = self._upload(chunk.codes, chunk.slot >= 0)
            for w, ids, peq in self.groups:
                job = self._job(chunk, w, ids, peq, text, self.seeds.get(w))
                if job is not None:
                    launches.append(job)
            ready = self.upload.record()
        self.stream.wait_event(ready)
        with self.stream:
            for job in launches:
                job.count, job.hits = cp.zeros(1, np.uint64), cp.empty((self.cap[job.w], 2), np.uint32)
                self._launch(job)
            return launches, self.stream.record()

    def _upload(self, codes: np.ndarray, in_slot: bool = False):
        """codes on the device, sent on the upload stream: straight from the reader's shared-memory slot
        (in_slot), page-locked the first time it comes (_lock); otherwise from one of two page-locked buffers
        (the one whose upload before is done), which the copy threads fill. A copy from pageable memory (the
        chunk's own buffer) held this thread for the whole 32 MiB (about 6 ms) and, meanwhile, the driver's
        lock that the other threads' CUDA calls (the hits' aligner) wait for. A slot is not written again
        before its chunk is given back (run.py: after collect(), so after this upload)."""
        if in_slot and self._lock(codes):
            text = self.cp.empty(len(codes), np.uint8)
            text.set(codes, stream=self.upload)
            return text
        self.staged.reverse()
        host, sent = self.staged[0]
        if sent is not None:
            sent.synchronize()
        if host is None or len(host) < len(codes):  # (rounded up: chunks' sizes differ by a few bytes)
            host = pinned_empty(-(-len(codes) // STAGE_STEP) * STAGE_STEP)
        copy_host(host[:len(codes)], codes)
        text = self.cp.empty(len(codes), np.uint8)
        text.set(host[:len(codes)], stream=self.upload)
        self.staged[0] = (host, self.upload.record())
        return text

    def _lock(self, codes: np.ndarray) -> bool:
        """Whether the slot holding codes (a view of it) is page-locked: made so when first seen. The slot's
        array is kept (and with it the mapping) until close() unlocks it. Slots are few and used again and
        again (text_ranges.Slots), so the chunks after the first in each slot need no copy on the host."""
        root = codes
        while isinstance(root.base, np.ndarray):
            root = root.base
        address = root.ctypes.data
        if address in self.locked:
            return True
        if self.lock_failed:
            return False
        try:
            self.cp.cuda.runtime.hostRegister(address, root.nbytes, 0)
        except self.cp.cuda.runtime.CUDARuntimeError:  # (a limit on locked memory; another device locked it)
            self.lock_failed = True
            return False
        self.locked[address] = root
        return True

    def _job(self, chunk, w: int, ids, peq, text, seeds):
        """The launch of one pattern width over chunk (None when the chunk holds nothing to scan): through the
        seed filter when seeds are given (and the chunk has seed offsets), else the scan."""
        cp = self.cp
        expected = seeds.plan.per_base * len(chunk.codes) if seeds is not None and not seeds.plan.dense else 0.0
        if seeds is not None and 2 * expected <= MAX_SEED_CANDS:  # (sparse, a larger --chunk-bases: the scan)
            sp = SD.tiles(chunk, seeds.plan)
            if sp[-1]:
                tiles = [cp.asarray(sp)] + [cp.asarray(a.astype(np.uint32)) for a in SD.bounds(chunk)]
                room = 0 if seeds.plan.dense else min(int(2 * expected) + 1024, MAX_SEED_CANDS)
                return _Launch(chunk, w, ids, peq, text, [], tiles, seeds=seeds, n_ft=int(sp[-1]), room=room)
        tiles = self._scan_tiles(chunk, w)
        return _Launch(chunk, w, ids, peq, text, tiles) if tiles else None

    def _scan_tiles(self, chunk, w: int) -> list:
        """The scan's tiles of chunk for patterns of w words, on the device ([] when it has none)."""
        warm, report, end = self._tiles(chunk, 32 * w + self.k - 1, 32 * w)
        return [self.cp.asarray(a) for a in (warm, report, end)] if len(warm) else []

    @trace.traced("search collect")
    def collect(self, submitted: tuple) -> Cands:
        """The candidates of submit()'s launches, once they are done (not waiting for later launches)."""
        launches, done = submitted
        done.synchronize()
        parts = []
        with self.fetch:
            for job in launches:
                while job.cum is not None:  # the sparse seed filter's candidates all had room
                    total = int(job.cum[-1:].get()[0])
                    if total <= job.room:
                        break
                    if total > MAX_SEED_CANDS:  # (a text far from random for these pieces: scan it)
                        self._to_scan(job)
                    else:
                        job.room = 1 << int(total - 1).bit_length()
                    self._again(job, f"{job.room:,} seed candidates")
                while True:
                    found = int(job.count.get()[0])
                    if found <= len(job.hits):
                        break
                    if found > MAX_CANDS and job.seeds is not None:  # (an end comes once per window reaching it)
                        self._to_scan(job)
                        self._again(job, "the scan")
                        continue
                    if found > MAX_CANDS:
                        raise GpualignError(f"search: over {MAX_CANDS:,} end positions with <= {self.k} edits in "
                                            f"one chunk of text: use a smaller -k, longer patterns or --chunk-bases")
                    self.cap[job.w] = max(self.cap[job.w], 1 << int(found - 1).bit_length())
                    self._again(job, f"{self.cap[job.w]:,} end positions")
                h = job.hits[:found].get()
                ps, d = (h[:, 1] >> 10).astype(np.int64), (h[:, 1] & 1023).astype(np.int32)
                if job.seeds is not None:  # (an end once per window: the least D)
                    keep = SD.best(h[:, 0], ps, d)
                    h, ps, d = h[keep], ps[keep], d[keep]
                chunk = job.chunk
                j = h[:, 0].astype(np.int64)
                piece = np.searchsorted(chunk.buf, j, side="right") - 1
                pos = chunk.rec_start[piece] + (j - chunk.buf[piece])
                parts.append(Cands(job.ids[ps].astype(np.int32), piece, pos, d))
        return Cands.concat(parts)

    def _to_scan(self, job: "_Launch") -> None:
        """job scans its chunk instead of going through the seed filter."""
        job.seeds = job.cum = job.cands = job.seed_tiles = None
        job.tiles = self._scan_tiles(job.chunk, job.w)  # (not empty: the chunk had seed offsets)

    def _again(self, job: "_Launch", what: str) -> None:
        """job launched again (room for `what`), and waited for."""
        job.hits = job.cum = job.cands = None
        self._with_memory(lambda: self._relaunch(job), what).synchronize()

    def _relaunch(self, job: "_Launch"):
        """job's kernel again, with room for self.cap[job.w] end positions (after the launches submitted
        since: rare); returns its event."""
        with self.stream:
            job.count.fill(0)
            job.hits = self.cp.empty((self.cap[job.w], 2), np.uint32)
            self._launch(job)
            return self.stream.record()

    def _launch(self, job: "_Launch") -> None:
        if job.seeds is not None:
            self._launch_seeds(job)
            return
        w, n_ps, n_tiles = job.w, len(job.ids), len(job.tiles[0])
        per = self.per_thread[w]
        threads = _threads(w)
        group = _group(n_ps, per, threads)
        per_block = threads // (group // per)  # tiles per block
        grid = (-(-n_tiles // per_block), -(-n_ps // group))
        shared = group * w * 16 * 4 if w <= SHARED_MAX_W else 0
        self.kernels[w](grid, (threads,), (job.text, *job.tiles, np.int32(n_tiles), job.peq, np.int32(n_ps),
                                           np.int32(group), np.int32(self.k), job.count, job.hits,
                                           np.uint64(len(job.hits))), shared_mem=shared)

    def _launch_seeds(self, job: "_Launch") -> None:
        """The seed filter over job's chunk: candidates counted per tile, summed, written, then verified (the
        verifying threads read the total on the device: no wait here); dense, verified where found."""
        cp, sd = self.cp, job.seeds
        sp, lo, rep, hi = job.seed_tiles
        n_ft, threads = job.n_ft, 256
        if sd.plan.dense:
            self.kernels["seed_warps"]((-(-n_ft * 32 // threads),), (threads,),
                                       (job.text, sp, np.int32(len(lo)), np.int32(n_ft), np.int32(sd.plan.ft), lo,
                                        rep, hi, np.int32(sd.plan.q), sd.table, np.int32(len(sd.plan.entries)),
                                        job.peq, sd.lengths, np.int32(self.k), job.count, job.hits,
                                        np.uint64(len(job.hits))))
            return
        count, emit, verify = (self.kernels[n] for n in sd.names)
        n_off = len(sd.plan.offsets)
        job.cum = cp.empty(n_ft, np.int64)
        common = (np.int32(len(lo)), np.int32(n_ft), np.int32(sd.plan.ft), hi, np.int32(sd.plan.q), sd.table,
                  sd.table[n_off:], np.int32(len(sd.plan.entries)))
        shared = 4 * len(sd.table) if sd.table_shared else 0
        blocks = (-(-n_ft // threads),)
        count(blocks, (threads,), (job.text, sp, *common, job.cum, np.uint64(0), job.cum), shared_mem=shared)
        job.cum = arrays.cumsum(job.cum, out=job.cum)
        job.cands = cands = cp.empty((job.room, 2), np.uint32)
        emit(blocks, (threads,), (job.text, sp, *common, job.cum, np.uint64(job.room), cands), shared_mem=shared)
        n_ps = len(job.ids)
        verify((min(-(-job.room // threads), self.verify_blocks),), (threads,),
               (job.text, cands, job.cum[-1:], np.uint64(job.room), lo, rep, hi, np.int32(len(lo)), job.peq,
                np.int32(n_ps), sd.lengths, np.int32(self.k), job.count, job.hits, np.uint64(len(job.hits))),
               shared_mem=64 * n_ps if sd.peq_shared else 0)

    @staticmethod
    def _tiles(chunk, warmup: int, free_rows: int):
        """Per tile: scan start (a multiple of 16; at a record's start, free_rows PAD bytes before it, so
        that the free rows below the pattern reach D = 0 there), first reported offset, end."""
        lo, rep, hi = SD.bounds(chunk)
        piece, report, end = SD.spans(rep, hi, TILE).T
        warm = np.maximum(report.astype(np.int64) - warmup, lo[piece] - free_rows) & ~15
        return warm.astype(np.uint32), np.ascontiguousarray(report), np.ascontiguousarray(end)
