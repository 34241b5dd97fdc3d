"""Per-pair results of the batch GPU engines' kernel levels (the affine engine's kept on the host, eWFA's
on the device), brought into one AlignBatch once per batch, with the CIGAR ops gathered on the device."""

from __future__ import annotations

import numpy as np

from .. import trace
from ..gpu import arrays
from ..gpu.staging import pinned_empty, to_device, to_host
from ..records import ENGINE_CODE, EXCEEDED, FAILED, OK, AlignBatch

_NULL = np.uint64(0)  # a null device pointer argument
INT32_MAX = (1 << 31) - 1
SLOT_LEVELS = 4  # levels a SlotResults books at most (common.cuh's gather_slots takes that many buffers)


def replay_failures(status: np.ndarray) -> dict:
    """AlignBatch.reason for the pairs whose CIGAR replay on the device failed (status FAILED)."""
    return {int(i): "GPU CIGAR replay did not reach the end (internal error)" for i in np.nonzero(status == FAILED)[0]}


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
        full = s.astype(np.int64) * scale  # (the penalties' common factor put back: past int32, left EXCEEDED
        done &= full <= INT32_MAX  # for the next engine, which says why it cannot either)
        at = np.asarray(ids)[done]
        self.score[at] = full[done]
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
        if type(flat) is np.ndarray:  # (on the host; tests/emu's device arrays are numpy's subclass)
            res.cigar = flat
        else:
            host_text = None
            if text is not None:
                res.device_cigar, host_text = text(flat, to_device(dst, np.int64), to_device(lens, np.int64))
            res.defer(host_copies(flat, host_text))
        res.cigar_len, res.cigar_off = lens, dst
        return res


def host_copies(flat, host_text=None):
    """AlignBatch.defer's fetch for a GPU engine's CIGARs: the ops flat (device), and host_text()'s text and
    counts, brought over when a host writer first reads them, after the work queued so far on the current
    stream. Into pageable memory: page-locking a new buffer per batch cost more (and held up the other threads'
    CUDA calls) than the copy into fresh pages. (gpu_dp's CIGARs, fetched for every batch, go into blocks of
    cupy's pinned pool instead, reused batch after batch; these are fetched only when a host writer reads
    them.)"""
    import cupy

    done, device = cupy.cuda.get_current_stream().record(), flat.device

    def fetch() -> dict:
        with device:
            done.synchronize()
            out = {"cigar": to_host(flat)}
            if host_text is not None:
                out["cigar_text"], out["cigar_stats"] = host_text()
        return out

    return fetch


def text_measure(mod, ops, d_off, d_lens):
    """The first half of text_kernels' work, queued and not waited for: common.cuh's cigar_measure over the
    pairs' ops (pair i's at d_off[i], d_lens[i] of them) and the exclusive sum of the text's lengths. Returns
    (d_len, d_stats, d_start): d_len and d_start have one entry more than the pairs, d_start's last the text's
    total length (the one number the host must read before text_write)."""
    import cupy

    n = len(d_lens)
    d_len = cupy.zeros(n + 1, dtype=cupy.int64)  # (one more, zero: its exclusive sum is the total)
    d_stats = cupy.empty((n, 5), dtype=cupy.int64)
    mod.get_function("cigar_measure")(((n + 31) // 32,), (32,), (ops, d_off, d_lens, np.int32(n), d_len, d_stats))
    return d_len, d_stats, arrays.cumsum(d_len, exclusive=True)


def text_write(mod, ops, d_off, d_lens, measured, total: int):
    """The second half: common.cuh's cigar_write of the text (total bytes, as text_measure summed it).
    Returns text_kernels' pair (the device dict, the host fetch)."""
    import cupy

    d_len, d_stats, d_start = measured
    n = len(d_lens)
    d_buf = cupy.empty(max(1, total), dtype=cupy.uint8)
    mod.get_function("cigar_write")(((n + 31) // 32,), (32,), (ops, d_off, d_lens, np.int32(n), d_start, d_buf))
    d_start, d_len = d_start[:n], d_len[:n]
    # done: the text written (on this stream); its readers on other streams wait for it
    return ({"text": d_buf, "start": d_start, "length": d_len, "stats": d_stats,
             "done": cupy.cuda.get_current_stream().record()},
            lambda: ((to_host(d_buf[:total]), d_start.get(), d_len.get()), d_stats.get()))


def text_kernels(mod):
    """text(ops, d_off, d_lens) -> (the text and counts on the device: AlignBatch.device_cigar, with "done", an
    event its readers on other streams wait for; host() -> the same on the host: AlignBatch.cigar_text,
    cigar_stats): common.cuh's cigar_measure and cigar_write on a batch's CIGARs in device memory (ops of
    pair i at d_off[i], d_lens[i] of them: int64 device arrays): the writers' text and totals, made on the
    device instead of by numpy passes over every op on the host. The text's offsets are summed on the device
    too: the host reads back the total alone (8 bytes) until a host writer asks for the text."""

    def text(ops, d_off, d_lens):
        measured = text_measure(mod, ops, d_off, d_lens)
        return text_write(mod, ops, d_off, d_lens, measured, int(measured[2][len(d_lens):].get()[0]))

    return text


class SlotResults:
    """Per-pair results of one batch, kept on the device and booked there after each kernel level
    (common.cuh's book_level), then finished: the per-pair arrays into page-locked memory, the CIGARs
    gathered in pair order with their text and counts (text_measure, text_write: mod holds cigar_measure and
    cigar_write), brought to the host when a host writer reads them (AlignBatch.defer).
    A level's CIGARs sit in fixed slots of a buffer of its own, stride ops per list entry.
    One wait for the device a level (settle): the finish's work is queued before it, with the level's three
    counters, so that after the last level finish() has its numbers on the host already; a level that
    leaves pairs for the next one throws that work away (speed only: the next settle queues it again)."""

    def __init__(self, mod, n: int, want_cigar: bool):
        import cupy

        self._mod, self.n, self.want_cigar = mod, n, want_cigar
        self.score = arrays.full(n, -1, np.int32)
        self.status = arrays.full(n, EXCEEDED, np.uint8)
        self.ops_len = cupy.zeros(n + 1, dtype=cupy.int64)  # (one more, zero: its exclusive sum ends with the total)
        self.ops_src = cupy.zeros(n, dtype=cupy.int64)  # level << 40 | offset in that level's buffer
        self.buffers: list = []
        self._counts = None  # the last level's counters on the device: left, done with the 2-bit compare, other
        self._ready = None  # _queue_finish's result since the last booking, waited for

    @trace.traced("slot results book")
    def book(self, ids, nl: int, score, mode=None, ncig=None, ops=None, stride: int = 0):
        """Book one level run over ids[:nl] (device int32; score, mode, ncig per entry, CIGARs in ops at
        entry * stride). Returns the ids still to align (device); how many, with the level's other counters,
        settle() tells."""
        import cupy

        if len(self.buffers) == SLOT_LEVELS:
            raise ValueError(f"SlotResults books at most {SLOT_LEVELS} levels")
        nxt = cupy.empty(max(1, nl), dtype=cupy.int32)
        self._counts = cupy.zeros(3, dtype=cupy.int32)
        ptr = lambda a: _NULL if a is None else a  # noqa: E731
        self._mod.get_function("book_level")(
            (min(4096, (nl + 255) // 256),), (256,),
            (ids, np.int32(nl), score, ptr(mode), ptr(ncig), np.int32(stride), np.int32(len(self.buffers)),
             np.int32(OK), np.int32(FAILED), self.score, self.status, self.ops_len, self.ops_src, nxt, self._counts))
        self.buffers.append(ops)
        self._ready = None
        return nxt

    @trace.traced("slot results settle")
    def settle(self) -> tuple[int, int, int]:
        """Wait for the levels booked so far (the finish's work queued first). Returns the last level's
        counters: pairs left for the next level, done with the 2-bit compare, done otherwise."""
        self._ready = self._queue_finish()
        counts = self._ready["counts"]
        return int(counts[0]), int(counts[1]), int(counts[2])

    def _queue_finish(self) -> dict:
        """The per-pair arrays, the last counters and the CIGARs' and their text's totals copied into one
        page-locked block, after the CIGARs' gather in pair order (into room for every slot booked: their
        total is not known yet) and the text's measure; waits for the stream once."""
        import cupy

        n = self.n
        cig = self.want_cigar and any(b is not None for b in self.buffers)
        wide = 2 * n + 2 if cig else 0  # int64s: each pair's ops count, their offsets (n + 1), the text's total
        block = pinned_empty(8 * wide + 4 * n + 12 + n)  # int64 rows first: aligned views
        score = block[8 * wide:8 * wide + 4 * n].view(np.int32)
        counts = block[8 * wide + 4 * n:8 * wide + 4 * n + 12].view(np.int32)
        status = block[8 * wide + 4 * n + 12:]
        out = {"score": score, "status": status, "counts": counts, "cig": cig}
        self.score.get(out=score, blocking=False)
        self.status.get(out=status, blocking=False)
        if self._counts is None:
            counts[:] = 0
        else:
            self._counts.get(out=counts, blocking=False)
        if cig:
            out["lens"], out["offs"] = block[:8 * n].view(np.int64), block[8 * n:8 * (2 * n + 1)].view(np.int64)
            text_total = block[8 * (2 * n + 1):8 * wide].view(np.int64)
            d_off = arrays.cumsum(self.ops_len, exclusive=True)
            room = sum(len(b) for b in self.buffers if b is not None)
            d_flat = cupy.empty(max(1, room), dtype=cupy.uint32)
            # the buffers' addresses go as kernel arguments: a host-to-device copy would queue behind the
            # next batch's upload on the copy engine
            ptrs = [np.uint64(0 if b is None else b.data.ptr) for b in self.buffers]
            ptrs += [_NULL] * (SLOT_LEVELS - len(ptrs))
            self._mod.get_function("gather_slots")((min(4096, (n + 127) // 128),), (128,),
                                                   (*ptrs, self.ops_src, self.ops_len, d_off, d_flat, np.int32(n)))
            lens = self.ops_len[:n]
            measured = text_measure(self._mod, d_flat, d_off, lens)
            lens.get(out=out["lens"], blocking=False)
            d_off.get(out=out["offs"], blocking=False)
            measured[2][n:].get(out=text_total, blocking=False)
            out.update(d_off=d_off, d_flat=d_flat, measured=measured, text_total=text_total)
        cupy.cuda.get_current_stream().synchronize()
        return out

    @trace.traced("slot results")
    def finish(self, name: str) -> AlignBatch:
        """The AlignBatch in pair order (scores and statuses in pinned host arrays, the CIGARs deferred)."""
        n, got = self.n, self._ready if self._ready is not None else self._queue_finish()
        self._ready = None  # (its host arrays are the AlignBatch's now: a second finish copies its own)
        cig = got["cig"]
        lens = got["lens"] if cig else np.zeros(n, np.int64)
        offs = got["offs"][:n] if cig else np.zeros(n, np.int64)
        res = AlignBatch(got["score"], got["status"], np.full(n, ENGINE_CODE[name], np.uint8), np.zeros(0, np.uint32),
                         offs, lens, self.want_cigar)
        res.reason = replay_failures(res.status)
        total = int(got["offs"][n]) if cig and n else 0
        if total == 0:
            return res
        flat = got["d_flat"][:total]
        if 2 * total < len(got["d_flat"]):  # (room for every slot booked: kept as long as the batch, so compacted)
            flat = arrays.copy(flat)
        # the writers' CIGAR text and counts made here too (numpy passes over every op on the host else); on
        # the host only when a host writer reads them
        res.device_cigar, host_text = text_write(self._mod, flat, got["d_off"], self.ops_len[:n], got["measured"],
                                                 int(got["text_total"][0]))
        res.defer(host_copies(flat, host_text))
        return res
