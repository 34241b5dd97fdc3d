"""The CUDA driver started early: cuInit and device 0's primary context, made through the driver API on a
thread of their own (ctypes lets go of the interpreter lock), so that they overlap the imports, the
option parsing and the input checks that come before a GPU engine; cupy's runtime then finds the context
made. `gpualign` starts it first thing for a command that may use a GPU (__main__.py); gpu_status()
(gpu/kernels.py) starts it if nobody has and waits for it. Any failure is left for cupy to meet and
report. Standard library only, and small: it loads before numpy.

A process forked while the thread is inside the driver could inherit a lock it holds, so every fork
waits for the thread to end first (os.register_at_fork)."""

from __future__ import annotations

import os
import threading

_thread: threading.Thread | None = None
_lock = threading.Lock()
_made: list = []  # [True] once device 0's context is made


def _run(ctypes) -> None:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0:
            if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0:
                _made.append(True)
    except (OSError, AttributeError):  # no driver library here
        pass


def start() -> None:
    """Start the thread (once per process). ctypes is imported here, so the thread imports nothing (a
    thread that imports could wait for a module another thread is importing)."""
    global _thread
    import ctypes

    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_run, args=(ctypes,), name="gpualign-cuda-start", daemon=True)
            os.register_at_fork(before=wait)
            _thread.start()


def wait() -> None:
    """Until the thread has ended (at once when it never started)."""
    thread = _thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def context_made() -> bool:
    """Whether the driver made device 0's context (started now if nobody has; waits for it)."""
    start()
    wait()
    return bool(_made)


ELSEWHERE = ("--scheduler", "--cpu-workers")  # options that align in other processes (cluster.py)


def wanted(argv: list[str]) -> bool:
    """Could this command line use device 0 (whose context this module makes) in this process? A command that
    aligns, without --device cpu, -h, --help, an option that sends the work to other processes (which hold the
    GPUs themselves), or --gpus naming devices that leave 0 out."""
    if len(argv) < 2 or argv[1] not in ("pairs", "paf", "genome", "search"):
        return False
    args = argv[2:]
    if "-h" in args or "--help" in args or "--device=cpu" in args:
        return False
    if any(a.split("=", 1)[0] in ELSEWHERE for a in args):
        return False
    pairs = list(zip(args, args[1:])) + [tuple(a.split("=", 1)) for a in args if "=" in a]
    if any(a == "--gpus" and "," in b and "0" not in b.split(",") for a, b in pairs):
        return False
    return not any(a == "--device" and b == "cpu" for a, b in pairs)
