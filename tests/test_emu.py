"""The CPU emulation of the kernels (tests/emu) itself: several of its libraries in one process."""

import ctypes

import pytest

import emu

pytestmark = pytest.mark.skipif(not emu.available(), reason="no g++ to compile the kernels for the CPU")


def test_libraries_keep_their_own_shared_memory(monkeypatch):
    """Each emulated library's shared-memory base stays its own array after others load: dp.cu under two sets
    of defines (gpu-dp's, COLS 1 and 2, as test_dp compiles them) and myers_search.cu. (As GNU unique symbols
    the libraries shared one base, the last loaded library's array, and a kernel's shared memory lay 4 GiB off
    where that array was mapped above its own: the suite's intermittent segmentation fault.)"""
    from gpualign.engines import gpu_dp

    libs = []
    for cols in (1, 2):
        monkeypatch.setattr(gpu_dp, "COLS", cols)
        libs.append((emu.library("dp", tuple(gpu_dp.kernels()[2])), "S"))
    libs.append((emu.library("myers_search"), "sh_peq"))
    for lib, array in libs:
        base = ctypes.c_void_p.in_dll(lib, "emu_shared_base").value
        assert base == ctypes.addressof(ctypes.c_int.in_dll(lib, array))
