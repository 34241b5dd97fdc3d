"""A GPU engine's kernels run on the CPU: the kernel file compiled with g++ against cuda_host.h (a
<name>_host.cpp beside it gives its C entry point, emu_launch), loaded with ctypes, and the engine's own
host code run on numpy arrays in place of CuPy's (fake_cupy). CI has no GPU: this is how it checks what
the kernels compute against the oracles. It does not check NVRTC, timing, or what only concurrent warps
could get wrong (tests marked gpu do, on the device).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "kernels")
CXX = shutil.which("g++")
BUILD_ENV = "GPUALIGN_EMU_DIR"  # where the compiled kernels are kept (conftest: pytest's cache directory)
# -fno-gnu-unique: each library its own cuda_host.h globals (emu_shared_base, emu_block, threadIdx). As GNU
# unique symbols the process had one of each: loading a second library (another kernel file, or dp.cu with
# other defines) pointed the first's shared memory at the second's array, a crash where it lay above it.
CXXFLAGS = ("-O2", "-std=c++17", "-Wall", "-Wno-unknown-pragmas", "-shared", "-fPIC", "-fno-gnu-unique",
            "-U_FORTIFY_SOURCE")
FLAGS_ENV = "GPUALIGN_EMU_CXXFLAGS"  # extra g++ flags, e.g. "-fsanitize=address -g" (with libasan preloaded)
_libs: dict = {}
_build_dir: list = []


def available() -> bool:
    return CXX is not None


def build_dir() -> str:
    """$GPUALIGN_EMU_DIR (the test suite sets it to pytest's cache: the kernels compiled once for every
    session, nothing in the temporary directory), else a temporary directory removed at exit."""
    if not _build_dir:
        where = os.environ.get(BUILD_ENV)
        if where:
            os.makedirs(where, exist_ok=True)
        else:
            where = tempfile.mkdtemp(prefix="gpualign-emu-")
            atexit.register(shutil.rmtree, where, True)
        _build_dir.append(where)
    return _build_dir[0]


def library(stem: str, defines: tuple = ()) -> ctypes.CDLL:
    """kernels/<stem>.cu with tests/emu/<stem>_host.cpp and -D defines, compiled once per source (kept in
    build_dir() by the sources' hash)."""
    if (stem, defines) in _libs:
        return _libs[stem, defines]
    sources = [os.path.join(HERE, f"{stem}_host.cpp"), os.path.join(HERE, "cuda_host.h"),
               os.path.join(KERNELS, f"{stem}.cu")]
    flags = [*CXXFLAGS, *os.environ.get(FLAGS_ENV, "").split()]
    h = hashlib.sha256(repr((defines, flags)).encode())
    headers = sorted(os.path.join(KERNELS, f) for f in os.listdir(KERNELS) if f.endswith(".cuh"))
    for path in sources + headers:  # (the headers a kernel file includes: any of them)
        with open(path, "rb") as fh:
            h.update(fh.read())
    digest = h.hexdigest()[:16]
    out = os.path.join(build_dir(), f"{stem}-{digest}.so")
    if not os.path.exists(out):
        part = f"{out}.{os.getpid()}"
        p = subprocess.run([CXX, *flags, f"-I{KERNELS}", f"-I{HERE}", *(f"-D{d}" for d in defines), sources[0],
                            "-o", part],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"g++ {sources[0]}:\n{p.stderr}")
        os.replace(part, out)
    lib = ctypes.CDLL(out)
    lib.emu_launch.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.POINTER(ctypes.c_void_p)]
    _libs[stem, defines] = lib
    return lib


class _Function:
    max_dynamic_shared_size_bytes = 232_448  # (CUDA's function attributes: an H100's opt-in limit, no static part)
    shared_size_bytes = 0

    def __init__(self, lib, name: str):
        self.lib, self.name = lib, name

    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0):
        keep = []  # CUDA's convention: a pointer to each argument's value
        for a in args:
            if isinstance(a, np.ndarray):
                if not a.flags.c_contiguous:
                    raise ValueError(f"{self.name}: an argument is not contiguous")
                keep.append(np.array([a.ctypes.data], np.uintp))
            elif isinstance(a, (np.integer, int)):
                keep.append(np.array([a], a.dtype if isinstance(a, np.integer) else np.int32))
            else:
                raise TypeError(f"{self.name}: argument of type {type(a).__name__}")
        ptrs = [v.ctypes.data for v in keep]
        arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
        gy = int(grid[1]) if len(grid) > 1 else 1
        if self.lib.emu_launch(self.name.encode(), int(grid[0]), gy, int(block[0]), arr) != 0:
            raise KeyError(f"no emulated kernel {self.name}")


class Module:
    """What gpu.kernels.load_module gives, for the emulated kernels of one file."""

    def __init__(self, stem: str, defines: tuple = ()):
        self.lib = library(stem, tuple(defines))

    def get_function(self, name: str) -> _Function:
        return _Function(self.lib, name)


def load_module(filename: str, name_expressions: tuple = (), defines: tuple = ()) -> Module:
    """gpu.kernels.load_module's stand-in."""
    return Module(filename.removesuffix(".cu"), defines)


class _Device:
    id = 0
    mem_info = (64 << 30, 80 << 30)  # (free, total): what launch sizes are planned from
    # (few SMs: gpu_dp.team_size gives the tests' launches either team size; an H100's shared memory an SM)
    attributes = {"MultiProcessorCount": 2, "MaxSharedMemoryPerMultiprocessor": 233_472,
                  "MaxSharedMemoryPerBlockOptin": 232_448}

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


class _Stream:
    def __init__(self, non_blocking: bool = False, priority: int = 0):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def record(self) -> "_Stream":  # (an event: synchronize())
        return self

    def wait_event(self, event) -> None:
        pass


class _Pool:
    def free_bytes(self) -> int:
        return 0

    def free_all_blocks(self) -> None:
        pass


class DeviceArray(np.ndarray):
    """A "device" array: numpy's, with CuPy's get() and device."""

    device = _Device()

    @property
    def data(self):  # (CuPy's device pointer: .data.ptr, as kernel arguments take it)
        ptr = self.ctypes.data
        return types.SimpleNamespace(ptr=ptr, memset_async=lambda value, size: ctypes.memset(ptr, value, size))

    def get(self, stream=None, out=None, blocking=True) -> np.ndarray:
        if out is None:
            return np.array(self)
        out[...] = self
        return out

    def set(self, host: np.ndarray, stream=None) -> None:
        self[...] = host

    def copy(self, order="C"):
        raise AssertionError("a device array's copy() (CuPy's elementwise kernel, compiled on a fresh machine's "
                             "first run; numpy functions that copy their argument call it too): gpu.arrays.copy")


def _device(make):
    return lambda *a, **kw: make(*a, **kw).view(DeviceArray)


def _runtime() -> types.SimpleNamespace:
    """CUDA's runtime calls the host code makes: page-locking host memory is a no-op here (numpy's copies need
    none), its addresses kept in `locked` so that a test can see what was locked and given back."""
    locked: set = set()

    def register(address: int, size: int, flags: int) -> None:
        if address in locked:
            raise RuntimeError("cudaErrorHostMemoryAlreadyRegistered")
        locked.add(address)

    return types.SimpleNamespace(getDeviceCount=lambda: 1, hostRegister=register, hostUnregister=locked.remove,
                                 CUDARuntimeError=RuntimeError, locked=locked, memGetInfo=lambda: _Device.mem_info)


def fake_cupy() -> types.ModuleType:
    """The part of CuPy the engines' host code calls, on numpy arrays (DeviceArray)."""
    m = types.ModuleType("cupy")
    for name in ("int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        setattr(m, name, getattr(np, name))
    for name in ("zeros", "empty", "empty_like", "full", "arange"):
        setattr(m, name, _device(getattr(np, name)))
    m.asarray = _device(lambda a, dtype=None: np.array(a, dtype=dtype, copy=True))
    m.asnumpy = lambda a: np.array(a)
    m.get_default_memory_pool = _Pool
    m.cuda = types.SimpleNamespace(Device=_Device, get_current_stream=_Stream, Stream=_Stream,
                                   alloc_pinned_memory=bytearray, runtime=_runtime())
    return m


def numpy_arrays() -> dict:
    """gpu/arrays.py's operations on numpy arrays (its kernels are checked on the GPU, test_arrays)."""
    dev = lambda a: np.ascontiguousarray(a).view(DeviceArray)  # noqa: E731

    def translate(a, table, out=None):
        r = np.asarray(table)[np.asarray(a)]
        if out is None:
            return dev(r)
        out[...] = r
        return out

    def cumsum(a, exclusive=False, out=None):
        r = np.cumsum(a) - (a if exclusive else 0)
        if out is None:
            return dev(r)
        out[...] = r
        return out

    def sort_pairs(keys, values, bits=None):
        order = np.argsort(keys, kind="stable")
        return dev(keys[order]), dev(values[order])

    def fill(a, value):
        a[...] = value
        return a

    def scatter(dst, idx, values):
        dst[np.asarray(idx)] = np.asarray(values)

    return dict(fill=fill, full=lambda n, v, dtype: dev(np.full(n, v, dtype)), scatter=scatter,
                copy=lambda a: dev(np.array(a)),
                arange=lambda start, stop, step=1, dtype=np.int32: dev(np.arange(start, stop, step, dtype=dtype)),
                gather=lambda src, idx: dev(np.asarray(src)[idx]), translate=translate, cumsum=cumsum,
                reverse=lambda a: dev(np.asarray(a)[::-1]), sort_pairs=sort_pairs,
                narrow_rows=lambda rows: dev(np.stack([np.asarray(r) for r in rows]).astype(np.int32)),
                argsort=lambda keys, bits=None: dev(np.argsort(keys, kind="stable").astype(np.int64)),
                byte_counts=lambda a: np.bincount(np.asarray(a), minlength=256).astype(np.int64))


@contextlib.contextmanager
def cupy_on_numpy():
    """`import cupy` gives fake_cupy() inside this block, and gpu/arrays.py works on numpy arrays."""
    from gpualign.gpu import arrays

    old = sys.modules.get("cupy")
    sys.modules["cupy"] = fake_cupy()
    ops = numpy_arrays()
    saved = {name: getattr(arrays, name) for name in ops}
    for name, fn in ops.items():
        setattr(arrays, name, fn)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(arrays, name, fn)
        if old is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = old


class Staging:
    """gpu.staging.Staging's upload, to numpy arrays."""

    def upload(self, batch, cfg):
        from gpualign import pack
        from gpualign.gpu.staging import meta_rows, raw_size

        seq = pack.compare_view(batch, cfg.n_mismatch)
        raw = np.zeros(raw_size(len(seq)), np.uint8)
        raw[:len(seq)] = seq
        return raw, meta_rows(batch, cfg.ends_free_target)

    def prefetch(self, batch, cfg) -> None:
        pass


def emulated(engine_class):
    """engine_class (a GPU engine) with its kernels run here: the load_module its module calls (in its
    _module(), and _text_module() where it has one), its staging and its stream replaced, and `import cupy`
    giving fake_cupy() while it aligns."""
    home = sys.modules[engine_class.__module__]

    def loading_here(method):
        def call(self):
            real = home.load_module
            home.load_module = load_module
            try:
                with cupy_on_numpy():  # (a module's load asks the device's attributes)
                    return method(self)
            finally:
                home.load_module = real

        return call

    class Emulated(engine_class):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self._staging = Staging()

        _module = loading_here(engine_class._module)
        if hasattr(engine_class, "_text_module"):
            _text_module = loading_here(engine_class._text_module)

        @contextlib.contextmanager
        def _stream(self):
            with cupy_on_numpy():
                yield

        def align(self, batch, cfg):  # (engines without a _stream of their own)
            with cupy_on_numpy():
                return super().align(batch, cfg)

    Emulated.__name__ = f"Emulated{engine_class.__name__}"
    return Emulated
