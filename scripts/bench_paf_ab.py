#!/usr/bin/env python3
"""`gpualign paf` against itself with one option more, whole commands alternated in one run, on reads simulated
as bench_paf.py simulates them, each with its true origin as its candidate (no minimap2 needed).

Writes per set (hifi: 10-20 kbp, 1%; ont: 5-20 kbp, 10%, indel-heavy; short: 150 bp, 2%; both strands) ref.fa,
q.fa and c.paf into --workdir, runs one small command first (kernels loaded, files in the page cache), then
--rounds rounds of the command without and with --with (default --host-parse: the sequences fetched on the host
instead of laid out on the GPU), and prints per run the whole time, the command's own wall and busy stages, and the
output's md5 (the two must agree).

  python scripts/bench_paf_ab.py --genome bact_Ecoli_K12_W3110_NC_007779.fa.gz --hifi 60000 --ont 30000
  python scripts/bench_paf_ab.py --genome bact_Ecoli_K12_W3110_NC_007779.fa.gz --hifi 0 --ont 0 --short 1000000
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_paf import reads_with_origin  # noqa: E402

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # commands timed with their bytecode cached (docs/benchmarks.md)
SETS = {"hifi": (10000, 20000, 0.01, "uniform"), "ont": (5000, 20000, 0.10, "long"),
        "short": (150, 150, 0.02, "uniform")}
STAGES = ("wall", "read", "align", "write")


def genome_of(path: str) -> bytes:
    """The first record's sequence, upper case (read as bench_paf.py reads it)."""
    import pysam

    with pysam.FastxFile(path) as fh:
        return next(iter(fh)).sequence.upper().encode()


def write_set(work: str, label: str, genome: bytes, n: int) -> tuple:
    lo, hi, rate, profile = SETS[label]
    d = os.path.join(work, label)
    os.makedirs(d, exist_ok=True)
    reads, starts, lens, rev = reads_with_origin(genome, n, lo, hi, rate, profile, seed=len(label))
    with open(os.path.join(d, "ref.fa"), "wb") as fh:
        fh.write(b">ref\n" + genome + b"\n")
    with open(os.path.join(d, "q.fa"), "wb") as fh:
        fh.write(b"".join(b">%s%d\n%s\n" % (label.encode(), i, r) for i, r in enumerate(reads)))
    with open(os.path.join(d, "c.paf"), "w") as fh:
        for i, r in enumerate(reads):
            s, ln = int(starts[i]), int(lens[i])
            fh.write(f"{label}{i}\t{len(r)}\t0\t{len(r)}\t{'-' if rev[i] else '+'}\tref\t{len(genome)}\t{s}\t{s + ln}\t"
                     f"{ln}\t{ln}\t60\ttp:A:P\n")
    return tuple(os.path.join(d, x) for x in ("c.paf", "q.fa", "ref.fa"))


def run(paths: tuple, out: str, extra: list, device: str) -> dict:
    summ = out + ".summary.tsv"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "gpualign", "paf", *paths, "-o", out, "--device", device, "-q",
                        "--summary", summ, *extra], capture_output=True, text=True)
    row = {"whole": time.perf_counter() - t0}
    if p.returncode:
        raise SystemExit(f"gpualign paf {' '.join(extra)} failed: {p.stderr.strip()[-300:]}")
    stats = dict(line.rstrip("\n").split("\t", 1) for line in open(summ) if "\t" in line)
    row.update({k: float(stats[f"{k}_seconds"]) for k in STAGES if f"{k}_seconds" in stats})
    with open(out, "rb") as fh:
        row["md5"] = hashlib.md5(fh.read()).hexdigest()[:8]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genome", required=True, help="FASTA (gzip too); its first record is the reference")
    ap.add_argument("--hifi", type=int, default=60000)
    ap.add_argument("--ont", type=int, default=30000)
    ap.add_argument("--short", type=int, default=0, help="short reads (150 bp, 2%%), as many")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--with", dest="other", default="--host-parse", help="the option(s) of the second command")
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--workdir")
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="gpualign-paf-ab-")
    genome = genome_of(a.genome)
    print("set\tcommand\tround\twhole_s\t" + "\t".join(f"{k}_s" for k in STAGES) + "\tmd5")
    for label, n in (("hifi", a.hifi), ("ont", a.ont), ("short", a.short)):
        if n <= 0:
            continue
        paths = write_set(work, label, genome, n)
        head = paths[0] + ".head.paf"
        with open(paths[0]) as src, open(head, "w") as dst:
            dst.writelines(src.readlines()[:300])
        run((head, *paths[1:]), os.path.join(work, f"{label}.head.out.paf"), [], a.device)
        md5s = set()
        for r in range(1, a.rounds + 1):
            for name, extra in (("default", []), (a.other, a.other.split())):
                row = run(paths, os.path.join(work, f"{label}.{len(extra)}.out.paf"), extra, a.device)
                md5s.add(row["md5"])
                print(f"{label}\t{name}\t{r}\t{row['whole']:.2f}\t" + "\t".join(f"{row.get(k, float('nan')):.2f}"
                                                                            for k in STAGES) + f"\t{row['md5']}",
                      flush=True)
        if len(md5s) != 1:
            raise SystemExit(f"{label}: the two commands wrote different bytes ({sorted(md5s)})")


if __name__ == "__main__":
    main()
