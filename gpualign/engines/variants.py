"""Every kernel module the engines can ask for, and building them all ahead of time (`gpualign cache build`).

Each engine declares its modules as (file, names, defines) tuples beside the code that loads them; a
request is served by the module of the same file and defines whose names hold the ones asked for (the
search engine asks for the pattern widths of its patterns only, and gets them from the module of every
width). What is not here compiles on first use, for a reason:
  - benchmark knobs that add defines: GpuAffineEngine.tune["min_blocks"], gpu_long.BP_DEFINES, the search
    engine's `defines` (scripts/bench_search.py, scripts/profile.py);
  - an unknown GPU with no cubin of its family and no PTX old enough (gpu/images.TARGETS).
"""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .. import text_device
from ..gpu import arrays, images, nvrtc
from ..io import fastx_device
from ..search import gpu as search_gpu
from ..search import gpu_align
from . import gpu_affine, gpu_anchors, gpu_dp, gpu_edit, gpu_long

VARIANTS = (gpu_edit.KERNELS, gpu_affine.KERNELS, gpu_dp.kernels(), gpu_long.WFA_KERNELS, gpu_long.BP_KERNELS,
            search_gpu.KERNELS, gpu_align.KERNELS, arrays.KERNELS, gpu_anchors.KERNELS, fastx_device.KERNELS,
            text_device.KERNELS)


@dataclass
class Built:
    """One image of `build`: what, for which target, where, its size and the seconds NVRTC took (0.0 when
    an image was there already)."""

    file: str
    target: str
    path: str
    size: int
    seconds: float


def serving(filename: str, names: tuple, defines: tuple = ()) -> tuple | None:
    """The registered module that serves a request, or None (it compiles on first use)."""
    for file, all_names, defs in VARIANTS:
        if file == filename and tuple(defs) == tuple(defines) and set(names) <= set(all_names):
            return file, all_names, defs
    return None


def build(directory: str, targets: tuple = images.TARGETS, jobs: int | None = None,
          force: bool = False, on_done=None) -> list[Built]:
    """Every registered module for every target into directory, NVRTC on `jobs` threads (default: the
    cores); images already there and whole (same source digest, names and target, bytes of the recorded
    hash) are kept unless force. on_done(b) is called as each finishes. KernelError when NVRTC is missing,
    or a kernel fails to compile (the jobs not started then are dropped)."""
    nvrtc_version = nvrtc.version()
    targets = tuple(dict.fromkeys(targets))
    work = []
    for file, names, defines in VARIANTS:
        code, headers = images.sources(file)
        opts = images.options(defines)
        dig = images.digest(code, headers, opts)
        have = {(m["target"], tuple(m["names"])): m for m in images.entries(directory, file, dig)}
        for target in targets:
            old = have.get((target, tuple(names)))
            if old is not None and not force and _whole(old):
                done = Built(file, target, old["path"], os.path.getsize(old["path"]), 0.0)
                if on_done:
                    on_done(done)
                work.append(done)
                continue
            work.append((file, names, code, headers, opts, dig, target))

    def one(item) -> Built:
        file, names, code, headers, opts, dig, target = item
        t0 = time.perf_counter()
        image, mapping = nvrtc.compile_source(code, file, headers, opts, names, target)
        path = images.store(directory, file, dig, names, target, image, mapping, nvrtc_version)
        done = Built(file, target, path, len(image), time.perf_counter() - t0)
        if on_done:
            on_done(done)
        return done

    # the most names first (dp.cu takes most of the time), so the pool ends together
    todo = sorted((w for w in work if not isinstance(w, Built)), key=lambda w: -len(w[1]))
    pool = ThreadPoolExecutor(max(1, jobs or os.cpu_count() or 1))
    try:
        built = list(pool.map(one, todo))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [w for w in work if isinstance(w, Built)] + built


def _whole(meta: dict) -> bool:
    try:
        with open(meta["path"], "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest() == meta["sha256"]
    except OSError:
        return False
