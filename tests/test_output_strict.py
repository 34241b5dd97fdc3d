"""Output that is whole or reported (issue 51): every command and format into a closed pipe (exit 141) or
onto a full device (exit 1) ends with one error line and no summary; protein is never rewritten (BAM
refused, SAM keeps the residues); names ending .gz give BGZF that htslib and gzip read; devices are
streams; an empty alignment's PAF line carries only well-formed tags."""

import errno
import fcntl
import gzip
import os
import pickle
import re
import subprocess
import sys
import tempfile

import numpy as np
import pysam
import pytest

from gpualign.errors import WriteError
from sim_inputs import pairs_and_candidates
from simulate import simulate, write_fasta

ENV = dict(os.environ, PYTHONUNBUFFERED="1")
F_SETPIPE_SZ = 1031  # fcntl: a pipe's capacity (Linux)
PIPE_BYTES = 4096  # the test pipes' capacity: any output over a few KB overflows it

FORMATS = {"pairs": ("paf", "sam", "bam", "tsv"), "paf": ("paf", "sam", "bam"), "genome": ("paf", "sam", "bam", "tsv"),
           "genome-distance": ("tsv",), "search": ("tsv", "sam", "bam", "paf", "bed")}
CASES = [(cmd, fmt) for cmd, fmts in FORMATS.items() for fmt in fmts]
TEXT = [(cmd, fmt) for cmd, fmt in CASES if fmt != "bam"]


def _first_and_bam(cases: list) -> list:
    """cases, all but each command's first format and BAM marked slow (they take the same write path)."""
    seen: set = set()
    out = []
    for cmd, fmt in cases:
        keep = cmd not in seen or fmt == "bam"
        seen.add(cmd)
        out.append(pytest.param(cmd, fmt, marks=() if keep else pytest.mark.slow))
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Inputs whose every output overflows the test pipes several times: 1,500 simulated pairs (their PAF
    candidates too), for genome 40 pairs of 1 kbp (aligned one at a time), and for search 6 patterns planted 40
    times in each of 120 text records."""
    d = tmp_path_factory.mktemp("strict")
    pairs_and_candidates(d, 1500, 120, 0.05, seed=51)
    q, t = simulate(40, 1000, 0.05, seed=52)
    write_fasta(str(d / "ga.fa"), q, "q")
    write_fasta(str(d / "gb.fa"), t, "t")
    rng = np.random.default_rng(51)
    letters = np.frombuffer(b"ACGT", np.uint8)
    pats = [letters[rng.integers(0, 4, 20)].tobytes() for _ in range(6)]
    recs = [b"".join(letters[rng.integers(0, 4, 15)].tobytes() + pats[i % 6] for i in range(40)) for _ in range(120)]
    write_fasta(str(d / "pats.fa"), pats, "p")
    write_fasta(str(d / "text.fa"), recs, "r")
    return d


def _args(d, cmd: str) -> list:
    return {"pairs": ["pairs", d / "a.fa", d / "b.fa"],
            "paf": ["paf", d / "c.paf", d / "a.fa", d / "b.fa"],
            "genome": ["genome", d / "ga.fa", d / "gb.fa"],
            "genome-distance": ["genome", d / "ga.fa", d / "gb.fa", "--distance-only"],
            "search": ["search", d / "pats.fa", d / "text.fa", "-k", "2"]}[cmd] + ["--device", "cpu"]


def _cmd(d, cmd: str, *more) -> list:
    threads = [] if cmd.startswith("genome") else ["-t", "2"]
    return [sys.executable, "-m", "gpualign", *map(str, _args(d, cmd)), *threads, *more]


def _cli(d, cmd: str, *more, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(_cmd(d, cmd, *more), capture_output=True, env=ENV, timeout=120, **kw)


def _error_line(stderr: bytes) -> str:
    """The run's stderr, checked to hold one error line (beside the engine notices) and no summary."""
    text = stderr.decode()
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, text
    assert "summary" not in text and "records_written" not in text and "hits" not in text, text
    assert "[E::" not in text and "samtools" not in text and "Traceback" not in text, text
    return errors[0]


@pytest.mark.parametrize("quiet", [False, True], ids=["", "q"])
@pytest.mark.parametrize("cmd,fmt", CASES)
def test_closed_pipe_ends_the_run_with_141(data, cmd, fmt, quiet):
    """The reader closes the pipe after a few bytes: exit 141, one line, no summary (before: exit 0 and a
    summary counting every record, for text over the pipe's capacity; htslib's lines for BAM); with -q, nothing
    on stderr (as `| head` expects)."""
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, PIPE_BYTES)
    with tempfile.TemporaryFile() as log:  # (stderr: genome's notices would fill a pipe)
        p = subprocess.Popen(_cmd(data, cmd, "-f", fmt, *["-q"] * quiet), stdout=w, stderr=log, env=ENV)
        os.close(w)
        got = b""
        while len(got) < 100:  # 100 bytes taken, no more (the header may come in a write of its own)
            part = os.read(r, 100 - len(got))
            assert part, "the run closed its output early"
            got += part
        os.close(r)
        try:
            p.wait(timeout=60)
        finally:
            p.kill()
        log.seek(0)
        err = log.read()
    assert p.returncode == 141, err.decode()
    if quiet:
        assert err == b"", err.decode()
    else:
        assert "broken pipe" in _error_line(err)


@pytest.mark.parametrize("compressed", [False, True])
def test_failed_write_of_a_shared_memory_block(compressed):
    """Output formatted in worker processes comes in shared-memory blocks over 1 MiB: a closed pipe raises
    the WriteError (141, one line), not BufferError from closing a block a view still held (a traceback,
    exit 1, the block leaked)."""
    from gpualign import shm
    from gpualign.errors import WriteError
    from gpualign.output.sink import BgzfSink, Sink

    size = 3 << 20
    name = _block(np.random.default_rng(1).integers(65, 91, size, dtype=np.uint8).tobytes())
    r, w = os.pipe()
    os.close(r)
    sink = Sink(w, "stdout", own=True)
    with pytest.raises(WriteError, match="broken pipe"):
        shm.write_to(name, size, BgzfSink(sink) if compressed else sink)
    assert not os.path.exists(f"/dev/shm/{name.lstrip('/')}")
    sink.release()


@pytest.mark.parametrize("cmd,fmt", _first_and_bam(CASES))
def test_full_device_ends_the_run_with_1(data, cmd, fmt):
    p = _cli(data, cmd, "-f", fmt, "-o", "/dev/full")
    assert p.returncode == 1, p.stderr.decode()
    assert "/dev/full" in _error_line(p.stderr) and "No space left" in p.stderr.decode()


@pytest.mark.parametrize("cmd", FORMATS)
def test_dev_null_is_a_stream(data, cmd):
    """-o /dev/null without -f: the format stdout would get (before: refused, no extension)."""
    p = _cli(data, cmd, "-o", "/dev/null", "-q")
    assert p.returncode == 0 and p.stderr == b"", p.stderr.decode()
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_dev_null_bam(data):
    p = _cli(data, "pairs", "-o", "/dev/null", "-f", "bam", "-q")
    assert p.returncode == 0 and p.stderr == b"", p.stderr.decode()


def test_unknown_extension_is_one_line(data, tmp_path):
    p = _cli(data, "pairs", "-o", str(tmp_path / "out.xyz"))
    assert p.returncode == 2
    line = _error_line(p.stderr)
    assert "out.xyz" in line and "--format" in line
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("cmd,fmt", _first_and_bam(TEXT))
def test_gz_name_gives_bgzf_of_the_plain_output(data, tmp_path, cmd, fmt):
    """-o out.FMT.gz: BGZF (each block carries BC, the end marker last; htslib's reader takes it) holding
    the plain output's bytes (before: refused, or with -f plain text under the .gz name)."""
    plain, packed = tmp_path / f"out.{fmt}", tmp_path / f"out.{fmt}.gz"
    for out in (plain, packed):
        p = _cli(data, cmd, "-o", str(out), "-q")
        assert p.returncode == 0, p.stderr.decode()
    want = plain.read_bytes()
    raw = packed.read_bytes()
    assert raw[12:16] == b"BC\x02\x00" and raw.endswith(BGZF_EOF)
    got = gzip.decompress(raw).replace(b"out.sam.gz", b"out.sam")  # (SAM: the command line in @PG)
    if cmd == "genome-distance":  # (its columns 7-9 are timings)
        got, want = (b"".join(ln.split(b"\t", 6)[0] + b"\n" for ln in x.splitlines()) for x in (got, want))
    assert got == want
    with pysam.BGZFile(str(packed), "rb") as fh:
        assert fh.read() == gzip.decompress(raw)
    if fmt == "sam":
        with pysam.AlignmentFile(str(packed)) as fh:
            assert sum(1 for _ in fh) == sum(not ln.startswith(b"@") for ln in want.splitlines())


BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def test_bgzf_blocks_hold_any_write_sizes(tmp_path):
    """Writes smaller and larger than a block, across block ends, a flush mid-way, incompressible bytes:
    gzip and htslib give the bytes back; every block is at most 64 KiB; a failed run writes no marker."""
    from gpualign.output.sink import BGZF_DATA, BgzfSink, Sink

    rng = np.random.default_rng(5)
    parts = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in (10, BGZF_DATA - 10, 1, 3 * BGZF_DATA + 7)]
    parts += [b"ACGT\n" * 30000, b"", b"x"]
    path = tmp_path / "x.gz"
    out = BgzfSink(Sink(os.open(path, os.O_WRONLY | os.O_CREAT), str(path), own=True))
    for i, part in enumerate(parts):
        out.write(part if i % 2 else memoryview(part))
        if i == 3:
            out.flush()
    out.close()
    raw = path.read_bytes()
    assert gzip.decompress(raw) == b"".join(parts) and raw.endswith(BGZF_EOF)
    with pysam.BGZFile(str(path), "rb") as fh:
        assert fh.read() == b"".join(parts)
    at = 0
    while at < len(raw):  # each block's BSIZE walks to the next one
        assert raw[at:at + 4] == b"\x1f\x8b\x08\x04" and raw[at + 12:at + 16] == b"BC\x02\x00"
        at += int.from_bytes(raw[at + 16:at + 18], "little") + 1
    assert at == len(raw)


def test_gz_name_with_format_option(data, tmp_path):
    out = tmp_path / "x.gz"
    assert _cli(data, "pairs", "-o", str(out), "-f", "tsv", "-q").returncode == 0
    want = _cli(data, "pairs", "-f", "tsv", "-q").stdout
    assert len(want) > 1 << 16 and gzip.decompress(out.read_bytes()) == want


def test_bgzf_bed_is_indexed_by_tabix(data, tmp_path):
    out = tmp_path / "hits.bed.gz"
    assert _cli(data, "search", "-o", str(out), "-q").returncode == 0
    pysam.tabix_index(str(out), preset="bed", force=True)
    with pysam.TabixFile(str(out)) as tbx:
        got = list(tbx.fetch("r3"))
    plain = _cli(data, "search", "-f", "bed", "-q").stdout.decode().splitlines()
    assert got == [ln for ln in plain if ln.startswith("r3\t")] and got


@pytest.fixture(scope="module")
def protein(tmp_path_factory):
    d = tmp_path_factory.mktemp("protein")
    (d / "p1.fa").write_text(">p1\nMVLSPADKTNVKAAW*\n>p2\nMKT*AYIAKQR\n>p3\nILSPADKTNVKAAWGKVGAHAGEYGAEALERMF\n")
    (d / "p2.fa").write_text(">t1\nMVLSPADKTNVKAAWGKVGA\n>t2\nMKTAYIAKQRQISFVKSH\n>t3\nLSPADKTNVKAAWGKV\n")
    return d


# protein asked for, or a protein matrix given without --alphabet protein (SEQ was written as DNA: '*' as N, a
# query '*' alone as N; BAM written)
PROTEIN = [("--alphabet", "protein"), ("--matrix", "BLOSUM62")]


def _protein(d, *more, scored=PROTEIN[0]):
    return subprocess.run([sys.executable, "-m", "gpualign", "pairs", str(d / "p1.fa"), str(d / "p2.fa"), "--mode",
                           "local", *scored, "--device", "cpu", "-t", "1", *more],
                          capture_output=True, env=ENV, timeout=120)


@pytest.mark.parametrize("scored", PROTEIN)
@pytest.mark.parametrize("how", [("-o", "prot.bam"), ("-f", "bam"), ("-o", "/dev/null", "-f", "bam")])
def test_protein_bam_is_refused(protein, tmp_path, how, scored):
    """BAM's SEQ is a 4-bit nucleotide code (MVLSPADKTN came back MVNSNADKTN): refused before anything is
    written or an engine starts."""
    how = [str(tmp_path / a) if a.endswith(".bam") else a for a in how]
    p = _protein(protein, *how, scored=scored)
    assert p.returncode == 2 and p.stdout == b""
    assert "BAM" in _error_line(p.stderr) and "protein" in p.stderr.decode()
    assert "engine" not in p.stderr.decode()
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("scored", PROTEIN)
def test_protein_sam_keeps_every_residue(protein, tmp_path, scored):
    """SEQ is the query as given, '*' included (before: '*' written as N); htslib still parses the file."""
    out = tmp_path / "prot.sam"
    p = _protein(protein, "-o", str(out), "-q", scored=scored)
    assert p.returncode == 0, p.stderr.decode()
    fasta = (protein / "p1.fa").read_text().split()
    seqs = dict(zip([name[1:] for name in fasta[::2]], fasta[1::2]))
    recs = [ln.split("\t") for ln in out.read_text().splitlines() if not ln.startswith("@")]
    assert {r[0]: r[9] for r in recs} == seqs
    with pysam.AlignmentFile(str(out)) as fh:
        assert [r.query_name for r in fh] == [r[0] for r in recs]


@pytest.mark.parametrize("scored", PROTEIN)
def test_protein_star_alone_refused_in_sam(tmp_path, scored):
    """A query that is '*' alone (one stop residue) would be written SEQ '*', which SAM reads as no sequence
    stored: refused with one line naming it, no file left; TSV keeps it."""
    (tmp_path / "p1.fa").write_text(">p1\nMVLSPADK\n>stop\n*\n")
    (tmp_path / "p2.fa").write_text(">t1\nMVLSPADK\n>t2\nMKTAY\n")
    out = tmp_path / "o" / "prot.sam"
    out.parent.mkdir()
    p = _protein(tmp_path, "-o", str(out), "-q", scored=scored)
    assert p.returncode != 0 and "'stop'" in _error_line(p.stderr) and "SEQ" in _error_line(p.stderr)
    assert _error_line(p.stderr).startswith(f"error: {tmp_path / 'p1.fa'}: query 'stop' (pair 2)")
    assert not os.listdir(out.parent)
    p = _protein(tmp_path, "-f", "tsv", "-q", scored=scored)
    assert p.returncode == 0 and [ln.split("\t")[0] for ln in p.stdout.decode().splitlines()[1:]] == ["p1", "stop"]


@pytest.mark.parametrize("fmt", ["paf", "tsv"])
def test_protein_text_formats_written(protein, fmt):
    p = _protein(protein, "-f", fmt, "-q")
    assert p.returncode == 0 and p.stdout, p.stderr.decode()


TAG = re.compile(r"^[A-Za-z][A-Za-z0-9]:[AifZHB]:.+$")


def _strict_paf(text: str) -> list:
    """The PAF lines, each checked: 12 columns of the right kinds, every tag TAG:TYPE:VALUE with a value."""
    lines = text.splitlines()
    for ln in lines:
        f = ln.split("\t")
        assert len(f) >= 12, ln
        assert all(f[i].isdigit() for i in (1, 2, 3, 6, 7, 8, 9, 10, 11)) and f[4] in "+-", ln
        assert all(TAG.match(t) for t in f[12:]), ln
    return lines


@pytest.mark.parametrize("metric", ["edit", "affine"])
def test_empty_pair_paf_tags_are_well_formed(tmp_path, metric):
    """An alignment of two empty sequences has no CIGAR operation: no cg:Z tag (before: `cg:Z:` with no
    value, which no PAF reader accepts); the other lines unchanged."""
    (tmp_path / "q.fa").write_text(">a\n\n>b\nACGT\n>c\nACGTAC\n")
    (tmp_path / "t.fa").write_text(">x\n\n>y\n\n>z\nACTTAC\n")
    p = subprocess.run([sys.executable, "-m", "gpualign", "pairs", str(tmp_path / "q.fa"), str(tmp_path / "t.fa"),
                        "--device", "cpu", "-t", "1", "-q", "-m", metric], capture_output=True, env=ENV, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    lines = _strict_paf(p.stdout.decode())
    assert [ln.split("\t")[0] for ln in lines] == ["a", "b", "c"]
    assert "cg:Z" not in lines[0] and lines[1].endswith("cg:Z:4I") and "cg:Z:2=1X3=" in lines[2]


def _block(data: bytes) -> str:
    """A shared-memory block holding data, made as the formatting processes make theirs."""
    from gpualign import shm

    return shm.put([data])


@pytest.mark.parametrize("sendfile", ["kernel", "refused"])
def test_shared_memory_block_to_a_file_in_order(tmp_path, monkeypatch, sendfile):
    """A formatted block goes to a file by sendfile (or, where the output refuses it, written from the
    block mapped here) after the bytes gathered before it, and the block is unlinked."""
    import errno

    from gpualign import shm
    from gpualign.output.sink import Sink

    if sendfile == "refused":
        def refuse(*a):
            raise OSError(errno.EINVAL, "refused")
        monkeypatch.setattr(os, "sendfile", refuse)
    data = np.random.default_rng(2).integers(65, 91, 5 << 20, dtype=np.uint8).tobytes()
    name = _block(data)
    path = tmp_path / "out.txt"
    sink = Sink(os.open(path, os.O_WRONLY | os.O_CREAT), str(path), own=True)
    sink.write(b"head\n")  # gathered in the sink's buffer: must come first
    shm.write_to(name, len(data) - 7, sink)
    sink.write(b"tail\n")
    sink.close()
    assert path.read_bytes() == b"head\n" + data[:-7] + b"tail\n"
    assert not os.path.exists(f"/dev/shm/{name.lstrip('/')}")


def test_shared_memory_block_to_a_full_device():
    from gpualign import shm
    from gpualign.errors import WriteError
    from gpualign.output.sink import Sink

    name = _block(b"x" * (2 << 20))
    sink = Sink(os.open("/dev/full", os.O_WRONLY), "/dev/full", own=True)
    with pytest.raises(WriteError, match="No space"):
        shm.write_to(name, 2 << 20, sink)
    sink.release()
    assert not os.path.exists(f"/dev/shm/{name.lstrip('/')}")


@pytest.mark.parametrize("fmt", ["sam", "bam", "paf", "tsv"])
@pytest.mark.parametrize("name,why", [("@q7", "starts with '@'"), ("r" * 255, "longer than 254 characters"),
                                      ("q\x01x", "holds '\\x01'"), ("q\u00e9", "holds '\u00e9'"),
                                      ("q@7", "holds '@'")])
def test_names_sam_cannot_hold(tmp_path, fmt, name, why):
    """A query name SAM cannot hold as its QNAME: one starting with '@' (its line would read as a header line:
    htslib could not read the file), longer than 254 characters (htslib refuses it), or holding a character
    other than printable ASCII (SAM's rule: htslib reads a control character, samtools view drops it), or '@'
    anywhere (SAM 1.6's QNAME rule, [!-?A-~]: htslib reads it, other readers need not). SAM and BAM: one line
    naming the query and its pair, exit 1, no output; PAF and TSV take it. 254 characters: SAM written."""
    names = [f"q{i}" for i in range(300)]
    names[150] = name
    (tmp_path / "a.fa").write_text("".join(f">{n}\nACGTACGTACGTAC\n" for n in names), encoding="utf-8")
    (tmp_path / "b.fa").write_text("".join(f">t{i}\nACGTACCTACGTAC\n" for i in range(300)))
    out = tmp_path / f"o.{fmt}"

    def run():
        return subprocess.run([sys.executable, "-m", "gpualign", "pairs", str(tmp_path / "a.fa"),
                               str(tmp_path / "b.fa"), "-o", str(out), "--device", "cpu", "-t", "1", "-q"],
                              capture_output=True, env=ENV, timeout=120)

    p = run()
    if fmt in ("paf", "tsv"):
        assert p.returncode == 0 and name in out.read_text(encoding="utf-8"), p.stderr.decode()
        return
    assert p.returncode == 1 and not out.exists()
    line = _error_line(p.stderr)
    assert line.startswith(f"error: {tmp_path / 'a.fa'}: query ") and "(pair 151)" in line and why in line \
        and "QNAME" in line, line
    names[150] = "r" * 254
    (tmp_path / "a.fa").write_text("".join(f">{n}\nACGTACGTACGTAC\n" for n in names))
    p = run()
    assert p.returncode == 0, p.stderr.decode()
    with pysam.AlignmentFile(str(out)) as fh:
        assert [r.query_name for r in fh] == names


@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_names_sam_cannot_hold_in_paf_and_search(tmp_path, fmt):
    """`paf` (its candidates' query names) and `search` (its patterns' names) refuse SAM/BAM for a name
    starting with '@' the same way: one line naming the PAF file and line (not the candidate's number: comment
    lines count) or the pattern's record, exit 1, no output; PAF and BED take it."""
    (tmp_path / "reads.fa").write_text(">@r1\nACGTACGTACGTACGTACGT\n>r2\nACGTACGTACGTACGTACGT\n")
    (tmp_path / "ref.fa").write_text(">chr\nTTTTTTTTTTACGTACGTACGTACGTACGTTTTTTTTTTT\n")
    (tmp_path / "c.paf").write_text("# candidates\n" + "".join(f"{q}\t20\t0\t20\t+\tchr\t40\t10\t30\t20\t20\t60\n"
                                                             for q in ("@r1", "r2")))
    (tmp_path / "pat.fa").write_text(">g0\nACGTACGTAC\n>@g1\nACGTACGTAC\n")
    runs = {"paf": ["paf", "c.paf", "reads.fa", "ref.fa"], "search": ["search", "pat.fa", "ref.fa", "-k", "0"]}
    for cmd, args in runs.items():
        for out, refused in ((f"o.{fmt}", True), ("o.paf" if cmd == "paf" else "o.bed", False)):
            p = subprocess.run([sys.executable, "-m", "gpualign", *args, "-o", out, "--device", "cpu", "-t", "1",
                                "-q"], capture_output=True, env=ENV, timeout=120, cwd=tmp_path)
            if not refused:
                assert p.returncode == 0 and "@" in (tmp_path / out).read_text(), p.stderr.decode()
                continue
            line = _error_line(p.stderr)
            assert p.returncode == 1 and not (tmp_path / out).exists(), line
            assert "starts with '@'" in line and "QNAME" in line
            assert "c.paf: query '@r1' (line 2)" in line if cmd == "paf" else "pat.fa: record 2" in line  # (line 1:
            # a comment)


def _run_to(tmp_path, args: list, out: str) -> subprocess.CompletedProcess:
    """`gpualign ARGS -o out` in tmp_path on the CPU, quiet, one worker where the command takes -t; out removed
    first."""
    (tmp_path / out).unlink(missing_ok=True)
    return subprocess.run([sys.executable, "-m", "gpualign", *args, "-o", out, "--device", "cpu", "-q"]
                          + ([] if args[0] == "genome" else ["-t", "1"]), capture_output=True, env=ENV, timeout=120,
                          cwd=tmp_path)


def _target_named(tmp_path, target: str) -> dict:
    """Inputs in tmp_path whose one target is named target (a.fa, b.fa, c.paf, p.fa), and each command's
    arguments over them."""
    seq = "ACGTACGTACGTACGTACGTACGTTTGACCATG"
    n = len(seq)
    (tmp_path / "a.fa").write_text(f">q\n{seq}\n")
    (tmp_path / "b.fa").write_text(f">{target} desc\n{seq}\n")
    (tmp_path / "c.paf").write_text(f"q\t{n}\t0\t{n}\t+\t{target}\t{n}\t0\t{n}\t{n}\t{n}\t60\n")
    (tmp_path / "p.fa").write_text(">p\nGTACGTTTGACC\n")
    return {"pairs": ["pairs", "a.fa", "b.fa"], "genome": ["genome", "a.fa", "b.fa"],
            "paf": ["paf", "c.paf", "a.fa", "b.fa"], "search": ["search", "p.fa", "b.fa", "-k", "0"]}


@pytest.mark.parametrize("name", ["*", "*x", "=x"])
@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_target_names_sam_cannot_hold(tmp_path, fmt, name):
    """A target name SAM's reference names (@SQ SN, RNAME) cannot be: '*' (RNAME '*' is no reference: htslib
    would read the records as unmapped), or a name starting with '*' or '=' (SAM's rule). `pairs`, `genome`,
    `paf` and `search`, SAM and BAM: one line naming the target file and the target, exit 1, no output; PAF,
    TSV and BED take it. The same character inside a name (x*, x=): written, htslib reads it."""
    for target, written in ((name, False), ("x" + name[0], True)):
        for cmd, args in _target_named(tmp_path, target).items():
            other = "bed" if cmd == "search" else "paf"
            for out, refused in ((f"o.{fmt}", not written), (f"o.{other}", False)):
                p = _run_to(tmp_path, args, out)
                if refused:
                    line = _error_line(p.stderr)
                    assert p.returncode == 1 and not (tmp_path / out).exists(), line
                    assert f"{target!r}" in line and f"starts with {name[0]!r}" in line and "b.fa" in line, (cmd, line)
                    assert ("reads as no reference" in line) == (name[0] == "*"), (cmd, line)  # (its own reason)
                    continue
                assert p.returncode == 0, (cmd, out, p.stderr.decode())
                if out.endswith((".sam", ".bam")):
                    with pysam.AlignmentFile(str(tmp_path / out)) as fh:
                        assert fh.references == (target,)
                        assert [r.reference_name for r in fh if not r.is_unmapped] == [target], cmd
                else:
                    assert target in (tmp_path / out).read_text()


@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_query_named_star_alone(tmp_path, fmt):
    """A query (or search pattern) named '*' alone, which a SAM QNAME reads as no name, was written so: refused
    for SAM/BAM (one line, exit 1, no output) by `pairs`, `paf` and `search`; '*x' and PAF are fine."""
    seq = "ACGTACGTACGTACGTACGTACGTTTGACCATG"
    (tmp_path / "b.fa").write_text(f">t\n{seq}\n")
    n = len(seq)
    for query, refused in (("*", True), ("*x", False)):
        (tmp_path / "a.fa").write_text(f">{query}\n{seq}\n")
        (tmp_path / "c.paf").write_text(f"{query}\t{n}\t0\t{n}\t+\tt\t{n}\t0\t{n}\t{n}\t{n}\t60\n")
        for args in (["pairs", "a.fa", "b.fa"], ["paf", "c.paf", "a.fa", "b.fa"],
                     ["search", "a.fa", "b.fa", "-k", "0"]):
            p = _run_to(tmp_path, args, f"o.{fmt}")
            if refused:
                line = _error_line(p.stderr)
                assert p.returncode == 1 and "is '*'" in line and "no name" in line, (args, line)
                assert not (tmp_path / f"o.{fmt}").exists()
            else:
                assert p.returncode == 0, (args, p.stderr.decode())
                with pysam.AlignmentFile(str(tmp_path / f"o.{fmt}")) as fh:
                    assert [r.query_name for r in fh] == [query]


@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_target_names_not_printable(tmp_path, fmt):
    """A target name holding a character other than printable ASCII (a control character, a non-ASCII letter),
    which SAM's reference names cannot: `pairs`, `genome`, `paf` and `search` refuse SAM/BAM with one line
    naming the target file, the name and the character, exit 1, no output; PAF and BED take it. search's
    target file has 300 records, the bad one the 200th (its reader checks a block's names at once); its
    patterns' names (QNAME) the same way, and paf's candidates' query names."""
    seq = "ACGTACGTACGTACGTACGTACGTTTGACCATG"
    for target, shown in (("t\x02", "'\\x02'"), ("t\u00c5", "'\u00c5'")):
        names = [f"s{i}" for i in range(300)]
        names[199] = target
        (tmp_path / "a.fa").write_text(f">q\n{seq}\n")
        (tmp_path / "b.fa").write_text(f">{target} desc\n{seq}\n", encoding="utf-8")
        (tmp_path / "many.fa").write_text("".join(f">{n}\n{seq}\n" for n in names), encoding="utf-8")
        (tmp_path / "c.paf").write_text(f"q\t{len(seq)}\t0\t{len(seq)}\t+\t{target}\t{len(seq)}\t0\t{len(seq)}\t"
                                        f"{len(seq)}\t{len(seq)}\t60\n", encoding="utf-8")
        (tmp_path / "c2.paf").write_text(f"{target}\t{len(seq)}\t0\t{len(seq)}\t+\tq\t{len(seq)}\t0\t{len(seq)}\t"
                                         f"{len(seq)}\t{len(seq)}\t60\n", encoding="utf-8")
        (tmp_path / "p.fa").write_text(">p\nGTACGTTTGACC\n")
        (tmp_path / "p2.fa").write_text(f">p\nGTACGTTTGACC\n>{target}\nGTACGTTTGAC\n", encoding="utf-8")
        runs = {"pairs": (["pairs", "a.fa", "b.fa"], "b.fa"), "genome": (["genome", "a.fa", "b.fa"], "b.fa"),
                "paf": (["paf", "c.paf", "a.fa", "b.fa"], "b.fa"),
                "paf query": (["paf", "c2.paf", "b.fa", "a.fa"], "c2.paf: query"),
                "search": (["search", "p.fa", "many.fa", "-k", "0"], "many.fa: record 200"),
                "search pattern": (["search", "p2.fa", "a.fa", "-k", "0"], "p2.fa: record 2")}
        for cmd, (args, where) in runs.items():
            other = "bed" if cmd.startswith("search") else "paf"
            for out, refused in ((f"o.{fmt}", True), (f"o.{other}", False)):
                p = _run_to(tmp_path, args, out)
                if refused:
                    line = _error_line(p.stderr)
                    assert p.returncode == 1 and not (tmp_path / out).exists(), (cmd, line)
                    assert f"holds {shown}" in line and where in line and "printable ASCII" in line, (cmd, line)
                    continue
                assert p.returncode == 0, (cmd, out, p.stderr.decode())
                if cmd != "search":  # (p's one hit is in the record named s0)
                    assert target in (tmp_path / out).read_text(encoding="utf-8"), cmd


@pytest.mark.parametrize("target", ["a,b", "chr(1)", "x\\y", "t<2>"])
def test_target_names_with_characters_sam_refuses(tmp_path, target):
    """A target name holding a character SAM 1.6's reference names cannot (\\ , " ' ` ( ) [ ] { } < >: the
    RNAME rule) was written to @SQ SN and RNAME, exit 0. Now `pairs`, `genome`, `paf` and `search` refuse SAM
    with one line naming the target file, the name and the character, exit 1, no output; PAF and BED take it,
    and a query name may hold it (QNAME's rule allows it)."""
    seq = "ACGTACGTACGTACGTACGTACGTTTGACCATG"
    n = len(seq)
    (tmp_path / "a.fa").write_text(f">q\n{seq}\n")
    (tmp_path / "b.fa").write_text(f">{target} desc\n{seq}\n")
    (tmp_path / "many.fa").write_text("".join(f">{'s' + str(i) if i != 199 else target}\n{seq}\n"
                                              for i in range(300)))
    (tmp_path / "c.paf").write_text(f"q\t{n}\t0\t{n}\t+\t{target}\t{n}\t0\t{n}\t{n}\t{n}\t60\n")
    (tmp_path / "p.fa").write_text(">p\nGTACGTTTGACC\n")
    runs = {"pairs": (["pairs", "a.fa", "b.fa"], "b.fa"), "genome": (["genome", "a.fa", "b.fa"], "b.fa"),
            "paf": (["paf", "c.paf", "a.fa", "b.fa"], "b.fa"),
            "search": (["search", "p.fa", "many.fa", "-k", "0"], "many.fa: record 200")}
    odd = next(c for c in target if c in "\\,()<>")
    for cmd, (args, where) in runs.items():
        for out, refused in (("o.sam", True), ("o.bed" if cmd == "search" else "o.paf", False)):
            p = _run_to(tmp_path, args, out)
            if not refused:
                assert p.returncode == 0, (cmd, out, p.stderr.decode())
                continue
            line = _error_line(p.stderr)
            assert p.returncode == 1 and not (tmp_path / out).exists(), (cmd, line)
            assert f"holds {odd!r}" in line and where in line and "printable ASCII but" in line, (cmd, line)
    p = _run_to(tmp_path, ["pairs", "b.fa", "a.fa"], "o.sam")  # (the name as a QNAME)
    assert p.returncode == 0, p.stderr.decode()
    with pysam.AlignmentFile(str(tmp_path / "o.sam")) as fh:
        assert [r.query_name for r in fh] == [target]


def test_target_names_sam_cannot_hold_from_the_scanning_child(tmp_path, monkeypatch):
    """A target file of FORK_BYTES or more is scanned by a child process (io/targets.scan_beside): its @SQ
    lines refuse '*' there, and the error reaches the run as the same one line."""
    from gpualign.config import AlignConfig
    from gpualign.errors import GpualignError
    from gpualign.io import targets
    from gpualign.pipeline import run_pairs

    monkeypatch.setattr(targets, "FORK_BYTES", 1)
    (tmp_path / "a.fa").write_text(">q0\nACGTACGTAC\n>q1\nACGTACGTAC\n")
    (tmp_path / "b.fa").write_text(">t0\nACGTACGTAC\n>*\nACGTACGTAC\n")
    with pytest.raises(GpualignError, match=r"b\.fa: target '\*': its name starts with '\*'"):
        run_pairs(str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), str(tmp_path / "o.sam"), None,
                  AlignConfig(device="cpu", threads=1), "test")
    assert not (tmp_path / "o.sam").exists()


@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_genome_refuses_a_query_name_before_aligning(tmp_path, fmt, monkeypatch):
    """`genome` to SAM/BAM checks its query records' names before it aligns anything (it found them when it
    wrote, after the alignments, which take hours on chromosomes): one line naming the query file, the name and
    its record number, every record pair or the one named with --query-record; PAF takes the name."""
    import gpualign.genome as G
    from gpualign.config import AlignConfig
    from gpualign.errors import GpualignError

    seq = "ACGTACGTACGTACGTACGTACGTTTGACCATG"
    (tmp_path / "a.fa").write_text(f">q1\n{seq}\n>@q2\n{seq}\n")
    (tmp_path / "b.fa").write_text(f">t1\n{seq}\n>t2\n{seq}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(G, "_computed", lambda *a, **k: pytest.fail("aligned before the names were checked"))
    cfg = AlignConfig(metric="edit", device="cpu")
    for named in (None, "@q2"):
        with pytest.raises(GpualignError) as e:
            G.run_genome("a.fa", "b.fa", f"o.{fmt}", cfg, qname=named, tname="t2" if named else None)
        assert str(e.value).startswith("a.fa: query '@q2' (record 2): its name starts with '@'"), str(e.value)
        assert not (tmp_path / f"o.{fmt}").exists()
    monkeypatch.undo()
    p = _run_to(tmp_path, ["genome", "a.fa", "b.fa"], "o.paf")
    assert p.returncode == 0 and "@q2" in (tmp_path / "o.paf").read_text(), p.stderr.decode()


@pytest.mark.parametrize("cmd", ["pairs", "search"])
def test_output_to_an_inherited_descriptor_keeps_its_mode(data, tmp_path, cmd):
    """-o /dev/fd/3 (and --summary /dev/fd/4) where the shell opened 3 for appending (3>>log): the output goes
    after what the file held. Opened again by name (O_WRONLY), it was written from the file's start over its
    bytes, the rest of them left after it (exit 0)."""
    log, summary = tmp_path / "log.txt", tmp_path / "summary.txt"
    log.write_text("OLD\n" * 5000)
    summary.write_text("KEEP\n")
    out = os.open(log, os.O_WRONLY | os.O_APPEND)
    summ = os.open(summary, os.O_WRONLY | os.O_APPEND)
    try:
        p = subprocess.run(_cmd(data, cmd, "-f", "tsv", "-q", "-o", f"/dev/fd/{out}", "--summary", f"/dev/fd/{summ}"),
                           capture_output=True, env=ENV, timeout=120, pass_fds=(out, summ))
    finally:
        os.close(out)
        os.close(summ)
    assert p.returncode == 0, p.stderr.decode()
    ref = _cli(data, cmd, "-f", "tsv", "-q", "-o", str(tmp_path / "ref.tsv"))
    assert ref.returncode == 0, ref.stderr.decode()
    assert log.read_bytes() == b"OLD\n" * 5000 + (tmp_path / "ref.tsv").read_bytes()
    lines = summary.read_text().splitlines()
    assert lines[0] == "KEEP" and lines[1] == "key\tvalue" and len(lines) > 3


@pytest.mark.parametrize("cmd", ["pairs", "search"])
def test_closed_standard_descriptors(data, tmp_path, cmd):
    """A run started with stdout closed (`>&-`) and stdout as its output: one line, exit 1, no traceback (it
    was a traceback: sys.stdout is None). With -o FILE the run is complete: exit 0 (it wrote the file, then
    failed flushing stdout). Started with stderr closed, no file the run opens takes descriptor 2 (the
    temporary output did: every message would have gone into it): the output equals a normal run's."""
    p = subprocess.run(_cmd(data, cmd, "-f", "tsv"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV,
                       timeout=120, preexec_fn=lambda: os.close(1))
    assert p.returncode == 1 and "stdout" in _error_line(p.stderr) and "closed" in _error_line(p.stderr)
    ref = tmp_path / "ref.tsv"
    assert _cli(data, cmd, "-f", "tsv", "-q", "-o", str(ref)).returncode == 0
    for fd, more in ((1, ["-q"]), (2, [])):
        out = tmp_path / f"closed{fd}.tsv"
        p = subprocess.run(_cmd(data, cmd, "-f", "tsv", "-o", str(out), *more), capture_output=True, env=ENV,
                           timeout=120, preexec_fn=lambda fd=fd: os.close(fd))
        assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr.decode()
        assert out.read_bytes() == ref.read_bytes()


def test_stderr_reader_gone_after_a_complete_run(data, tmp_path):
    """The reader of stderr goes after the first line (`2>&1 | head -1`) while the run writes -o FILE: the
    output is complete and the exit 0; the summary's table is lost. It was exit 1 with no message (rich's
    handling of the closed pipe)."""
    out = tmp_path / "o.paf"
    p = subprocess.Popen(_cmd(data, "pairs", "-o", str(out)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=ENV)
    p.stderr.readline()
    p.stderr.close()
    assert p.wait(timeout=120) == 0
    assert len(out.read_text().splitlines()) == 1500


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EPIPE])
def test_write_error_survives_pickling(code):
    """An error raised in a worker process reaches the parent pickled: WriteError's constructor takes the
    OSError, so unpickling it from its message alone failed (TypeError)."""
    e = WriteError("out.paf", OSError(code, os.strerror(code)))
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is WriteError and str(back) == str(e)
    assert (back.exit_code, back.broken_pipe, back.why) == (e.exit_code, e.broken_pipe, e.why)
