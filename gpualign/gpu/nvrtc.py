"""NVRTC through ctypes: CUDA C++ to a cubin (sm_XY) or PTX (compute_XY) for a named architecture.

NVRTC needs no GPU and no driver, so kernels can be built ahead of time (gpu/images.py, `gpualign cache
build`) on a machine without one, CI included. Standard library only.

The library is looked for where CuPy's own lookup (cuda-pathfinder) finds it, then in the `nvidia-cuda-nvrtc`
wheel beside this interpreter, then in $CUDA_PATH / $CUDA_HOME / /usr/local/cuda, then on the loader's path.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import sys

from ..errors import KernelError


def _candidates() -> list[str]:
    paths = []
    try:  # how CuPy 14 finds it
        from cuda.pathfinder import load_nvidia_dynamic_lib

        paths.append(load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception:  # not installed, or nothing found: the other places
        pass
    for base in sys.path:
        paths += sorted(glob.glob(os.path.join(base, "nvidia", "cu1[3-9]", "lib", "libnvrtc.so.1[3-9]")))
        paths += sorted(glob.glob(os.path.join(base, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.1[2-9]")))
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            paths += sorted(glob.glob(os.path.join(os.environ[var], "lib64", "libnvrtc.so.1[2-9]")))
    paths += sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so.1[2-9]"))
    paths += sorted(glob.glob("/usr/local/cuda/targets/*/lib/libnvrtc.so.1[2-9]"))
    return paths + ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]


@functools.lru_cache(maxsize=1)
def library():
    """The loaded NVRTC library (ctypes.CDLL); KernelError when there is none."""
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            lib.nvrtcVersion  # noqa: B018 (an NVRTC it is)
        except (OSError, AttributeError):
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        return lib
    raise KernelError("NVRTC (libnvrtc.so) not found: install the CUDA toolkit or `pip install nvidia-cuda-nvrtc`")


def available() -> bool:
    try:
        library()
    except KernelError:
        return False
    return True


def version() -> tuple[int, int]:
    lib = library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def supported() -> tuple[int, ...]:
    """The architectures this NVRTC compiles for, as numbers (75, 80, ..., 120)."""
    lib = library()
    n = ctypes.c_int()
    _check(lib, lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
    archs = (ctypes.c_int * n.value)()
    _check(lib, lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    return tuple(archs)


def target_for(cc: tuple[int, int]) -> str:
    """What to compile for a GPU of compute capability cc: its own cubin when this NVRTC knows it, else
    PTX of the newest architecture below it (the driver compiles that for the GPU)."""
    want, archs = 10 * cc[0] + cc[1], supported()
    if want in archs:
        return f"sm_{want}"
    older = [a for a in archs if a <= want]
    if not older:
        raise KernelError(f"NVRTC {'.'.join(map(str, version()))} compiles for none of sm_{want}'s ancestors")
    return f"compute_{max(older)}"


def _check(lib, rc: int, what: str, log: str = "") -> None:
    if rc != 0:
        msg = lib.nvrtcGetErrorString(rc).decode(errors="replace")
        raise KernelError(f"{what}: {msg}" + (f"\n{log}" if log else ""))


def _strings(items) -> ctypes.Array:
    return (ctypes.c_char_p * len(items))(*(s.encode() for s in items))


def compile_source(code: str, filename: str, headers: dict, options: tuple, names: tuple,
                   target: str) -> tuple[bytes, dict]:
    """(image, mapping): code compiled for target ("sm_90": a cubin; "compute_90": PTX text as bytes), its
    #include "x.cuh" answered from headers (name -> text), and mapping each of names (kernel names or
    template instances such as "f<8, true>") to the symbol in the image. Releases the interpreter lock while
    NVRTC works (ctypes), so threads compile side by side."""
    lib = library()
    prog = ctypes.c_void_p()
    hnames = sorted(headers)
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), filename.encode(), len(hnames),
                                       _strings([headers[h] for h in hnames]), _strings(hnames)),
           f"{filename}: nvrtcCreateProgram")
    try:
        for n in names:
            _check(lib, lib.nvrtcAddNameExpression(prog, n.encode()), f"{filename}: name {n!r}")
        opts = (*options, f"-arch={target}")
        rc = lib.nvrtcCompileProgram(prog, len(opts), _strings(opts))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        _check(lib, rc, f"{filename} for {target}", buf.value.decode(errors="replace"))
        cubin = target.startswith("sm_")
        get_size, get = (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if cubin else (lib.nvrtcGetPTXSize,
                                                                                  lib.nvrtcGetPTX)
        _check(lib, get_size(prog, ctypes.byref(size)), f"{filename}: image size")
        image = ctypes.create_string_buffer(size.value)
        _check(lib, get(prog, image), f"{filename}: image")
        data = image.raw if cubin else image.raw.rstrip(b"\0")
        mapping = {}
        for n in names:
            lowered = ctypes.c_char_p()
            _check(lib, lib.nvrtcGetLoweredName(prog, n.encode(), ctypes.byref(lowered)), f"{filename}: {n!r}")
            mapping[n] = lowered.value.decode()
        return data, mapping
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
