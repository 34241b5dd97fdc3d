"""`gpualign paf`'s sequences made on the GPU from the raw bytes of the indexed files.

For PAF output on a GPU in this process, with the query and target files read in place (plain, or a
scratch copy of gzip: io/random_access), each reader process (realign_readers) sends its candidates'
segments, not their bytes: where each query record and target window lies in its file (line ends and
all), the .fai's line layout, which bases to keep, the strand. Here a chunk's segments are merged into
few ranges per file (a chunk's reads lie one after another in the query file as a rule, and windows on a
small genome overlap), the ranges read by threads into one page-locked buffer, which goes to the device in
one copy; kernels/fastx.cu's fasta_windows then lays out the batch as io/paf.fetch would: the query's part
(reverse-complemented on '-'), then the target windows, case-folded, in the layout every engine takes. The
host copy is made only when something there reads it.

The kernel checks what the host path checks (every base of the whole query record and of the window a
letter, each line end inside a segment where the .fai puts it; a multi-line FASTQ record's quality lines
are read through the index by the reader process, as the host's fetch reads them). Where one fails, the
caller fetches the chunk's candidates on the host instead, which names the error, or skips the candidate,
as it always did: a batch is made here only when the host path would have made the same bytes. A chunk whose
whole reads are far longer than their candidates' parts (contigs) goes the host's way from the start.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import pack, trace
from ..errors import InputError
from ..gpu.kernels import Kernels, is_out_of_memory, load_module
from . import fastx_device
from .fastx import display_name
from .paf import COMPLEMENT

THREADS = 256
COLUMNS = 8  # a segment's row: raw offset, bases, first column, bases a line, bytes a line, kept from, to, out offset
NO_SEGMENT = np.iinfo(np.int32).max
GAP = 1 << 12  # ranges of a file closer than this are read as one (the bytes between read too) ...
SLACK = 1 << 20  # ... unless the bytes read would pass twice the ranges' own, and this; a chunk's whole reads too
READ_PIECE = 8 << 20  # a read's bytes at most (ranges are read in pieces side by side)
READ_THREADS = 8
FOLD = np.frombuffer(pack.fold_table(b""), np.uint8)
COMP = np.frombuffer(COMPLEMENT, np.uint8)


def line_ends_placed(n, p0, per_line, width):
    """Whether the kernel can read n bases from column p0 of lines of per_line bases and width bytes: on one
    line, or with line ends of "\\n" or "\\r\\n" (what io/faidx.py's slice strips); numbers or arrays."""
    ends = np.subtract(width, per_line)
    return (np.equal(n, 0) | (np.add(p0, n) <= per_line)) | (ends == 1) | (ends == 2)


def segment_rows(raw_off, n, p0, per_line, width, keep_from, keep_to, out_off) -> np.ndarray:
    """Segments' rows (kernels/fastx.cu's fasta_windows), int64 n x COLUMNS, from arrays: n bases from raw_off,
    bases keep_from..keep_to written at out_off."""
    return np.stack([raw_off, n, p0, per_line, width, keep_from, keep_to, out_off], axis=1).astype(np.int64)


class WindowGather:
    """The device side, in the thread that makes the batches (one device): paths, the query and the target file
    the segments' offsets are in (the reader processes' IndexedFasta's, a scratch copy's where there is one)."""

    def __init__(self, paths: tuple, load=None):
        self._kernel = Kernels(fastx_device.KERNELS, load or load_module)
        self._paths, self._files = paths, [open(p, "rb") for p in paths]
        self._tables = self._stream = None
        self._host = self._dev = None  # the page-locked buffer the ranges are read into, and its device copy (kept)
        self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="gpualign-windows")

    def close(self) -> None:
        """The files, threads and buffers let go (by the thread that gathers, once it is done with them)."""
        for f in self._files:
            f.close()
        self._pool.shutdown(wait=False)
        self._host = self._dev = None

    @trace.traced("device windows")
    def gather(self, segs: np.ndarray, rc: np.ndarray, sizes: np.ndarray, total: int):
        """The batch's sequence bytes on the device (gpu.staging.raw_size(total) bytes, zeros after total) from
        segs (int64 rows of COLUMNS, their raw offsets in the files: the first half in the query file, the
        rest in the target file; rc: uint8, 1 for a reverse-complemented segment; sizes: each one's bytes in its
        file), or None where a segment is refused or the device has no room for the batch (the host path then
        makes it). Waits for the kernel (its flag read back)."""
        import cupy

        try:
            return self._gather(segs, rc, sizes, total)
        except Exception as err:  # noqa: BLE001 - only memory errors are handled, the rest re-raised
            if not is_out_of_memory(err):
                raise
        self._host = self._dev = None  # (the engines need the room more: the host path from here)
        cupy.get_default_memory_pool().free_all_blocks()
        return None

    def _gather(self, segs: np.ndarray, rc: np.ndarray, sizes: np.ndarray, total: int):
        import cupy

        from ..gpu import arrays
        from ..gpu.staging import pinned_empty, raw_size, to_device

        half = len(segs) // 2
        places, reads, at = np.empty(len(segs), np.int64), [], 0
        for k, rows in enumerate((slice(0, half), slice(half, len(segs)))):
            starts, ranges = merged(segs[rows, 0], sizes[rows])
            if sum(n for _, n in ranges) > 2 * int(sizes[rows].sum()) + SLACK:  # (sparse: the gaps not read)
                starts, ranges = merged(segs[rows, 0], sizes[rows], 0)
            places[rows] = starts + at
            for a, n in ranges:
                reads += [(k, a + p, min(READ_PIECE, n - p), at + p) for p in range(0, n, READ_PIECE)]
                at += n
        if self._stream is None:
            self._stream = cupy.cuda.Stream(non_blocking=True)
            with self._stream:
                self._tables = tuple(to_device(t, np.uint8) for t in (FOLD, COMP))
        if self._host is None or len(self._host) < at:  # grown with room to spare: few page-lockings, at the start
            # (page-locking holds up the other threads' CUDA calls; one per chunk's size slowed the aligner)
            self._host = self._dev = None
            size = max(1 << 20, at + at // 4)
            self._host = pinned_empty(size)
            with self._stream:
                self._dev = cupy.empty(size, dtype=cupy.uint8)
        view = memoryview(self._host)
        list(self._pool.map(lambda r: self._pread(r[0], view[r[3]:r[3] + r[2]], r[1]), reads))
        with self._stream:
            d_buf = self._dev
            if at:
                d_buf[:at].set(self._host[:at], self._stream)
            rows = segs.copy()
            rows[:, 0] = places
            d_segs, d_rc = to_device(rows, np.int64), to_device(rc, np.uint8)
            out = cupy.empty(raw_size(total), dtype=cupy.uint8)
            arrays.fill(out[total:], 0)
            d_bad = to_device(np.array([NO_SEGMENT]), np.int32)
            if len(segs):
                self._kernel("fasta_windows")((-(-len(segs) * 32 // THREADS),), (THREADS,),
                                              (d_buf, d_segs, d_rc, np.int64(len(segs)), *self._tables, out, d_bad))
            bad = int(d_bad.get()[0])  # (waits for the stream: the buffers may be used again, the batch is ready)
        return None if bad != NO_SEGMENT else out

    def _pread(self, k: int, into: memoryview, offset: int) -> None:
        """len(into) bytes of file k from offset into `into` (the interpreter lock let go meanwhile)."""
        done = 0
        while done < len(into):
            n = os.preadv(self._files[k].fileno(), [into[done:]], offset + done)
            if n <= 0:
                raise InputError(f"{display_name(self._paths[k])}: ended before the bytes its index places (the file "
                                 "changed during the run?)")
            done += n


def merged(offsets: np.ndarray, sizes: np.ndarray, gap: int = GAP) -> tuple[np.ndarray, list]:
    """Byte ranges [offsets[i], offsets[i] + sizes[i]) of one file merged where they overlap or lie at most gap
    bytes apart: (each range's place in the merged ranges laid end to end, the merged (offset, size) in file
    order)."""
    if len(offsets) == 0:
        return np.zeros(0, np.int64), []
    order = np.argsort(offsets, kind="stable")
    a, b = offsets[order], offsets[order] + sizes[order]
    reach = np.maximum.accumulate(b)
    new = np.ones(len(a), bool)
    new[1:] = a[1:] > reach[:-1] + gap
    first = np.flatnonzero(new)
    lo, hi = a[first], np.maximum.reduceat(b, first)
    at = np.concatenate([[0], np.cumsum(hi - lo)[:-1]])
    group = np.cumsum(new) - 1
    places = np.empty(len(a), np.int64)
    places[order] = at[group] + a - lo[group]
    return places, list(zip(lo.tolist(), (hi - lo).tolist()))

