"""Cold start: each command's first run on a machine whose kernel caches are empty, then its warm runs.

For every case (pairs: edit, affine, local, global, semi-global, protein; paf; genome; search) on the demo
data (data/demo/, and small inputs made from it): CuPy's kernel cache (CUPY_CACHE_DIR) and gpualign's JIT
cache (GPUALIGN_CACHE_DIR) are pointed at new empty directories, the command runs once (the first run),
then --warm more times with those caches as the first run left them. Optional --old DIR runs the same
cases with an older tree (`git archive REV gpualign kernels | tar -x -C DIR`) in the same session.
Each first run says what it compiled: images in gpualign's JIT cache, files in CuPy's.

The images built ahead (`gpualign cache build`, the install step) are not emptied: that is the point;
`--build` runs `gpualign cache build --arch native` first and reports its time.

    python scripts/bench_coldstart.py --old prof/old --build
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gpualign.io import fastx  # noqa: E402 (the tree's own reader)

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # commands timed with their bytecode cached (docs/benchmarks.md)

DEMO = os.path.join(ROOT, "data", "demo")


def _records(path: str) -> list[tuple[str, str]]:
    return [(name, seq.decode()) for name, seq, _ in fastx.records(path)]


def inputs(work: str) -> dict:
    """Paths of the inputs every case reads, made in work from the demo."""
    a, b = os.path.join(DEMO, "a.fa"), os.path.join(DEMO, "b.fa")
    qa, tb = _records(a), _records(b)
    paf = os.path.join(work, "cands.paf")
    with open(paf, "w") as fh:
        for (qn, q), (tn, t) in zip(qa, tb):
            fh.write(f"{qn}\t{len(q)}\t0\t{len(q)}\t+\t{tn}\t{len(t)}\t0\t{len(t)}\t{min(len(q), len(t))}\t"
                     f"{max(len(q), len(t))}\t60\n")
    pats = os.path.join(work, "pats.fa")
    with open(pats, "w") as fh:
        fh.write("".join(f">p{i}\n{q[10:33]}\n" for i, (_, q) in enumerate(qa[:20])))
    import random

    rng = random.Random(1)
    letters = "ACDEFGHIKLMNPQRSTVWY"
    prot_a, prot_b = os.path.join(work, "pa.fa"), os.path.join(work, "pb.fa")
    with open(prot_a, "w") as fa, open(prot_b, "w") as fb:
        for i in range(300):
            p = "".join(rng.choice(letters) for _ in range(rng.randint(200, 400)))
            m = "".join(c if rng.random() > 0.15 else rng.choice(letters) for c in p)
            fa.write(f">p{i}\n{p}\n")
            fb.write(f">p{i}\n{m}\n")
    return dict(a=a, b=b, paf=paf, pats=pats, prot_a=prot_a, prot_b=prot_b)


def cases(f: dict) -> list[tuple[str, list]]:
    pairs = ["pairs", f["a"], f["b"]]
    return [
        ("pairs edit", pairs),
        ("pairs affine", [*pairs, "--metric", "affine"]),
        ("pairs local", [*pairs, "--mode", "local", "--match", "2"]),
        ("pairs global (general)", [*pairs, "--mode", "global", "--match", "1"]),
        ("pairs semi-global", [*pairs, "--mode", "semi-global", "--match", "2"]),
        ("pairs protein", ["pairs", f["prot_a"], f["prot_b"], "--alphabet", "protein", "--mode", "global"]),
        ("paf", ["paf", f["paf"], f["a"], f["b"]]),
        ("genome", ["genome", f["a"], f["b"]]),
        ("search", ["search", f["pats"], f["b"], "-k", "3"]),
    ]


def run(tree: str, args: list, env: dict, device: str = "gpu") -> tuple[float, int, str]:
    cmd = [sys.executable, "-m", "gpualign", *args, "--device", device, "-q", "-o", os.devnull]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    lines = r.stderr.strip().splitlines()
    return time.perf_counter() - t0, r.returncode, lines[-1] if lines else ""


def count(d: str) -> int:
    return sum(len(files) for _, _, files in os.walk(d)) if os.path.isdir(d) else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", help="an older tree to run the same cases with")
    ap.add_argument("--warm", type=int, default=3, help="warm runs after the first (default 3)")
    ap.add_argument("--build", action="store_true", help="gpualign cache build --arch native first")
    ap.add_argument("--only", help="comma-separated case names (prefixes)")
    ap.add_argument("--device", default="gpu", help="gpu (default), or cpu to check the cases here")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="coldstart-")
    f = inputs(work)
    if a.build:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "gpualign", "cache", "build", "--arch", "native"], cwd=ROOT,
                           capture_output=True, text=True)
        print(f"gpualign cache build --arch native: {time.perf_counter() - t0:.1f} s, rc {r.returncode} "
              f"{r.stdout.strip()}", flush=True)
    trees = [("new", ROOT)] + ([("old", os.path.abspath(a.old))] if a.old else [])
    rows = []
    for name, args in cases(f):
        if a.only and not any(name.startswith(p) for p in a.only.split(",")):
            continue
        row = [name]
        for label, tree in trees:
            caches = tempfile.mkdtemp(prefix=f"caches-{label}-", dir=work)
            ours, cupys = os.path.join(caches, "gpualign"), os.path.join(caches, "cupy")
            env = {**os.environ, "GPUALIGN_CACHE_DIR": ours, "CUPY_CACHE_DIR": cupys}
            first, rc, last = run(tree, args, env, a.device)
            if rc:
                print(f"{label} {name}: exit {rc}: {last}", flush=True)
            compiled = (count(ours), count(cupys))
            warm = [run(tree, args, env, a.device)[0] for _ in range(a.warm)]
            row += [first, min(warm) if warm else float("nan"), compiled]
            print(f"{label:3s} {name:24s} first {first:6.2f} s  warm {min(warm) if warm else 0:5.2f} s "
                  f"(median {statistics.median(warm) if warm else 0:5.2f})  compiled: {compiled[0]} gpualign "
                  f"files, {compiled[1]} cupy files", flush=True)
            shutil.rmtree(caches, ignore_errors=True)
        rows.append(row)
    head = "| case | first run | warm run | compiled on the first run (gpualign, cupy files) |"
    if a.old:
        head = ("| case | first run, new | first run, old | warm, new | warm, old | compiled on the first run "
                "(new; old) |")
    print("\n" + head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        if a.old:
            print(f"| {r[0]} | {r[1]:.2f} s | {r[4]:.2f} s | {r[2]:.2f} s | {r[5]:.2f} s | {r[3]}; {r[6]} |")
        else:
            print(f"| {r[0]} | {r[1]:.2f} s | {r[2]:.2f} s | {r[3]} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
