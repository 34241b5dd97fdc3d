#!/usr/bin/env python3
"""Benchmark `gpualign paf` against minimap2's own alignment (mappy), on reads simulated from a genome.

Simulates Nanopore-like reads (5-20 kbp, ~10% indel-heavy errors) and HiFi-like reads (10-20 kbp, ~1%),
both strands; maps them with mappy (minimap2's binding, all cores) and times that as (c): minimap2's
chaining + base-level alignment with CIGAR (mappy cannot skip the CIGAR, so the candidates written to
the PAF carry minimap2's own ends; gpualign re-aligns them ends-free with a padded window anyway).
Then times (a) `gpualign paf` on the GPU and (b) on the CPU engine for the same candidates, compares
the edits (NM) each reports per candidate and whether both devices give the same scores, and checks a
sample of gpualign's scores against the reference DP on the same bounded ends-free problem. gpualign's
times are whole commands (start-up included) after the reads' .fai is built (once per reads file, by
the first command on it: reported apart as query_index_s) and after a first small run per device
(kernel compilation, a one-time cost per machine, reported apart as first_small_run_s).

  python scripts/bench_paf.py --genome ../shared/data/real/bact_Ecoli_K12_W3110_NC_007779.fa.gz \
      --ont 50000 --hifi 200000 --devices gpu,cpu
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from simulate import mutate  # noqa: E402

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # commands timed with their bytecode cached (docs/benchmarks.md)

COMP = bytes.maketrans(b"ACGT", b"TGCA")


# candidates of the untimed first run per device: enough for the sampled estimated level (128 pairs or more
# in a length group), so that every kernel the timed run uses, CuPy's own included, is compiled by then
# (with 20 the timed 2,000-read ONT run still compiled some: 3.1-3.3 s, then 2.6-2.75 s)
FIRST_RUN_CANDIDATES = 300


def reads_from(genome: bytes, n: int, lo: int, hi: int, rate: float, profile: str, seed: int):
    return reads_with_origin(genome, n, lo, hi, rate, profile, seed)[0]


def reads_with_origin(genome: bytes, n: int, lo: int, hi: int, rate: float, profile: str, seed: int):
    """(reads, starts, lengths, reverse): read i comes from genome[starts[i], starts[i] + lengths[i]),
    reverse-complemented where reverse[i]."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(lo, hi + 1, n)
    starts = rng.integers(0, len(genome) - hi, n)
    frags = [genome[s:s + ln] for s, ln in zip(starts.tolist(), lens.tolist())]
    reads = mutate(frags, rate, seed + 1, profile)
    rev = rng.random(n) < 0.5
    return [r.translate(COMP)[::-1] if v else r for r, v in zip(reads, rev.tolist())], starts, lens, rev


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genome", required=True)
    ap.add_argument("--ont", type=int, default=50_000)
    ap.add_argument("--hifi", type=int, default=200_000)
    ap.add_argument("--devices", default="gpu,cpu")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--sample", type=int, default=20, help="candidates re-checked with the reference DP")
    ap.add_argument("--batch-bases", default="",
                    help="comma-separated gpualign --batch-bases values for extra GPU runs (gpu@N columns)")
    ap.add_argument("--workdir")
    ap.add_argument("--json")
    a = ap.parse_args()
    import mappy
    import pysam

    from gpualign.io.faidx import IndexedFasta

    work = a.workdir or tempfile.mkdtemp(prefix="gpualign-bench-paf-")
    os.makedirs(work, exist_ok=True)
    with pysam.FastxFile(a.genome) as fh:
        rec = next(iter(fh))
        genome = rec.sequence.upper().encode()
    ref = os.path.join(work, "ref.fa")
    with open(ref, "wb") as fh:
        fh.write(b">ref\n" + genome + b"\n")
    rows = []
    for label, n, lo, hi, rate, profile, preset in (("ont", a.ont, 5000, 20000, 0.10, "long", "map-ont"),
                                                    ("hifi", a.hifi, 10000, 20000, 0.01, "uniform", "map-hifi")):
        if n == 0:
            continue
        reads = reads_from(genome, n, lo, hi, rate, profile, seed=len(label))
        rfa = os.path.join(work, f"{label}.fa")
        with open(rfa, "wb") as fh:
            fh.write(b"".join(b">%s%d\n%s\n" % (label.encode(), i, r) for i, r in enumerate(reads)))
        al = mappy.Aligner(ref, preset=preset, n_threads=a.threads)

        def map_one(i):
            return i, [h for h in al.map(reads[i]) if h.is_primary]

        t0 = time.perf_counter()
        with ThreadPoolExecutor(a.threads) as pool:
            hits = list(pool.map(map_one, range(n), chunksize=64))
        mm2_s = time.perf_counter() - t0
        paf = os.path.join(work, f"{label}.paf")
        mm2_nm, box, scores = {}, {}, {}
        with open(paf, "w") as fh:
            for i, hs in hits:
                for h in hs[:1]:
                    name = f"{label}{i}"
                    fh.write(f"{name}\t{len(reads[i])}\t{h.q_st}\t{h.q_en}\t{'+' if h.strand > 0 else '-'}\t{h.ctg}\t"
                             f"{h.ctg_len}\t{h.r_st}\t{h.r_en}\t{h.mlen}\t{h.blen}\t{h.mapq}\ttp:A:P\n")
                    mm2_nm[name] = h.NM
                    box[name] = (h.r_st, h.r_en)
        row = {"set": label, "reads": n, "candidates": len(mm2_nm), "minimap2_s": mm2_s}
        head = os.path.join(work, f"{label}.head.paf")
        with open(paf) as src, open(head, "w") as dst:
            dst.writelines(src.readlines()[:FIRST_RUN_CANDIDATES])
        # the query index (.fai of the reads, built once per reads file by the first gpualign command on it),
        # timed apart: every gpualign run below finds it
        t0 = time.perf_counter()
        IndexedFasta(rfa).close()
        row["query_index_s"] = time.perf_counter() - t0
        runs = [(d, []) for d in a.devices.split(",")] + \
            [("gpu", ["--batch-bases", v]) for v in a.batch_bases.split(",") if v]
        for dev, extra in runs:
            key = dev + (f"@{extra[1]}" if extra else "")  # gpu@N: an extra GPU run at --batch-bases N
            if not extra:
                # a first run on FIRST_RUN_CANDIDATES: GPU kernels compiled into CuPy's on-disk cache (a one-time
                # cost per machine, reported apart), files in the page cache for every contender
                t0 = time.perf_counter()
                p = subprocess.run([sys.executable, "-m", "gpualign", "paf", head, rfa, ref, "-o",
                                    os.path.join(work, f"{label}.head.{dev}.paf"), "--device", dev, "-q"],
                                   capture_output=True, text=True)
                row[f"{dev}_first_small_run_s"] = time.perf_counter() - t0
                if p.returncode:
                    row[f"{dev}_first_small_run_error"] = p.stderr.strip()[-300:]
            out = os.path.join(work, f"{label}.{key}.paf")
            summ = os.path.join(work, f"{label}.{key}.summary.tsv")
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "gpualign", "paf", paf, rfa, ref, "-o", out, "--device", dev,
                                "-t", str(a.threads), "-q", "--summary", summ, *extra], capture_output=True, text=True)
            row[f"gpualign_{key}_s"] = time.perf_counter() - t0
            if p.returncode:
                row[f"gpualign_{key}_error"] = p.stderr.strip()[-300:]
                continue
            # the command's own wall and its stages' busy seconds (reader, aligner and writer overlap)
            stats = dict(line.rstrip("\n").split("\t", 1) for line in open(summ) if "\t" in line)
            for name in ("wall_seconds", "read_seconds", "align_seconds", "write_seconds"):
                if name in stats:
                    row[f"{key}_{name}"] = float(stats[name])
            if extra:
                continue
            ours = {}
            lines = open(out).read().splitlines()
            for line in lines:
                f = line.split("\t")
                tags = dict(x.split(":", 1) for x in f[12:])
                ours[f[0]] = (int(tags["NM"][2:]), -int(tags["AS"][2:]), f)
            scores[dev] = {k: v[1] for k, v in ours.items()}
            fewer = sum(1 for k, (nm, _, _) in ours.items() if nm < mm2_nm.get(k, nm))
            row[f"{dev}_fewer_edits_than_minimap2"] = fewer / max(1, len(ours))
            row[f"{dev}_mean_nm"] = float(np.mean([v[0] for v in ours.values()])) if ours else None
            if dev == a.devices.split(",")[0] and a.sample:
                row["verified"], row["verified_optimal"] = verify(ours, box, reads, genome, a.sample)
        if len(scores) == 2:  # both devices ran: the same optimal score for every candidate
            d1, d2 = scores.values()
            row["devices_agree"] = sum(d1[k] == d2.get(k) for k in d1) / max(1, len(d1))
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        if a.json:
            with open(a.json, "a") as fh:
                fh.write(json.dumps(row) + "\n")
    print("set\treads\tcands\tminimap2_s\t" + "\t".join(f"gpualign_{d}_s" for d in a.devices.split(","))
          + "\tfewer_edits\tverified_optimal\tdevices_agree\tbusy_read/align/write_s\tquery_index_s")
    for r in rows:
        d0 = a.devices.split(",")[0]
        print(f"{r['set']}\t{r['reads']}\t{r['candidates']}\t{r['minimap2_s']:.2f}\t"
              + "\t".join(f"{r.get(f'gpualign_{d}_s', float('nan')):.2f}" for d in a.devices.split(","))
              + f"\t{r.get(f'{d0}_fewer_edits_than_minimap2', float('nan')):.3f}\t"
              f"{r.get('verified_optimal', '-')}/{r.get('verified', '-')}\t{r.get('devices_agree', '-')}\t"
              + "/".join(f"{r.get(f'{d0}_{k}_seconds', float('nan')):.2f}" for k in ("read", "align", "write"))
              + f"\t{r['query_index_s']:.2f}")
    for r in rows:
        for v in (v for v in a.batch_bases.split(",") if v):
            key = f"gpu@{v}"
            print(f"{r['set']}\t--batch-bases {v}\t{r.get(f'gpualign_{key}_s', float('nan')):.2f} s\tbusy "
                  + "/".join(f"{r.get(f'{key}_{k}_seconds', float('nan')):.2f}" for k in ("read", "align", "write")))


def verify(ours, box, reads, genome, k, pad=100):
    """The reference DP (gpualign.engines.reference, pinned to parasail in tests) on the problem
    gpualign paf solves by default: the candidate box padded by `pad`, clamped, with up to that many
    target bases free at each end. The score must match."""
    from gpualign.config import Penalties
    from gpualign.engines import reference

    p = Penalties()
    names = sorted(ours)[:k]
    ok = 0
    for name in names:
        nm, score, f = ours[name]
        i = int(name.lstrip("onthifi"))
        q = reads[i][int(f[2]):int(f[3])]
        if f[4] == "-":
            q = q.translate(COMP)[::-1]
        cts, cte = box[name]
        ws, we = max(0, cts - pad), min(len(genome), cte + pad)
        want = reference.affine_score(q, genome[ws:we], p, False, cts + pad - ws, we - (cte - pad))
        ok += int(want == score)
    return len(names), ok


if __name__ == "__main__":
    main()
