"""Host <-> device transfers of the batch GPU engines: page-locked host arrays, batches staged on the
device ahead of their turn (Staging), copies in pieces that let other threads' CUDA calls in, and host
copies in pieces on the copy threads (copy_host: into page-locked buffers)."""

from __future__ import annotations

import threading

import numpy as np

from .. import pack, trace
from ..config import AlignConfig
from ..records import PairBatch
from .kernels import is_out_of_memory

COPY_THREADS = 8
# pageable host memory crosses in pieces of this size (copy_pieces): one copy call per piece, the other
# threads' CUDA calls (kernel launches) free to get in between; copy_host's pieces, side by side, too
PIECE_BYTES = 8 << 20
_pool = None


@trace.traced("pinned_empty")
def pinned_empty(count: int, dtype=np.uint8) -> np.ndarray:
    """A host array in page-locked memory, which the device reads and writes at full speed with no
    staging copy. Sizes are rounded up to eighths of a power of two, so that cupy's pinned pool (which
    reuses a freed block of the same size) serves the next batch without a new page-locking call (page-locking
    is slow and holds up the other threads' CUDA calls meanwhile)."""
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


def raw_size(n: int) -> int:
    """Device bytes for a batch's n sequence bytes: padded to 64 bytes, plus 64 spare zero bytes."""
    return (n + 127) // 64 * 64 + 64


def meta_rows(batch: PairBatch, ends_free: bool = False) -> np.ndarray:
    """int32 rows q_off, q_len, t_off, t_len (and with ends_free the two rows of free_rows), as staged."""
    rows = (batch.q_off, batch.q_len, batch.t_off, batch.t_len)
    if ends_free:
        rows += free_rows(batch)
    meta = np.empty((len(rows), batch.n), np.int32)
    if batch.n < 1 << 16:
        for k, row in enumerate(rows):
            meta[k] = row
    else:  # the int64 -> int32 casts side by side (numpy lets go of the interpreter lock)
        list(_copy_pool().map(lambda k: np.copyto(meta[k], rows[k], casting="unsafe"), range(len(rows))))
    return meta


class Staging:
    """Batches to the device. prefetch(batch) starts a batch's upload early, on a copy stream of its own,
    so that it overlaps the kernels of the batch before it (dispatch.Here calls it on the queueing
    thread as a batch is queued); upload(batch) then takes it. Sequence bytes in pinned memory
    (pinned_empty) are copied asynchronously; pageable ones (`gpualign paf`'s batches) are copied by the
    driver through its own staging buffers, the calling thread waiting meanwhile (faster than page-locking
    a buffer of that size, which also holds up the other threads' CUDA calls)."""

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

        size = raw_size(len(seq))
        d_raw = cupy.empty(size, dtype=cupy.uint8)
        copy_pieces(d_raw[:len(seq)], seq, stream)
        # the zero tail by memset (a cupy fill would load cupy's own kernels, and with them SciPy)
        cupy.cuda.runtime.memsetAsync(d_raw.data.ptr + len(seq), 0, size - len(seq), stream.ptr)
        d_meta, meta = Staging._rows(batch, stream, ends_free)
        return d_raw, d_meta, meta

    @staticmethod
    def _rows(batch: PairBatch, stream, ends_free: bool = False):
        """(the batch's int32 rows on the device, copying on stream; the host rows, or None where the device
        reader made them: batch.device_cols' rows, which the ends-free rows are not)."""
        import cupy

        cols = batch.device_cols
        if not ends_free and cols is not None and "rows" in cols:
            return cols["rows"], None
        meta = meta_rows(batch, ends_free)
        d_meta = cupy.empty(meta.shape, dtype=cupy.int32)
        d_meta.set(meta, stream)
        return d_meta, meta

    def prefetch(self, batch: PairBatch, cfg: AlignConfig) -> None:
        """Start batch's upload now (batches without --n-mismatch; others are staged by upload itself); a batch
        parsed on the device (batch.device) has only its rows to send."""
        import cupy

        if cfg.n_mismatch or batch.n == 0:
            return
        with self._lock:
            if self._copy is None:
                self._copy = cupy.cuda.Stream(non_blocking=True)
        try:
            with self._copy:
                if batch.device is not None:  # parsed on the device: only the rows go over
                    d_raw, (d_meta, meta) = batch.device, self._rows(batch, self._copy, cfg.ends_free_target)
                else:
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
        if batch.device is not None and not cfg.n_mismatch:  # parsed on the device: only the rows go over
            d_meta, meta = self._rows(batch, stream, cfg.ends_free_target)
            if meta is not None:  # (copied: the host rows may go; the reader's own rows are ready already)
                stream.synchronize()
            return batch.device, d_meta
        d_raw, d_meta, meta = self._send(pack.compare_view(batch, cfg.n_mismatch), batch, stream, cfg.ends_free_target)
        stream.synchronize()  # copied: the host rows (meta) may go
        return d_raw, d_meta


def copy_host(dst: np.ndarray, src: np.ndarray) -> None:
    """src into dst (contiguous host arrays of one size and type), in pieces of PIECE_BYTES side by side on the
    copy threads (numpy lets go of the interpreter lock while it copies)."""
    step = max(1, PIECE_BYTES // max(1, src.itemsize))
    if src.size <= step:
        np.copyto(dst, src)
        return
    list(_copy_pool().map(lambda a: np.copyto(dst[a:a + step], src[a:a + step]), range(0, src.size, step)))


def to_device(a: np.ndarray, dtype):
    """a as a device array of dtype, on the current stream: converted on the host (a cupy astype would
    load cupy's own kernels) and copied from where it is. cupy.asarray would stage it through a
    page-locked buffer of cupy's pinned pool, a new one for each new size, and page-locking a new buffer
    holds up the other threads' CUDA calls."""
    import cupy

    host = np.ascontiguousarray(a, dtype=dtype)
    dev = cupy.empty(host.shape, dtype=dtype)
    if host.size:
        dev.set(host)
    return dev


def copy_pieces(dev, host: np.ndarray, stream=None) -> None:
    """host (pageable, contiguous) into dev (same size), or dev into host with stream None, in pieces of
    PIECE_BYTES. A copy from or to pageable memory goes through the driver's own staging buffers, and
    one large copy call keeps the other threads' CUDA calls (kernel launches) waiting; between pieces
    they can get in."""
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
