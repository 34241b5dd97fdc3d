"""The search engines' contract (SearchEngine: what search/run.py, a --gpus device slot and a Dask worker call)
and which engine runs (engine_class, make_engine, remote_engine). The engines: search/gpu.py (Myers' bit-parallel
search with seed filters, CuPy) and search/cpu.py (sassy-rs in worker processes)."""

from __future__ import annotations

from .. import trace
from ..config import SearchConfig
from ..errors import DeviceError


class SearchEngine:
    """A search engine: the candidate end positions of every pattern-strand with <= k edits in a text chunk.
    Made by make(pats, cfg) (patterns.Patterns, a SearchConfig), then start() (worker processes, kernels);
    per chunk (text.Chunk) submit(chunk) starts its scan without waiting and collect(submitted) gives its
    hits.Cands (run.py submits a chunk before it collects the one before); search(chunk) does both; close()
    at the end, whatever happened. geometry(pats, k): the (context, gap) of the chunks it needs, known before
    it is made; aligner(): the hits' aligner to use beside it (None: hits.py's own)."""

    name = ""
    gpu = False

    @classmethod
    def make(cls, pats, cfg: SearchConfig) -> "SearchEngine":
        raise NotImplementedError

    @staticmethod
    def geometry(pats, k: int) -> tuple[int, int]:
        raise NotImplementedError

    def start(self) -> None:
        """Make what it runs on, before the first chunk."""

    def close(self) -> None:
        """Release what start() made (idempotent)."""

    def aligner(self):
        return None

    def submit(self, chunk):
        raise NotImplementedError

    def collect(self, submitted):
        raise NotImplementedError

    def search(self, chunk):
        return self.collect(self.submit(chunk))


def make_engine(pats, cfg: SearchConfig, notice) -> SearchEngine:
    """The engine this process runs (engine_class's), made for pats."""
    return engine_class(cfg, notice).make(pats, cfg)


@trace.traced("select_engines")
def engine_class(cfg: SearchConfig, notice):
    """The engine this process runs: the GPU one if a GPU is usable (and not --device cpu), else the CPU one;
    notice gets a line naming it (`engine: ...`, as pairs' select_engines)."""
    from ..gpu.kernels import gpu_status
    from .cpu import SassyEngine

    cpu_note = f"{SassyEngine.name} (sassy-rs, {cfg.n_threads} thread{'s' * (cfg.n_threads != 1)})"
    if cfg.device != "cpu":
        ok, what = gpu_status()
        if ok:
            from .gpu import GpuSearchEngine

            if notice:
                notice(f"engine: {GpuSearchEngine.name} on {what}")
            return GpuSearchEngine
        if cfg.device == "gpu":
            raise DeviceError(f"--device gpu: no usable GPU ({what})")
        if notice:
            notice(f"engine: {cpu_note}; no GPU ({what})")
    elif notice:
        notice(f"engine: {cpu_note}")
    return SassyEngine


def remote_engine(cfg: SearchConfig, cluster):
    """The engine class the workers of cluster (a cluster.ClusterSpec) run, for its name and chunk geometry: the
    CPU one for --cpu-workers or --device cpu, else the GPU one (whose geometry also serves the CPU engine of a
    --scheduler worker without a GPU under --device auto)."""
    if cluster.cpu_workers or cfg.device == "cpu":
        from .cpu import SassyEngine

        return SassyEngine
    from .gpu import GpuSearchEngine

    return GpuSearchEngine


def device_set(pats, cfg: SearchConfig, ids: list[int]):
    """A devices.DeviceSet (not started) whose slots scan text chunks (scan_on), a GPU search engine made on each;
    once every device has left the run, the CPU engine (one thread, in this process) scans the rest."""
    from ..devices import DeviceSet
    from .cpu import SassyEngine
    from .gpu import GpuSearchEngine

    def open_engine(device):
        engine = (GpuSearchEngine.make(pats, cfg) if device is not None
                  else SassyEngine(pats, cfg.k, cfg.rule, threads=1))
        engine.start()
        return engine

    return DeviceSet(ids, open_engine, lambda engine: engine.close(), cfg, units=("bases", "chunks"))


def scan_on(engine: SearchEngine, chunk):
    """A chunk's candidates by a device slot's engine (device_set's task): (Cands, {engine name: 1})."""
    return engine.search(chunk), {engine.name: 1}
