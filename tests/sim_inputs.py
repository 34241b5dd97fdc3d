"""Simulated inputs shared by the CLI tests: pairs as FASTA, and the same pairs as PAF candidates."""

from simulate import simulate, write_fasta


def pairs_and_candidates(d, n: int, length: int, rate: float, seed: int, queries="a.fa", targets="b.fa",
                         strands: str = "+-", extra=((), ())):
    """d/queries and d/targets (record i: q<i>, t<i>) and d/c.paf, one whole-box candidate per pair with a
    non-empty query and target, strands taken in turn from `strands`; extra: (queries, targets) added
    after the simulated ones. Returns the (queries, targets) sequences."""
    q, t = simulate(n, length, rate, seed=seed)
    q, t = q + list(extra[0]), t + list(extra[1])
    write_fasta(str(d / queries), q, "q")
    write_fasta(str(d / targets), t, "t")
    with open(d / "c.paf", "w") as fh:
        fh.writelines(f"q{i}\t{len(a)}\t0\t{len(a)}\t{strands[i % len(strands)]}\tt{i}\t{len(b)}\t0\t{len(b)}\t0\t"
                      f"{len(b)}\t60\n" for i, (a, b) in enumerate(zip(q, t)) if a and b)
    return q, t
