"""The host's pair reader alone (io/pair_reader.py: what `pairs` reads with when the device reader does not, e.g.
without a GPU or with --host-parse), on simulated 150 bp pairs written as 2-line FASTA and 4-line FASTQ, plain
and bgzip: seconds to take every batch, with one parsing process a file (a child's stream) and with --workers
(parts, fastx_parts.py; a command uses them from -t 8 on). Each run is a process of its own; with --old, another
tree (e.g. `git archive REV gpualign | tar -x -C DIR`) runs the same, alternated. Each tree's batches are checked
the same (a digest of names, sequences and qualities, in runs of their own, not timed). No GPU needed.

  python scripts/bench_reader.py --pairs 1000000 --workers 2 --rounds 2 [--old DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

RUN = """
import hashlib, sys, time
from gpualign.io import pair_reader
a, b, workers, digest = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "digest"
t = time.perf_counter()
h, n = hashlib.md5(), 0
for bt in pair_reader.read_pairs(a, b, 1 << 25, 1 << 18, 0, workers=workers):
    n += bt.n
    if digest:  # (a run of its own, not timed: str per record)
        h.update(bt.seq.tobytes())
        h.update("\\n".join(bt.q_names).encode())
        h.update("\\n".join(q or "" for q in bt.q_quals).encode())
print(f"{time.perf_counter() - t:.3f} {n} {h.hexdigest()}")
"""


def write_inputs(workdir: str, pairs: int, seed: int) -> dict:
    """The inputs by form: (query file, target file), written once per size."""
    import pysam

    rng = np.random.default_rng(seed)
    out = {}
    for side in "ab":
        fa, fq = os.path.join(workdir, f"{side}{pairs}.fa"), os.path.join(workdir, f"{side}{pairs}.fq")
        if not os.path.exists(fq + ".gz"):
            seq = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, (pairs, 150))]
            qual = np.frombuffer(b"#5:FI", np.uint8)[rng.integers(0, 5, (pairs, 150))]
            with open(fa, "wb") as f, open(fq, "wb") as q:
                for i in range(pairs):
                    s = seq[i].tobytes()
                    f.write(b">r%d\n%s\n" % (i, s))
                    q.write(b"@r%d\n%s\n+\n%s\n" % (i, s, qual[i].tobytes()))
            for path in (fa, fq):
                pysam.tabix_compress(path, path + ".gz", force=True)
    for form, ext in (("FASTA", ".fa"), ("bgzip FASTA", ".fa.gz"), ("FASTQ", ".fq"), ("bgzip FASTQ", ".fq.gz")):
        out[form] = tuple(os.path.join(workdir, f"{side}{pairs}{ext}") for side in "ab")
    return out


def run(tree: str, a: str, b: str, workers: int, digest: bool = False) -> tuple[float, str]:
    """(seconds to take every batch, their digest where asked: a run of its own, its time not the reader's)."""
    env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", RUN, a, b, str(workers), "digest" if digest else "time"],
                       capture_output=True, text=True, env=env, cwd=tree)
    if p.returncode:
        raise SystemExit(f"{tree}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    seconds, _, digest = p.stdout.split()
    return float(seconds), digest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2, help="parsing processes a file for the parts' column")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--old", help="another tree (holding gpualign/) to run the same, alternated")
    ap.add_argument("--workdir", default="/tmp/bench_reader")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [("this", here)] + ([("old", os.path.abspath(a.old))] if a.old else [])
    inputs = write_inputs(a.workdir, a.pairs, a.seed)
    print("form\tworkers\ttree\tseconds")
    for form, (qa, qb) in inputs.items():
        digests = set()
        for workers in (1, a.workers):
            times: dict = {name: [] for name, _ in trees}
            for _ in range(a.rounds):
                for name, tree in trees:
                    times[name].append(run(tree, qa, qb, workers)[0])
            digests.update(run(tree, qa, qb, workers, digest=True)[1] for _, tree in trees)
            for name, _ in trees:
                print(f"{form}\t{workers}\t{name}\t{' / '.join(f'{t:.2f}' for t in times[name])}", flush=True)
        if len(digests) != 1:
            raise SystemExit(f"{form}: the runs' batches differ")


if __name__ == "__main__":
    main()
