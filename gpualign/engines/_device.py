"""Host-side pieces the batch GPU engines share: staging the sequence bytes on the device, and the
per-pair results of the kernel levels (the affine engine's on the host, eWFA's on the device), brought
into one AlignBatch once per batch."""

from __future__ import annotations

import threading

import numpy as np

from .. import pack, trace
from ..config import AlignConfig
from ..records import ENGINE_CODE, EXCEEDED, FAILED, OK, AlignBatch, PairBatch

MAX_BATCH_BASES = 1 << 30  # sequence bytes per device launch set (offsets are 32-bit on the device)
COPY_THREADS = 8
# pageable host memory crosses in pieces of this size (copy_pieces): one copy call per piece, the other
# threads' CUDA calls (kernel launches) free to get in between
PIECE_BYTES = 8 << 20
_NULL = np.uint64(0)  # a null device pointer argument
SLOT_LEVELS = 4  # levels a SlotResults books at most (common.cuh's gather_slots takes that many buffers)
_pool = None


@trace.traced("pinned_empty")
def pinned_empty(count: int, dtype=np.uint8) -> np.ndarray:
    """A host array in page-locked memory, which the device reads and writes at full speed with no
    staging copy. Sizes are rounded up to eighths of a power of two, so that cupy's pinned pool (which
    reuses a freed block of the same size) serves the next batch without a new page-locking call (H100
    host: ~35 ms per 40 MB, holding up the other threads' CUDA calls meanwhile)."""
    import cupy

    want = max(1, count * np.dtype(dtype).itemsize)
    step = max(4096, 1 << max(0, want.bit_length() - 4))
    mem = cupy.cuda.alloc_pinned_memory(-(-want // step) * step)
    return np.ndarray((count,), dtype=dtype, buffer=mem)


def _copy_pool(threads: int = COPY_THREADS):
    """The threads of the host-side copies (made on first use)."""
    global _pool
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _pool = ThreadPoolExecutor(threads, thread_name_prefix="gpualign-copy")
    return _pool


def free_rows(batch: PairBatch) -> tuple[np.ndarray, np.ndarray]:
    """Ends-free: the most target bases each pair may skip free at its start and at its end (t_free
    clamped to the target; all of it when the batch gives no bound)."""
    if batch.t_free is None:
        return batch.t_len, batch.t_len
    free = np.minimum(batch.t_free, batch.t_len[:, None])
    return free[:, 0], free[:, 1]


class Staging:
    """Batches to the device. prefetch(batch) starts a batch's upload early, on a copy stream of its own,
    so that it overlaps the kernels of the batch before it (pipeline.stream calls it on the queueing
    thread as a batch is queued); upload(batch) then takes it. Sequence bytes in pinned memory
    (pinned_empty) are copied asynchronously; pageable ones (`gpualign paf`'s batches) are copied by the
    driver through its own staging buffers, the calling thread waiting meanwhile (H100 host: 170 MB in
    26 ms, against 140 ms to page-lock a buffer of that size, which also holds up the other threads'
    CUDA calls)."""

    AHEAD = 2  # prefetched batches kept at most

    def __init__(self):
        self._copy = None  # the copy stream of prefetch
        self._ahead: dict = {}  # id(batch) -> (batch, d_raw, d_meta, host meta, done event)
        self._lock = threading.Lock()

    @staticmethod
    @trace.traced("send")
    def _send(seq: np.ndarray, batch: PairBatch, stream, ends_free: bool = False):
        """Start copying seq and the batch's int32 rows to the device on stream."""
        import cupy

        size = (len(seq) + 127) // 64 * 64 + 64
        d_raw = cupy.empty(size, dtype=cupy.uint8)
        copy_pieces(d_raw[:len(seq)], seq, stream)
        # the zero tail by memset (a cupy fill would load cupy's own kernels, and with them SciPy)
        cupy.cuda.runtime.memsetAsync(d_raw.data.ptr + len(seq), 0, size - len(seq), stream.ptr)
        rows = (batch.q_off, batch.q_len, batch.t_off, batch.t_len)
        if ends_free:
            rows += free_rows(batch)
        meta = np.empty((len(rows), batch.n), np.int32)
        if batch.n < 1 << 16:
            for k, row in enumerate(rows):
                meta[k] = row
        else:  # the int64 -> int32 casts side by side (numpy lets go of the interpreter lock)
            list(_copy_pool().map(lambda k: np.copyto(meta[k], rows[k], casting="unsafe"), range(len(rows))))
        d_meta = cupy.empty(meta.shape, dtype=cupy.int32)
        d_meta.set(meta, stream)
        return d_raw, d_meta, meta

    def prefetch(self, batch: PairBatch, cfg: AlignConfig) -> None:
        """Start batch's upload now (batches without --n-mismatch; others are staged by upload itself)."""
        import cupy

        if cfg.n_mismatch or batch.n == 0:
            return
        from . import is_out_of_memory

        with self._lock:
            if self._copy is None:
                self._copy = cupy.cuda.Stream(non_blocking=True)
        try:
            with self._copy:
                d_raw, d_meta, meta = self._send(batch.seq, batch, self._copy, cfg.ends_free_target)
                done = self._copy.record()
        except Exception as err:  # noqa: BLE001 - no room now: upload() stages it when its turn comes
            if is_out_of_memory(err):
                return
            raise
        with self._lock:
            self._ahead[id(batch)] = (batch, d_raw, d_meta, meta, done)
            while len(self._ahead) > self.AHEAD:  # not taken (a batch split or routed elsewhere)
                self._ahead.pop(next(iter(self._ahead)))[4].synchronize()  # its host rows stay until copied

    @trace.traced("upload")
    def upload(self, batch: PairBatch, cfg: AlignConfig):
        """(compare bytes on the device as uint8, padded to 64 bytes + 64 spare zeros; per-pair
        int32 rows q_off, q_len, t_off, t_len on the device, and with cfg.ends_free_target the two
        rows of free_rows)."""
        import cupy

        with self._lock:
            ahead = self._ahead.pop(id(batch), None)
        if ahead is not None and not cfg.n_mismatch:  # (the entry holds the batch: its id is not reused)
            ahead[4].synchronize()  # copied (long since, as a rule): its host rows may go
            return ahead[1], ahead[2]
        stream = cupy.cuda.get_current_stream()
        d_raw, d_meta, meta = self._send(pack.compare_view(batch, cfg.n_mismatch), batch, stream, cfg.ends_free_target)
        stream.synchronize()  # copied: the host rows (meta) may go
        return d_raw, d_meta


def warm_up(align_device, cfg: AlignConfig) -> None:
    """align_device(batch, cfg) on a few pairs (matching, mutated, with N, far apart): the first use of
    each path (cupy compiles or loads its own kernels then) happens at start, not in the first batch."""
    rng = np.random.default_rng(0)
    q = [bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), ln)) for ln in (1, 50, 150, 300)]
    t = [q[0], q[1], q[2][:70] + b"N" + q[2][71:], bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), 300))]
    batch = PairBatch.from_sequences(q * 300, t * 300)  # over 1,024 pairs: the eWFA start level is sampled
    align_device(batch, cfg)


class BatchEngine:
    """What the batch GPU engines (eWFA, affine WFA) share around their own _module() (load the
    kernels), _align_device(batch, cfg) and _staging (a Staging)."""

    @trace.traced("engine start")
    def start(self) -> None:
        """Load the kernels (and start the CUDA context) now, while the readers parse the first records."""
        self._module()

    def warm(self, cfg: AlignConfig) -> None:
        """Run a few pairs through cfg's path once (cupy's own kernels load on first use); a device out of
        memory now only skips it (align() degrades on its own)."""
        from . import is_out_of_memory

        self._module()
        try:
            warm_up(self._align_device, cfg)
        except Exception as err:  # noqa: BLE001 - only memory errors are let go
            if not is_out_of_memory(err):
                raise

    def prefetch(self, batch: PairBatch, cfg: AlignConfig) -> None:
        """Start uploading a batch that align() will get next (overlaps the kernels before it)."""
        if self.accepts_cfg(cfg):
            self._staging.prefetch(batch, cfg)


def replay_failures(status: np.ndarray) -> dict:
    """AlignBatch.reason for the pairs whose CIGAR replay on the device failed (status FAILED)."""
    return {int(i): "GPU CIGAR replay did not reach the end (internal error)" for i in np.nonzero(status == FAILED)[0]}


def to_device(a: np.ndarray, dtype):
    """a as a device array of dtype, on the current stream: converted on the host (a cupy astype would
    load cupy's own kernels) and copied from where it is. cupy.asarray would stage it through a
    page-locked buffer of cupy's pinned pool, a new one for each new size; new page-locked buffers took
    30-120 ms each on the H100 host with several threads at work, holding up the others' CUDA calls
    (measured on our own pinned_empty calls, not on cupy.asarray's)."""
    import cupy

    host = np.ascontiguousarray(a, dtype=dtype)
    dev = cupy.empty(host.shape, dtype=dtype)
    if host.size:
        dev.set(host)
    return dev


def copy_pieces(dev, host: np.ndarray, stream=None) -> None:
    """host (pageable, contiguous) into dev (same size), or dev into host with stream None, in pieces of
    PIECE_BYTES. A copy from or to pageable memory goes through the driver's own staging buffers; with a
    batch uploaded in one call, gaps of 5-40 ms in the device's work coincided with the uploads (H100
    timeline, 50,000 ONT candidates, two batches aligning at once). Between pieces the other threads'
    CUDA calls can get in. Not measured apart from the changes made with it."""
    d, h = dev.reshape(-1), host.reshape(-1)
    step = max(1, PIECE_BYTES // max(1, h.itemsize))
    for a in range(0, h.size, step):
        if stream is None:
            d[a:a + step].get(out=h[a:a + step])
        else:
            d[a:a + step].set(h[a:a + step], stream)


def to_host(dev) -> np.ndarray:
    """dev in a new pageable host array (copy_pieces; the current stream's work first)."""
    host = np.empty(dev.shape, dtype=dev.dtype)
    copy_pieces(dev, host)
    return host


def gather_kernel(kernel):
    """common.cuh's gather_ops as gather(parts, total) -> dst (Results.finish): each part (src, src_off,
    lens, dst_off) copies lens[i] ops from src[src_off[i]:] to dst[dst_off[i]:] (host index arrays)."""

    def gather(parts, total):
        import cupy

        dst = cupy.empty(max(1, total), dtype=cupy.uint32)
        for src, src_off, lens, dst_off in parts:
            n = len(lens)
            kernel(((n + 127) // 128,), (128,), (src, to_device(src_off, np.int64), to_device(lens, np.int32),
                                                 to_device(dst_off, np.int64), dst, np.int32(n)))
        return dst

    return gather


class Results:
    """Per-pair results of one batch across the kernel levels: scores, statuses and where each pair's
    CIGAR ops lie, kept on the host (the levels' scores come back anyway; small device arrays would cost
    a transfer and a kernel per step), the ops themselves in the levels' buffers beside the kernels
    (device arrays; numpy in the CPU tests), brought into pair order once (finish)."""

    def __init__(self, n: int, want_cigar: bool):
        self.n, self.want_cigar = n, want_cigar
        self.score = np.full(n, -1, dtype=np.int32)
        self.status = np.full(n, EXCEEDED, dtype=np.uint8)
        self.ops_len = np.zeros(n, dtype=np.int64)  # CIGAR ops per pair
        self.ops_src = np.zeros(n, dtype=np.int64)  # where they start in their buffer
        self.ops_buf = np.zeros(n, dtype=np.int64)  # which buffer
        self.buffers: list = []

    @trace.traced("results record")
    def record(self, ids, s, cnt=None, ops=(), off=None, part=None, scale: int = 1) -> np.ndarray:
        """Book one kernel level for the pairs ids (the level's list): entries with a score (s >= 0,
        times scale) are OK, or FAILED where the CIGAR replay failed (cnt < 0); their CIGARs are
        cnt[i] ops at off[i] in the buffer ops[part[i]] (ops: the level's buffers, one per launch;
        part None: all in the first). Returns the mask of ids done."""
        s = np.asarray(s)
        done = s >= 0
        at = np.asarray(ids)[done]
        self.score[at] = s[done] * scale
        if not self.want_cigar:
            self.status[at] = OK
            return done
        c = np.asarray(cnt)[done]
        self.status[at] = np.where(c < 0, FAILED, OK)
        self.ops_len[at] = np.maximum(c, 0)
        self.ops_src[at] = np.asarray(off)[done]
        self.ops_buf[at] = len(self.buffers) + (0 if part is None else np.asarray(part)[done])
        self.buffers.extend(ops)
        return done

    @trace.traced("results")
    def finish(self, gather, name: str, text=None) -> AlignBatch:
        """The AlignBatch in pair order; gather(parts, total) -> dst copies each pair's ops to its place
        (gather_kernel on the device); text (text_kernels, device only): the CIGAR text and counts made
        beside them."""
        n = self.n
        engine = np.full(n, ENGINE_CODE[name], np.uint8)
        res = AlignBatch(self.score, self.status, engine, np.zeros(0, np.uint32), np.zeros(n, np.int64),
                         np.zeros(n, np.int64), self.want_cigar)
        res.reason = replay_failures(res.status)
        if not self.want_cigar or not self.buffers or n == 0:
            return res
        lens = self.ops_len
        dst = np.cumsum(lens) - lens
        total = int(dst[-1] + lens[-1])
        if len(self.buffers) == 1 and bool((self.ops_src == dst).all()):
            flat = self.buffers[0][:total]  # one level, already in pair order
        else:
            parts = []
            for b, src in enumerate(self.buffers):
                sel = np.nonzero((self.ops_buf == b) & (lens > 0))[0]
                if len(sel):
                    parts.append((src, self.ops_src[sel], lens[sel], dst[sel]))
            flat = gather(parts, total)[:total]
        if isinstance(flat, np.ndarray):
            res.cigar = flat
        else:  # into pageable memory: page-locking a buffer per batch cost more (H100 host: ~35 ms per
            # 40 MB, holding up the other threads' CUDA calls) than the copy into fresh pages (~16 ms)
            res.cigar = to_host(flat)
            if text is not None:
                res.cigar_text, res.cigar_stats = text(flat, dst, lens)
        res.cigar_len, res.cigar_off = lens, dst
        return res


def text_kernels(mod):
    """text(ops, off, lens) -> ((buffer, start, length), counts): common.cuh's cigar_measure and cigar_write
    on a batch's CIGARs in device memory (ops of pair i at off[i], lens[i] of them: host int64 arrays),
    brought to the host (AlignBatch.cigar_text, cigar_stats): the writers' text and totals, made on the
    device instead of by numpy passes over every op on the host."""
    measure, write = mod.get_function("cigar_measure"), mod.get_function("cigar_write")

    def text(ops, off, lens):
        import cupy

        n = len(lens)
        grid, block = ((n + 31) // 32,), (32,)  # a thread per pair, spread over the SMs
        d_off, d_lens = to_device(off, np.int64), to_device(lens, np.int64)
        d_len = cupy.empty(n, dtype=cupy.int64)
        d_stats = cupy.empty((n, 5), dtype=cupy.int64)
        measure(grid, block, (ops, d_off, d_lens, np.int32(n), d_len, d_stats))
        length = d_len.get()
        start = np.cumsum(length) - length
        total = int(start[-1] + length[-1]) if n else 0
        d_buf = cupy.empty(max(1, total), dtype=cupy.uint8)
        write(grid, block, (ops, d_off, d_lens, np.int32(n), to_device(start, np.int64), d_buf))
        return (to_host(d_buf[:total]), start, length), d_stats.get()

    return text


class SlotResults:
    """Per-pair results of one batch, kept on the device and booked there after each kernel level
    (common.cuh's book_level: the host reads back only three counters per level), then brought to the
    host in one pass (finish: the per-pair arrays, then the CIGARs, into page-locked memory).
    A level's CIGARs sit in fixed slots of a buffer of its own, stride ops per list entry."""

    def __init__(self, mod, n: int, want_cigar: bool):
        import cupy

        self._mod, self.n, self.want_cigar = mod, n, want_cigar
        self.score = cupy.full(n, -1, dtype=cupy.int32)
        self.status = cupy.full(n, EXCEEDED, dtype=cupy.uint8)
        self.ops_len = cupy.zeros(n, dtype=cupy.int64)
        self.ops_src = cupy.zeros(n, dtype=cupy.int64)  # level << 40 | offset in that level's buffer
        self.buffers: list = []

    @trace.traced("slot results book")
    def book(self, ids, nl: int, score, mode=None, ncig=None, ops=None, stride: int = 0):
        """Book one level run over ids[:nl] (device int32; score, mode, ncig per entry, CIGARs in ops at
        entry * stride). Returns (the ids still to align (device), how many, done with the 2-bit compare,
        done otherwise)."""
        import cupy

        if len(self.buffers) == SLOT_LEVELS:
            raise ValueError(f"SlotResults books at most {SLOT_LEVELS} levels")
        nxt = cupy.empty(max(1, nl), dtype=cupy.int32)
        counts = cupy.zeros(3, dtype=cupy.int32)
        ptr = lambda a: _NULL if a is None else a  # noqa: E731
        self._mod.get_function("book_level")(
            (min(4096, (nl + 255) // 256),), (256,),
            (ids, np.int32(nl), score, ptr(mode), ptr(ncig), np.int32(stride), np.int32(len(self.buffers)),
             np.int32(OK), np.int32(FAILED), self.score, self.status, self.ops_len, self.ops_src, nxt, counts))
        self.buffers.append(ops)
        left, two_bit, other = (int(c) for c in counts.get())
        return nxt, left, two_bit, other

    @trace.traced("slot results")
    def finish(self, name: str) -> AlignBatch:
        """The AlignBatch in pair order (pinned host arrays)."""
        import cupy

        n = self.n
        cig = self.want_cigar and any(b is not None for b in self.buffers)
        stream = cupy.cuda.get_current_stream()
        block = pinned_empty(n * (16 if cig else 0) + n * 5 + 8)  # int64 rows first: aligned views
        lens = block[:8 * n].view(np.int64) if cig else np.zeros(n, np.int64)
        offs = block[8 * n:16 * n].view(np.int64) if cig else np.zeros(n, np.int64)
        at = 16 * n if cig else 0
        score = block[at:at + 4 * n].view(np.int32)
        status = block[at + 4 * n:at + 5 * n]
        self.score.get(out=score, blocking=False)
        self.status.get(out=status, blocking=False)
        if cig:
            d_off = cupy.cumsum(self.ops_len)
            d_off -= self.ops_len
            self.ops_len.get(out=lens, blocking=False)
            d_off.get(out=offs, blocking=False)
        stream.synchronize()
        res = AlignBatch(score, status, np.full(n, ENGINE_CODE[name], np.uint8), np.zeros(0, np.uint32), offs,
                         lens, self.want_cigar)
        res.reason = replay_failures(status)
        total = int(offs[-1] + lens[-1]) if cig and n else 0
        if total == 0:
            return res
        d_flat = cupy.empty(total, dtype=cupy.uint32)
        # the buffers' addresses go as kernel arguments: a host-to-device copy would queue behind the
        # next batch's upload on the copy engine
        ptrs = [np.uint64(0 if b is None else b.data.ptr) for b in self.buffers]
        ptrs += [_NULL] * (SLOT_LEVELS - len(ptrs))
        self._mod.get_function("gather_slots")((min(4096, (n + 127) // 128),), (128,),
                                               (*ptrs, self.ops_src, self.ops_len, d_off, d_flat, np.int32(n)))
        res.cigar = pinned_empty(total, np.uint32)
        d_flat.get(out=res.cigar)
        return res


def align_split(align_device, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
    """align_device(batch, cfg), with batches over MAX_BATCH_BASES split first, and device
    out-of-memory halving the batch (down to a few pairs, then CPU rescue: align_degrading)."""
    from . import align_degrading, is_out_of_memory

    if batch.n > 1 and len(batch.seq) > MAX_BATCH_BASES:  # the whole buffer goes over (take() compacts it)
        half = batch.n // 2
        parts = [(idx, align_split(align_device, batch.take(idx), cfg))
                 for idx in (np.arange(half), np.arange(half, batch.n))]
        return AlignBatch.merge(batch.n, parts, not cfg.distance_only)

    def once(b, c):
        try:
            return align_device(b, c)
        except Exception as err:
            if is_out_of_memory(err):  # give the pool's cached blocks back before the smaller retry
                import cupy

                cupy.get_default_memory_pool().free_all_blocks()
            raise

    return align_degrading(once, batch, cfg)
