"""`gpualign cache`: the compiled kernels: where they are, building them ahead of time, clearing the first-use cache.

Data (the listing) goes to stdout, progress to stderr."""

from __future__ import annotations

import os
import re
import sys
import time

import click

from ..errors import ConfigError, KernelError
from .common import DEBUG, run_guarded
from .usage import Group, command

app = Group("cache", help="The compiled GPU kernels: where they are kept, building them ahead, clearing them.",
            short_help="The compiled GPU kernels: build them ahead, list, clear.")

LEGACY = re.compile(r"[0-9a-f]{64}\.(cubin|json)|\.tmp-.*")  # an earlier release's cache files, or half-written ones


def _targets(arch: str) -> tuple:
    """The targets --arch names, each one this NVRTC compiles for (KernelError without NVRTC)."""
    from ..gpu import images, nvrtc

    if arch == "all":
        targets = images.TARGETS
    elif arch == "native":
        cc = _local_capability()
        if cc is None:
            raise ConfigError("--arch native: no usable CUDA GPU here (name the targets: --arch sm_90,...)")
        targets = (nvrtc.target_for(cc),)
    else:
        targets = tuple(dict.fromkeys(t.strip() for t in arch.split(",") if t.strip()))
        bad = [t for t in targets if not images.TARGET.fullmatch(t)]
        if bad or not targets:
            raise ConfigError(f"--arch: {', '.join(bad) or repr(arch)} is not a target (sm_90, compute_75, "
                              "a list of them, native or all)")
    archs = nvrtc.supported()
    unknown = [t for t in targets if int(t.partition("_")[2]) not in archs]
    if unknown:
        raise ConfigError(f"--arch: NVRTC {'.'.join(map(str, nvrtc.version()))} does not compile for "
                          f"{', '.join(unknown)} (it knows {', '.join(map(str, archs))})")
    return targets


def _local_capability():
    from ..engines import gpu_status

    if not gpu_status()[0]:
        return None
    import cupy

    from ..gpu.kernels import capability

    return capability(cupy.cuda.Device(0))


@command(app, "build")
@click.option("--dir", "directory", help="Where to put them (default: the install's own, gpualign/_kernels/; share another with GPUALIGN_KERNEL_PATH).")
@click.option("--arch", default="all", help="Targets: all (cubins for sm_75, 80, 90, 100, 120 and PTX for later GPUs), native (this GPU's), or a list (sm_90,compute_75).")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, help="NVRTC threads (0 = all cores).")
@click.option("--force", is_flag=True, help="Compile again images already there.")
@DEBUG
def build(directory, arch, jobs, force, debug) -> None:
    """Compile every kernel the engines use, for each target, with NVRTC (no GPU needed)."""
    from ..engines import variants
    from ..gpu import images

    def body():
        targets = _targets(arch)
        where = directory or images.install_dir()
        bad = ConfigError if directory else KernelError  # (a directory named, or the install's own)
        if os.path.exists(where) and not os.path.isdir(where):
            raise bad(f"{where}: not a directory")
        try:
            os.makedirs(where, exist_ok=True)
        except OSError as e:
            raise bad(f"{where}: cannot be made ({e.strerror or e})") from None
        if not os.access(where, os.W_OK):
            raise bad(f"{where}: not writable (build elsewhere with --dir DIR, then point "
                      f"{images.PATH_ENV} at it)")
        t0 = time.perf_counter()

        def done(b) -> None:
            what = "kept" if b.seconds == 0.0 else f"{b.seconds:.1f} s"
            print(f"gpualign: {b.file} {b.target}: {b.size / 1024:,.0f} KiB ({what})", file=sys.stderr, flush=True)

        print(f"gpualign: compiling the kernels for {', '.join(targets)} into {where} (minutes: each line below is "
              f"one image, as it is done)", file=sys.stderr, flush=True)
        built = variants.build(where, targets, jobs or None, force, done)
        made = sum(b.seconds > 0 for b in built)
        print(f"{where}\t{len(built)} images ({made} compiled, {len(built) - made} kept) in "
              f"{time.perf_counter() - t0:.1f} s")

    run_guarded(body, debug)


@command(app, "info")
@DEBUG
def info(debug) -> None:
    """Where compiled kernels are looked for, what each holds, and what this GPU would load."""
    from ..engines import variants
    from ..gpu import images, nvrtc

    def body():
        roles = {images.cache_dir(): "first-use cache (GPUALIGN_CACHE_DIR)",
                 images.install_dir(): "install (gpualign cache build)"}
        out = []
        for d in images.search_dirs():
            found = images.entries(d)
            targets = sorted({m["target"] for m in found})
            role = roles.get(d, f"shared ({images.PATH_ENV})")
            held = f"{len(found)} images" if os.path.isdir(d) else "missing"
            out.append(f"dir\t{d}\t{role}\t{held}\t{','.join(targets) or '-'}")
        out.append(f"nvrtc\t{'.'.join(map(str, nvrtc.version())) if nvrtc.available() else 'not found'}")
        cc = _local_capability()
        if cc is None:
            out.append("gpu\tnone")
        else:
            out.append(f"gpu\tsm_{cc[0]}{cc[1]}")
            for file, names, defines in variants.VARIANTS:
                code, headers = images.sources(file)
                dig = images.digest(code, headers, images.options(defines))
                hit = next(images.find(file, dig, names, cc), None)
                out.append(f"kernel\t{file}\t{hit[0] if hit else 'compiles on first use'}")
        print("\n".join(out))

    run_guarded(body, debug)


@command(app, "clear")
@click.option("--dir", "directory", help="The directory to empty (default: the first-use cache).")
@DEBUG
def clear(directory, debug) -> None:
    """Remove compiled kernels from the first-use cache (or --dir): only gpualign's own files."""
    from ..gpu import images

    def body():
        where = directory or images.cache_dir()
        if directory and not os.path.isdir(directory):
            raise ConfigError(f"--dir {directory}: not a directory")
        removed = 0
        for meta in images.entries(where):
            for path in (meta["path"], meta["path"].rsplit(".", 1)[0] + ".json"):
                try:
                    os.unlink(path)
                    removed += 1
                except FileNotFoundError:
                    pass
                except OSError as e:
                    raise KernelError(f"{path}: cannot be removed ({e.strerror or e})") from None
        try:
            stale = [n for n in os.listdir(where) if LEGACY.fullmatch(n)]
        except OSError:
            stale = []
        for name in stale:
            try:
                os.unlink(os.path.join(where, name))
                removed += 1
            except OSError:
                pass
        print(f"{where}\t{removed} files removed")

    run_guarded(body, debug)
