"""Compiled kernel images on disk: where they are kept, how they are named, and which one fits a GPU.

An image is one kernels/*.cu file compiled by NVRTC (gpu/nvrtc.py) with given defines and kernel
names, for one target: a cubin for sm_XY, or PTX for compute_XY that the driver compiles itself. Beside each
image a small JSON file says what it holds:

    {"file": "ewfa.cu", "digest": <source digest>, "names": [...], "mapping": {name: symbol},
     "target": "sm_90", "sha256": <the image's hash>, "nvrtc": [13, 0]}

`digest` hashes the source, every header of kernels/ and the compile options, not the directory they were
read from, so images built by one install serve another of the same sources. An image serves a request
when digest matches and its names hold the names asked for.

Directories searched, first to last:
  1. the first-use cache: $GPUALIGN_CACHE_DIR, else $XDG_CACHE_HOME/gpualign/kernels (~/.cache/...): what
     this user compiled on first use; written by the run;
  2. $GPUALIGN_KERNEL_PATH: directories separated by ':', read only (a cluster's or a container's shared
     images, filled once by `gpualign cache build --dir DIR`);
  3. the install's own images, gpualign/_kernels/ (`gpualign cache build` fills it).
With GPUALIGN_PREBUILT=0 only the first is searched (timing a first run that compiles everything).
Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile

CACHE_ENV = "GPUALIGN_CACHE_DIR"
PATH_ENV = "GPUALIGN_KERNEL_PATH"
PREBUILT_ENV = "GPUALIGN_PREBUILT"  # "0": images built ahead are ignored, everything compiles on first use
# every compile's options, before the defines and the target: functions without __host__/__device__ (the
# kernels' lambdas) are device functions, as CuPy compiles them for NVRTC 12 and later
OPTIONS = ("-std=c++17", "--device-as-default-execution-space")
# what `gpualign cache build` makes by default: cubins for each architecture family CUDA 13 supports (a
# cubin runs on its own major version at the same or a higher minor: sm_80 on sm_86 and sm_89, sm_100
# on sm_103, sm_120 on sm_121), and PTX of the lowest, which the driver compiles for any later GPU
TARGETS = ("sm_75", "sm_80", "sm_90", "sm_100", "sm_120", "compute_75")
TARGET = re.compile(r"(sm|compute)_(\d{1,2})(\d)")  # a target's form: kind, major, minor


def cache_dir() -> str:
    """The first-use cache: $GPUALIGN_CACHE_DIR, else $XDG_CACHE_HOME/gpualign/kernels (~/.cache/...)."""
    if os.environ.get(CACHE_ENV):
        return os.environ[CACHE_ENV]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpualign", "kernels")


def install_dir() -> str:
    """The install's own images: gpualign/_kernels/."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_kernels")


def search_dirs() -> list[str]:
    """Every directory looked in, in order (module docstring); the first-use cache alone with GPUALIGN_PREBUILT=0."""
    if os.environ.get(PREBUILT_ENV) == "0":
        return [cache_dir()]
    shared = [d for d in os.environ.get(PATH_ENV, "").split(":") if d]
    return [cache_dir(), *shared, install_dir()]


def kernel_dir() -> str:
    """kernels/ beside the package (source checkout / editable install) or inside it (a wheel)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "..", "..", "kernels"), os.path.join(here, "..", "kernels")):
        if os.path.isfile(os.path.join(cand, "common.cuh")):
            return os.path.normpath(cand)
    raise FileNotFoundError("gpualign kernels/ directory not found")


def sources(filename: str) -> tuple[str, dict]:
    """(the text of kernels/<filename>, {header name: text} for every .cuh of kernels/)."""
    kdir = kernel_dir()
    with open(os.path.join(kdir, filename)) as fh:
        code = fh.read()
    headers = {}
    for name in sorted(os.listdir(kdir)):
        if name.endswith(".cuh"):
            with open(os.path.join(kdir, name)) as fh:
                headers[name] = fh.read()
    return code, headers


def options(defines: tuple) -> tuple:
    return (*OPTIONS, *(f"-D{d}" for d in defines))


def digest(code: str, headers: dict, opts: tuple) -> str:
    """Hash of what an image's code depends on, apart from its names and target."""
    h = hashlib.sha256()
    for part in (code, *(f"{k}\0{v}" for k, v in sorted(headers.items())), repr(tuple(opts))):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _prefix(filename: str, dig: str) -> str:
    return f"{filename.rsplit('.', 1)[0]}-{dig[:20]}-"


def stem(filename: str, dig: str, names: tuple, target: str) -> str:
    """An image's file name without extension: file, digest, target and a hash of its names."""
    nh = hashlib.sha256("\0".join(names).encode()).hexdigest()[:10]
    return f"{_prefix(filename, dig)}{target}-{nh}"


def store(directory: str, filename: str, dig: str, names: tuple, target: str, image: bytes, mapping: dict,
          nvrtc: tuple) -> str:
    """Write an image and its JSON (each under a temporary name, then renamed: readers never see half a
    file), readable by every user (a shared directory); the image's path. OSError when the directory
    cannot be written."""
    os.makedirs(directory, exist_ok=True)
    base = os.path.join(directory, stem(filename, dig, names, target))
    image_path = base + (".cubin" if target.startswith("sm_") else ".ptx")
    meta = {"file": filename, "digest": dig, "names": list(names), "mapping": mapping, "target": target,
            "sha256": hashlib.sha256(image).hexdigest(), "nvrtc": list(nvrtc)}
    for path, data in ((image_path, image), (base + ".json", json.dumps(meta, indent=1).encode())):
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                os.fchmod(fh.fileno(), 0o644)  # (mkstemp's 0600 would hide it from other users)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    return image_path


def _rank(target: str, cc: tuple[int, int]) -> int | None:
    """How well an image for target fits a GPU of compute capability cc: a cubin of the same major and the
    highest minor not above cc's first, then PTX of the highest version not above cc; None if it cannot
    run there."""
    m = TARGET.fullmatch(target)
    if m is None:
        return None
    kind, major, minor = m.group(1), int(m.group(2)), int(m.group(3))
    if kind == "sm" and major == cc[0] and minor <= cc[1]:
        return 1000 + minor
    if kind == "compute" and (major, minor) <= cc:
        return 10 * major + minor
    return None


def entries(directory: str, filename: str | None = None, dig: str | None = None) -> list[dict]:
    """The images of a directory (those of filename and digest when given): their JSON, with "path" (the
    image) added. A JSON that is not one of ours, or not of this form (another release's, a hand edit),
    is passed over."""
    try:
        listing = os.listdir(directory)
    except OSError:
        return []
    prefix = _prefix(filename, dig) if filename and dig else ""
    found = []
    for name in sorted(listing):
        if not (name.endswith(".json") and name.startswith(prefix)):
            continue
        try:
            with open(os.path.join(directory, name)) as fh:
                meta = json.load(fh)
            if not _well_formed(meta):
                continue
            ext = ".cubin" if meta["target"].startswith("sm_") else ".ptx"
            meta["path"] = os.path.join(directory, name[:-5] + ext)
            found.append(meta)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return found


def _strings(xs) -> bool:
    return isinstance(xs, list) and all(isinstance(x, str) for x in xs)


def _well_formed(meta) -> bool:
    """Is meta an image's JSON of this release's form (store)?"""
    if not isinstance(meta, dict) or not _strings([meta.get(k) for k in ("file", "digest", "sha256", "target")]):
        return False
    mapping = meta.get("mapping")
    return (TARGET.fullmatch(meta["target"]) is not None and _strings(meta.get("names"))
            and isinstance(mapping, dict) and _strings(list(mapping.values())) and set(meta["names"]) <= set(mapping))


def find(filename: str, dig: str, names: tuple, cc: tuple[int, int], dirs: list[str] | None = None):
    """Images that serve (filename, digest, names) on a GPU of compute capability cc, best first: each
    directory in search order, within it the best-fitting target. Each is (path, mapping, image bytes);
    an image whose bytes do not match its recorded hash is passed over."""
    want = set(names)
    for directory in search_dirs() if dirs is None else dirs:
        fits = []
        for meta in entries(directory, filename, dig):
            rank = _rank(meta["target"], cc)
            if rank is None or meta["digest"] != dig or not want <= set(meta["names"]):
                continue
            fits.append((rank, meta))
        for _, meta in sorted(fits, key=lambda f: -f[0]):
            try:
                with open(meta["path"], "rb") as fh:
                    image = fh.read()
            except OSError:
                continue
            if hashlib.sha256(image).hexdigest() == meta["sha256"]:
                yield meta["path"], dict(meta["mapping"]), image
