"""io.faidx: memory-mapped slices of an indexed FASTA, checked against pysam's faidx and the records."""

import numpy as np
import pysam
import pytest

from gpualign.errors import InputError
from gpualign.io.faidx import IndexedFasta

RNG = np.random.default_rng(11)
RECORDS = {"a": b"ACGTacgtNN" * 37 + b"A", "b": b"", "c": b"G", "d": RNG.choice(list(b"ACGT"), 5000).astype(np.uint8).tobytes()}


def write_fasta(path, width, newline=b"\n"):
    with open(path, "wb") as fh:
        for name, seq in RECORDS.items():
            fh.write(b">" + name.encode() + b" some description" + newline)
            for i in range(0, len(seq), width):
                fh.write(seq[i:i + width] + newline)


@pytest.mark.parametrize("width,newline", [(60, b"\n"), (7, b"\n"), (1, b"\n"), (10 ** 6, b"\n"), (50, b"\r\n")])
def test_slices_match_records_and_pysam(tmp_path, width, newline):
    path = str(tmp_path / "x.fa")
    write_fasta(path, width, newline)
    fa = IndexedFasta(path)
    ref = pysam.FastaFile(path)
    assert fa._map is not None  # the memory-mapped path, not pysam's
    assert fa.lengths == {k: len(v) for k, v in RECORDS.items() if v}  # faidx leaves empty records out
    for name, seq in RECORDS.items():
        if not seq:
            continue
        assert name in fa
        assert fa.fetch(name) == seq
        for _ in range(60):
            a, b = sorted(RNG.integers(0, len(seq) + 1, 2).tolist())
            got = fa.fetch(name, a, b)
            assert got == seq[a:b] == ref.fetch(name, a, b).encode()
        assert fa.fetch(name, len(seq) - 3, len(seq) + 50) == seq[max(0, len(seq) - 3):]  # clamped
    assert "zz" not in fa
    fa.close()


def test_bgzip_goes_through_pysam(tmp_path):
    plain = str(tmp_path / "x.fa")
    write_fasta(plain, 60)
    pysam.tabix_compress(plain, plain + ".gz")
    fa = IndexedFasta(plain + ".gz")
    assert fa._map is None
    assert fa.fetch("d", 100, 4321) == RECORDS["d"][100:4321]
    assert fa.fetch("a") == RECORDS["a"]


def test_unindexable_is_an_input_error(tmp_path):
    path = tmp_path / "x.fa"
    path.write_bytes(b">a\nACGT\nAC\nACGT\n")  # uneven line lengths: faidx refuses
    with pytest.raises(InputError, match="cannot index"):
        IndexedFasta(str(path))


def test_stale_index_is_rebuilt(tmp_path):
    """A .fai older than its FASTA (the file was rewritten) would point at the wrong bytes: rebuilt."""
    import os

    path = tmp_path / "x.fa"
    path.write_bytes(b">a\nAAAA\n>b\nCCCC\n")
    IndexedFasta(str(path)).close()
    path.write_bytes(b">a\nGGGGGGGG\n>b\nTTTTTTT\n")
    fai = os.stat(str(path) + ".fai")
    os.utime(path, (fai.st_atime + 5, fai.st_mtime + 5))
    fa = IndexedFasta(str(path))
    assert fa.lengths == {"a": 8, "b": 7} and fa.fetch("b", 1, 5) == b"TTTT"
