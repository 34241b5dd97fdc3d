"""The worker side of cluster.py: what a Dask worker runs (imported there, and by the client when a
cluster run starts)."""

from __future__ import annotations

import threading
import time

from distributed import WorkerPlugin, get_worker

from .config import AlignConfig, SearchConfig

START_EVENT = "gpualign-batch-start"

_chains: dict = {}  # one started engine chain per config, in this worker's process
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
    chain = _chains.get(cfg)
    if chain is None:
        chain, _ = select_engines(cfg)
        for e in reversed(chain):  # the CPU engine's processes forked before the GPU is used
            e.start()
        chain[0].warm(cfg)
        _chains[cfg] = chain
    t0 = time.perf_counter()
    res, counts = run_chain(batch, chain, cfg)
    return res, counts, str(worker.name), time.perf_counter() - t0


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
    GPU, or its CPU: (genome.compute_pair's tuple, {}, worker name, busy seconds)."""
    from .genome import compute_pair, use_gpu

    worker = get_worker()
    worker.log_event(START_EVENT, {"run": run, "batch": seq})
    t0 = time.perf_counter()
    out = compute_pair(qn, tn, q, t, cfg, use_gpu(cfg.device), prune, cpu_method)
    return out, {}, str(worker.name), time.perf_counter() - t0


def search_chunk(pats, chunk, cfg: SearchConfig, run: str, seq: int):
    """`gpualign search`'s candidate scan of one text chunk (search/text.py's Chunk) by this worker's search
    engine, built and started at the run's first chunk (an earlier run's engine closed then). Logs START_EVENT
    first. Returns (Cands, {engine name: 1}, worker name, busy seconds)."""
    from .search.run import make_engine

    worker = get_worker()
    worker.log_event(START_EVENT, {"run": run, "batch": seq})
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
