"""This host's GPUs driven from this process (`--gpus N|all|0,2,3`): one slot per device named (a device
named twice, `--gpus 0,0`, is two slots on one GPU: how one-GPU machines test the dealing), each with its
own threads (that device current on them: its CUDA streams, memory pool and kernels) and its own engines,
made there by the runner's open(device) and closed by its close(state).

Work is dealt as slots free up (to the live slot with the fewest tasks queued or running); results are
awaited by the runner in its own order (stages.stream: input order), so the output is the same bytes
as one GPU's. Nothing is serialised and no process is started: the runners' CPU engine (the rescue
pool, sized to the host) is shared by the slots.

A slot whose device fails (a CUDA error other than out of memory, which the engines degrade on their own;
or DeviceLost, injected for tests through $GPUALIGN_FAIL_DEVICE) leaves the run: its task and the ones
queued for it go to the other slots, and once no device is left to the CPU (open(None)). rows() says so.
"""

from __future__ import annotations

import collections
import os
import re
import threading
import time
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field

import numpy as np

from . import interrupt
from .dispatch import Dispatcher
from .errors import ConfigError, DeviceError

FAIL_ENV = "GPUALIGN_FAIL_DEVICE"  # "SLOT:TASK[,...]": slot SLOT's TASK-th task (from 0) fails as a lost device
STOP_WAIT = 10.0  # seconds close() waits for a slot's running task before closing its engines


class DeviceLost(DeviceError):
    """A device that failed mid-run (what a CUDA error other than out of memory is taken for)."""


def parse(text: str) -> tuple:
    """--gpus's value checked: ("count", n), ("all",) or ("ids", (i, j, ...)) (a comma-separated list). One
    device other than the first: CUDA_VISIBLE_DEVICES=3 with --gpus 1."""
    if text == "all":
        return ("all",)
    if re.fullmatch(r"[0-9]+", text) and int(text) >= 1:
        return ("count", int(text))
    parts = text.split(",")
    if len(parts) > 1 and all(re.fullmatch(r"[0-9]+", p) for p in parts):
        return ("ids", tuple(int(p) for p in parts))
    raise ConfigError(f"--gpus must be a number >= 1, 'all' or a list of device numbers such as 0,2 (got {text!r})")


def device_ids(text: str, present: int) -> list[int]:
    """The device numbers --gpus names on a host with `present` devices."""
    kind = parse(text)
    if present < 1:
        raise DeviceError("--gpus: no CUDA device on this host")
    if kind[0] == "all":
        return list(range(present))
    if kind[0] == "count":
        if kind[1] > present:
            raise ConfigError(f"--gpus {kind[1]}: this host has {present} GPU(s)")
        return list(range(kind[1]))
    missing = sorted({i for i in kind[1] if i >= present})
    if missing:
        raise ConfigError(f"--gpus {text}: no device {missing[0]} (this host has {present} GPU(s), 0 to {present - 1})")
    return list(kind[1])


def present(gpus: str) -> list[int]:
    """The device numbers --gpus names on this host (DeviceError without a usable GPU)."""
    from .gpu.kernels import gpu_status

    ok, what = gpu_status()
    if not ok:
        raise DeviceError(f"--gpus: no usable GPU ({what})")
    import cupy

    return device_ids(gpus, cupy.cuda.runtime.getDeviceCount())


def on_device_zero(text: str | None) -> bool:
    """Whether --gpus names device 0 alone (once or more): what a batch parsed on the GPU (device 0) may go to."""
    if not text:
        return False
    kind = parse(text)
    return kind == ("count", 1) or (kind[0] == "ids" and set(kind[1]) == {0})


def batches_on_gpu(cfg, cluster) -> bool:
    """Whether this process may make its batches' sequences on the GPU (device 0) for its engines (cfg: an
    AlignConfig; cluster: a cluster.ClusterSpec or None): it aligns them here, on device 0 alone, and a GPU is
    wanted (--device gpu) or there (auto: the driver made a context)."""
    import importlib.util

    from . import driver

    here = cluster is None or (not cluster.wanted and (not cluster.gpus or on_device_zero(cluster.gpus)))
    return (here and cfg.device_parse and cfg.device != "cpu" and importlib.util.find_spec("cupy") is not None
            and (cfg.device == "gpu" or driver.context_made()))


def is_device_failure(err: BaseException) -> bool:
    """A failure of the device rather than of the work: DeviceLost, or a CUDA runtime/driver error other than
    out of memory (the engines halve their batches on that themselves)."""
    if isinstance(err, DeviceLost):
        return True
    if type(err).__name__ not in ("CUDARuntimeError", "CUDADriverError"):
        return False
    return "out of memory" not in str(err).lower() and "OUT_OF_MEMORY" not in str(err)


def _injected() -> set:
    """The (slot, task) pairs $GPUALIGN_FAIL_DEVICE names (tests: a device lost there)."""
    raw = os.environ.get(FAIL_ENV, "")
    try:
        return {(int(a), int(b)) for a, b in (x.split(":") for x in raw.split(",") if x)}
    except ValueError:
        raise ConfigError(f"${FAIL_ENV} must be SLOT:TASK[,SLOT:TASK...] (got {raw!r})") from None


@dataclass
class _Task:
    fn: object
    args: tuple
    n: int  # what rows() counts (pairs, bases)
    future: Future = field(default_factory=Future)
    begun: bool = False  # its future set running (by the slot that took it first)
    order: int = 0  # the tasks its slot had begun before it


def _cancel(task: _Task) -> None:
    """A task that will not run: its future cancelled, or failed with CancelledError if it had begun (re-dealt)."""
    if not task.future.cancel() and not task.future.done():
        task.future.set_exception(CancelledError())


@dataclass
class Slot:
    index: int
    device: int | None  # None: the CPU, once every device has left
    threads: int = 1
    state: object = None  # open(device)'s value: the engines the tasks run on
    queue: collections.deque = field(default_factory=collections.deque)
    running: int = 0
    started: int = 0  # tasks begun (the injected failure's count)
    units: int = 0
    tasks: int = 0
    busy: float = 0.0
    lost: str = ""  # why it left the run
    workers: list = field(default_factory=list)

    name: str = ""  # gpu<N> (a device named again: gpu<N>#2, ...), or cpu

    @property
    def load(self) -> int:
        return len(self.queue) + self.running


def on_device(device: int | None):
    """A context in which `device` is this thread's current CUDA device (nothing for the CPU)."""
    import contextlib

    if device is None:
        return contextlib.nullcontext()
    import cupy

    return cupy.cuda.Device(device)


class DeviceSet(Dispatcher):
    """Tasks on several devices of this host, from this process. open(device) -> state makes a slot's engines
    (on one of its threads, the device current; device None: the CPU's, after every device left) and
    close(state) ends them; concurrent(state): tasks a slot runs at once (threads). submit_task(fn, *args)
    runs fn(state, *args) -> (value, counts) on a slot and returns a Future of that; submit(batch) aligns a
    PairBatch through a slot's chain (state: an engine chain, route.run_chain; its upload started now)."""

    def __init__(self, ids: list[int], open, close, cfg=None, units: tuple = ("pairs", "batches"),
                 concurrent=lambda state: 1, context=None):
        self.slots = [Slot(i, d, name=f"gpu{d}" + (f"#{ids[:i].count(d) + 1}" if ids.count(d) > 1 else ""))
                      for i, d in enumerate(ids)]
        self._open, self._close, self._concurrent = open, close, concurrent
        self.cfg, self.units = cfg, units
        self._on = context or on_device  # context(device): that device current in it (tests emulate one)
        self._lock = threading.Condition()
        self._stopped = False
        self._fail = _injected()
        self.cpu: Slot | None = None
        self.after: list = []  # what close() closes once the slots have stopped (the CPU engine they share)

    # -- start and stop ---------------------------------------------------------------------------------
    def start(self) -> str:
        """Every slot's engines made at once (one thread each); returns a notice line. A slot that cannot
        start leaves the run; none starting raises its error."""
        errors: dict = {}

        def opened(slot: Slot) -> None:
            try:
                with self._on(slot.device):
                    slot.state = self._open(slot.device)
                slot.threads = max(1, int(self._concurrent(slot.state)))
            except BaseException as e:  # noqa: BLE001 - reported below
                errors[slot.index] = e

        starters = [threading.Thread(target=opened, args=(s,), name=f"gpualign-open-{s.index}") for s in self.slots]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        for slot in self.slots:
            err = errors.get(slot.index)
            if err is not None and not is_device_failure(err):
                raise err
            if err is not None:
                slot.lost = f"did not start ({err})"
        live = self.live()
        if not live:
            raise DeviceError(f"--gpus: no device started ({self.slots[0].lost})")
        for slot in live:
            self._spawn(slot)
        names = ", ".join(s.name for s in live)
        return f"{len(live)} device slot(s) in this process ({names})"

    def _spawn(self, slot: Slot) -> None:
        for k in range(slot.threads):
            t = threading.Thread(target=self._work, args=(slot,), daemon=True, name=f"gpualign-{slot.name}-{k}")
            slot.workers.append(t)
            t.start()

    @property
    def engines(self):
        """The first live slot's state (search: the engine whose hits' aligner runs beside the slots)."""
        live = self.live()
        return live[0].state if live else None

    def live(self) -> list[Slot]:
        return [s for s in self.slots if not s.lost]

    @property
    def window(self) -> int:
        """Tasks in flight: each slot's running ones and one more queued for it (taken the moment it frees)."""
        live = self.live() or ([self.cpu] if self.cpu else [])
        return max(1, sum(s.threads + 1 for s in live))

    def close(self) -> None:
        """Tasks not done cancelled (queued ones, and re-dealt ones already begun: their futures fail with
        CancelledError), the slots' threads told to stop (each ends after its task: waited for up to STOP_WAIT
        seconds, not after a signal), then every slot's engines closed and what self.after holds; the first
        error of those raised once all are closed."""
        with self._lock:
            self._stopped = True
            for slot in self._all():
                while slot.queue:
                    _cancel(slot.queue.popleft())
            self._lock.notify_all()
        wait = STOP_WAIT if interrupt.signalled() is None else 0.0
        deadline = time.monotonic() + wait
        for slot in self._all():
            for t in slot.workers:
                if t is not threading.current_thread():
                    t.join(max(0.0, deadline - time.monotonic()))
        first = None
        running = any(t.is_alive() for slot in self._all() for t in slot.workers)
        # (none closed while a task still runs: a genome pair shared by the slots uses the others' engines)
        closers = [] if running else [(slot, slot.state) for slot in self._all() if slot.state is not None]
        for slot, state in closers:
            slot.state = None
            try:
                with self._on(slot.device):
                    self._close(state)
            except Exception as err:  # noqa: BLE001 - a lost device's engines may not close cleanly
                if not slot.lost and first is None:
                    first = err
        while self.after:
            try:
                self.after.pop(0)()
            except Exception as err:  # noqa: BLE001 - raised once everything is closed
                first = first or err
        if first is not None:
            raise first

    def _all(self) -> list[Slot]:
        return self.slots + ([self.cpu] if self.cpu else [])

    def host_allocator(self):
        """alloc(n, dtype) for the batches' sequence buffers: page-locked (engines.host_allocator of the first
        live slot's chain), made with that slot's device current (no context on a device not named), or numpy's."""
        from .engines import host_allocator

        live = self.live()
        alloc = host_allocator(live[0].state if live else [])
        if not live or alloc is np.empty:
            return alloc
        device = live[0].device

        def on_first(count: int, dtype=np.uint8):
            with self._on(device):
                return alloc(count, dtype)

        return on_first

    # -- the work ---------------------------------------------------------------------------------------
    def submit_task(self, fn, *args, pairs: int = 1, ahead=None) -> Future:
        """fn(state, *args) -> (value, counts) on the least busy live slot; ahead(state), if given, runs now
        on this thread with that slot's device current (a batch's upload started)."""
        task = _Task(fn, args, pairs)
        with self._lock:
            slot = self._least()
            slot.queue.append(task)
            self._lock.notify_all()
        # the upload is started after the task is queued, so that an idle slot takes the task at once (then,
        # as a rule, uploading the batch itself: the head start is one spare upload, which the engine's staging
        # drops after AHEAD more batches)
        if ahead is not None and slot.device is not None:
            try:
                with self._on(slot.device):
                    ahead(slot.state)
            except Exception:  # noqa: BLE001 - only a head start: the task uploads it itself
                pass
        return task.future

    def submit(self, batch, cfg=None) -> Future:
        """A PairBatch through a slot's engine chain under cfg (default: self.cfg): result() -> (AlignBatch,
        route counts)."""
        from .route import prefetch, run_chain

        cfg = cfg or self.cfg
        return self.submit_task(lambda chain, b: run_chain(b, chain, cfg), batch, pairs=batch.n,
                                ahead=lambda chain: prefetch(batch, chain, cfg))

    def _least(self) -> Slot:
        live = self.live()
        if live:
            return min(live, key=lambda s: (s.load, s.index))
        if self.cpu is None:  # every device left: the rest on the CPU (open(None)'s error raised, none made)
            cpu = Slot(len(self.slots), None, name="cpu")
            cpu.state = self._open(None)
            self._spawn(cpu)
            self.cpu = cpu
        return self.cpu

    def _next(self, slot: Slot) -> _Task | None:
        with self._lock:
            while not slot.queue and not self._stopped and not slot.lost:
                self._lock.wait(0.5)
            if self._stopped or slot.lost or not slot.queue:
                return None
            task = slot.queue.popleft()
            task.order = slot.started
            slot.running += 1
            slot.started += 1
            return task

    def _work(self, slot: Slot) -> None:
        with self._on(slot.device):  # this thread's device for its life
            self._serve(slot)

    def _serve(self, slot: Slot) -> None:
        while True:
            task = self._next(slot)
            if task is None:
                return
            if not task.begun and not task.future.set_running_or_notify_cancel():
                with self._lock:
                    slot.running -= 1
                continue
            task.begun = True
            t0 = time.perf_counter()
            try:
                if (slot.index, task.order) in self._fail:
                    raise DeviceLost(f"{slot.name}: device lost ({FAIL_ENV} {slot.index}:{task.order})")
                value, counts = task.fn(slot.state, *task.args)
            except BaseException as err:  # noqa: BLE001 - a device failure is dealt again, the rest raised
                with self._lock:
                    slot.running -= 1
                if slot.device is not None and is_device_failure(err):
                    self._leave(slot, task, err)
                    return
                task.future.set_exception(err)
                continue
            with self._lock:
                slot.running -= 1
                slot.busy += time.perf_counter() - t0
                slot.units += task.n
                slot.tasks += 1
            task.future.set_result((value, counts))

    def states(self) -> list:
        """The live slots' states (open()'s values)."""
        return [s.state for s in self.live()]

    def drop(self, state, err: BaseException) -> None:
        """The live slot whose state this is leaves the run (its device failed under another slot's task, which
        shared it: genome_pair.on_slot); its queued tasks go to the others."""
        for slot in self.live():
            if slot.state is state:
                self._leave(slot, None, err)

    def _leave(self, slot: Slot, task: _Task | None, err: BaseException) -> None:
        """slot's device failed running task (or under another slot's: None): it leaves the run; task and the
        ones queued for it go to the others (in their order), or to the CPU once none is left."""
        with self._lock:
            if not slot.lost:
                slot.lost = str(err) or type(err).__name__
            orphans = [*([task] if task is not None else []), *slot.queue]
            slot.queue.clear()
            try:
                for t in orphans:  # (the same futures: the runner still waits on them)
                    if self._stopped:
                        _cancel(t)
                    else:
                        self._least().queue.append(t)
            except BaseException as e:  # noqa: BLE001 - no CPU engine to be had: the runner hears why
                for t in orphans:
                    if not t.future.done():
                        t.future.set_exception(e)
            self._lock.notify_all()

    # -- the summary ------------------------------------------------------------------------------------
    @property
    def stats(self) -> dict:
        return {s.name: s for s in self._all()}

    def rows(self) -> list[tuple[str, str]]:
        n, per = self.units
        rows = []
        for s in self._all():
            text = f"{s.units} {n}, {s.tasks} {per}, {s.busy:.3f} s busy"
            rows.append((f"device:{s.name}", text + (f"; left the run: {s.lost}" if s.lost else "")))
        return rows + [("devices_lost", str(sum(1 for s in self.slots if s.lost)))]


def chain_set(ids: list[int], cfg, cpu) -> DeviceSet:
    """A DeviceSet (not started) whose slots each align through an engine chain for cfg: select_engines' GPU
    engines, made, started and warmed on the slot, then cpu (a started CPU engine, shared by the slots; alone
    once every device has left the run)."""
    from .engines import select_engines

    def open_chain(device):
        if device is None:
            return [cpu]
        mine = [*select_engines(cfg)[0][:-1], cpu]
        for e in reversed(mine[:-1]):
            e.start()
        mine[0].warm(cfg)
        return mine

    def close_chain(chain):
        for e in chain[:-1]:
            e.close()

    return DeviceSet(ids, open_chain, close_chain, cfg, concurrent=lambda chain: chain[0].concurrent)
