"""What every runner shares around its engines (pairs, paf, genome, search): the output (check_output before
anything starts, Output: a temporary name renamed at commit, stdout, a pipe, BGZF), the read-ahead and
write-behind threads with their stage timings (ReadAhead, WriteBehind), the engines started here, on this
host's devices or on a Dask cluster and the dispatcher that drives them (start_engines, dispatcher_summary;
dispatch.py), their lifetime around a run (running, aborting), the batches streamed through the dispatcher
in input order (stream: out is an output.parallel.OrderedWriter or anything with its submit/flush) and the
run's summary (Summary)."""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import shutil
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from . import interrupt, memory, trace
from .config import AlignConfig
from .engines import select_engines
from .errors import DeviceError, InputError
from .io.fastx import shown_as
from .output.reserve import Reserve
from .output.sink import STDOUT_NAMES, BgzfSink, Sink, compressed, inherited_fd, is_stream
from .records import OK
from .stdio import CLOSED_AT_START, stdout_closed


@dataclass
class Summary:
    pairs: int = 0
    bases: int = 0
    written: int = 0
    failed: int = 0
    skipped: int = 0  # input left out with --skip-bad (paf's bad candidates): in neither pairs nor failed
    seconds: float = 0.0
    counts: dict = field(default_factory=dict)
    notice: str = ""
    verified: int = 0
    verified_optimal: int = 0
    verified_by: str = ""  # the library that re-computed the verified scores (engines.check)
    verified_cigar_faults: int = 0  # verified pairs whose CIGAR is no alignment of their score (check.cigar_faults)
    stage_seconds: dict = field(default_factory=lambda: {"read": 0.0, "align": 0.0, "write": 0.0})
    extra: list = field(default_factory=list)  # (key, value) rows of a cluster run: per worker, retried
    first_failure: str = ""  # the first failed pair in input order, and why (failure_note)

    def add_counts(self, counts: dict) -> None:
        for k, v in counts.items():
            self.counts[k] = self.counts.get(k, 0) + v

    def rows(self) -> list[tuple[str, str]]:
        rate = self.pairs / self.seconds if self.seconds > 0 else 0.0
        rows = [("pairs", str(self.pairs)), ("bases", str(self.bases)), ("records_written", str(self.written)),
                ("failed", str(self.failed))] + [("skipped", str(self.skipped))] * (self.skipped > 0)
        rows += [("wall_seconds", f"{self.seconds:.3f}"),
                 ("pairs_per_second", f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}")]  # 0.412 for a slow pair
        # busy time of each stage; the stages overlap (reader, aligner and writer run concurrently)
        rows += [(f"{k}_seconds", f"{v:.3f}") for k, v in self.stage_seconds.items()]
        rows += [(f"route:{k}", str(v)) for k, v in sorted(self.counts.items())]
        rows += memory.peak_rows()
        rows += self.extra
        if self.verified_by:  # (--verify asked: its rows also where no pair was drawn, recall '-' then)
            rows += [("verified", str(self.verified)), ("verified_by", self.verified_by),
                     ("verified_optimal", str(self.verified_optimal)),
                     ("verified_cigar_faults", str(self.verified_cigar_faults)),
                     ("recall", f"{100.0 * self.verified_optimal / self.verified:.4f}%" if self.verified else "-")]
        return rows


def check_output(path: str) -> None:
    """Raise the InputError Output(path) would, before a run starts anything (engines, notices): a
    directory, or a file whose directory takes no files (a probe file made there and removed). A stream is
    opened when the run writes (a FIFO's open waits for its reader)."""
    if path in STDOUT_NAMES and stdout_closed():
        raise InputError(_STDOUT_CLOSED)
    if path in STDOUT_NAMES or is_stream(path):
        return
    if os.path.isdir(path):
        raise InputError(f"{path}: cannot write (a directory)")
    try:
        fd, probe = tempfile.mkstemp(prefix=".gpualign-", dir=os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        raise InputError(f"{path}: cannot write ({e.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def _remove(path: str | None) -> None:
    """A temporary file of the run removed (if any) and no longer tracked for an interrupt."""
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass
        interrupt.untrack(path)


_STDOUT_CLOSED = "stdout: cannot write (it is closed): give the output a name with -o"


class Output:
    """Where a run's output goes (output/sink.py): stdout, a device or pipe named as the output (/dev/null,
    /dev/stdout, a FIFO, a shell's >(...)), written in place and never replaced, or a temporary file renamed
    over the name at commit() (over a symbolic link's target, the link kept), with the mode of the file it
    replaces. target: a Sink (BGZF-compressed for a file named .gz) that writes whole or
    raises WriteError; with binary_via_path (BAM, made by htslib) a path instead: the temporary file, or for
    a stream a temporary file copied to it at commit()."""

    def __init__(self, path: str, binary_via_path: bool):
        self.path = self.dest = path
        self.tmp = self.staged = None
        if os.path.isdir(path):
            raise InputError(f"{path}: cannot write (a directory)")
        stream = is_stream(path)
        if path in STDOUT_NAMES:
            if stdout_closed():
                raise InputError(_STDOUT_CLOSED)
            self.sink = Sink(sys.stdout.fileno(), "stdout", own=False)
        elif stream:
            fd = inherited_fd(path)
            if fd in CLOSED_AT_START:  # (/dev/null since: the output would be lost)
                raise InputError(f"{path}: cannot write (the process started with descriptor {fd} closed)")
            try:
                self.sink = Sink(os.open(path, os.O_WRONLY) if fd is None else os.dup(fd), path, own=True)
            except OSError as e:
                raise InputError(f"{path}: cannot write ({e.strerror})") from None
        else:
            # a symbolic link's target replaced, the link kept (as a plain open() would write through it)
            self.dest = os.path.realpath(path) if os.path.islink(path) else path
            d = os.path.dirname(os.path.abspath(self.dest))
            try:
                fd, self.tmp = tempfile.mkstemp(prefix=".gpualign-", suffix=os.path.basename(path), dir=d)
            except OSError as e:
                raise InputError(f"{path}: cannot write ({e.strerror})") from None
            interrupt.track(self.tmp)  # removed by the interrupt handler if abort() cannot run
            shown_as(self.tmp, path)  # (messages about it, such as htslib's on BAM, name the output)
            # (BAM: htslib writes the file by its name, none of it through this sink, so nothing is taken ahead)
            self.sink = Sink(fd, path, own=True, reserve=None if binary_via_path else Reserve.ahead_of(fd))
            if compressed(path) and not binary_via_path:
                self.sink = BgzfSink(self.sink)
        self.target = self.sink
        if binary_via_path:
            if self.tmp is None:  # htslib writes a file; its bytes go to the stream at commit()
                fd, self.staged = tempfile.mkstemp(prefix="gpualign-", suffix=".bam")
                os.close(fd)
                interrupt.track(self.staged)
            self.target = self.staged or self.tmp

    def flush(self) -> None:
        """What was written through target out now (nothing where target is a path: htslib writes it)."""
        if not isinstance(self.target, str):
            self.target.flush()

    @trace.traced("commit")
    def commit(self) -> None:
        if self.staged:
            with open(self.staged, "rb") as fh:
                shutil.copyfileobj(fh, self.sink, 1 << 20)
            self._unstage()
        self.sink.close()
        if self.tmp:
            # mkstemp made the file 0600: give it the mode a plain open() would (the file replaced's, if any)
            try:
                mode = stat.S_IMODE(os.stat(self.dest).st_mode)
            except OSError:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
            os.chmod(self.tmp, mode)
            # (the old file or the new one, never neither, whatever happens meanwhile; on ext4 the sink's
            # Reserve spares the new one's write-out that a rename over a file would begin: reserve.py)
            os.replace(self.tmp, self.dest)
            interrupt.untrack(self.tmp)
            self.tmp = None

    def abort(self) -> None:
        self.sink.release()
        self._unstage()
        _remove(self.tmp)
        self.tmp = None

    def _unstage(self) -> None:
        _remove(self.staged)
        self.staged = None


@contextlib.contextmanager
def running(chain, output: "Output", cfg: AlignConfig):
    """Engines started (the first one run once on a few pairs: cfg's path loaded) and the output
    committed on success; on any failure the partial output is removed. The engines are closed
    either way."""
    for e in reversed(chain):  # a CPU chain's worker processes forked first (a GPU chain's rescue: at first use)
        e.start()
    if chain:  # (none here: --gpus's device slots have theirs)
        chain[0].warm(cfg)
    interrupt.phase("pools")
    try:
        yield
        output.commit()
    except BaseException:
        output.abort()
        raise
    finally:
        for e in chain:
            e.close()


SWITCH_SECONDS = 0.0002  # the interpreter lock handed between threads this often while batches stream


@contextlib.contextmanager
def switching(seconds: float = SWITCH_SECONDS):
    """The interpreter's thread switch interval set for the block (then set back). A run on the GPU has
    three busy threads (reading, aligning, writing) whose numpy and CUDA calls each let go of the lock and
    take it again; at the default 5 ms a thread can wait that long for it each time (10M pairs: 2.57 s at
    0.2 ms against 2.80-3.06 s, same lease)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@contextlib.contextmanager
def aborting(writer):
    """writer.abort() (if it has one: BAM drops its spooled text) when the block fails."""
    try:
        yield
    except BaseException:
        getattr(writer, "abort", lambda: None)()
        raise


def timed(gen, stages: dict, key: str):
    """Iterate gen, adding the time spent producing each item to stages[key]; closing this closes gen."""
    it = iter(gen)
    try:
        while True:
            t0 = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                stages[key] += time.perf_counter() - t0
            yield item
    finally:
        getattr(it, "close", lambda: None)()


class ReadAhead:
    """Batches produced by a thread (two ahead of the consumer) from the moment it is made: reading
    overlaps whatever the caller does next (engine start-up, alignment). Iterate it once. close() stops
    the thread (after the batch it is making) and closes the producer there, so that its own clean-up
    runs; close(wait) also waits up to `wait` seconds for that. Busy seconds of the producer go to
    stages[stage], and its phase is announced as `stage` (stage None: the producer does both itself)."""

    def __init__(self, batches, stages: dict, ahead: int = 2, stage: str | None = "read"):
        self.q: queue.Queue = queue.Queue(maxsize=ahead)
        self.stop = threading.Event()
        self.stage = stage
        gen = batches if stage is None else timed(batches, stages, stage)
        self.thread = threading.Thread(target=self._run, args=(gen,), daemon=True)
        self.thread.start()

    def _put(self, item) -> bool:
        """item queued, unless close() comes first (False)."""
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, gen) -> None:
        try:
            for batch in gen:
                if self.stage:
                    interrupt.phase(self.stage)
                if not self._put(batch):
                    return
            self._put(None)
        except BaseException as e:  # noqa: BLE001 - forwarded to the consumer, which raises it
            self._put(e)
        finally:
            close = getattr(gen, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - stopping anyway; an error here was raised before
                    pass

    def ready(self) -> bool:
        """Whether the next batch (or the end, or the reader's error) is there to be taken now."""
        return not self.q.empty()

    def __iter__(self):
        """The batches in order; ends early (no error) once close() is called."""
        while True:
            try:
                item = self.q.get(timeout=0.1)
            except queue.Empty:
                if self.stop.is_set():
                    return
                continue
            if isinstance(item, BaseException):
                raise item
            if item is None:
                return
            yield item

    def close(self, wait: float = 0.0) -> None:
        """Stop the thread; wait: seconds to wait for it, none after a signal (the run must unwind at once,
        its pools closed before they replace the workers the handler ended)."""
        self.stop.set()
        if wait > 0 and interrupt.signalled() is None and self.thread is not threading.current_thread():
            self.thread.join(wait)


class WriteBehind:
    """fn(item) for each submitted item, in order, on a thread of its own (at most `ahead` items waiting):
    the caller goes on with the next item while the last is written. close() waits for every item
    submitted and raises fn's first error; abort() drops what waits. Busy seconds go to stages[stage]."""

    def __init__(self, fn, stages: dict, stage: str, ahead: int = 2):
        self.q: queue.Queue = queue.Queue(maxsize=ahead)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn, stages, stage), daemon=True)
        self.thread.start()

    def _run(self, fn, stages: dict, stage: str) -> None:
        while True:
            item = self.q.get()
            if item is None or self.stop.is_set():
                return
            if self.error is not None:
                continue
            t0 = time.perf_counter()
            try:
                fn(item)
            except BaseException as e:  # noqa: BLE001 - raised by the caller's next submit() or close()
                self.error = e
            finally:
                stages[stage] += time.perf_counter() - t0

    def _put(self, item) -> None:
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.1)
                return
            except queue.Full:
                if not self.thread.is_alive():
                    return

    def submit(self, item) -> None:
        if self.error is not None:
            raise self.error
        self._put(item)

    def close(self) -> None:
        self._put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def abort(self, wait: float = 0.0) -> None:
        """Stop after the item being written; wait: seconds to wait for that, none after a signal (the run
        must unwind at once)."""
        self.stop.set()
        try:
            self.q.put_nowait(None)
        except queue.Full:
            pass
        if wait > 0 and interrupt.signalled() is None and self.thread is not threading.current_thread():
            self.thread.join(wait)


def start_engines(cfg: AlignConfig, cluster=None):
    """(chain, notice, dispatcher): the engine chain the runner starts and closes (stages.running) and the
    dispatcher (dispatch.py) that aligns the batches, to close: this process's chain and dispatch.Here on it;
    with a cluster.ClusterSpec asking for this host's GPUs (--gpus), no chain and a started devices.DeviceSet
    (it closes the CPU engine its slots share too); with one asking for Dask workers, only the CPU engine
    here (one process) and a started cluster.ClusterAligner."""
    if cluster is not None and cluster.gpus:
        return _on_devices(cfg, cluster.gpus)
    if cluster is None or not cluster.wanted:
        from .dispatch import Here

        chain, notice = select_engines(cfg)
        return chain, notice, Here(chain, cfg)
    from .cluster import ClusterAligner

    remote = ClusterAligner(cluster.validate(cfg.device), cfg)
    try:
        notice = remote.start()
    except BaseException:
        remote.close()
        raise
    local, _ = select_engines(cfg.with_(device="cpu", threads=1))
    return local, notice, remote


def _on_devices(cfg: AlignConfig, gpus: str):
    """start_engines for --gpus: one chain per device slot (devices.chain_set), the CPU engine shared by them
    (the chain's rescue: its processes forked by the first slot that needs them, engines/_pool.py)."""
    from .devices import chain_set, present

    ids = present(gpus)
    chain, notice = select_engines(cfg)
    if len(chain) < 2:
        raise DeviceError(f"--gpus: {notice}")
    cpu = chain[-1]
    cpu.start()
    remote = chain_set(ids, cfg, cpu)
    remote.after.append(cpu.close)  # (closed once the slots, which share it, have stopped)
    try:
        started = remote.start()
    except BaseException:
        remote.close()
        raise
    return [], f"{notice}; {started}", remote


def dispatcher_summary(dispatcher, summary: Summary) -> None:
    """The dispatcher's rows (per device slot, per worker; none for this process's chain); the align stage is
    its busy time (the workers', the slots', this process's aligning threads')."""
    summary.extra = dispatcher.rows()
    summary.stage_seconds["align"] = sum(w.busy for w in dispatcher.stats.values())


_END = object()


def in_order(items, submit, full):
    """(item, handle, waiting) for each of items, in their order, once enough are in flight: submit(item)
    starts an item and returns its handle (a future, a function to wait on); an item is given out once
    full(pending) says so (pending: a deque of the (item, handle) started and not yet given out, the item
    submitted last at its end), and every one at the end; waiting: how many are still in flight then. The
    window every runner keeps (batches, text chunks, record pairs)."""
    pending: collections.deque = collections.deque()
    items = iter(items)
    while True:
        while pending and full(pending):  # (asked again before waiting for the next item)
            done, handle = pending.popleft()
            yield done, handle, len(pending)
        item = next(items, _END)
        if item is _END:
            break
        pending.append((item, submit(item)))
    while pending:
        done, handle = pending.popleft()
        yield done, handle, len(pending)


def _verify(batch, res, checker, cfg, fraction: float, summary: Summary) -> None:
    """Score a random fraction of the pairs again with checker (engines.check: a library other than the
    engines'), and check their CIGARs (check.cigar_faults); count the pairs whose score agrees and whose
    CIGAR is an alignment of that score (optimal)."""
    from .engines.check import cigar_faults

    rng = np.random.default_rng(int(batch.index[0]) if batch.n else 0)
    idx = np.nonzero((rng.random(batch.n) < fraction) & (res.status == OK))[0]
    if len(idx) == 0:
        return
    want = checker.scores(batch.take(idx), cfg)
    ok = want == res.score[idx]
    if res.has_cigar:
        faults = cigar_faults(batch, res, idx, cfg)
        summary.verified_cigar_faults += int(faults.sum())
        ok &= ~faults
    summary.verified += len(idx)
    summary.verified_optimal += int(ok.sum())


def failure_note(batch, res, row: int) -> str:
    """'pair N (query name): reason' of a failed row (N counted from 1 in the input; no name where the batch
    has none)."""
    name = f" ({batch.q_names[row]})" if row < len(batch.q_names) else ""
    return f"pair {int(batch.index[row]) + 1}{name}: {res.reason.get(row, 'failed')}"


def stream(batches, dispatcher, cfg, out, summary: Summary, progress, verify: float = 0.0, checker=None) -> None:
    """Align an iterable of PairBatches (or a ReadAhead already reading them) through the dispatcher
    (dispatch.py: this process's chain, this host's devices, a Dask cluster) and hand each result, in order,
    to out.submit(batch, res, done(lines)); the batches are produced in a reader thread (two ahead),
    dispatcher.window batches align while the one before them is submitted, then out.flush(). Busy seconds
    of reading and writing, pairs, failures and route counts go to summary (the align stage's:
    dispatcher_summary); verify: the share of pairs whose scores checker (engines.check.CheckEngine) computes
    again."""
    stages = summary.stage_seconds
    ahead = batches if isinstance(batches, ReadAhead) else ReadAhead(batches, stages)

    def written(n: int) -> None:
        summary.written += n

    workers = dispatcher.window

    def full(pending) -> bool:
        """`workers` batches aligning, or the oldest one aligned while the next is still being read: it is
        written now, beside that reading (not after all of it). A batch read already goes to the engines
        first: written first, it would leave them a batch short while the oldest is written."""
        return len(pending) > workers or (pending[0][1].done() and not ahead.ready())

    try:
        # keep `workers` batches aligning while the one before them is written
        for batch, fut, _ in in_order(ahead, dispatcher.submit, full):
            res, counts = fut.result()
            batch.device = None  # aligned: its sequences on the GPU (fastx_device's) go once no host copy is due
            t0 = time.perf_counter()
            out.submit(batch, res, written)
            interrupt.phase("write")
            stages["write"] += time.perf_counter() - t0
            summary.pairs += batch.n
            summary.bases += batch.bases
            failed = np.flatnonzero(res.status != OK)
            summary.failed += len(failed)
            if len(failed) and not summary.first_failure:
                summary.first_failure = failure_note(batch, res, int(failed[0]))
            summary.add_counts(counts)
            if verify > 0:
                _verify(batch, res, checker, cfg, verify, summary)
            if progress:
                progress(summary.pairs, summary.bases)
        t0 = time.perf_counter()
        out.flush()
        stages["write"] += time.perf_counter() - t0
    except BaseException:
        getattr(out, "discard", lambda: None)()  # formatted text not to be written: its blocks freed
        raise
    finally:
        dispatcher.settle()  # its threads' work ended before the runner closes the engines
        ahead.close()
