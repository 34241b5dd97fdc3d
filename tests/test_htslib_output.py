"""Every SAM and BAM the CLI writes (pairs and paf, each option that changes the records) read back by
htslib (pysam) at verbosity 3 without a single message on stderr, caught at the file-descriptor level;
and the runs themselves print nothing with -q (no `[E::...]` from htslib's probes)."""

import gzip
import itertools
import os

import pysam
import pytest

from cli_helper import run_cli
from sim_inputs import pairs_and_candidates


def _cli(*args):
    p = run_cli(*args, "-q", text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    return p


def _read_quietly(path, capfd) -> int:
    old = pysam.set_verbosity(3)
    try:
        capfd.readouterr()
        with pysam.AlignmentFile(path, check_sq=False) as fh:
            n = sum(1 for _ in fh)
        err = capfd.readouterr().err
    finally:
        pysam.set_verbosity(old)
    assert err == "", f"{path}: htslib said\n{err}"
    return n


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """60 simulated pairs plus an empty query, an empty target and one with N runs; the same pairs as
    PAF candidates (both strands) over plain FASTA and gzip FASTQ reads."""
    d = tmp_path_factory.mktemp("htslib")
    q, _ = pairs_and_candidates(d, 60, 300, 0.05, seed=5, extra=([b"", b"ACGTACGTAC", b"ACGTNNNNNNACGT"],
                                                                [b"ACGTAC", b"", b"ACGTNNNNACGTT"]))
    with gzip.open(d / "a.fq.gz", "wt") as fh:
        fh.writelines(f"@q{i}\n{s.decode()}\n+\n{'I' * len(s)}\n" for i, s in enumerate(q))
    return d


@pytest.mark.parametrize("fmt,metric,distance_only,fastq",
                         list(itertools.product(["sam", "bam"], ["edit", "affine"], [False, True], [False, True])))
def test_pairs_sam_bam_read_without_warnings(tmp_path, data, capfd, fmt, metric, distance_only, fastq):
    out = str(tmp_path / f"o.{fmt}")
    query = data / ("a.fq.gz" if fastq else "a.fa")
    _cli("pairs", str(query), str(data / "b.fa"), "-o", out, "--metric", metric,
         *(["--distance-only"] if distance_only else []))
    assert _read_quietly(out, capfd) == 63


@pytest.mark.parametrize("fmt,mode,metric", list(itertools.product(["sam", "bam"], ["ends-free", "global"],
                                                                    ["affine", "edit"])))
def test_paf_sam_bam_read_without_warnings(tmp_path, data, capfd, fmt, mode, metric):
    out = str(tmp_path / f"o.{fmt}")
    reads = data / ("a.fq.gz" if mode == "global" else "a.fa")  # gzip reads: streamed, not indexed
    _cli("paf", str(data / "c.paf"), str(reads), str(data / "b.fa"), "-o", out, "--mode", mode, "--metric", metric)
    assert _read_quietly(out, capfd) == 61


@pytest.mark.parametrize("fmt,mode,distance_only", list(itertools.product(
    ["sam", "bam"], ["global", "local", "semi-global"], [False, True])))
def test_scored_pairs_sam_bam_read_without_warnings(tmp_path, data, capfd, fmt, mode, distance_only):
    """General scoring (--match): soft clips, POS, empty local alignments unmapped."""
    out = str(tmp_path / f"o.{fmt}")
    _cli("pairs", str(data / "a.fa"), str(data / "b.fa"), "-o", out, "--mode", mode, "--match", "2",
         *(["--distance-only"] if distance_only else []))
    assert _read_quietly(out, capfd) == 63


@pytest.mark.parametrize("fmt,all_ends", list(itertools.product(["sam", "bam"], [False, True])))
def test_search_sam_bam_read_without_warnings(tmp_path, data, capfd, fmt, all_ends):
    """search: every hit (both strands, primary and secondary) as a mapped record."""
    with open(data / "b.fa") as fh:
        seqs = [line.strip() for line in fh if not line.startswith(">")]
    (tmp_path / "p.fa").write_text("".join(f">g{i}\n{s[5:25]}\n" for i, s in enumerate(seqs[:8]) if len(s) > 30))
    out = str(tmp_path / f"o.{fmt}")
    _cli("search", str(tmp_path / "p.fa"), str(data / "b.fa"), "-k", "2", "-o", out, "--device", "cpu",
         *(["--all-ends"] if all_ends else []))
    assert _read_quietly(out, capfd) >= 8


def test_bam_converted_as_the_text_comes(tmp_path, monkeypatch):
    """output/sam.SamToBam: SAM text written in pieces (one larger than the pipe) becomes a BAM htslib reads
    back record for record; text htslib refuses fails at close() with samtools' words, and leaves no
    process or temporary directory; abort() ends the conversion at once. (Temporary files in a directory
    of this test's: tests running beside it make their own.)"""
    import glob
    import tempfile

    from gpualign.errors import GpualignError
    from gpualign.output.sam import SamToBam

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "gpualign-bam-*")))
    header = "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:t\tLN:100000\n"
    recs = [f"q{i}\t0\tt\t{1 + i}\t60\t4M\t*\t0\t0\tACGT\t*\n" for i in range(30000)]
    path = str(tmp_path / "o.bam")
    bam = SamToBam(path, header)
    bam.write("".join(recs[:10]).encode())
    bam.write("".join(recs[10:]).encode())  # (~1.1 MB: more than the pipe holds)
    bam.close()
    with pysam.AlignmentFile(path, "rb") as fh:
        assert [r.to_string() + "\n" for r in fh] == recs
    bad = SamToBam(str(tmp_path / "bad.bam"), header)
    bad.write(b"q\t0\tt\t1\t60\t4M\t*\t0\t0\tACGT\tII\n")
    with pytest.raises(GpualignError, match=r"bad\.bam: writing BAM failed \(\[E::sam_parse1\] SEQ and QUAL"):
        bad.close()
    assert bad._proc.returncode not in (0, None)
    stopped = SamToBam(str(tmp_path / "stopped.bam"), header)
    stopped.write(recs[0].encode())
    stopped.abort()
    assert stopped._proc.returncode == -9  # (killed: not left to write a BAM)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "gpualign-bam-*"))) == before


def test_bam_conversion_not_held_by_a_fork(tmp_path):
    """A process forked while a SamToBam runs does not hold its pipe open: close() returns while it lives."""
    import signal
    import time

    from gpualign.output.sam import SamToBam

    bam = SamToBam(str(tmp_path / "o.bam"), "@HD\tVN:1.6\n@SQ\tSN:t\tLN:10\n")
    pid = os.fork()
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    try:
        t = time.monotonic()
        bam.close()
        assert time.monotonic() - t < 10
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    with pysam.AlignmentFile(str(tmp_path / "o.bam"), "rb") as fh:
        assert list(fh) == []


def test_bam_conversion_that_cannot_start(tmp_path, monkeypatch):
    import glob
    import sys
    import tempfile

    from gpualign.errors import GpualignError
    from gpualign.output.sam import SamToBam

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # (this test's own: see the test above)
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "gpualign-bam-*")))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(GpualignError, match=r"o\.bam: writing BAM failed \(cannot start .*no-python"):
        SamToBam(str(tmp_path / "o.bam"), "@HD\tVN:1.6\n")
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "gpualign-bam-*"))) == before
