"""Text in shared-memory blocks (what the formatting processes hand back, output/parallel.py) to a file: the ways
to write it, timed on the same blocks. `mapped`: shm.write_to's fallback (the block mapped here with its pages
populated, written);
`sendfile`: the kernel copies it (shm.write_to into an output/sink.Sink); `threads`: four threads writing at
their offsets; `allocated`: the file's size allocated first, then mapped and written. Two passes; one JSON
line per pass and way (host, Python, git SHA) on stderr.

    python scripts/bench_write.py --blocks 90 --mib 11.7 --dir /tmp
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpualign import shm  # noqa: E402
from gpualign.output.sink import Sink  # noqa: E402


def _mapped(fd: int, name: str, size: int, at: int | None = None) -> None:
    """Block name mapped here and written at the file's position (at None) or at offset `at`."""
    path = os.path.join(shm.SHM_DIR, name)
    src = os.open(path, os.O_RDONLY)
    try:
        os.unlink(path)
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        with mmap.mmap(src, size, flags=flags, prot=mmap.PROT_READ) as block, memoryview(block) as view:
            done = 0
            while done < size:
                done += os.write(fd, view[done:]) if at is None else os.pwrite(fd, view[done:], at + done)
    finally:
        os.close(src)


def run(mode: str, names: list, size: int, path: str) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    try:
        if mode == "sendfile":
            sink = Sink(fd, path, own=False)
            for name in names:
                shm.write_to(name, size, sink)
        elif mode == "threads":
            with ThreadPoolExecutor(4) as ex:
                list(ex.map(lambda job: _mapped(fd, job[1], size, job[0] * size), enumerate(names)))
        else:
            if mode == "allocated":
                os.posix_fallocate(fd, 0, len(names) * size)
            for name in names:
                _mapped(fd, name, size)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=90)
    ap.add_argument("--mib", type=float, default=11.7, help="bytes per block, MiB")
    ap.add_argument("--dir", default="/tmp", help="where the file is written (removed after each run)")
    a = ap.parse_args()
    size = int(a.mib * (1 << 20))
    data = np.random.default_rng(1).integers(48, 58, size, dtype=np.uint8)
    path = os.path.join(a.dir, f"gpualign-bench-write-{os.getpid()}")
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "?"
    for rep in range(2):
        for mode in ("mapped", "sendfile", "threads", "allocated"):
            names = [shm.put([data]) for _ in range(a.blocks)]
            try:
                secs = run(mode, names, size, path)
                assert os.path.getsize(path) == a.blocks * size
            finally:
                for name in names:
                    shm.discard(name)
                os.unlink(path)
            print(f"pass {rep + 1} {mode:<9} {secs:6.3f} s  {a.blocks * size / secs / 1e9:5.2f} GB/s")
            print(json.dumps({"bench": "write", "mode": mode, "pass": rep + 1, "blocks": a.blocks, "bytes": size,
                              "seconds": round(secs, 4), "dir": a.dir, "host": platform.node(), "cpus": os.cpu_count(),
                              "python": platform.python_version(), "git": sha}), file=sys.stderr)


if __name__ == "__main__":
    main()
