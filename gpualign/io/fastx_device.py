"""Record i of one FASTA/FASTQ file with record i of another, parsed on the GPU (kernels/fastx.cu).

For `pairs` on a GPU with two regular files (plain, gzip or bgzip; not a stream): threads read raw blocks of
both files (a compressed file's inflated ahead of the reading, bgzf.open_inflated: bgzip by rapidgzip on
several threads, gzip by ISA-L on one) into one
page-locked buffer, it goes to the device in one copy, and the kernels find the line ends, the records,
their names, and write the sequences case-folded one after another, the layout of pair_reader's batches,
which stays on the device for the engine (PairBatch.device: no second upload) and comes back to the host
only when something there reads it (PairBatch.defer_seq). Names and FASTQ qualities are gathered there too,
and come back as records.Names (bytes and their places, no Python object per record).

The kernels take the host fast path's rules (fastx_fast.py) record by record. Where a record breaks one,
or a compressed file's bytes stop inflating, the batch ends before it and the rest of both files is read by
pair_reader from there (fast path, then the strict parser, which accepts the other layouts and names the
error of what it refuses): the same pairs, byte for byte, as pair_reader's, and the same error for a fault.
(Inputs with several faults: the one reported may be another than pair_reader reports, whose order follows
its own blocks; a damaged gzip file's record is where its bytes stopped, where pair_reader alone names the
first record of the 8 MB it could not inflate.) usable() sends a file whose first records already break the
rules to pair_reader at once (its worker processes are forked before the GPU starts); without CuPy, or with
no room on the device, pair_reader reads on in this process.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import pack, trace
from ..errors import InputError
from ..gpu.kernels import Kernels, load_module
from ..records import Names, PairBatch
from . import pair_reader
from .bgzf import ParallelInflated, open_inflated
from .fastx import CHUNK, display_name, gzipped, streamed
from .fastx_fast import READ_ERRORS, NotSimple, open_gz, simple_chunks
from .fastx_strict import prefixed

KERNELS = ("fastx.cu", ("nl_count", "nl_emit", "fastx_records", "fastx_compact", "fasta_windows"), ())
LINE_BYTES = 64  # kernels/fastx.cu's CHUNK: bytes per thread finding line ends; regions are padded to it
THREADS = 256
HEAD_BYTES = 1 << 20  # usable() checks the records in this much of a file's start
MIN_READ = 1 << 20  # bytes read from a file first, and at least when no whole record fits (doubled then)
READ_PIECE = 8 << 20  # both files' bytes are read in pieces of this size, side by side
READ_THREADS = 8
NO_RECORD = np.iinfo(np.int32).max  # the kernels' `bad` when every record passed
_KEEP = np.arange(256, dtype=np.uint8)  # a table that keeps every byte (names)
NO_SEQ = np.zeros(0, np.uint8)  # a batch's seq until its host copy is fetched (host_copy)


def host_copy(d_seq, total: int):
    """PairBatch.defer_seq's fetch: the first total bytes of d_seq (written by the work queued so far on the
    current stream) into a new pageable array. Only CPU rescue, host writers and checks read it, so most
    batches never copy it (page-locking a new buffer per batch cost ~20 ms each until cupy's pool held
    enough blocks)."""
    import cupy

    done, device = cupy.cuda.get_current_stream().record(), d_seq.device

    def fetch() -> np.ndarray:
        host = np.empty(total, np.uint8)
        if total:
            with device:
                done.synchronize()
                d_seq[:total].get(out=host)
        return host

    return fetch


def usable(path: str, symbols: bytes = b"") -> bool:
    """Whether path can be read here: a regular file (plain, gzip or bgzip) whose whole records in its first
    HEAD_BYTES (inflated) keep the fast path's rules (2-line FASTA or 4-line FASTQ; a first record longer
    than that: yes)."""
    if streamed(path) or not os.path.isfile(path):
        return False
    try:
        with (open_gz(path) if gzipped(path) else open(path, "rb")) as fh:
            head = fh.read(HEAD_BYTES)
    except READ_ERRORS:  # corrupt or truncated at its start: the host's parsers say what is wrong
        return False
    if head[:1] not in (b">", b"@") or head.count(b"\r") != head.count(b"\r\n"):
        return False  # (a CR that ends no line, as in a file of CR-only line ends: the host's parsers refuse it)
    step = 2 if head[:1] == b">" else 4
    if len(head) < HEAD_BYTES:  # the whole file
        whole = head
    else:
        ends = np.flatnonzero(np.frombuffer(head, np.uint8) == 10)
        lines = len(ends) // step * step
        if lines < 2 * step:  # fewer than two records: the GPU's parse decides
            return True
        whole = head[:ends[lines - step - 1] + 1]  # the last whole record held back, as the fast path does
    try:
        for _ in simple_chunks(path, CHUNK, data=whole, symbols=symbols):
            pass
    except NotSimple:
        return False
    return True


class _File:
    """One input: what is read, what is left of the last region, what was taken. A plain file is read at
    offsets, in pieces side by side; a gzip or bgzip file through bgzf.open_inflated (a bgzip file's members
    side by side by rapidgzip, a gzip file's stream by ISA-L on a thread of its own), inflating ahead, from
    the start on, its offsets those of the inflated bytes."""

    def __init__(self, path: str):
        self.path, self.name = path, display_name(path)
        self.gz = gzipped(path)
        self.size = None if self.gz else os.path.getsize(path)  # (inflated: not known until the end)
        self.fd, self.inflated = -1, None
        self._taking = threading.Lock()  # (close, from any thread, and hand_over take the inflated stream)
        if self.gz:  # (ISA-L's threaded gzip reader stops when the thread that opened it ends: the reader's
            # maker, pipeline.run_pairs' thread, outlives the reading)
            self.inflated = open_inflated(path)
        else:
            self.fd = os.open(path, os.O_RDONLY)
        self.ended = False  # an inflated file's end reached
        self.failed = False  # its bytes could not be inflated from pos on (the host's parsers say why)
        self.pos = 0  # file offset of the next byte to read
        self.carry = np.zeros(0, np.uint8)  # bytes read, not taken (they start a record)
        self.records = 0  # records taken
        self.step = 0  # lines per record (2 or 4), once the first byte is seen
        self.per_record = 0.0  # bytes per record so far
        self.want = MIN_READ  # bytes to read next

    @property
    def eof(self) -> bool:
        return self.ended if self.gz else self.pos >= self.size

    def next_read(self) -> int:
        """Bytes the next read asks for (an inflated file's: up to them)."""
        if self.gz:
            return 0 if self.ended or self.failed else self.want
        return min(self.want, self.size - self.pos)

    def inflate(self, view: memoryview) -> int:
        """An inflated file's next bytes into view: how many (fewer at its end, or where they cannot be
        inflated)."""
        got = 0
        try:
            while got < len(view):
                n = self.inflated.readinto(view[got:])
                if not n:
                    self.ended = True
                    break
                got += n
        except READ_ERRORS:
            self.failed = True
        return got

    def start(self) -> int:
        """The file offset of the first byte not taken."""
        return self.pos - len(self.carry)

    def hand_over(self):
        """A gzip file's inflated stream from the first byte not taken on (the carried bytes, then the rest),
        for the host's parsers to read on with instead of inflating the file again up to there; no longer
        closed here. None for a plain file (read at offsets), nothing taken yet, bytes that stopped inflating
        (the host's inflater finds the place again and says why in its words), or a bgzip file (its inflater
        is not the host's, whose words a later error would not have; the host reads on from the member that
        holds the place: fastx._open_near)."""
        with self._taking:
            inflated = self.inflated
            if inflated is None or self.failed or not self.start() or isinstance(inflated, ParallelInflated):
                return None
            self.inflated = None
        stream, self.carry = prefixed(self.carry, inflated, owns=True), np.zeros(0, np.uint8)
        return stream

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with self._taking:  # (hand_over may take it meanwhile, on the reading thread: one or the other)
            inflated, self.inflated = self.inflated, None
        if inflated is not None:
            inflated.close()


class _Region:
    """A file's bytes in the batch buffer, parsed: `records` whole records (bad: the first refused)."""

    def __init__(self, f: _File, at: int, n: int):
        self.f, self.at, self.n = f, at, n
        self.records = 0
        self.bad = NO_RECORD
        self.dev = None  # per-record device arrays (name_off, name_len, seq_off, seq_len, qual_off)
        self.nl, self.ends = None, 0  # the line ends (device), how many


class DevicePairReader:
    """The batches of pair_reader.read_pairs, read as the module docstring says. quals: FASTQ qualities
    wanted (SAM, BAM); else a FASTQ query's are None. allowed (bool[256] over the case-folded bytes, or None):
    a record holding another byte is refused here like a broken one (pair_reader reads on from it, and
    scoring.check_batch names it), so that every batch parsed here (batch.device set) holds allowed bytes only:
    general scoring's alphabet check (scoring.allowed_bytes) made by the kernels."""

    def __init__(self, path_a: str, path_b: str, batch_bases: int, batch_pairs: int, symbols: bytes = b"",
                 quals: bool = True, allowed: np.ndarray | None = None):
        first = _File(path_a)
        try:
            self.files = [first, _File(path_b)]
        except BaseException:
            first.close()
            raise
        self.batch_bases, self.batch_pairs, self.symbols, self.quals = batch_bases, batch_pairs, symbols, quals
        self.alloc = None  # (pipeline sets it for pair_reader's batches; these are page-locked already)
        self.host_seq = False  # (pipeline sets it where the run reads every batch's sequences on the host too:
        # their copy then made here, in the reading thread, not when first read)
        self.fold = np.frombuffer(pack.fold_table(symbols), np.uint8)
        if allowed is not None:
            self.fold = np.where(allowed[self.fold], self.fold, 0).astype(np.uint8)  # (0: refused)
        self._stop = False
        self.k_next = batch_pairs  # records to read for the next batch (fewer once a batch is bounded by bases)
        self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="gpualign-read")
        self._stream = None  # the reader thread's CUDA stream
        self._kernel = Kernels(KERNELS, load_module)  # (the reader's thread keeps one device)
        self._host = None  # the page-locked buffer _fill reads into, kept for the next batches
        self._tables: dict = {}  # byte tables on the device (fold, _KEEP)
        self.gen = self._batches()

    def __iter__(self):
        return self

    def __next__(self) -> PairBatch:
        return next(self.gen)

    def abort(self) -> None:
        """Stop (from any thread): no batch after the one being made; the files and threads released now
        (a read under way fails or ends short, unseen: the run is ending)."""
        self._stop = True
        self._close()

    # ---- reading

    @trace.traced("device read")
    def _read(self, buf: np.ndarray, reads: list) -> list:
        """For each (f, at, n) of reads, f's next n bytes into buf[at:]: every plain file's pieces side by
        side, each inflated file in one piece beside them. Returns the bytes each got (an inflated file's:
        fewer at its end)."""
        def piece(job) -> None:
            f, at, a, b = job
            view, off = memoryview(buf[at + a:at + b]), f.pos + a
            while len(view):
                got = os.preadv(f.fd, [view], off)
                if got <= 0:
                    raise InputError(f"{f.name}: cannot read (the file shrank while it was read)")
                view, off = view[got:], off + got
        jobs = [(f, at, a, min(n, a + READ_PIECE)) for f, at, n in reads if not f.gz for a in range(0, n, READ_PIECE)]
        futs = {id(f): self._pool.submit(f.inflate, memoryview(buf[at:at + n])) for f, at, n in reads if f.gz}
        list(self._pool.map(piece, jobs))
        got = [futs[id(f)].result() if f.gz else n for f, _, n in reads]
        for (f, _, _), n in zip(reads, got):
            f.pos += n
        return got

    @trace.traced("device fill")
    def _fill(self) -> tuple[np.ndarray, list]:
        """A page-locked buffer holding each file's carry and next bytes, each region 64-byte aligned
        and followed by zeros up to the next 64. It is the same buffer every time (grown when too small: a
        new page-locked buffer costs ~1 ms a MB), its bytes done with once _take has carried the rest."""
        from ..gpu.staging import pinned_empty

        if self._stream is not None:  # the last buffer's upload (asynchronous) done before it is written
            self._stream.synchronize()
        sizes = [len(f.carry) + f.next_read() for f in self.files]  # (at most, for an inflated file)
        places = [0, -(-sizes[0] // LINE_BYTES) * LINE_BYTES]
        total = max(LINE_BYTES, places[1] + -(-sizes[1] // LINE_BYTES) * LINE_BYTES)
        if self._host is None or len(self._host) < total:
            self._host = None  # (back to cupy's pool first)
            self._host = pinned_empty(total + total // 8)
        buf = self._host[:total]
        for f, at in zip(self.files, places):
            buf[at:at + len(f.carry)] = f.carry
        got = self._read(buf, [(f, at + len(f.carry), n - len(f.carry)) for f, at, n in zip(self.files, places, sizes)])
        regions, held = [], [len(f.carry) + g for f, g in zip(self.files, got)]
        for f, at, n in zip(self.files, places, held):
            buf[at + n:at + -(-n // LINE_BYTES) * LINE_BYTES] = 0
            if not f.step and n:
                f.step = 2 if buf[at] == ord(">") else 4
            regions.append(_Region(f, at, n))
        return buf, regions

    # ---- parsing

    @trace.traced("device parse")
    def _parse(self, d_buf, host: np.ndarray, r: _Region) -> None:
        """r's line ends and records on the device; r.records and r.bad on the host."""
        import cupy

        from ..gpu import arrays

        f, n = r.f, r.n
        if n == 0:
            return
        step, eof = f.step, f.eof
        threads = -(-n // LINE_BYTES)
        region = d_buf[r.at:r.at + threads * LINE_BYTES]
        counts = cupy.empty(threads, dtype=cupy.int64)
        grid = (-(-threads // THREADS),), (THREADS,)
        self._kernel("nl_count")(*grid, (region, np.int64(threads), counts))
        sums = arrays.cumsum(counts, out=counts)
        r.ends = ends = int(sums[-1:].get()[0])
        r.nl = nl = cupy.empty(max(ends, 1), dtype=cupy.int64)
        self._kernel("nl_emit")(*grid, (region, np.int64(threads), sums, nl))
        lines = ends + int(eof and host[r.at + n - 1] != 10)  # a last line without its '\n'
        records = lines // step if eof else max(0, lines // step - 1)  # the last whole one held back
        d_bad = cupy.empty(1, dtype=cupy.int32)
        d_bad.set(np.array([records if eof and lines % step else NO_RECORD], np.int32))  # a part record
        m = max(records, 1)
        r.dev = tuple(cupy.empty(m, dtype=cupy.int64) for _ in range(5))
        if records:
            self._kernel("fastx_records")((-(-records // THREADS),), (THREADS,),
                                          (region, np.int64(n), nl, np.int64(ends), np.int32(step), np.int32(eof),
                                           np.int64(records), *r.dev, d_bad))
        r.records, r.bad = records, int(d_bad.get()[0])

    @trace.traced("device gather")
    def _gather(self, d_buf, regions: list, lens: list, fields: tuple, table: np.ndarray, check: bool = False,
                ends: list | None = None):
        """The first len(lens[i]) records' pieces (offsets r.dev[fields[0]], lengths r.dev[fields[1]], which
        are lens[i]) of each region one after another in a device buffer through table (kernels/fastx.cu's
        fastx_compact; padded as gpu.staging.raw_size says, zeros after them): (it, the first record
        a region refused there, or NO_RECORD; check: sequences, and FASTQ qualities, each region's offsets
        of its pieces in the buffer: host int64 arrays and their device copies). ends: each lens[i]'s
        running sum, where the caller has them."""
        import cupy

        from ..gpu import arrays
        from ..gpu.staging import raw_size

        if ends is None:
            ends = [np.cumsum(ln) for ln in lens]
        offs, base = [], 0
        for ln, e in zip(lens, ends):
            offs.append(e - ln + base)
            base += int(e[-1]) if len(e) else 0
        total = base
        out = cupy.empty(raw_size(total), dtype=cupy.uint8)
        arrays.fill(out[total:], 0)
        d_table = self._tables.get(table.tobytes())
        if d_table is None:
            d_table = self._tables[table.tobytes()] = cupy.empty(256, dtype=cupy.uint8)
            d_table.set(table)
        d_bad = cupy.empty(1, dtype=cupy.int32)
        d_bad.set(np.array([NO_RECORD], np.int32))
        d_offs = []
        for r, off in zip(regions, offs):
            k = len(off)
            out_off = cupy.empty(max(k, 1), dtype=cupy.int64)
            if k:
                out_off[:k].set(off)
            d_offs.append(out_off)
            self._kernel("fastx_compact")((-(-k * 32 // THREADS),), (THREADS,),
                                          (d_buf[r.at:], r.dev[fields[0]], r.dev[fields[1]], r.dev[4],
                                           np.int32(check and r.f.step == 4), np.int64(k), out_off, d_table, out,
                                           d_bad))
        return out, int(d_bad.get()[0]) if check else NO_RECORD, offs, d_offs

    # ---- batches

    def _batches(self):
        from ..gpu.kernels import is_out_of_memory

        count = 0
        try:
            try:
                import cupy

                # (no device: a Stream made anyway fails half-made, and CuPy prints a traceback as it goes)
                self._stream = cupy.cuda.Stream(non_blocking=True) if cupy.cuda.runtime.getDeviceCount() else None
            except Exception:  # noqa: BLE001 - CuPy missing or broken, no device: the host reads it all
                self._stream = None
            while self._stream is not None and not self._stop:
                regions = []
                try:
                    host, regions = self._fill()
                    if not any(r.n for r in regions) and not any(f.failed for f in self.files):
                        return  # both files read to their ends
                    with self._stream:  # (entered and left here: the generator may be finalised elsewhere)
                        step = self._step(host, regions, count)
                except Exception as err:  # noqa: BLE001 - no room on the device: the host reads on
                    if not is_out_of_memory(err):
                        raise
                    step = None
                if step == "more" and any(f.failed for f in self.files):
                    step = None  # (nothing more to be had there: the host's parsers say why)
                if step is None:  # nothing taken: pair_reader reads on from here
                    for r in regions:
                        self._take(host, r, 0)
                    break
                if step == "more":  # no whole record in a region yet: read more of that file
                    for r in regions:
                        self._take(host, r, 0)
                        if not r.records:
                            r.f.want = max(MIN_READ, 2 * r.f.want)
                    continue
                batch, k, last = step
                if batch is not None:
                    yield batch
                    count += k
                for r in regions:
                    self._take(host, r, k)
                if not last and all(f.eof and not f.carry.size for f in self.files):
                    return  # both files taken to their ends (a compressed one is not inflated again)
                if last or any(r.f.eof and not r.f.carry.size or r.f.failed for r in regions):
                    break  # a refused record next, a file's end, or bytes not inflated: pair_reader reads on
            starts = [(f.start(), f.records, f.records * f.step + 1, f.hand_over()) for f in self.files]
        finally:
            self._close()
        yield from self._read_on(count, starts)

    @trace.traced("device step")
    def _step(self, host: np.ndarray, regions: list, count: int):
        """One buffer's batch: (PairBatch or None, records taken from each file, whether a refused record
        follows them); "more" when a file has no whole record in it yet; None to read on the host."""
        import cupy

        d_buf = cupy.empty(len(host), dtype=cupy.uint8)
        d_buf.set(host)
        for r in regions:
            self._parse(d_buf, host, r)
        k = min(r.records for r in regions)
        refused = min(r.bad for r in regions)
        if k == 0 and refused and any(not r.records and not r.f.eof for r in regions):
            return "more"
        k = min(k, refused, self.batch_pairs)
        if k == 0:  # a refused record, or a file's end: pair_reader reads on
            return None
        lens = [r.dev[3][:k].get() for r in regions]
        ends = [np.cumsum(ln) for ln in lens]
        per_pair = ends[0] + ends[1]  # bases of the first i + 1 pairs
        # the next reads hold about a batch: as many pairs as the bases bound lets these through
        self.k_next = max(1, min(self.batch_pairs, int(self.batch_bases / max(1.0, float(per_pair[-1]) / k))))
        k = max(1, min(k, int(np.searchsorted(per_pair, self.batch_bases, side="left")) + 1))
        lens, ends = [ln[:k] for ln in lens], [e[:k] for e in ends]
        seq = self._gather(d_buf, regions, lens, (2, 3), self.fold, check=True, ends=ends)
        _, bad, _, _ = seq
        if bad < k:  # a byte a record cannot hold: the batch ends before it
            k = refused = bad
            lens, ends = [ln[:k] for ln in lens], [e[:k] for e in ends]
            if k:
                seq = self._gather(d_buf, regions, lens, (2, 3), self.fold, ends=ends)
        batch = self._batch(d_buf, seq, regions, k, lens, count) if k else None
        return batch, k, k == refused

    def _close(self) -> None:
        """The files, the reading threads and the buffers released (from any thread, more than once)."""
        for f in self.files:
            f.close()
        self._pool.shutdown(wait=False)
        self._host, self._tables = None, {}

    @trace.traced("device batch")
    def _batch(self, d_buf, seq: tuple, regions: list, k: int, lens: list, count: int) -> PairBatch:
        """The batch of the first k records of both regions (seq: _gather's of their sequences): names and
        (wanted) qualities gathered on the device and brought over, so that the raw buffer can go; the
        sequences stay on the device (batch.device), their host copy made when first read (host_copy)."""
        from ..gpu import arrays

        d_seq, _, (q_off, t_off), (d_q_off, d_t_off) = seq
        ql, tl = lens
        total = int(t_off[-1] + tl[-1])
        ra, rb = regions
        # the engines' int32 rows, made here (the names' copy below waits for them): not sent over again
        rows = arrays.narrow_rows((d_q_off[:k], ra.dev[3][:k], d_t_off[:k], rb.dev[3][:k]))
        name_lens = [r.dev[1][:k].get() for r in regions]
        d_names, _, name_offs, d_name_offs = self._gather(d_buf, regions, name_lens, (0, 1), _KEEP)
        buf = d_names[:int(name_offs[1][-1] + name_lens[1][-1])].get()
        quals, d_quals = [None] * k, None
        if self.quals and ra.f.step == 4:  # (a sequence's length is its quality's)
            d_quals, _, (qual_off,), (d_qual_off,) = self._gather(d_buf, regions[:1], [ql], (4, 3), _KEEP,
                                                                   ends=[q_off + ql])
            quals = Names(d_quals[:int(qual_off[-1] + ql[-1])].get(), qual_off, ql)
        batch = PairBatch(NO_SEQ, q_off, ql, t_off, tl, np.arange(count, count + k, dtype=np.int64),
                          Names(buf, name_offs[0], name_lens[0]), Names(buf, name_offs[1], name_lens[1]), quals)
        batch.defer_seq(host_copy(d_seq, total), total)
        if self.host_seq:
            batch.seq  # (fetched now)
        batch.device = d_seq
        batch.device_cols = {"names": d_names, "q_name": (d_name_offs[0], ra.dev[1][:k]),
                             "t_name": (d_name_offs[1], rb.dev[1][:k]), "q_len": ra.dev[3][:k], "t_len": rb.dev[3][:k],
                             "rows": rows}
        if self.quals:  # SAM's SEQ and QUAL (batch.device goes once the batch is aligned)
            batch.device_cols["q_seq"] = (d_seq, d_q_off)
            if d_quals is not None:
                batch.device_cols["quals"] = (d_quals, d_qual_off)
        return batch

    @trace.traced("device take")
    def _take(self, host: np.ndarray, r: _Region, k: int) -> None:
        """k records of r taken: the bytes after them carried to the next buffer, the next read sized."""
        f = r.f
        last = k * f.step - 1  # the line that ends record k - 1
        end = 0 if k == 0 else int(r.nl[last:last + 1].get()[0]) + 1 if last < r.ends else r.n
        f.carry = host[r.at + end:r.at + r.n].copy()
        f.records += k
        if k:
            f.per_record += (end - k * f.per_record) / f.records
        if f.per_record:  # the next batch's records (and two spare), less what is held already
            f.want = max(0, int(f.per_record * (self.k_next * 1.03 + 2)) - len(f.carry))

    def _read_on(self, count: int, starts: list):
        """pair_reader's batches from the first record not taken (starts: pair_reader.read_on's, with a gzip
        file's live stream where _File.hand_over gives one), in this process (no worker forked: the GPU and
        threads run): it reads on past a record the kernels refused, or finds the error, and tells a file's
        end from the other's."""
        try:
            if not self._stop:
                a, b = self.files
                yield from pair_reader.read_on(a.path, b.path, starts, self.batch_bases, self.batch_pairs,
                                               self.symbols, count)
        finally:  # (a stream whose parser never started, the other file failing first, is closed here)
            for *_, stream in starts:
                if stream is not None:
                    stream.close()
