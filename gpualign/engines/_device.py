"""Host-side pieces the batch GPU engines share: staging the sequence bytes on the device, and
assembling per-level results (CIGARs gathered on the device, downloaded once)."""

from __future__ import annotations

import numpy as np

from .. import pack
from ..config import AlignConfig
from ..records import ENGINE_CODE, FAILED, OK, AlignBatch, PairBatch, offsets_from_lengths

MAX_BATCH_BASES = 1 << 30  # bases per device launch set (offsets are 32-bit on the device)


def copy_parallel(dst: np.ndarray, src: np.ndarray, threads: int = 8, chunk: int = 1 << 23) -> None:
    """dst[:len(src)] = src with several threads (numpy releases the GIL): pinned staging is
    otherwise limited by one core's memcpy."""
    n = len(src)
    if n <= chunk:
        dst[:n] = src
        return
    from concurrent.futures import ThreadPoolExecutor

    bounds = list(range(0, n, chunk)) + [n]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda ab: np.copyto(dst[ab[0]:ab[1]], src[ab[0]:ab[1]]), zip(bounds[:-1], bounds[1:])))


class Staging:
    """A pinned host buffer (grown as needed) through which batches go to the device."""

    def __init__(self):
        self._pinned = None

    def upload(self, batch: PairBatch, cfg: AlignConfig):
        """(compare bytes on the device as uint8, padded to 64 bytes + 64 spare; per-pair
        int32 rows q_off, q_len, t_off, t_len on the device)."""
        import cupy
        import cupyx

        seq = pack.compare_view(batch, cfg.n_mismatch)
        size = (len(seq) + 127) // 64 * 64 + 64
        if self._pinned is None or len(self._pinned) < size:
            self._pinned = cupyx.empty_pinned(max(size, 1 << 22), dtype=np.uint8)
        host = self._pinned[:size]
        copy_parallel(host, seq)
        host[len(seq):] = 0
        d_raw = cupy.empty(size, dtype=cupy.uint8)
        d_raw.set(host)
        meta = np.empty((4, batch.n), dtype=np.int32)
        meta[0], meta[1], meta[2], meta[3] = batch.q_off, batch.q_len, batch.t_off, batch.t_len
        return d_raw, cupy.asarray(meta)


def record_level(ids: np.ndarray, s: np.ndarray, cnt, d_ops, off, score: np.ndarray, status: np.ndarray,
                 parts: list, want_cigar: bool, scale: int = 1) -> np.ndarray:
    """Book one kernel level's results for pairs ids: those with a score (s >= 0, times scale) are OK,
    or FAILED when their CIGAR replay failed (cnt < 0); their CIGARs (device buffer d_ops, per-id
    offsets off and op counts cnt) join parts for assemble(). Returns the mask of ids done."""
    done = s >= 0
    score[ids[done]] = s[done] * scale
    status[ids[done]] = OK
    if want_cigar:
        status[ids[done & (cnt < 0)]] = FAILED
        good = done & (cnt >= 0)
        parts.append((ids[good], d_ops, off[good], cnt[good]))
    return done


def assemble(gather, name: str, n: int, score, status, parts, want_cigar: bool) -> AlignBatch:
    """Results in pair order. parts: (pair ids, device ops buffer, ops offset per pair, ops count per
    pair); gather: the common.cuh gather_ops kernel."""
    import cupy

    engine = np.full(n, ENGINE_CODE[name], np.uint8)
    res = AlignBatch(score, status, engine, np.zeros(0, np.uint32), np.zeros(n, np.int64),
                     np.zeros(n, np.int64), want_cigar)
    res.reason = {int(i): "GPU CIGAR replay did not reach the end (internal error)"
                  for i in np.nonzero(status == FAILED)[0]}
    if not want_cigar or not parts:
        return res
    lens = np.zeros(n, np.int64)
    src_off = np.zeros(n, np.int64)
    base = 0
    for ids, d_ops, off, cnt in parts:
        lens[ids] = cnt
        src_off[ids] = off + base
        base += len(d_ops)
    dst_off = offsets_from_lengths(lens)
    total = int(lens.sum())
    if len(parts) == 1 and np.array_equal(src_off, dst_off):
        flat = parts[0][1][:total].get()  # one level, already in pair order
    else:
        d_src = cupy.concatenate([p[1] for p in parts])
        d_dst = cupy.empty(max(1, total), dtype=cupy.uint32)
        gather(((n + 127) // 128,), (128,), (
            d_src, cupy.asarray(src_off), cupy.asarray(lens.astype(np.int32)), cupy.asarray(dst_off),
            d_dst, np.int32(n)))
        flat = d_dst[:total].get()
    res.cigar, res.cigar_len, res.cigar_off = flat, lens, dst_off
    return res


def align_split(align_device, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
    """align_device(batch, cfg), with batches over MAX_BATCH_BASES split first, and device
    out-of-memory halving the batch (down to a few pairs, then CPU rescue: align_degrading)."""
    from . import align_degrading, is_out_of_memory

    if batch.n > 1 and batch.bases > MAX_BATCH_BASES:
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
