"""Malformed FASTA/FASTQ is refused by every reader path of every command, with one line naming the file,
the record and the line (issue 51, item 2), and bzip2/xz/zstd input is refused as such. Valid files of any
layout give the same records on the fast path and the strict parser."""

import bz2
import gzip
import lzma
import os
import random
import re
import subprocess
import sys

import pytest

from gpualign.errors import InputError
from gpualign.io import fastx, fastx_fast, fastx_parts, pair_reader

ENV = dict(os.environ, PYTHONUNBUFFERED="1")

# name -> (content, record, line, what the error says): the record and line of the error in the content
MALFORMED = {
    "no_plus": ("@r1\nACGT\nIIII\n", 1, 1, "no '+' line"),
    "last_without_quality": ("@r1\nACGT\n+\nIIII\n@r2\nACGT\n", 2, 5, "no '+' line"),
    "at_garbage_then_fasta": ("@@@garbage\nACGT\n>x\nACGT\n", 1, 1, "no '+' line"),
    "at_in_fasta_sequence": (">x\nAC@GT\n", 1, 2, "invalid sequence character '@'"),
    "fastq_record_in_fasta": (">a\nACGT\n@b\nACGT\n+\nIIII\n", 1, 3, "FASTA and FASTQ records mixed"),
    "fasta_record_in_fastq": ("@a\nACGT\n+\nIIII\n>b\nACGT\n", 2, 5, "a FASTA record in a FASTQ file"),
    "short_quality": ("@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\nIII\n@r3\nACGT\n+\nIIII\n", 2, 5,
                      "quality length 3 != sequence length 4"),
    "long_quality": ("@r1\nACGT\n+\nIIIII\n", 1, 1, "quality length 5 != sequence length 4"),
    "last_quality_short": ("@r1\nACGT\n+\nIII\n", 1, 1,
                           "quality length 3 != sequence length 4 (the input ends before the quality is complete)"),
    # (record 2's sequence line missing: it reads as an empty record, and the next line is no header)
    "sequence_line_missing": ("@r1\nACGT\n+\nIIII\n@r2\n+\nIIII\n@r3\nACGT\n+\nIIII\n", 3, 7,
                              "read with an empty sequence: its sequence line missing?"),
    "plus_names_another": ("@r1\nACGT\n+r2\nIIII\n", 1, 3, "the '+' line names 'r2'"),
    # (as many '+' as '+' lines, but "++" and an empty line among them: the fast path took these records)
    "plus_lines_doubled_and_empty": ("@r1\nACGT\n++\nIIII\n@r2\nAC\n+\nII\n@r3\nAC\n\nII\n@r4\nA\n+\nI\n", 1, 3,
                                     "the '+' line names '+'"),
    "space_in_quality": ("@r1\nACGT\n+\nII I\n", 1, 4, "invalid quality character"),
    "digit_in_wrapped_fasta": (">x\nACGT\nAC1T\n", 1, 3, "invalid sequence character '1'"),
    "lone_cr": (">x\nAC\rGT\n", 1, 2, "invalid sequence character"),
    "star_in_dna": (">x\nAC*GT\n", 1, 2, "invalid sequence character '*'"),
}
ISSUE = ["no_plus", "last_without_quality", "at_garbage_then_fasta", "at_in_fasta_sequence"]  # the issue's four


def _prefixed(content: str, k: int) -> tuple[str, int, int]:
    """k valid records of content's kind before it: (text, records, lines) before the malformed part."""
    if content.startswith("@"):
        return "".join(f"@p{i}\nACGT\n+\nIIII\n" for i in range(k)) + content, k, 4 * k
    return "".join(f">p{i}\nACGT\n" for i in range(k)) + content, k, 2 * k


def _expect(case: str, records: int = 0, lines: int = 0) -> str:
    _, rec, line, what = MALFORMED[case]
    return rf"record {rec + records} \(line {line + lines}\): .*{re.escape(what)}"


def _read_all(path, **kw):
    for _ in fastx.record_chunks(str(path), **kw):
        pass


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("fast", [True, False])
def test_record_chunks_refuse(tmp_path, case, fast):
    path = tmp_path / "in.fx"
    path.write_text(MALFORMED[case][0])
    with pytest.raises(InputError, match=r"in\.fx: " + _expect(case)):
        _read_all(path, fast=fast)


def test_missing_sequence_line_names_the_record_before(tmp_path):
    """The '@' header expected where a quality line stands: the record before it, whose sequence is empty, is
    named (its sequence line is the one missing, most likely)."""
    path = tmp_path / "in.fq"
    path.write_text("".join(f"@p{i}\nACGT\n+\nIIII\n" for i in range(5)) + MALFORMED["sequence_line_missing"][0])
    for fast in (True, False):
        with pytest.raises(InputError, match=r"record 8 \(line 27\): expected an '@' header line \(record 7 read with "
                                             r"an empty sequence"):
            _read_all(path, fast=fast)


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("block,count", [(64, None), (1 << 23, None), (64, 1), (1 << 23, 1)])
def test_refused_after_many_records_across_blocks(tmp_path, monkeypatch, case, gz, block, count):
    """After 300 valid records, in 64-byte or 8 MB blocks: the fast path hands over to the strict parser,
    which counts records and lines from the start of the file (FASTA records at once where there are many);
    count 1: every piece's line ends counted by numpy (else only pieces of COUNT_BY_NUMPY bytes or more)."""
    monkeypatch.setattr(fastx_fast, "_BLOCK", block)
    monkeypatch.setattr("gpualign.io.fastx_strict.BLOCK", block)
    if count is not None:
        monkeypatch.setattr("gpualign.io.fastx_strict.COUNT_BY_NUMPY", count)
    text, recs, lines = _prefixed(MALFORMED[case][0], 300)
    path = tmp_path / ("in.fx.gz" if gz else "in.fx")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    with pytest.raises(InputError, match=_expect(case, recs, lines)):
        _read_all(path)


def _partner(tmp_path, n):
    b = tmp_path / "b.fa"
    b.write_text("".join(f">t{i}\nACGT\n" for i in range(n)))
    return str(b)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_pairs_child_process_and_parts(tmp_path, monkeypatch, case):
    """The pairs reader: in this process, in a child process (big files), and plain FASTA in parts by
    several processes (small parts here): the same error, with the record and line in the whole file."""
    monkeypatch.setattr(fastx_parts, "RANGE_BYTES", 256)
    text, recs, lines = _prefixed(MALFORMED[case][0], 200)
    a = tmp_path / "a.fx"
    a.write_text(text)
    b = _partner(tmp_path, 300)
    said = []
    for min_bytes, workers in ((1 << 40, 1), (0, 1), (0, 2)):
        with pytest.raises(InputError, match=r"a\.fx: " + _expect(case, recs, lines)) as e:
            list(pair_reader.read_pairs(str(a), b, 5000, 37, min_bytes, workers=workers))
        said.append(str(e.value))
    assert len(set(said)) == 1


@pytest.mark.parametrize("case", ISSUE)
def test_search_patterns_and_sam_header_pass(tmp_path, case):
    from gpualign.search import patterns

    path = tmp_path / "p.fx"
    path.write_text(MALFORMED[case][0])
    with pytest.raises(InputError, match=_expect(case)):
        patterns.read(str(path), 1, "both")
    with pytest.raises(InputError, match=_expect(case)):
        list(fastx.names_and_lengths(str(path)))


@pytest.mark.parametrize("case", ISSUE + ["fastq_record_in_fasta", "plus_names_another", "short_quality"])
def test_paf_queries_and_targets(tmp_path, case):
    """paf's readers: the query file indexed or streamed, the target indexed; a malformed file fails with
    the reader's error (an indexable one at the bytes fetched), never with a wrong sequence."""
    from gpualign.io import paf as P

    content = MALFORMED[case][0]
    path = tmp_path / "r.fx"
    path.write_text(content)
    name, n = content[1:].split()[0], len(content.split("\n")[1])
    cand = P.Candidate(1, name, n, 0, 4, "+", name, n, 0, 4, 60, [])
    with pytest.raises(InputError, match=r"r\.fx: record"):
        q = P.Queries(str(path))
        q.get(cand)
    with pytest.raises(InputError, match=r"r\.fx: record"):
        t = P.Targets(str(path))
        t.fetch(cand, 0, 4)


@pytest.mark.parametrize("plus", ["+ ", "+\t", "+a ", "+a desc \r", "+a desc"])
@pytest.mark.parametrize("fast", [True, False])
def test_plus_line_white_space(tmp_path, plus, fast):
    """A '+' line of white space alone, or the name or header followed by white space, names nothing else:
    read as htslib and Biopython read it (it was refused: "the '+' line names ' '"); a '+' line naming another
    record still is refused."""
    path = tmp_path / "in.fq"
    path.write_text(f"@a desc\nACGT\n{plus}\nIIII\n@b\nAC\n+\nII\n")
    _read_all(path, fast=fast)
    assert [(n, ln) for n, ln in fastx.names_and_lengths(str(path))] == [("a", 4), ("b", 2)]
    path.write_text("@a\nACGT\n+b \nIIII\n")
    with pytest.raises(InputError, match="the '\\+' line names 'b'"):
        _read_all(path, fast=fast)


def test_symbols_follow_the_scoring():
    """'*' and '-' pass the reader with general scoring only (its alphabet check decides: protein takes
    '*'); DNA's edit/affine model takes letters only."""
    from gpualign import pack

    assert pack.symbols(False) == b"" and set(pack.symbols(True)) == set(b"*-")


@pytest.mark.parametrize("symbols", [b"", b"*-"])
def test_star_read_with_general_scoring_only(tmp_path, symbols):
    path = tmp_path / "p.fa"
    path.write_text(">p\nMVL*\n>q\nAC-GT\n")
    if symbols:
        assert [s for _, s, _ in fastx.records(str(path), symbols=symbols)] == [b"MVL*", b"AC-GT"]
    else:
        with pytest.raises(InputError, match=r"record 1 \(line 2\): invalid sequence character '\*'"):
            list(fastx.records(str(path), symbols=symbols))


COMPRESSED = {"bzip2": bz2.compress, "xz": lzma.compress,
              "zstd": lambda d: b"\x28\xb5\x2f\xfd" + bytes(20)}  # (the magic is what is looked at)


@pytest.mark.parametrize("kind", sorted(COMPRESSED))
def test_unsupported_compression_named(tmp_path, kind):
    path = tmp_path / "x.fa.c"
    path.write_bytes(COMPRESSED[kind](b">x\nACGT\n"))
    with pytest.raises(InputError, match=rf"x\.fa\.c: {kind}-compressed input is not supported \(decompress it, "
                                         r"or recompress with bgzip\)"):
        fastx.sniff(str(path))


# --- the commands, as a user runs them (tiny files, CPU) ---

def run(args, stdin=None):
    p = subprocess.run([sys.executable, "-m", "gpualign", *args], input=stdin, capture_output=True, env=ENV,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr.decode()


def _refused(args, file_name, pattern, stdin=None):
    rc, out, err = run(args, stdin)
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert rc == 1, err
    assert len(errors) == 1 and file_name in errors[0] and re.search(pattern, errors[0]), err
    assert "Traceback" not in err and out == b""


@pytest.fixture
def small(tmp_path):
    t = tmp_path / "t.fa"
    t.write_text(">t\nACGTACGTAC\n")
    p = tmp_path / "p.fa"
    p.write_text(">p\nACGT\n")
    return tmp_path


@pytest.mark.parametrize("case", ISSUE)
def test_cli_pairs(small, case):
    bad = small / f"{case}.fx"
    bad.write_text(MALFORMED[case][0])
    _refused(["pairs", str(bad), str(small / "t.fa"), "--device", "cpu", "-t", "1"], bad.name, _expect(case))


@pytest.mark.parametrize("case", ["no_plus", "at_in_fasta_sequence"])
def test_cli_pairs_stdin(small, case):
    _refused(["pairs", "-", str(small / "t.fa"), "--device", "cpu", "-t", "1"], "stdin", _expect(case),
             stdin=MALFORMED[case][0].encode())


@pytest.mark.parametrize("case", ["last_without_quality", "at_in_fasta_sequence"])
def test_cli_genome(small, case):
    bad = small / f"{case}.fx"
    bad.write_text(MALFORMED[case][0])
    _refused(["genome", str(bad), str(small / "t.fa"), "--device", "cpu"], bad.name, _expect(case))


@pytest.mark.parametrize("case", ["at_garbage_then_fasta", "at_in_fasta_sequence"])
def test_cli_paf(small, case):
    bad = small / f"{case}.fx"
    bad.write_text(MALFORMED[case][0])
    name = MALFORMED[case][0][1:].split()[0]
    cands = small / "c.paf"
    cands.write_text(f"{name}\t4\t0\t4\t+\tt\t10\t0\t4\t4\t4\t60\n")
    _refused(["paf", str(cands), str(bad), str(small / "t.fa"), "--device", "cpu", "-q"], bad.name, "record")


@pytest.mark.parametrize("case", ["no_plus", "at_garbage_then_fasta"])
def test_cli_search_patterns(small, case):
    bad = small / f"{case}.fx"
    bad.write_text(MALFORMED[case][0])
    _refused(["search", str(bad), str(small / "t.fa"), "-k", "1", "--device", "cpu"], bad.name, _expect(case))


@pytest.mark.parametrize("kind", sorted(COMPRESSED))
def test_cli_compressed(small, kind):
    bad = small / f"x.fa.{kind}"
    bad.write_bytes(COMPRESSED[kind](b">x\nACGT\n"))
    said = f"{kind}-compressed input is not supported"
    _refused(["pairs", str(bad), str(small / "t.fa"), "--device", "cpu", "-t", "1"], bad.name, said)
    # (the text from stdin, read as the search runs; hits into a file)
    _refused(["search", str(small / "p.fa"), "-", "-k", "1", "--device", "cpu", "-o", str(small / "o.tsv")],
             "stdin", said, stdin=bad.read_bytes())


# --- valid files of many layouts: the fast path and the strict parser agree ---

def _random_records(rnd, fq):
    recs = []
    for i in range(rnd.randint(1, 60)):
        name = f"r{i}" + rnd.choice(["", "_x", ".1"])
        desc = rnd.choice(["", " c=1", "\tlen=3 x"])
        seq = "".join(rnd.choice("ACGTNacgtnRYK") for _ in range(rnd.choice([0, 1, 5, 40, 150])))
        qual = "".join(rnd.choice("!#5?I@+~") for _ in seq) if fq else None
        recs.append((name, desc, seq, qual))
    return recs


def _render(rnd, recs, fq):
    wrap = rnd.choice([0, 0, 1, 7, 60])
    plus_header = rnd.random() < 0.3
    lines = []

    def wrapped(s):
        return [s[i:i + wrap] for i in range(0, len(s), wrap)] if wrap and s else [s]

    for name, desc, seq, qual in recs:
        lines.append(("@" if fq else ">") + name + desc)
        lines += wrapped(seq)
        if fq:
            lines.append("+" + (name + desc if plus_header else ""))
            lines += wrapped(qual)
    nl = rnd.choice(["\n", "\n", "\r\n"])
    text = nl.join(lines) + rnd.choice(["", nl, nl * 3])
    if not fq and rnd.random() < 0.2:  # blank lines inside a FASTA record
        text = text.replace(nl + "A", nl + nl + "A", 1)
    return text.encode()


@pytest.mark.parametrize("seed", range(40))
def test_fast_path_and_strict_parser_agree(tmp_path, monkeypatch, seed):
    rnd = random.Random(seed)
    fq = seed % 2 == 1
    recs = _random_records(rnd, fq)
    data = _render(rnd, recs, fq)
    if fq and not data.endswith(b"\n") and not recs[-1][2]:
        data += b"\n"  # (an empty last record's quality line must be there to be read as such)
    path = tmp_path / ("r.fq.gz" if seed % 3 == 0 else "r.fq")
    path.write_bytes(gzip.compress(data) if seed % 3 == 0 else data)
    want = [(n, s.encode(), q) for n, _, s, q in recs]
    monkeypatch.setattr(fastx_fast, "_BLOCK", rnd.choice([16, 100, 1 << 23]))
    monkeypatch.setattr("gpualign.io.fastx_strict.MANY", rnd.choice([1, 3, 64]))  # FASTA records at once from
    monkeypatch.setattr("gpualign.io.fastx_strict.BLOCK", rnd.choice([3, 16, 100, 1 << 23]))  # (lines cut)
    for fast in (True, False):
        got = [r for names, seqs, quals in fastx.record_chunks(str(path), chunk=5, fast=fast)
               for r in zip(names, seqs, quals)]
        assert got == want, (fast, data[:300])


def test_simple_layout_with_sra_plus_lines_stays_on_the_fast_path(tmp_path, monkeypatch):
    """'+' lines repeating the header (as SRA writes them) do not leave the fast path."""
    path = tmp_path / "r.fq"
    path.write_text("".join(f"@r{i} d\nACGT\n+r{i} d\nIIII\n" for i in range(100)))

    def refuse(*a, **k):
        raise AssertionError("the strict parser was used")

    monkeypatch.setattr(fastx, "strict_chunks", refuse)
    assert sum(len(c[0]) for c in fastx.record_chunks(str(path))) == 100


def test_genome_scale_multiline_record(tmp_path):
    """A multi-megabase record in 60-column lines (a genome's layout): read whole by the strict parser."""
    rnd = random.Random(5)
    seq = "".join(rnd.choice("ACGT") for _ in range(3_000_000))
    path = tmp_path / "g.fa"
    path.write_text(">chr\n" + "\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)) + "\n")
    assert list(fastx.records(str(path), chunk=1, fast=False)) == [("chr", seq.encode(), None)]


@pytest.mark.parametrize("block", range(1, 24))
def test_lines_longer_than_a_block(tmp_path, monkeypatch, block):
    """The strict parser takes a line longer than the bytes buffered (unwrapped FASTA: a chromosome on one
    line) in parts, cut at every offset here: the same records, CR LF ends whose CR and LF fall in different
    blocks read as line ends, and a byte refused inside a line named as such ('>' and '@' there start no
    record; before a lone CR earlier in the line, as when the line is read whole), a line starting with '@'
    or a lone CR at the end as before."""
    monkeypatch.setattr("gpualign.io.fastx_strict.BLOCK", block)
    monkeypatch.setattr("gpualign.io.fastx_strict.MANY", 1 << 20)  # (records one at a time)
    path = tmp_path / "u.fa"
    good = {b">r1 x\nACGTACGTACGTAACCGGTT\n>r2\nAC\n": [("r1", b"ACGTACGTACGTAACCGGTT"), ("r2", b"AC")],
            b">r1\r\nACGTACGTACGTAACCGGTT\r\nGG\r\n>r2\r\nAC": [("r1", b"ACGTACGTACGTAACCGGTTGG"), ("r2", b"AC")]}
    for data, want in good.items():
        path.write_bytes(data)
        assert [(n, s) for n, s, _ in fastx.records(str(path), chunk=1, fast=False)] == want, data
    bad = {b">r1\nACGTACGTAC>GTAACCGGTT\n>r2\nAC\n": r"record 1 \(line 2\): invalid sequence character '>'",
           b">r1\nACGTACGTACGTAACCGG@T\n": r"record 1 \(line 2\): invalid sequence character '@'",
           b">r1\nACGTACGTACGTAACCGGTT\n@GT\n": r"record 1 \(line 3\): a line starts with '@' inside a FASTA",
           b">r1\nACGTACGTACGTAACCGGTT\r": r"record 1 \(line 2\): invalid sequence character byte 0x0d",
           b">r1\nACGTACGTACG\rTAACCGGTT\n": r"record 1 \(line 2\): invalid sequence character byte 0x0d",
           b">r1\nACG\rTACGTACGTAACCGG!T\n": r"record 1 \(line 2\): invalid sequence character '!'",
           b">r1\nACG\rTACGTACG\rTAACC>GGT\n>r2\nA\n": r"record 1 \(line 2\): invalid sequence character '>'"}
    for data, error in bad.items():
        path.write_bytes(data)
        with pytest.raises(InputError, match=error):
            list(fastx.records(str(path), chunk=1, fast=False))


@pytest.mark.parametrize("layout", ["unique", "same length again", "other length, other chunk",
                                    "other length, same chunk"])
def test_target_lengths_by_chunks(tmp_path, monkeypatch, layout):
    """fastx.target_lengths (SAM's @SQ lines), a chunk of records at a time: the dict the record-by-record
    loop gives, in file order, or its error at the first name seen again with another length (unique: at
    the first name seen again, its record numbered across the chunks)."""
    monkeypatch.setattr(fastx, "CHUNK", 7)
    recs = [(f"t{i}", "ACGT"[: 1 + i % 4] * (1 + i)) for i in range(40)]
    if layout == "same length again":
        recs.insert(30, recs[3])
    elif layout == "other length, other chunk":
        recs.insert(30, (recs[3][0], recs[3][1] + "A"))
    elif layout == "other length, same chunk":
        recs.insert(5, (recs[3][0], "A"))
    path = tmp_path / "t.fa"
    path.write_text("".join(f">{n}\n{s}\n" for n, s in recs))
    want: dict = {}
    for n, s in recs:
        want.setdefault(n, len(s))
    if layout.startswith("other"):
        with pytest.raises(InputError, match=r"target name 't3' appears twice with different lengths \(16 and "):
            fastx.target_lengths(str(path))
    else:
        assert list(fastx.target_lengths(str(path)).items()) == list(want.items())
    if layout == "same length again":  # (unique: genome's rule; the record counted across chunks)
        with pytest.raises(InputError, match=r"t.fa: record 31: target name 't3' appears twice: SAM/BAM"):
            fastx.target_lengths(str(path), unique=True)
    elif layout == "unique":
        assert list(fastx.target_lengths(str(path), unique=True).items()) == list(want.items())
