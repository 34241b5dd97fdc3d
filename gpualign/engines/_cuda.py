"""The only place that touches CUDA: device discovery (and, with the GPU engines, kernel loading)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def gpu_status() -> tuple[bool, str]:
    """(available, description or reason). Imports cupy lazily; never raises."""
    try:
        import cupy
    except Exception as e:  # ImportError, or a broken CUDA install
        return False, f"cupy not importable ({type(e).__name__})"
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


def load_module(filename: str, name_expressions: tuple, defines: tuple = ()):
    """Compile kernels/<filename> once per device (CuPy RawModule + its disk cache)."""
    import os

    import cupy

    key = (cupy.cuda.Device().id, filename, name_expressions, defines)
    mod = _modules.get(key)
    if mod is None:
        kdir = kernel_dir()
        with open(os.path.join(kdir, filename)) as fh:
            code = fh.read()
        opts = ("-std=c++17", f"-I{kdir}", *(f"-D{d}" for d in defines))
        mod = cupy.RawModule(code=code, options=opts, name_expressions=name_expressions)
        mod.compile()
        _modules[key] = mod
    return mod
