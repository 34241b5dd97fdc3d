"""The worker side of cluster.py: what a Dask worker runs (imported there, and by the client when a
cluster run starts), and `gpualign worker` (serve): a Dask worker in this process whose engines are made
before it joins the cluster (Host: CPU engines forked, CUDA and every chain's kernels loaded and warmed on
each GPU it drives, devices.py), so that a run's first batch finds them ready."""

from __future__ import annotations

import dataclasses
import threading
import time

from distributed import WorkerPlugin, get_worker

from .config import AlignConfig, SearchConfig

START_EVENT = "gpualign-batch-start"

_chains: dict = {}  # one started engine chain per config, in this worker's process
_host = None  # `gpualign worker`'s Host (this process's engines, made before it joined), else None
WARM = ("edit", "affine")  # the metrics whose chains a Host makes and warms before it joins
_searches: dict = {}  # the latest search run's started engine (run id -> engine), in this worker's process
_search_lock = threading.Lock()  # one chunk at a time per engine (a worker may run several threads)


def align_batch(batch, cfg: AlignConfig, run: str, seq: int):
    """One batch through this worker's chain (built and started at its first batch). Logs START_EVENT
    first (the client counts batches that started twice). Returns (result, route counts, worker name,
    busy seconds)."""
    from .engines import select_engines
    from .route import run_chain

    worker = get_worker()
    worker.log_event(START_EVENT, {"run": run, "batch": seq})
    if _host is not None:
        t0 = time.perf_counter()
        res, counts = _host.align(batch, cfg)
        return res, counts, str(worker.name), time.perf_counter() - t0
    cfg = _forkable(cfg)
    chain = _chains.get(cfg)
    if chain is None:
        chain, _ = select_engines(cfg)
        for e in reversed(chain):  # a CPU chain's processes forked first (a GPU chain's rescue: at first use)
            e.start()
        chain[0].warm(cfg)
        _chains[cfg] = chain
    t0 = time.perf_counter()
    res, counts = run_chain(batch, chain, cfg)
    return res, counts, str(worker.name), time.perf_counter() - t0


def _forkable(cfg):
    """cfg (AlignConfig, SearchConfig), or with one CPU process where this worker's process is daemonic (a
    plain `dask worker`'s under its Nanny, unless distributed.worker.daemon is off): such a process may not
    start a process pool, so its CPU engines run without one (pairs: each batch in a forked child,
    interrupt.killable; search: in the worker's thread), as many batches at once as the worker's threads."""
    import multiprocessing

    if cfg.threads != 1 and multiprocessing.current_process().daemon:
        return dataclasses.replace(cfg, threads=1)
    return cfg


class CloseEngines(WorkerPlugin):
    """Closes the worker's engines when the worker closes: their CPU pools' processes would outlive it."""

    name = "gpualign-close-engines"

    def teardown(self, worker) -> None:
        while _chains:
            _, chain = _chains.popitem()
            for e in chain:
                e.close()
        _close_searches()


def genome_pair(qn: str, tn: str, q, t, prune: bool, cpu_method: str, cfg: AlignConfig, run: str, seq: int):
    """`gpualign genome`'s work for one record pair (q, t: the character rule applied) on this worker's
    GPU, or its CPU: (genome_pair.compute_pair's tuple, {}, worker name, busy seconds)."""
    from .genome_pair import compute_pair, use_gpu

    worker = get_worker()
    worker.log_event(START_EVENT, {"run": run, "batch": seq})
    t0 = time.perf_counter()
    if _host is not None:
        out = _host.genome(qn, tn, q, t, prune, cpu_method, cfg)
    else:
        out = compute_pair(qn, tn, q, t, cfg, use_gpu(cfg.device), prune, cpu_method)
    return out, {}, str(worker.name), time.perf_counter() - t0


def search_chunk(pats, chunk, cfg: SearchConfig, run: str, seq: int):
    """`gpualign search`'s candidate scan of one text chunk (search/text.py's Chunk) by this worker's search
    engine, built and started at the run's first chunk (an earlier run's engine closed then). Logs START_EVENT
    first. Returns (Cands, {engine name: 1}, worker name, busy seconds)."""
    from .search.engines import make_engine

    worker = get_worker()
    worker.log_event(START_EVENT, {"run": run, "batch": seq})
    if _host is not None and _host.ids and cfg.device != "cpu":  # its GPUs, a search engine on each
        t0 = time.perf_counter()
        cands, counts = _host.scan(pats, chunk, cfg, run)
        return cands, counts, str(worker.name), time.perf_counter() - t0
    if _host is not None:  # a `gpualign worker` without GPUs: the CPU engine
        cfg = dataclasses.replace(cfg, device="cpu")
    cfg = _forkable(cfg)
    with _search_lock:
        engine = _searches.get(run)
        if engine is None:
            _close_searches()
            engine = make_engine(pats, cfg, None)
            engine.start()
            _searches[run] = engine
        t0 = time.perf_counter()
        cands = engine.search(chunk)
    return cands, {engine.name: 1}, str(worker.name), time.perf_counter() - t0


def _close_searches() -> None:
    while _searches:
        _searches.popitem()[1].close()


class Host:
    """The engines of a `gpualign worker` process: the CPU engines (WFA2-lib, parasail) forked once with
    `threads` processes each, and with GPUs (gpus: --gpus's value, None for none) a devices.DeviceSet per
    engine chain (one per distinct chain select_engines gives: edit, affine, general scoring), each slot's
    chain started and warmed; WARM's are made by start(), the others at their first batch. Batches of any
    run use them (their cfg is given per call: engines take it per batch). `genome` record pairs and `search`
    chunks are dealt to the GPUs too (genome: a leaf chain per slot; search: the run's engines per slot)."""

    def __init__(self, gpus: str | None, threads: int):
        self.gpus, self.threads = gpus, threads
        self.ids: list = []
        self.cpu: dict = {}  # engine class name -> its started CPU engine
        self.sets: dict = {}  # chain's engine class names (or "genome" and distance_only) -> started DeviceSet
        self.search: tuple = (None, None)  # (run id, started DeviceSet of its search engines): the latest run's
        self.lock = threading.Lock()

    def start(self) -> str:
        """Everything made (the CPU engines first: their processes fork before CUDA starts); a notice line."""
        from .engines import CpuEngine
        from .engines.cpu_dp import CpuDpEngine

        for cls in (CpuEngine, CpuDpEngine):
            if cls.available():
                engine = self.cpu[cls.__name__] = cls(self.threads)
                engine.start()
        if self.gpus:
            from .devices import present

            self.ids = present(self.gpus)
            for metric in WARM:
                self._device_set(AlignConfig(metric=metric, device="gpu", threads=self.threads))
        where = f"{len(self.ids)} GPU slot(s) ({', '.join(map(str, self.ids))})" if self.ids else "the CPU"
        return f"engines ready on {where}, CPU engines with {self.threads} process(es) each"

    @property
    def slots(self) -> int:
        """Batches this host takes at once: its device sets' window (each GPU's running batches and one more),
        or two on the CPU."""
        return max([2, *(ds.window for ds in self.sets.values())])

    def _cpu_for(self, cfg: AlignConfig):
        from .engines import CpuEngine
        from .engines.cpu_dp import CpuDpEngine

        name = (CpuDpEngine if cfg.general else CpuEngine).__name__
        if name not in self.cpu:
            from .errors import DeviceError

            raise DeviceError(f"this worker has no {name} (its library is not installed)")
        return self.cpu[name]

    def _device_set(self, cfg: AlignConfig):
        from .devices import chain_set
        from .engines import select_engines

        key = tuple(type(e).__name__ for e in select_engines(cfg)[0])
        return self._made(key, lambda: chain_set(self.ids, cfg, self._cpu_for(cfg)))

    def _made(self, key, make):
        """self.sets[key], made by make() and started on first use."""
        with self.lock:
            ds = self.sets.get(key)
            if ds is None:
                ds = make()
                ds.start()
                self.sets[key] = ds
        return ds

    def genome(self, qn, tn, q, t, prune: bool, cpu_method: str, cfg: AlignConfig):
        """compute_pair's tuple for one `genome` record pair: on one of the GPUs (a leaf chain kept per slot),
        or on the CPU without GPUs or with cfg's --device cpu."""
        from .genome_pair import compute_pair, device_set, on_slot

        if not self.ids or cfg.device == "cpu":
            return compute_pair(qn, tn, q, t, cfg, False, prune, cpu_method)
        ds = self._made(("genome", cfg.distance_only), lambda: device_set(cfg, self.ids))
        return ds.submit_task(on_slot, qn, tn, q, t, cfg, prune, cpu_method).result()[0]

    def scan(self, pats, chunk, cfg, run: str):
        """(Cands, counts) of a `search` run's text chunk on one of the GPUs: the run's search engines made on
        each at its first chunk (the previous run's closed then)."""
        from .search.engines import device_set, scan_on

        with self.lock:
            if self.search[0] != run:
                old = self.search[1]
                self.search = (run, None)
                if old is not None:
                    old.close()
                ds = device_set(pats, cfg, self.ids)
                ds.start()
                self.search = (run, ds)
            ds = self.search[1]
        return ds.submit_task(scan_on, chunk, pairs=int(chunk.length.sum())).result()

    def align(self, batch, cfg: AlignConfig):
        """(AlignBatch, route counts) of a batch under cfg: on the GPUs unless cfg says the CPU or there are
        none."""
        from .route import run_chain

        if not self.ids or cfg.device == "cpu":
            return run_chain(batch, [self._cpu_for(cfg)], cfg)
        return self._device_set(cfg).submit(batch, cfg).result()

    def close(self) -> None:
        for ds in [*self.sets.values(), self.search[1]]:
            if ds is not None:
                ds.close()
        self.sets.clear()
        self.search = (None, None)
        for engine in self.cpu.values():
            engine.close()
        self.cpu.clear()


def serve(scheduler: str, gpus: str | None, threads: int, name: str | None, notice) -> None:
    """`gpualign worker`: make this process's engines (Host), then join the Dask cluster at scheduler as one
    worker taking Host.slots batches at once, until the cluster or a signal ends it. notice(text): what is
    said on stderr."""
    import asyncio
    import tempfile

    from distributed import Worker

    from .cluster import BATCHES_RESOURCE, connect_timeout, quiet_dask
    from .errors import DeviceError

    global _host
    host = Host(gpus, threads)
    scratch = tempfile.mkdtemp(prefix="gpualign-worker-")
    try:
        notice(host.start())
        _host = host
        quiet_dask(scratch)

        async def run() -> None:
            try:
                worker = await Worker(scheduler, nthreads=host.slots, name=name, dashboard=False,
                                      death_timeout=connect_timeout(), local_directory=scratch,
                                      resources={BATCHES_RESOURCE: host.slots})  # (the client's window)
            except (OSError, asyncio.TimeoutError) as e:
                raise DeviceError(f"--scheduler {scheduler}: cannot connect ({e})") from None
            notice(f"joined {scheduler} as {worker.name}, {host.slots} batch(es) at once")
            try:
                await worker.finished()
            finally:
                await worker.close()

        asyncio.run(run())
    finally:
        _host = None
        host.close()
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
