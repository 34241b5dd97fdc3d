#!/usr/bin/env python3
"""Run the README's commands on data/demo and print one SHA-256 per output (stdout only; the summary and
notices on stderr hold timings and are left out). Run it at two commits and diff the two listings: a
restructuring that changes no behaviour prints the same lines.

    python3 scripts/check_demo.py [--repo DIR] > hashes.txt
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile


def paf_candidates(a: str, b: str, out: str) -> None:
    """One minimap2-like candidate per demo pair: the whole query against the whole target."""
    def lengths(path):
        names, lens = [], []
        for line in open(path):
            if line.startswith(">"):
                names.append(line[1:].split()[0])
                lens.append(0)
            else:
                lens[-1] += len(line.strip())
        return list(zip(names, lens))

    with open(out, "w") as fh:
        for (qn, ql), (tn, tl) in zip(lengths(a), lengths(b)):
            fh.write(f"{qn}\t{ql}\t0\t{ql}\t+\t{tn}\t{tl}\t0\t{tl}\t0\t{max(ql, tl)}\t60\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    repo = os.path.abspath(ap.parse_args().repo)
    tmp = tempfile.mkdtemp(prefix="gpualign-demo-")
    try:
        a, b = (shutil.copy(os.path.join(repo, "data", "demo", f), tmp) for f in ("a.fa", "b.fa"))
        cands = os.path.join(tmp, "cands.paf")
        paf_candidates(a, b, cands)
        runs = {
            "pairs": ["pairs", a, b],
            "pairs-affine": ["pairs", a, b, "--metric", "affine", "-x", "4", "-O", "6", "-E", "2"],
            "pairs-distance": ["pairs", a, b, "--distance-only"],
            "pairs-sam": ["pairs", a, b, "--format", "sam"],
            "pairs-tsv-nmis": ["pairs", a, b, "--format", "tsv", "--n-mismatch"],
            "paf": ["paf", cands, a, b, "--cs"],
            "paf-global-sam": ["paf", cands, a, b, "--mode", "global", "--format", "sam"],
            "paf-edit": ["paf", cands, a, b, "--metric", "edit"],
            "genome": ["genome", a, b, "--distance-only", "--device", "cpu"],
            "help": ["--help"],
            "help-pairs": ["pairs", "--help"],
            "help-paf": ["paf", "--help"],
            "help-genome": ["genome", "--help"],
            "error-genome": ["genome", a, b],
            "error-metric": ["pairs", a, b, "--metric", "nope"],
        }
        env = dict(os.environ, PYTHONPATH=repo, COLUMNS="100", TERM="dumb")
        for name, args in runs.items():
            p = subprocess.run([sys.executable, "-m", "gpualign", *args, "-q"] if args[0] != "--help" and
                               "--help" not in args else [sys.executable, "-m", "gpualign", *args],
                               capture_output=True, env=env, cwd=tmp)
            out = p.stdout.replace(tmp.encode(), b"TMP")
            if name.startswith("genome"):  # columns 7 and 8 hold seconds and cells/s
                out = b"\n".join(b"\t".join(c for i, c in enumerate(line.split(b"\t")) if i not in (6, 7))
                                 for line in out.split(b"\n"))
            if name.endswith("sam"):  # @PG's CL holds the temporary paths
                out = b"\n".join(line for line in out.split(b"\n") if not line.startswith(b"@PG"))
            err = p.stderr.replace(tmp.encode(), b"TMP") if name.startswith(("error", "help")) else b""
            print(f"{name}\trc={p.returncode}\t{hashlib.sha256(out).hexdigest()[:16]}\t"
                  f"{hashlib.sha256(err).hexdigest()[:16]}\t{len(out)}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
