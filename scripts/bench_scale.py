#!/usr/bin/env python3
"""Benchmark several GPUs: `gpualign pairs`/`paf` on one process's GPU against `--gpus ...` (this host's GPUs
from the same process, devices.py), or against `--cpu-workers K` (the Dask path without a GPU), whole commands.

Sets (simulated with scripts/simulate.py, written as FASTA once):
  edit150   N pairs of 150 bp at 2%, edit distance
  affine1k  N pairs of 1 kbp at 10%, affine 4/6/2
  ont       `gpualign paf`: --ont Nanopore-like reads (5-20 kbp, ~10%, bench_paf.py's simulation) from
            --genome, one candidate per read at the locus it was drawn from
  chrom     `gpualign genome`: one pair of --chrom-len bp at --chrom-rate edits (an optimal path, PAF); with
            --gpus naming more slots than pairs, the pair is shared by every slot
  chromd    the same pair, --distance-only (TSV: every column but the seconds compared)
  searcha   `gpualign search`: bench_search.py's set a (312 guides x 23 nt, k = 3) on a simulated genome of
            --search-mbp (3100: human-sized); searchb its set b (10,000 guides, k = 4)
For each set: the one-process run and one run per --gpus value (`;`-separated: "1;2" or "1;0,0": two slots on
one GPU), with --fail SLOT:TASK the last of them again with that device lost mid-run ($GPUALIGN_FAIL_DEVICE),
and with --worker a run through Dask (`--scheduler`) served by a `gpualign worker` started (and warm) before
the runs; wall clock of the whole command (best of --repeat), output checked byte for byte against the
one-process run, busy seconds per stage and per device slot. Prints a table (speed-up over the one-process
run; efficiency per distinct GPU) and one JSON line per run.

  python scripts/bench_scale.py --gpus "1;2" --sets edit150,affine1k -n 1000000
  python scripts/bench_scale.py --gpus "1;0,0" --fail 1:3 --sets affine1k -n 300000
  python scripts/bench_scale.py --cpu --gpus 2 -n 20000          # the Dask path on CPU workers
  python scripts/bench_scale.py --gpus 1 --worker --repeat 3 -n 3000 --sets affine1k   # a run's start
  python scripts/bench_scale.py --sets ont --ont 50000 --genome ecoli.fa.gz
  python scripts/bench_scale.py --sets chrom,chromd --chrom-len 48000000 --chrom-rate 0.084 --gpus "1;2"
  python scripts/bench_scale.py --sets searchb --search-mbp 3100 --gpus "1;2"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_paf import reads_with_origin  # noqa: E402
from simulate import simulate, write_fasta  # noqa: E402

SETS = {"edit150": (150, 0.02, ["--metric", "edit"]), "affine1k": (1000, 0.10, ["--metric", "affine"])}


def chrom_set(n: int, rate: float, tmp: str) -> list:
    a, b = os.path.join(tmp, "chrom_a.fa"), os.path.join(tmp, "chrom_b.fa")
    if not os.path.exists(a):
        q, t = simulate(1, n, rate, seed=11)
        write_fasta(a, q, "chrA")
        write_fasta(b, t, "chrB")
    return [a, b]


def search_set(name: str, mbp: int, tmp: str) -> tuple[list, list]:
    """([patterns.fa, genome.fa], options) of bench_search.py's set a or b on a simulated genome of mbp Mbp."""
    from bench_search import SETS as SEARCH_SETS
    from bench_search import first_bases, write_genome, write_patterns

    genome = os.path.join(tmp, f"genome{mbp}.fa")
    if not os.path.exists(genome):
        write_genome(genome, mbp, 250)
    count, length, k, _ = SEARCH_SETS[name[-1]]
    pats = os.path.join(tmp, f"{name}.fa")
    write_patterns(pats, count, length, first_bases(genome, 10_000_000), seed=2)
    return [pats, genome], ["-k", str(k)]


def same_output(out: str, base: str) -> bool:
    """Byte for byte, except genome's distance TSV, whose seconds and rates columns differ run to run."""
    x, y = (open(p, "rb").read() for p in (out, base))
    if not out.endswith(".tsv"):
        return x == y
    if not os.path.basename(out).startswith("chromd"):  # (search's TSV: whole)
        return x == y
    cut = [[line.split(b"\t")[:6] + line.split(b"\t")[9:] for line in z.splitlines()] for z in (x, y)]
    return cut[0] == cut[1]


def run(command: str, args: list, summary: str, env: dict | None = None) -> tuple[float, dict]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "gpualign", command, *args, "--summary", summary, "-q"],
                       capture_output=True, text=True, env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"gpualign failed ({p.returncode}): {p.stderr.strip()}")
    with open(summary) as fh:
        rows = dict(line.rstrip("\n").split("\t", 1) for line in fh if not line.startswith("key\t"))
    return seconds, rows


SCHEDULER = """
import asyncio, sys
from distributed import Scheduler
async def main():
    async with Scheduler(port=0, dashboard_address=None) as s:
        print(s.address, flush=True)
        await s.finished()
asyncio.run(main())
"""


def start_worker(cpu: bool) -> tuple[str, list]:
    """A Dask scheduler and a `gpualign worker` joined to it (its engines warm): (address, processes)."""
    sched = subprocess.Popen([sys.executable, "-c", SCHEDULER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    address = sched.stdout.readline().strip()
    worker = subprocess.Popen([sys.executable, "-m", "gpualign", "worker", "--scheduler", address,
                               *(["--device", "cpu"] if cpu else [])], stderr=subprocess.PIPE, text=True)
    for line in worker.stderr:
        print(line.rstrip(), file=sys.stderr)
        if "joined" in line:
            return address, [worker, sched]
    raise SystemExit("gpualign worker did not join")


def pairs_set(name: str, n: int, tmp: str) -> tuple[list, list]:
    """([a.fa, b.fa], options) of a simulated pairs set."""
    length, rate, opts = SETS[name]
    q, t = simulate(n, length, rate, seed=7)
    fa, fb = os.path.join(tmp, f"{name}_a.fa"), os.path.join(tmp, f"{name}_b.fa")
    write_fasta(fa, q, "q")
    write_fasta(fb, t, "t")
    return [fa, fb], opts


def ont_set(genome_path: str, n: int, tmp: str) -> list:
    """[candidates.paf, reads.fa, ref.fa]: n ONT-like reads, each with its true locus as the candidate."""
    import pysam

    if not genome_path:
        raise SystemExit("the ont set needs --genome")
    with pysam.FastxFile(genome_path) as fh:
        genome = next(iter(fh)).sequence.upper().encode()
    reads, starts, lens, rev = reads_with_origin(genome, n, 5000, 20000, 0.10, "long", seed=3)
    ref, rfa, paf = (os.path.join(tmp, x) for x in ("ref.fa", "ont.fa", "ont.paf"))
    with open(ref, "wb") as fh:
        fh.write(b">ref\n" + genome + b"\n")
    with open(rfa, "wb") as fh:
        fh.write(b"".join(b">ont%d\n%s\n" % (i, r) for i, r in enumerate(reads)))
    with open(paf, "w") as fh:
        for i, (r, s, ln, v) in enumerate(zip(reads, starts.tolist(), lens.tolist(), rev.tolist())):
            fh.write(f"ont{i}\t{len(r)}\t0\t{len(r)}\t{'-' if v else '+'}\tref\t{len(genome)}\t{s}\t{s + ln}\t"
                     f"{ln}\t{ln}\t60\n")
    return [paf, rfa, ref]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--pairs", type=int, default=1_000_000)
    ap.add_argument("--sets", default="edit150,affine1k")
    ap.add_argument("--gpus", default="1;2", help="--gpus values to run, ';'-separated (with --cpu: worker counts)")
    ap.add_argument("--cpu", action="store_true", help="CPU workers (--cpu-workers) instead of GPUs")
    ap.add_argument("--fail", help="SLOT:TASK: the last --gpus value run again with that device slot lost")
    ap.add_argument("--ont", type=int, default=50_000, help="reads of the ont set")
    ap.add_argument("--genome", help="FASTA (gz ok) whose first record the ont set's reads come from")
    ap.add_argument("--chrom-len", type=int, default=20_000_000, help="bases of the chrom sets' pair")
    ap.add_argument("--chrom-rate", type=float, default=0.084, help="edit rate of the chrom sets' pair")
    ap.add_argument("--search-mbp", type=int, default=3100, help="Mbp of the search sets' simulated genome")
    ap.add_argument("--worker", action="store_true", help="also a --scheduler run served by a warm `gpualign worker`")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each command; the best is kept")
    ap.add_argument("--json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_scale_")
    table = []
    address, procs = start_worker(a.cpu) if a.worker else (None, [])
    for name in a.sets.split(","):
        ext = "tsv" if name == "chromd" or name.startswith("search") else "paf"
        if name == "ont":
            command, inputs, opts = "paf", ont_set(a.genome, a.ont, tmp), []
        elif name in ("searcha", "searchb"):
            command, (inputs, opts) = "search", search_set(name, a.search_mbp, tmp)
        elif name.startswith("chrom"):
            command, inputs = "genome", chrom_set(a.chrom_len, a.chrom_rate, tmp)
            opts = ["--distance-only"] if name == "chromd" else []
        else:
            command, inputs, opts = "pairs", *pairs_set(name, a.pairs, tmp)
        base_out = os.path.join(tmp, f"{name}_one.{ext}")
        device = ["--device", "cpu"] if a.cpu else []
        runs = [("one process", [*inputs, "-o", base_out, *opts, *device], None)]
        values = a.gpus.split(";")
        for i, k in enumerate(values):
            flag = ["--cpu-workers", k] if a.cpu else ["--gpus", k]
            runs.append((f"{'cpu' if a.cpu else 'gpus'} {k}", [*inputs, "-o", os.path.join(tmp, f"{name}_{i}.{ext}"),
                                                                *opts, *flag], None))
        if a.fail and not a.cpu:
            runs.append((f"gpus {values[-1]}, lost {a.fail}", [*inputs, "-o", os.path.join(tmp, f"{name}_f.{ext}"),
                                                                *opts, "--gpus", values[-1]],
                         {"GPUALIGN_FAIL_DEVICE": a.fail}))
        if address:
            runs.append(("warm worker", [*inputs, "-o", os.path.join(tmp, f"{name}_w.{ext}"), *opts, *device,
                                         "--scheduler", address], None))
        results = []
        for label, args, env in runs:
            seconds, rows = min((run(command, args, os.path.join(tmp, "summary.tsv"), env)
                                 for _ in range(a.repeat)), key=lambda x: x[0])
            out = args[args.index("-o") + 1]
            same = label == "one process" or same_output(out, base_out)
            slots = {k: v for k, v in rows.items() if k.startswith(("worker:", "device:"))}
            units = rows.get("pairs", rows.get("hits", 0))  # (search: hits)
            rec = dict(set=name, run=label, seconds=seconds, same_bytes=same, pairs=int(units),
                       read_s=float(rows.get("read_seconds", 0)),
                       align_s=float(rows.get("search_seconds", rows.get("align_seconds", 0))),  # (search: scan)
                       write_s=float(rows.get("write_seconds", 0)), slots=slots,
                       lost=int(rows.get("devices_lost", rows.get("retried_batches", 0))))
            results.append(rec)
            print(json.dumps(rec), file=sys.stderr, flush=True)
            if a.json:
                with open(a.json, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
        one = results[0]
        for r in results:
            first = r is one
            value = r["run"].split()[1].rstrip(",")
            k = 1 if first or value == "worker" else (int(value) if value.isdigit() else len(set(value.split(","))))
            speed = one["seconds"] / r["seconds"]
            table.append((name, r["run"], f"{r['seconds']:.2f}", "-" if first else f"{speed:.2f}",
                          "-" if first else f"{speed / k:.0%}",
                          f"{r['read_s']:.2f}/{r['align_s']:.2f}/{r['write_s']:.2f}", str(r["lost"]),
                          "yes" if r["same_bytes"] else "NO"))
    for p in procs:
        p.terminate()
    print("\t".join(["set", "run", "seconds", "speed-up vs one process", "efficiency per GPU",
                     "busy read/align/write", "lost/retried", "same bytes"]))
    for row in table:
        print("\t".join(row))


if __name__ == "__main__":
    main()
