"""The only place that touches CUDA: device discovery (and, with the GPU engines, kernel loading)."""

from __future__ import annotations

import functools

from .. import trace


def _start_driver():
    """A thread that starts the CUDA driver (cuInit) and retains device 0's primary context through the
    driver API (ctypes lets go of the interpreter lock), so that both overlap cupy's import; cupy's
    runtime then finds the context made. Started
    only after the caller's worker processes are forked (select_engines' callers fork first). Any failure
    is left for cupy to meet and report."""
    import ctypes
    import threading

    def run() -> None:
        try:
            cuda = ctypes.CDLL("libcuda.so.1")
            dev, ctx = ctypes.c_int(), ctypes.c_void_p()
            if cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0:
                cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
        except (OSError, AttributeError):  # no driver library here
            pass

    thread = threading.Thread(target=run, name="gpualign-cuda-start", daemon=True)
    thread.start()
    return thread


@functools.lru_cache(maxsize=1)
def gpu_status() -> tuple[bool, str]:
    """(available, description or reason). Imports cupy lazily, the driver starting meanwhile
    (_start_driver); never raises."""
    starting = _start_driver()
    try:
        import cupy
    except Exception as e:  # ImportError, or a broken CUDA install
        return False, f"cupy not importable ({type(e).__name__})"
    finally:
        starting.join()
    try:
        n = cupy.cuda.runtime.getDeviceCount()
        if n < 1:
            return False, "no CUDA device"
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        return True, name
    except Exception as e:
        return False, f"no usable CUDA device ({type(e).__name__})"


def kernel_dir() -> str:
    """kernels/ beside the package (source checkout / editable install)."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "..", "..", "kernels"), os.path.join(here, "..", "kernels")):
        if os.path.isfile(os.path.join(cand, "common.cuh")):
            return os.path.normpath(cand)
    raise FileNotFoundError("gpualign kernels/ directory not found")


_modules: dict = {}
CACHE_ENV = "GPUALIGN_CACHE_DIR"


def cache_dir() -> str:
    """Where compiled kernels are kept: $GPUALIGN_CACHE_DIR, else $XDG_CACHE_HOME/gpualign (~/.cache)."""
    import os

    if os.environ.get(CACHE_ENV):
        return os.environ[CACHE_ENV]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpualign", "kernels")


def cache_key(code: str, headers: dict, opts: tuple, name_expressions: tuple, env: tuple) -> str:
    """Hash of everything a compiled module depends on: its source, every header of kernels/ (CuPy's own
    cache keys on the source alone, and skips itself when name expressions are asked for), the options,
    the names and env (CuPy and NVRTC versions, the device's compute capability)."""
    import hashlib

    h = hashlib.sha256()
    for part in (code, *(f"{k}\0{v}" for k, v in sorted(headers.items())), repr(opts), repr(name_expressions),
                 repr(env)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class Module:
    """A loaded kernel module whose functions are looked up by their name expressions."""

    def __init__(self, raw, mapping: dict):
        self.raw, self.mapping = raw, mapping

    def get_function(self, name: str):
        return trace.kernel(name, self.raw.get_function(self.mapping.get(name, name)))


def _cached(stem: str) -> dict | None:
    """The name mapping stored beside stem.cubin by _store, or None when either file is missing or the
    binary is not the one stored."""
    import hashlib
    import json

    try:
        with open(stem + ".json") as fh:
            meta = json.load(fh)
        with open(stem + ".cubin", "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() != meta["sha256"]:
                return None
        return dict(meta["mapping"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(stem: str, cubin: bytes, mapping: dict) -> bool:
    """stem.cubin, then stem.json (the binary's hash and the name mapping), each written under a temporary
    name and renamed; False when they cannot be written."""
    import hashlib
    import json
    import os
    import tempfile

    d = os.path.dirname(stem)
    try:
        os.makedirs(d, exist_ok=True)
        for ext, data in ((".cubin", cubin),
                          (".json", json.dumps({"sha256": hashlib.sha256(cubin).hexdigest(),
                                                "mapping": mapping}).encode())):
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, stem + ext)
    except OSError:
        return False
    return True


@trace.traced("load_module")
def load_module(filename: str, name_expressions: tuple, defines: tuple = ()) -> Module:
    """kernels/<filename> compiled once per device (NVRTC through CuPy) and kept in cache_dir(): later
    runs load the binary."""
    import os

    import cupy
    from cupy.cuda import compiler

    dev = cupy.cuda.Device()
    key = (dev.id, filename, name_expressions, defines)
    mod = _modules.get(key)
    if mod is None:
        kdir = kernel_dir()
        with open(os.path.join(kdir, filename)) as fh:
            code = fh.read()
        headers = {}
        for name in os.listdir(kdir):
            if name.endswith(".cuh"):
                with open(os.path.join(kdir, name)) as fh:
                    headers[name] = fh.read()
        opts = ("-std=c++17", f"-I{kdir}", *(f"-D{d}" for d in defines))
        nvrtc = getattr(compiler, "_get_nvrtc_version", cupy.cuda.runtime.runtimeGetVersion)
        env = (cupy.__version__, nvrtc(), dev.compute_capability)
        stem = os.path.join(cache_dir(), cache_key(code, headers, opts, name_expressions, env))
        mapping = _cached(stem)
        if mapping is None:
            cubin, mapping = compiler.compile_using_nvrtc(code, opts, name_expressions=name_expressions)
            mapping = dict(mapping)
            if not _store(stem, cubin, mapping):  # no cache to be had: CuPy compiles it in this process
                mapping = None
        if mapping is None:
            raw, mapping = cupy.RawModule(code=code, options=opts, name_expressions=name_expressions), {}
        else:
            raw = cupy.RawModule(path=stem + ".cubin")
        mod = _modules[key] = Module(raw, mapping)
    return mod
