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
