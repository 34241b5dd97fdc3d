#!/usr/bin/env python3
"""Simulate A/B FASTA pairs: random sequences and a mutated copy of each.

Uniform profile (the WFA papers' generator): length L, round(L*rate) edits,
each a mismatch, a 1-base insertion or a 1-base deletion with equal
probability, at uniform positions. Long-read profile: lengths spread around L
(log-normal), indel-heavy edits (20% mismatch, 40% insertion, 40% deletion),
half of the insertions copying the neighbouring base (homopolymer errors).
Vectorised with numpy: a million pairs take seconds.

  python scripts/simulate.py -n 1000 -l 150 -e 0.02 --seed 1 -o pairs   # pairs_a.fa, pairs_b.fa
"""

from __future__ import annotations

import argparse

import numpy as np

BASES = np.frombuffer(b"ACGT", dtype=np.uint8)


def simulate(n: int, length: int, rate: float, seed: int = 0, profile: str = "uniform"):
    """Return (queries, targets) as lists of bytes: target = query with edits applied."""
    rng = np.random.default_rng(seed)
    if profile == "long":
        lens = np.maximum(1, rng.lognormal(np.log(length), 0.3, n)).astype(np.int64)
    elif profile == "uniform":
        lens = np.full(n, length, dtype=np.int64)
    else:
        raise ValueError(f"unknown profile {profile!r}")
    codes = rng.integers(0, 4, int(lens.sum()), dtype=np.uint8)
    return _mutate(codes, lens, rate, rng, profile)


def mutate(seqs: list, rate: float, seed: int = 0, profile: str = "uniform"):
    """Apply the profile's edits to given ACGT sequences (other bytes become random bases)."""
    rng = np.random.default_rng(seed)
    lut = np.full(256, 255, np.uint8)
    lut[list(b"ACGT")], lut[list(b"acgt")] = np.arange(4), np.arange(4)
    codes = lut[np.frombuffer(b"".join(seqs), np.uint8)]
    other = codes == 255
    codes[other] = rng.integers(0, 4, int(other.sum()), dtype=np.uint8)
    return _mutate(codes, np.array([len(x) for x in seqs], np.int64), rate, rng, profile)[1]


def _mutate(codes: np.ndarray, lens: np.ndarray, rate: float, rng, profile: str):
    """(originals, mutated) for the sequences of `lens` packed as 2-bit codes in `codes`."""
    n = len(lens)
    p_types = [0.2, 0.4, 0.4] if profile == "long" else [1 / 3, 1 / 3, 1 / 3]
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    k = np.rint(lens * rate).astype(np.int64)
    k = np.where(lens > 0, k, 0)
    pair = np.repeat(np.arange(n), k)
    pos = starts[pair] + (rng.random(len(pair)) * lens[pair]).astype(np.int64)
    kind = rng.choice(3, size=len(pair), p=p_types)
    out = codes.astype(np.int16)
    sub = pos[kind == 0]
    out[sub] = (out[sub] + rng.integers(1, 4, len(sub))) % 4
    out[pos[kind == 2]] = -1  # deleted
    ins_pos = pos[kind == 1]
    ins_val = rng.integers(0, 4, len(ins_pos)).astype(np.int16)
    if profile == "long":
        copy = rng.random(len(ins_pos)) < 0.5
        ins_val[copy] = codes[ins_pos[copy]]
    order = np.argsort(ins_pos, kind="stable")
    mutated = np.insert(out, ins_pos[order], ins_val[order])
    # pair boundaries of the mutated flat array
    ins_per = np.bincount(pair[kind == 1], minlength=n)
    new_lens = lens + ins_per
    bounds = np.concatenate([[0], np.cumsum(new_lens)])
    keep = mutated >= 0
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    tb = kept_before[bounds]
    tseq = BASES[mutated[keep].astype(np.uint8)].tobytes()
    qseq = BASES[codes].tobytes()
    qb = np.concatenate([[0], np.cumsum(lens)])
    queries = [qseq[a:b] for a, b in zip(qb[:-1].tolist(), qb[1:].tolist())]
    targets = [tseq[a:b] for a, b in zip(tb[:-1].tolist(), tb[1:].tolist())]
    return queries, targets


def write_fasta(path: str, seqs, prefix: str) -> None:
    with open(path, "wb") as fh:
        fh.write(b"".join(b">%s%d\n%s\n" % (prefix.encode(), i, s) for i, s in enumerate(seqs)))


def write_fastq(path: str, seqs, prefix: str) -> None:
    """4-line FASTQ, every quality 'I' (Q40)."""
    with open(path, "wb") as fh:
        fh.write(b"".join(b"@%s%d\n%s\n+\n%s\n" % (prefix.encode(), i, s, b"I" * len(s))
                          for i, s in enumerate(seqs)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--pairs", type=int, required=True)
    ap.add_argument("-l", "--length", type=int, required=True)
    ap.add_argument("-e", "--error", type=float, required=True, help="edits per base, e.g. 0.02")
    ap.add_argument("--profile", choices=("uniform", "long"), default="uniform")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--prefix", required=True, help="writes PREFIX_a.fa and PREFIX_b.fa")
    ap.add_argument("--fastq", action="store_true", help="write PREFIX_a.fq and PREFIX_b.fq (qualities 'I') instead")
    a = ap.parse_args()
    q, t = simulate(a.pairs, a.length, a.error, a.seed, a.profile)
    write, ext = (write_fastq, "fq") if a.fastq else (write_fasta, "fa")
    write(f"{a.prefix}_a.{ext}", q, "q")
    write(f"{a.prefix}_b.{ext}", t, "t")


if __name__ == "__main__":
    main()
