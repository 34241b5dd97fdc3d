"""Batches on a Dask cluster: `--scheduler ADDRESS` (an existing cluster whose workers have gpualign
installed) or `--cpu-workers N` (a local cluster of CPU workers: the same path without a GPU, as CI tests
it). `--gpus` (this host's GPUs) is not Dask: devices.py drives them from this process; ClusterSpec carries
it to the runners with the rest.

The client reads the input and sends each PairBatch, without its names, to a worker: workers need no
access to the input files. Each worker (cluster_worker.py) builds its engine chain once, closes it when
the worker closes, and aligns the batches it is given;
the results come back through stages.stream in input order, to the same writers, so the output is the
same bytes as a one-process run. At most `window` batches are in flight (two per worker; a `gpualign worker`
says how many it takes: cluster_worker.Host): bounded
memory. A worker that dies takes its batches with it and Dask runs them elsewhere (a batch is given up
after RETRIES worker deaths); each batch logs an event when it starts, so the summary counts the batches
that started more than once. Units are whole batches (2^25 bases by default, far more than Dask's ~1 ms
per task). `search` sends text chunks instead (cluster_worker.search_chunk): only the candidate scan runs on the
workers, the hits are aligned and written here.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
import uuid
import warnings
from dataclasses import dataclass, field

from . import interrupt
from .config import AlignConfig, SearchConfig, usable_cores
from .dispatch import Dispatcher
from .errors import ConfigError, DeviceError

RETRIES = 3  # worker deaths a batch may survive (Dask's allowed failures per task)
CPU_WORKERS_MAX = 1024  # --cpu-workers at most (each a process of its own)
# a scheduler's address as distributed takes it: [scheme://]host:port, host a name, an IPv4 or an [IPv6]
ADDRESS = re.compile(r"(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")
BATCHES_RESOURCE = "gpualign-batches"  # a `gpualign worker`'s Dask resource: the batches it takes at once
CONNECT_TIMEOUT_ENV = "GPUALIGN_CONNECT_TIMEOUT"  # seconds to reach --scheduler's cluster (default 10)


def connect_timeout() -> float:
    """$GPUALIGN_CONNECT_TIMEOUT in seconds (> 0), else 10: how long --scheduler keeps trying to connect."""
    raw = os.environ.get(CONNECT_TIMEOUT_ENV, "10")
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"${CONNECT_TIMEOUT_ENV} must be a number of seconds > 0 (got {raw!r})")
    return seconds


def quiet_dask(scratch: str | None = None) -> str | None:
    """Dask set up for gpualign in this process (a client's, or `gpualign worker`'s): its log lines are not for
    our stderr (its failures reach us as exceptions), a batch may be given up after RETRIES worker deaths,
    workers may fork (the CPU engine's pool), every batch's start event kept; scratch: its temporary
    directory. Processes started from here inherit the config. Returns the temporary directory it had (for
    ClusterAligner.close to set back once scratch is removed)."""
    import logging

    import dask

    before = dask.config.get("temporary-directory", None)

    # a batch travels inside its task (not scattered): when a worker dies the scheduler still holds it
    warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
    # the scheduler's HTTP server (health checks; no dashboard) on a port taken by another Dask process
    warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)
    dask.config.set({"distributed.scheduler.allowed-failures": RETRIES,
                     "distributed.worker.daemon": False,  # workers may fork the CPU engine's pool
                     "distributed.admin.low-level-log-length": 1 << 20,  # every batch's start event
                     "logging.distributed": "critical", "temporary-directory": scratch})
    # distributed gives some of its loggers their own level at import (distributed.client: warning,
    # its "Couldn't gather ... rescheduling" on an interrupt): each one is quietened, not only the parent
    for name in [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] == "distributed"]:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    # the local cluster's worker processes are spawned: distributed sets up their logging as it is
    # imported there, from the environment, before any config of ours reaches them
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "critical")
    return before


@dataclass(frozen=True)
class ClusterSpec:
    gpus: str | None = None  # "N", "all" or "0,2,3": this host's GPUs from this process (devices.py)
    scheduler: str | None = None  # tcp://host:8786: an existing cluster
    cpu_workers: int = 0  # a LocalCluster of this many CPU workers

    @property
    def wanted(self) -> bool:
        """Whether Dask workers align (--scheduler, --cpu-workers): work leaves this process."""
        return bool(self.scheduler or self.cpu_workers)

    def validate(self, device: str) -> "ClusterSpec":
        chosen = [x for x in (self.gpus and "--gpus", self.scheduler and "--scheduler",
                              self.cpu_workers and "--cpu-workers") if x]
        if len(chosen) > 1:
            raise ConfigError(f"choose one of {', '.join(chosen)}")
        if self.scheduler is not None:
            m = ADDRESS.fullmatch(self.scheduler)
            if m is None or not 1 <= int(m.group(1)) <= 65535:
                raise ConfigError(f"--scheduler must be an address [tcp://]host:port (got {self.scheduler!r})")
        if not 0 <= self.cpu_workers <= CPU_WORKERS_MAX:
            raise ConfigError(f"--cpu-workers must be 0 (none) to {CPU_WORKERS_MAX} (got {self.cpu_workers})")
        if self.gpus is not None:
            from .devices import parse

            parse(self.gpus)
        if self.gpus and device == "cpu":
            raise ConfigError("--gpus cannot run with --device cpu (use --cpu-workers for CPU workers)")
        if self.cpu_workers and device == "gpu":
            raise ConfigError("--cpu-workers runs the CPU engine: not with --device gpu")
        return self


@dataclass
class _Worker:
    pairs: int = 0
    batches: int = 0
    busy: float = 0.0


class _Result:
    """A batch's future: result() -> (AlignBatch, counts), the worker's share recorded (n: pairs, or bases)."""

    def __init__(self, fut, n: int, stats: dict):
        self.fut, self.n, self.stats = fut, n, stats

    def done(self) -> bool:
        return self.fut.done()

    def result(self):
        try:
            res, counts, name, busy = self.fut.result()
        except Exception as err:  # noqa: BLE001 - a batch given up by Dask (its workers kept dying)
            if type(err).__name__ != "KilledWorker":
                raise
            raise DeviceError(f"a batch was given up after {RETRIES} worker deaths ({err})") from None
        w = self.stats.setdefault(name, _Worker())
        w.pairs += self.n
        w.batches += 1
        w.busy += busy
        self.fut.release()
        return res, counts


@dataclass
class ClusterAligner(Dispatcher):
    """The client side: start (or join) the cluster, submit batches, report per worker, shut down."""

    in_process = False  # (its work leaves the process)

    spec: ClusterSpec
    cfg: AlignConfig | SearchConfig  # given to the workers with their threads (and device) set at start()
    units: tuple = ("pairs", "batches")  # what rows() counts per worker (search: bases, chunks)
    client: object = None
    cluster: object = None
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    stats: dict = field(default_factory=dict)
    starts: dict = field(default_factory=dict)  # this run's batches' start events as they came (batch -> count)
    seq: int = 0
    workers: int = 1
    slots: int = 0  # batches the workers take at once, together (two each; a `gpualign worker` says its own)
    scratch: str = ""
    loop_runner: object = None
    _restore_spawn: object = field(default=lambda: None, repr=False)  # spawn_ignoring_sigint's undo
    _temporary_before: str | None = None  # Dask's temporary directory before start() set scratch

    def start(self) -> str:
        """Connect; returns a notice line."""
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise DeviceError("--scheduler/--cpu-workers need Dask's distributed: pip install distributed") from None
        s = self.spec
        if not s.scheduler:  # the local cluster's scratch space: removed at close() or by an interrupt
            self.scratch = tempfile.mkdtemp(prefix=interrupt.temp_prefix() + "dask-")
            interrupt.track(self.scratch)
            self._restore_spawn = interrupt.spawn_ignoring_sigint(self.scratch)  # its workers ignore Ctrl-C
        self._temporary_before = quiet_dask(self.scratch or None)
        host_cores = usable_cores()
        if s.scheduler:
            try:
                self.client = Client(s.scheduler, timeout=connect_timeout())
            except OSError as e:
                raise DeviceError(f"--scheduler {s.scheduler}: cannot connect ({e})") from None
            threads = self.cfg.threads  # 0: every core of the worker's host
            what = f"Dask cluster at {s.scheduler}"
        else:
            self.cluster = LocalCluster(n_workers=s.cpu_workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None, local_directory=self.scratch, loop=self._loop())
            self.client = Client(self.cluster)
            threads = max(1, (self.cfg.threads or host_cores) // s.cpu_workers)  # -t shared by the workers
            what = f"{s.cpu_workers} CPU worker(s) (Dask, this host)"
        from .cluster_worker import START_EVENT, CloseEngines

        # (before any batch: the scheduler keeps only its last events of a topic, 1,000 unless it was told)
        self.client.subscribe_topic(START_EVENT, self._started)
        self.client.register_plugin(CloseEngines())  # the workers' engines closed with them
        self.client.wait_for_workers(1, timeout=60)
        info = self.client.scheduler_info()["workers"]
        self.workers = max(1, len(info))
        self.slots = sum(int((w.get("resources") or {}).get(BATCHES_RESOURCE, 2)) for w in info.values())
        device = "cpu" if s.cpu_workers else self.cfg.device
        self.cfg = dataclasses.replace(self.cfg, threads=threads, device=device)
        return f"engines on {what}, {self.workers} worker(s) up, {self.units[1]} sent by this client"

    def _loop(self):
        """The local cluster's event loop, in a thread started with SIGINT blocked: the worker processes
        it spawns inherit that, so a Ctrl-C reaches only this process, which ends them (interrupt.py)."""
        from distributed.utils import LoopRunner

        with interrupt.sigint_blocked():
            self.loop_runner = LoopRunner()
            self.loop_runner.start()
        return self.loop_runner.loop

    @property
    def window(self) -> int:
        """Batches in flight: two per worker, or a `gpualign worker`'s own count (its BATCHES_RESOURCE: the
        batches its GPUs run at once and one more each)."""
        return max(2 * self.workers, self.slots)

    def submit(self, batch) -> _Result:
        """A PairBatch to a worker: result() -> (AlignBatch, route counts)."""
        from .cluster_worker import align_batch

        bare = dataclasses.replace(batch, q_names=[], t_names=[], q_quals=[], meta=None, device=None)
        return self.submit_task(align_batch, bare, self.cfg, pairs=batch.n)

    def submit_task(self, fn, *args, pairs: int = 1) -> _Result:
        """fn(*args, cfg, run, seq) on a worker (a cluster_worker function: it logs its start and returns
        (value, counts, worker name, busy seconds)): result() -> (value, counts)."""
        fut = self.client.submit(fn, *args, self.run, self.seq, pure=False, key=f"gpualign-{self.run}-{self.seq}")
        self.seq += 1
        return _Result(fut, pairs, self.stats)

    def _started(self, event) -> None:
        """A start event (timestamp, msg) as the scheduler passes it on (on the client's event loop)."""
        msg = event[1]
        if isinstance(msg, dict) and msg.get("run") == self.run:
            self.starts[msg["batch"]] = self.starts.get(msg["batch"], 0) + 1

    def retried(self) -> int:
        """Batches of this run that started more than once (their worker died): the events as they came, or
        the scheduler's log of them where it holds more (an event still on its way at the end)."""
        from .cluster_worker import START_EVENT

        logged: dict = {}
        for _, msg in self.client.get_events(START_EVENT):
            if isinstance(msg, dict) and msg.get("run") == self.run:
                logged[msg["batch"]] = logged.get(msg["batch"], 0) + 1
        came = dict(self.starts)
        return sum(1 for b in came.keys() | logged.keys() if max(came.get(b, 0), logged.get(b, 0)) > 1)

    def rows(self) -> list[tuple[str, str]]:
        n, per = self.units
        rows = [(f"worker:{name}", f"{w.pairs} {n}, {w.batches} {per}, {w.busy:.3f} s busy")
                for name, w in sorted(self.stats.items())]
        return rows + [("retried_batches", str(self.retried()))]

    def close(self) -> None:
        """The client's futures released (their batches cancelled), a cluster we started shut down."""
        try:
            if self.client is not None:
                self.client.close()
        finally:
            try:
                if self.cluster is not None:
                    self.cluster.close()
            finally:
                if self.scratch:
                    self._restore_spawn()
                    shutil.rmtree(self.scratch, ignore_errors=True)
                    interrupt.untrack(self.scratch)
                    import dask

                    # (a later cluster of this process made its scratch in the removed one, which stayed)
                    dask.config.set({"temporary-directory": self._temporary_before})
                if self.loop_runner is not None:  # (the cluster's event loop, once the cluster is closed)
                    self.loop_runner.stop()
