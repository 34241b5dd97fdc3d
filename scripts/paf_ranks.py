#!/usr/bin/env python3
"""How often `gpualign paf` ranks a read's candidates as minimap2 did: real reads mapped with mappy (minimap2's
binding, secondaries and supplementary parts kept, each line with its tp:A tag), re-aligned by `gpualign paf`,
and each read with several candidates compared: the same tp:A (P or S) on every candidate, or not; and the
same primary (minimap2's first P, mappy's best hit, against SAM's record without FLAG 256 or 2048). The two
score differently (minimap2's preset against gpualign's penalties with a match reward), so some reads differ
by design; the script prints the first few.

  python scripts/paf_ranks.py --reads ../shared/data/real/reads_honeybee_virus_Illumina_SRR059298_subset.fastq.gz \
      --ref ../shared/data/real/virus_DWV_NC_004830.fa ../shared/data/real/virus_VDV1_NC_006494.fa --preset sr
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile


def tp_tags(path: str) -> dict:
    """read name -> [(target, target start, query start, query end, tp)] in the PAF's order."""
    out = collections.defaultdict(list)
    with open(path) as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            tp = next((t[5:] for t in f[12:] if t.startswith("tp:A:")), "?")
            out[f[0]].append((f[5], f[7], f[2], f[3], tp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", required=True, help="FASTQ or FASTA, plain or gzip")
    ap.add_argument("--ref", required=True, nargs="+", help="target FASTA files (joined)")
    ap.add_argument("--preset", default="sr")
    ap.add_argument("--best-n", type=int, default=5, help="minimap2's -N: secondaries kept a read")
    ap.add_argument("--device", default="auto")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--show", type=int, default=3, help="reads that differ to print")
    ap.add_argument("--workdir")
    a = ap.parse_args()
    import mappy
    import pysam

    work = a.workdir or tempfile.mkdtemp(prefix="gpualign-paf-ranks-")
    os.makedirs(work, exist_ok=True)
    ref, paf, reads = (os.path.join(work, n) for n in ("ref.fa", "c.paf", "r.fa"))
    with open(ref, "w") as out:
        for p in a.ref:
            with pysam.FastxFile(p) as fh:
                for r in fh:
                    out.write(f">{r.name}\n{r.sequence}\n")
    al = mappy.Aligner(ref, preset=a.preset, best_n=a.best_n)
    mapped = 0
    with pysam.FastxFile(a.reads) as fh, open(paf, "w") as pf, open(reads, "w") as rf:
        for r in fh:
            hits = list(al.map(r.sequence))
            if not hits:
                continue
            mapped += 1
            rf.write(f">{r.name}\n{r.sequence}\n")
            for h in hits:
                pf.write(f"{r.name}\t{len(r.sequence)}\t{h.q_st}\t{h.q_en}\t{'+' if h.strand > 0 else '-'}\t{h.ctg}\t"
                         f"{h.ctg_len}\t{h.r_st}\t{h.r_en}\t{h.mlen}\t{h.blen}\t{h.mapq}\t"
                         f"tp:A:{'P' if h.is_primary else 'S'}\n")
    out, sam = os.path.join(work, "o.paf"), os.path.join(work, "o.sam")
    for o in (out, sam):
        p = subprocess.run([sys.executable, "-m", "gpualign", "paf", paf, reads, ref, "-o", o, "--device", a.device,
                            "-t", str(a.threads), "-q"], capture_output=True, text=True)
        if p.returncode:
            sys.exit(p.stderr)
    theirs, ours = tp_tags(paf), tp_tags(out)
    several = [n for n, c in theirs.items() if len(c) > 1]
    differ = [n for n in several if [c[4] for c in theirs[n]] != [c[4] for c in ours.get(n, [])]]
    chimeric = sum(1 for n in several if sum(c[4] == "P" for c in theirs[n]) > 1)
    # the primary: minimap2's first P of a read (mappy lists the best first) against SAM's record without 256/2048
    # (the SAM records come in the PAF's order)
    primary = collections.defaultdict(lambda: [None, None])
    with open(paf) as fh:
        for k, line in enumerate(fh):
            f = line.split("\t", 1)[0], "tp:A:P" in line
            if f[1] and primary[f[0]][0] is None:
                primary[f[0]][0] = k
    with open(sam) as fh:
        for k, line in enumerate(x for x in fh if not x.startswith("@")):
            name, flag = line.split("\t", 2)[:2]
            if int(flag) & 0x900 == 0:
                primary[name][1] = k
    same_primary = sum(1 for n in several if primary[n][0] == primary[n][1])
    for n in differ[:a.show]:
        print(n, "minimap2:", theirs[n], "gpualign:", ours.get(n), file=sys.stderr)
    print("reads_mapped\tseveral_candidates\tminimap2_two_or_more_P\tsame_ranks\tdiffer\tsame_primary")
    print(f"{mapped}\t{len(several)}\t{chimeric}\t{len(several) - len(differ)}\t{len(differ)}\t{same_primary}")


if __name__ == "__main__":
    main()
