"""The CUDA driver started early: cuInit and device 0's primary context, made through the driver API on a
thread of their own (ctypes lets go of the interpreter lock), so that they overlap the imports, the
option parsing and the input checks that come before a GPU engine; cupy's runtime then finds the context
made. `gpualign` starts it first thing for a command that may use a GPU (__main__.py); gpu_status()
(gpu/kernels.py) starts it if nobody has and waits for it. Any failure is left for cupy to meet and
report. Standard library only, and small: it loads before numpy.

A process forked while the thread is inside the driver could inherit a lock it holds, so every fork
waits for the thread to end first (os.register_at_fork).

At the end (hand_off, from cli.quick_exit): the driver tears a process's contexts down when its last reference
to the driver's device files goes, 0.09-0.15 s on an H100 host, which the shell would wait for after the
output is complete. A forked child holding only those files (every other descriptor closed: a pipe's reader
sees its end at once) until this process is gone takes that teardown instead."""

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


HAND_OFF_MAX_RSS = 16 << 30  # no hand-off above this resident size: the fork maps it again (H100 host: 10 ms at
# 0.3 GB, 15 ms at 8 GB more)
COMPUTE_MODE = 20  # CU_DEVICE_ATTRIBUTE_COMPUTE_MODE; 0: default (several processes may hold a context)
HAND_OFF_ENV = "GPUALIGN_HAND_OFF"  # "0": none (a container whose first process does not reap orphans)


def _is_driver_file(target: str) -> bool:
    return target.startswith("/dev/nvidia")


def _driver_files(keep) -> list[int]:
    """This process's open descriptors whose targets keep accepts (_is_driver_file: the driver's device files)."""
    out = []
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # (no /proc)
        return out
    for name in names:
        try:
            if keep(os.readlink(f"/proc/self/fd/{name}")):
                out.append(int(name))
        except OSError:  # (gone meanwhile: the listing's own descriptor)
            pass
    return out


def _shared_devices() -> bool:
    """Whether every device is in the default compute mode: a context the child holds for a moment after this
    process is gone must not keep the next process off an exclusive-process device."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count, value = ctypes.c_int(), ctypes.c_int()
        if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return False
        return all(cuda.cuDeviceGetAttribute(ctypes.byref(value), COMPUTE_MODE, k) == 0 and value.value == 0
                   for k in range(count.value))
    except (OSError, AttributeError):
        return False


def _resident() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return HAND_OFF_MAX_RSS + 1


def hand_off(keep=None, check_devices=None) -> bool:
    """Fork a child that holds the driver's device files until this process has exited, so that the contexts'
    teardown happens there, off the command's time; the caller exits right after (os._exit). Only where this
    process has the driver's files open, every device is shared (_shared_devices), the fork is cheap
    (HAND_OFF_MAX_RSS) and $GPUALIGN_HAND_OFF is not 0; returns whether a child took them (any failure: no).
    keep, check_devices: tests' stand-ins for the driver's file test and the devices' check. The garbage
    collector stays off from here (a finalizer must not run after the output, nor in the child before it has let
    go of the standard streams); the child closes every other descriptor first and leaves by os._exit when its
    pipe from this process reads its end."""
    import gc

    if os.environ.get(HAND_OFF_ENV) == "0":
        return False
    was = gc.isenabled()
    gc.disable()
    took = False
    try:
        took = _fork_holder(keep or _is_driver_file, check_devices or _shared_devices)
    except Exception:  # noqa: BLE001 - best effort: the process exits as before
        took = False
    finally:
        if was and not took:
            gc.enable()
    return took


def _fork_holder(keep, check_devices) -> bool:
    import warnings

    if _thread is not None and _thread.is_alive():  # (the fork hooks would wait for cuInit, signals ignored)
        return False
    files = _driver_files(keep=keep)
    if not files or _resident() > HAND_OFF_MAX_RSS or not check_devices():
        return False
    r, w = os.pipe()
    # kept in the child: the driver's files and the pipe's reading end (a listed file closed since may have
    # given w its number: the child must not keep w, or its read would never end)
    kept = sorted((set(files) - {w}) | {r})
    try:
        with warnings.catch_warnings():  # (Python 3.12: a fork of a process with threads warns)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return False
    if pid == 0:
        try:
            # up to the highest descriptor open now (a limit of 2^30, where close_range(2) is missing, would be
            # as many closes)
            top = max(int(name) for name in os.listdir("/proc/self/fd")) + 1
            low = 0
            for fd in kept:
                os.closerange(low, fd)
                low = fd + 1
            os.closerange(low, top)
            while os.read(r, 1):
                pass
        finally:
            os._exit(0)
    os.close(r)  # (w stays open until this process is gone)
    return True


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
