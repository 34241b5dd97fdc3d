"""gpualign search on the GPU: the same bytes as the CPU engine (sassy-rs), on a real bacterial genome
with a few hundred guides and on simulated sets with every option; hits checked against Sellers' DP in
test_search.py (its `device` fixture)."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from gpualign.config import SearchConfig
from gpualign.search.run import run_search
from search_oracle import mutate, random_dna, write_fasta

pytestmark = pytest.mark.gpu


def both(tmp_path, pfa, tfa, out_ext="tsv", **kw):
    outs = []
    for device in ("gpu", "cpu"):
        out = os.path.join(tmp_path, f"{device}.{out_ext}")
        run_search(pfa, tfa, out, None, SearchConfig(device=device, **kw), "gpualign search (test)")
        outs.append(open(out, "rb").read())
    assert outs[0] == outs[1]
    return outs[0]


def test_real_genome_guides(tmp_path, real_data):
    with gzip.open(os.path.join(real_data, "bact_Ecoli_K12_W3110_NC_007779.fa.gz"), "rt") as fh:
        genome = "".join(line.strip() for line in fh if not line.startswith(">"))
    rng = np.random.default_rng(1)
    guides = {}
    for i in range(300):
        if i % 3 == 0:
            guides[f"rand{i}"] = random_dna(rng, 23)
        else:
            a = int(rng.integers(0, len(genome) - 30))
            guides[f"g{i}"] = mutate(rng, genome[a:a + 23], int(rng.integers(0, 4)))
    pfa = os.path.join(tmp_path, "g.fa")
    write_fasta(pfa, guides)
    tfa = os.path.join(real_data, "bact_Ecoli_K12_W3110_NC_007779.fa.gz")
    for k, all_ends in ((3, False), (4, True)):
        data = both(tmp_path, pfa, tfa, k=k, all_ends=all_ends)
        assert data.count(b"\n") > 200
    both(tmp_path, pfa, tfa, out_ext="sam", k=3)


@pytest.mark.parametrize("rule", ["default", "n_mismatch", "iupac"])
def test_options_same_bytes(tmp_path, rule):
    rng = np.random.default_rng(4)
    records = {f"c{i}": random_dna(rng, int(rng.integers(1000, 200_000)), "ACGTN" if i == 2 else "ACGT")
               for i in range(5)}
    pats = {f"p{i}": mutate(rng, records[f"c{i % 5}"][i * 7:i * 7 + m], 3)
            for i, m in enumerate([12, 23, 31, 33, 64, 65, 100, 150, 257, 600, 1000])}
    pfa, tfa = os.path.join(tmp_path, "p.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, pats)
    write_fasta(tfa, records)
    for chunk in (0, 50_000):
        for strand in ("both", "-"):
            both(tmp_path, pfa, tfa, k=6, rule=rule, chunk_bases=chunk, strand=strand, max_hits=50)
