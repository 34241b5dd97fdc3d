"""Shared test inputs: hypothesis strategies for whole batches and named adversarial pairs."""

from __future__ import annotations

from hypothesis import strategies as st

from gpualign import pack
from gpualign.records import PairBatch

ALPHA = b"ACGT"


def adversarial() -> list[tuple[bytes, bytes]]:
    """Named edge cases every engine must get right (raw, before case folding)."""
    a = b"ACGTTGCAAGGCTTACGATCGGATCCATGCAGT" * 3
    return [
        (b"", b""),
        (b"", b"ACGT"),
        (b"ACGTACGT", b""),
        (b"A", b"A"),
        (b"A", b"C"),
        (b"A", b""),
        (b"", b"G"),
        (a, a),  # identical
        (b"A" * 80, b"C" * 80),  # nothing in common
        (b"ACGT" * 20, b"TGCA" * 23),
        (b"ACG", a * 4),  # very unequal lengths
        (a * 4, b"T"),
        (b"N" * 50, b"N" * 50),  # runs of N
        (a[:40] + b"N" * 30 + a[40:], a),
        (b"NNNNACGTNNNN", b"ACGTNNNNACGT"),
        (a.lower(), a),  # lowercase
        (b"acgtnnRYKM", b"ACGTNNRYKM"),  # lowercase and IUPAC
        (b"A" * 200, b"A" * 190),  # long homopolymers
        (b"A" * 100 + b"C" * 100, b"A" * 95 + b"C" * 110),
        (b"!?!?ACGT*-.", b"?!?!ACGT.-*"),  # punctuation, WFA2-lib's padding characters
    ]


def to_batch(pairs) -> PairBatch:
    qs = [pack.fold(q) for q, _ in pairs]
    ts = [pack.fold(t) for _, t in pairs]
    return PairBatch.from_sequences(qs, ts, q_names=[f"q{i}" for i in range(len(qs))],
                                    t_names=[f"t{i}" for i in range(len(ts))])


@st.composite
def mutated_pair(draw, max_len: int = 300, alphabet: bytes = ALPHA):
    """A random sequence and a copy with random edits (0 to ~20%)."""
    n = draw(st.integers(0, max_len))
    q = bytes(draw(st.lists(st.sampled_from(list(alphabet)), min_size=n, max_size=n)))
    t = bytearray(q)
    for _ in range(draw(st.integers(0, max(1, n // 5)))):
        kind = draw(st.integers(0, 2))
        pos = draw(st.integers(0, len(t)))
        c = draw(st.sampled_from(list(alphabet)))
        if kind == 0 and pos < len(t):
            t[pos] = c
        elif kind == 1:
            t.insert(pos, c)
        elif pos < len(t):
            del t[pos]
    if draw(st.booleans()):
        q, t = bytes(t), q
    return bytes(q), bytes(t)


def batches(max_pairs: int = 20, max_len: int = 300, alphabet: bytes = ALPHA):
    return st.lists(mutated_pair(max_len, alphabet), min_size=1, max_size=max_pairs)
