"""text.join_lines on the GPU (kernels/lines.cu), the same bytes: the writer of a run whose inputs the GPU
parses joins its PAF or TSV lines here (pipeline.py), in the running process. The columns go up in one
page-locked copy, a thread per line measures it and a thread per line writes it, and the lines come back
in one copy to page-locked memory, handed to the output as they are. PAF and SAM lines (BAM's text too) of
batches that one GPU engine aligned whole (paf(), sam(): eWFA's, the affine engine's) are made from the
columns the reader and the engine left on the device (names, sequences, qualities, CIGARs): nothing goes up
but the statuses and scores, and no column is built on the host (a handful of host calls per batch, where the
interpreter lock is what the reading, aligning and writing threads share); SAM's unmapped pairs take their
tags (zr:Z:reason) from the host.
"""

from __future__ import annotations

import numpy as np

from . import trace
from .gpu.kernels import Kernels, load_module
from .records import OK, Names, offsets_from_lengths, segment_index
from .text import Strings, fields_of, join_lines

KERNELS = ("lines.cu", ("line_lengths", "line_write", "paf_lengths", "paf_write", "sam_lengths", "sam_write",
                       "cigar_measure", "cigar_write"), ())  # (the last two: gpu_dp's CIGAR text)
THREADS = 256
SPEC = 5  # kernels/lines.cu's ints per field
KIND_STRING, KIND_INT = 1, 2  # (0: a prefix alone)
ALIGN = 8  # the parts of the upload start at multiples of this many bytes


def _packed(col: Strings) -> tuple[np.ndarray, np.ndarray, int]:
    """(bytes holding col's rows, starts, shift): row i starts at starts[i] + shift in the bytes. The slice
    of col.buf its rows lie in when it is not much more than their bytes (names, CIGARs: one after
    another), else the rows gathered."""
    n = len(col.length)
    length = np.asarray(col.length, np.int64)
    total = int(length.sum())
    if n == 0 or total == 0:
        return np.zeros(0, np.uint8), np.zeros(n, np.int64), 0
    start = np.asarray(col.start, np.int64)
    some = length > 0  # (an empty row's start may lie anywhere)
    lo, hi = int(start[some].min()), int((start + length)[some].max())
    if hi - lo <= 2 * total + 4096:
        return col.buf[lo:hi], start, -lo
    return col.buf[segment_index(start, length)], offsets_from_lengths(length), 0


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


class DeviceLines:
    """join_lines(fields, n, sep, drop_empty_last) on the current device, its own stream; returns the lines
    as a memoryview of page-locked memory (a new buffer each call), or join_lines' bytes when the device has
    no room."""

    def __init__(self):
        self._stream = None
        self._kernel = Kernels(KERNELS, load_module)

    def ready(self) -> bool:
        """Whether lines can be joined on this thread's device: CuPy works, the stream and the kernels load
        (a first-use compile happens here, before any output). False: join_lines is the way."""
        try:
            import cupy

            if self._stream is None:
                self._stream = cupy.cuda.Stream(non_blocking=True)
            for name in KERNELS[1]:
                self._kernel(name)
        except Exception:  # noqa: BLE001 - CuPy or the device unusable here: the host joins the lines
            return False
        return True

    @trace.traced("device lines")
    def __call__(self, fields: list, n: int, sep: bytes = b"\t", drop_empty_last: bool = False):
        from .gpu.kernels import is_out_of_memory

        try:
            return self._on_device(fields, n, sep, drop_empty_last)
        except Exception as err:  # noqa: BLE001 - no room on the device: the host's numpy join
            if not is_out_of_memory(err):
                raise
            return join_lines(fields, n, sep, drop_empty_last)

    @trace.traced("device paf")
    def paf(self, batch, res) -> tuple | None:
        """output/paf.py's PafFormat.render (not scored): (the lines, how many), or None where the columns
        are not on the device (a batch the host read, a result merged from several engines or without CIGARs)
        or there is no room for the lines (then the host's way)."""
        return self._fused(batch, res, self._paf)

    @trace.traced("device sam")
    def sam(self, batch, res) -> tuple | None:
        """output/sam.py's SamFormat.render (not scored, not protein), unmapped pairs included (None where
        paf() would give None, and for an empty batch: the host's way)."""
        if batch.n == 0:
            return None
        cols = getattr(batch, "device_cols", None)
        if cols is None or "q_seq" not in cols or (isinstance(batch.q_quals, Names) and "quals" not in cols):
            return None
        return self._fused(batch, res, self._sam)

    def _fused(self, batch, res, make) -> tuple | None:
        """make(cols, cig, res, batch) where the batch's columns and the result's CIGARs are on the device."""
        from .gpu.kernels import is_out_of_memory

        cols, cig = getattr(batch, "device_cols", None), getattr(res, "device_cigar", None)
        if cols is None or cig is None or not res.has_cigar or res.t_start is not None or res.q_start is not None:
            return None
        if not len(cig["length"]) == len(cols["q_len"]) == res.n == batch.n:
            raise ValueError(f"device columns of {len(cols['q_len'])} and {len(cig['length'])} rows for a batch "
                             f"of {batch.n}")
        try:
            return make(cols, cig, res, batch)
        except Exception as err:  # noqa: BLE001 - no room on the device: the host's numpy join
            if not is_out_of_memory(err):
                raise
            return None

    def _after_engine(self, cig: dict):
        """This object's stream, waiting for the engine's stream where that wrote the CIGARs' text."""
        import cupy

        if self._stream is None:
            self._stream = cupy.cuda.Stream(non_blocking=True)
        if cig.get("done") is not None:
            self._stream.wait_event(cig["done"])
        return self._stream

    def _paf(self, cols: dict, cig: dict, res, batch) -> tuple:
        from .gpu.staging import to_device

        n = res.n
        kept = int(np.count_nonzero(res.status == OK))
        if kept == 0:
            return b"", 0
        with self._after_engine(cig):
            # the statuses and scores as the host has them (route.py may fail a pair after its engine)
            args = (to_device(res.status, np.uint8), np.int32(OK), to_device(res.score, np.int32), cig["stats"],
                    cig["text"], cig["start"], cig["length"], cols["names"], *cols["q_name"], *cols["t_name"],
                    cols["q_len"], cols["t_len"], np.int64(n))
            return self._two_passes(n, "paf_lengths", args, "paf_write", args), kept

    def _sam(self, cols: dict, cig: dict, res, batch) -> tuple:
        from .gpu.staging import to_device
        from .output.sam import unmapped_tags

        n = res.n
        quals, qual_off = cols.get("quals") or cols["q_seq"]  # (none read: not read by the kernel)
        # the unmapped rows' zr:Z tags, made here (a Python step per unmapped pair, none per aligned one)
        rows = np.flatnonzero((res.status != OK) | (batch.t_len == 0))
        why = unmapped_tags(res, rows)
        why_off, why_len = np.zeros(n if len(rows) else 1, np.int64), np.zeros(n if len(rows) else 1, np.int64)
        why_off[rows], why_len[rows] = why.start, why.length
        why_buf = why.buf if len(why.buf) else np.zeros(1, np.uint8)
        with self._after_engine(cig):
            args = (to_device(res.score, np.int32), to_device(res.status, np.uint8), np.int32(OK), cols["t_len"],
                    to_device(why_buf, np.uint8), to_device(why_off, np.int64), to_device(why_len, np.int64),
                    cig["stats"], cig["text"], cig["start"], cig["length"], cols["names"], *cols["q_name"],
                    *cols["t_name"], cols["q_len"], *cols["q_seq"], quals, qual_off, np.int32("quals" in cols),
                    np.int64(n))
            return self._two_passes(n, "sam_lengths", args, "sam_write", args), n

    def _two_passes(self, n: int, measure: str, measure_args: tuple, write: str, write_args: tuple) -> memoryview:
        """n lines on the current stream: kernel `measure` (its args, then the lengths) gives each line's
        length, kernel `write` (its args, then the ends, the lengths, the output) writes it; the lines back in
        page-locked memory."""
        import cupy

        from .gpu import arrays
        from .gpu.staging import pinned_empty

        grid = (-(-n // THREADS),), (THREADS,)
        lens = cupy.empty(n, dtype=cupy.int64)
        self._kernel(measure)(*grid, (*measure_args, lens))
        ends = arrays.cumsum(lens)
        total = int(ends[n - 1:n].get()[0])
        out = cupy.empty(max(total, 1), dtype=cupy.uint8)
        self._kernel(write)(*grid, (*write_args, ends, lens, out))
        text = pinned_empty(total)
        out[:total].get(out=text)
        cupy.cuda.get_current_stream().synchronize()
        return memoryview(text)

    def _on_device(self, fields: list, n: int, sep: bytes, drop_empty_last: bool) -> memoryview:
        import cupy

        from .gpu.staging import pinned_empty

        if n == 0:
            return memoryview(b"")
        if self._stream is None:
            self._stream = cupy.cuda.Stream(non_blocking=True)
        spec = np.zeros((len(fields), SPEC), np.int32)
        consts = bytearray(sep)
        ints, strings = [], []
        for k, (prefix, col) in enumerate(fields_of(fields)):
            spec[k, 2:4] = len(consts), len(prefix)
            consts += prefix
            if isinstance(col, Strings):
                spec[k, :2] = KIND_STRING, len(strings)
                strings.append((*_packed(col), col.length))
            elif col is not None:
                spec[k, :2] = KIND_INT, len(ints)
                ints.append(col)
        if drop_empty_last and spec[-1, 0] == KIND_STRING:
            spec[-1, 4] = 1
        # one page-locked upload, each part written straight to its place: spec, consts, the integer
        # columns, the string columns' starts, their lengths, their bytes
        sizes = [spec.nbytes, len(consts), 8 * n * max(1, len(ints)), 8 * n * max(1, len(strings)),
                 8 * n * max(1, len(strings)), max(1, sum(len(buf) for buf, _, _, _ in strings))]
        places = np.cumsum([0] + [_aligned(x) for x in sizes]).tolist()
        host = pinned_empty(places[-1])
        part = lambda i, dtype=np.uint8: host[places[i]:places[i] + sizes[i]].view(dtype)  # noqa: E731
        part(0, np.int32)[:] = spec.ravel()
        part(1)[:] = np.frombuffer(bytes(consts), np.uint8)
        h_ints = part(2, np.int64).reshape(-1, n)
        for c, col in enumerate(ints):
            h_ints[c] = col
        h_start, h_len, h_buf = part(3, np.int64).reshape(-1, n), part(4, np.int64).reshape(-1, n), part(5)
        base = 0
        for c, (buf, start, shift, length) in enumerate(strings):
            np.add(start, base + shift, out=h_start[c])
            h_len[c] = length
            h_buf[base:base + len(buf)] = buf
            base += len(buf)
        with self._stream:
            dev = cupy.empty(len(host), dtype=cupy.uint8)
            dev.set(host)
            view = lambda i, dtype=cupy.uint8: dev[places[i]:places[i] + sizes[i]].view(dtype)  # noqa: E731
            d_spec, d_consts, d_ints = view(0, cupy.int32), view(1), view(2, cupy.int64)
            d_start, d_len, d_sbuf = view(3, cupy.int64), view(4, cupy.int64), view(5)
            args = (np.int32(len(fields)), np.int32(len(sep)))
            return self._two_passes(n, "line_lengths", (d_spec, *args, d_ints, d_len, np.int64(n)), "line_write",
                                    (d_spec, *args, d_consts, d_ints, d_sbuf, d_start, d_len, np.int64(n)))


LONG_CIGAR_RUN = 256  # ops per thread when one long CIGAR's text is made on the device (long_cigar_text)
LONG_CIGAR_MIN = 1 << 20  # a CIGAR of at least this many ops has its text made so (genome's path)


def long_cigar_text(ops: np.ndarray) -> tuple[tuple, np.ndarray]:
    """One long packed CIGAR's text and counts, made on the current device (a chromosome pair's path: ~10M ops,
    whose text numpy makes in ~0.2 s): the ops cut into runs of LONG_CIGAR_RUN, the text and counts of each run
    by cigar_text.cuh's kernels (a thread per run), the texts end to end. ((text, start [0], length [len]),
    counts (1 x 5: =, X, I, D bases and I/D runs)), as AlignBatch.cigar_text and cigar_stats hold them."""
    import cupy

    from .engines._results import text_kernels

    if len(ops) == 0:
        return (np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(1, np.int64)), np.zeros((1, 5), np.int64)
    off = np.arange(0, len(ops), LONG_CIGAR_RUN, dtype=np.int64)
    lens = np.minimum(LONG_CIGAR_RUN, len(ops) - off)
    _, host = text_kernels(load_module(*KERNELS))(cupy.asarray(np.asarray(ops, np.uint32)), cupy.asarray(off),
                                                   cupy.asarray(lens))
    (text, _, _), stats = host()
    return (text, np.zeros(1, np.int64), np.array([len(text)], np.int64)), stats.sum(axis=0, keepdims=True)
