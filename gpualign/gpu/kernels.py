"""The only place that touches CUDA (with driver.py, which starts it early): device discovery, kernel
loading for every GPU path (images built ahead or cached, gpu/images.py; else NVRTC now, gpu/nvrtc.py),
and telling a device allocation failure from other errors (is_out_of_memory)."""

from __future__ import annotations

import functools

from .. import driver, trace
from . import images, nvrtc


@functools.lru_cache(maxsize=1)
def gpu_status() -> tuple[bool, str]:
    """(available, description or reason). Imports cupy lazily, the driver starting meanwhile (driver.py,
    if the command has not started it already); never raises."""
    driver.start()
    try:
        import cupy
    except ImportError:
        return False, "CuPy is not installed: pip install 'gpualign[gpu]'"
    except Exception as e:  # a broken CUDA install
        return False, f"CuPy cannot load: {type(e).__name__}: {e}"
    finally:
        driver.wait()
    try:
        n = cupy.cuda.runtime.getDeviceCount()
        if n < 1:
            return False, "no NVIDIA GPU found"
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        return True, name
    except Exception as e:
        return False, _why(str(e))


CUDA_WHY = {"cudaErrorNoDevice": "no NVIDIA GPU found",
            "cudaErrorInsufficientDriver": "no NVIDIA driver, or one older than this CUDA needs"}


def _why(error: str) -> str:
    """A CUDA error's text ("cudaErrorNoDevice: ...") as a user reads it, its CUDA name after it."""
    code = error.split(":", 1)[0].strip()
    return f"{CUDA_WHY[code]}: {code}" if code in CUDA_WHY else f"CUDA cannot use the GPU: {error}"


_modules: dict = {}
_notice = None  # the running command's notice printer (commands/common.feedback): told before a kernel compiles


def set_notice(fn) -> None:
    """fn(text) hears of each kernel compiled in this process (None: nobody)."""
    global _notice
    _notice = fn


class Module:
    """A loaded kernel module whose functions are looked up by their name expressions."""

    def __init__(self, raw, mapping: dict):
        self.raw, self.mapping = raw, mapping

    def get_function(self, name: str):
        return trace.kernel(name, self.raw.get_function(self.mapping.get(name, name)))


class Kernels:
    """The functions of one kernel module (file, names, defines), each looked up once (load_module's lookup
    costs a device object and a key each call): for a holder whose calls all run on one device, or, with
    per_device, once per device (keyed by the current one: a module-wide table). load: the module loader
    (load_module; the tests' emulated one)."""

    def __init__(self, spec: tuple, load=None, per_device: bool = False):
        self.spec, self.load, self.per_device, self.fns = spec, load or load_module, per_device, {}

    def __call__(self, name: str):
        if self.per_device:
            import cupy

            key = (cupy.cuda.runtime.getDevice(), name)
        else:
            key = name
        fn = self.fns.get(key)
        if fn is None:
            fn = self.fns[key] = self.load(*self.spec).get_function(name)
        return fn


def capability(dev) -> tuple[int, int]:
    """(major, minor) of a cupy Device."""
    cc = str(dev.compute_capability)
    return int(cc[:-1]), int(cc[-1])


def _load(cupy, path: str, mapping: dict, names: tuple):
    """The module of an image file, its first kernel looked up (the driver loads it then); None when this
    driver cannot load it (an image from a newer toolkit, a damaged file)."""
    try:
        raw = cupy.RawModule(path=path)
        raw.get_function(mapping.get(names[0], names[0]))
        return raw
    except (cupy.cuda.driver.CUDADriverError, OSError, RuntimeError):
        return None


def _compile(cupy, filename: str, code: str, headers: dict, opts: tuple, dig: str, names: tuple,
             cc: tuple[int, int]) -> Module:
    """Compiled here for this GPU (NVRTC) and kept in the first-use cache (gpu/images.py); when the cache
    cannot be written, through a temporary file."""
    import os
    import tempfile

    own = nvrtc.available()
    target = nvrtc.target_for(cc) if own else f"sm_{cc[0]}{cc[1]}"
    if _notice is not None:
        _notice(f"compiling kernels/{filename} for {target} (first use; `gpualign cache build` compiles every "
                "kernel ahead)")
    if own:
        image, mapping = nvrtc.compile_source(code, filename, headers, opts, names, target)
        version = nvrtc.version()
    else:  # none of our own to be found: CuPy's (it has its own ways of finding one; it picks the target)
        from cupy.cuda import compiler

        mine = tuple(o for o in opts if o != "--device-as-default-execution-space")  # (CuPy adds it itself)
        image, mapping = compiler.compile_using_nvrtc(code, (*mine, f"-I{images.kernel_dir()}"),
                                                      name_expressions=names)
        mapping, version = dict(mapping), (0, 0)
    try:
        path = images.store(images.cache_dir(), filename, dig, names, target, image, mapping, version)
    except OSError:
        path = None
    raw = _load(cupy, path, mapping, names) if path is not None else None
    if raw is None:  # no cache to be had: loaded from a temporary file
        fd, tmp = tempfile.mkstemp(suffix=".cubin")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(image)
            raw = cupy.RawModule(path=tmp)
            raw.get_function(mapping.get(names[0], names[0]))  # (an image it compiled that fails: raised)
        finally:
            os.unlink(tmp)
    return Module(raw, mapping)


@trace.traced("load_module")
def load_module(filename: str, name_expressions: tuple, defines: tuple = ()) -> Module:
    """kernels/<filename> with the given defines, holding at least the kernels name_expressions names,
    once per device: an image built ahead or compiled before (gpu/images.py: the best that fits this
    GPU), else compiled now by NVRTC and kept for the next run."""
    import cupy

    dev = cupy.cuda.Device()
    key = (dev.id, filename, tuple(name_expressions), tuple(defines))
    mod = _modules.get(key)
    if mod is None:
        names = tuple(name_expressions)
        code, headers = images.sources(filename)
        opts = images.options(defines)
        dig = images.digest(code, headers, opts)
        cc = capability(dev)
        for path, mapping, _ in images.find(filename, dig, names, cc):
            raw = _load(cupy, path, mapping, names)
            if raw is not None:
                mod = Module(raw, mapping)
                break
        if mod is None:
            mod = _compile(cupy, filename, code, headers, opts, dig, names, cc)
        _modules[key] = mod
    return mod


def is_out_of_memory(err: BaseException) -> bool:
    """A device allocation failure (CuPy's OutOfMemoryError, or the CUDA error behind it)."""
    return type(err).__name__ == "OutOfMemoryError" or "out of memory" in str(err).lower()
