"""`gpualign genome` on the command line: which records are paired (--query-record/--target-record),
every input error before the first output byte, -t and --summary, and the divergence estimate that the
CPU notice prints (and the kernel choices use)."""

import os
import re

import edlib
import numpy as np
import pytest

from cli_helper import run_cli
from gpualign.divergence import estimate as estimate_divergence
from test_genome import mutate, rand, run, write_fa

X, Y, Z = rand(3_000, 1), rand(2_000, 2), rand(2_500, 3)
Y2, Z2, SOLO = mutate(Y, 0.05, 4), mutate(Z, 0.05, 5), mutate(Y, 0.08, 6)


def dist(a: bytes, b: bytes) -> int:
    return edlib.align(a, b, task="distance")["editDistance"]


@pytest.fixture
def files(tmp_path):
    """a.fa: x, y; b.fa: y, z (y in both, x only in a, z only in b); one.fa: solo."""
    return {"a": write_fa(tmp_path / "a.fa", [("x", X), ("y", Y)]),
            "b": write_fa(tmp_path / "b.fa", [("y", Y2), ("z", Z2)]),
            "one": write_fa(tmp_path / "one.fa", [("solo", SOLO)]), "dir": tmp_path}


def rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    assert lines[0].startswith("query\ttarget\t")
    return [line.split("\t") for line in lines[1:]]


CPU = ["--device", "cpu", "--distance-only", "-t", "1"]


@pytest.mark.parametrize("q,t,option,name,want", [
    ("a", "b", "--query-record", "y", ("y", "y", Y, Y2)),  # the target record of the same name (not record 1)
    ("a", "one", "--query-record", "x", ("x", "solo", X, SOLO)),  # the target's only record
    ("a", "b", "--query-record", "x", None),  # b has two records, none named x: an error
    ("a", "b", "--target-record", "y", ("y", "y", Y, Y2)),  # the query record of the same name
    ("one", "b", "--target-record", "z", ("solo", "z", SOLO, Z2)),  # the query's only record
    ("a", "b", "--target-record", "z", None),  # a has two records, none named z
])
def test_one_record_named(files, q, t, option, name, want):
    rc, out, err = run([files[q], files[t], *CPU, option, name])
    if want is None:
        other = "--target-record" if option == "--query-record" else "--query-record"
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, (rc, out, err)
        assert f"none named {name!r}" in err and f"name one with {other}" in err
        return
    assert rc == 0, err
    (row,) = rows(out)
    qn, tn, qs, ts = want
    assert row[:5] == [qn, tn, str(len(qs)), str(len(ts)), str(dist(qs, ts))]


@pytest.mark.parametrize("args", [["--query-record", "nope"], ["--target-record", "nope"],
                                  ["--query-record", "nope", "--target-record", "y"]])
@pytest.mark.parametrize("to_file", [False, True])
def test_missing_record_before_any_output(files, args, to_file):
    """No header, no notice, no file: one line, exit 1."""
    o = files["dir"] / "o.tsv"
    rc, out, err = run([files["a"], files["b"], *CPU, *args, *(["-o", str(o)] if to_file else [])])
    assert rc == 1 and out == "" and not o.exists(), (rc, out, err)
    assert err.strip().splitlines() == [err.strip()] and "no record named 'nope'" in err


def test_record_count_mismatch_before_any_output(files):
    rc, out, err = run([files["a"], files["one"], *CPU])
    assert rc == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "has more records than" in err
    assert "one.fa ends after 1 record)" in err  # (pairs' words)


def test_missing_record_on_stdin_before_any_output(files):
    """A query on stdin is not read twice: its names are checked as it is read, still before the header."""
    with open(files["a"], "rb") as fh:
        p = run_cli("genome", "-", files["b"], *CPU, "--query-record", "nope", "--target-record", "y",
                    stdin=fh.read(), timeout=120)
    assert p.returncode == 1 and p.stdout == b"" and b"no record named 'nope'" in p.stderr, p.stderr


def test_summary_file_and_threads(files):
    """-t 1 and -t 2 (two pairs at once): the same rows; --summary: the TSV summary, also with -q."""
    results = {}
    for t in ("1", "2"):
        s = files["dir"] / f"s{t}.tsv"
        rc, out, err = run([files["a"], files["a"], "--device", "cpu", "--distance-only", "-t", t, "-q",
                            "--summary", str(s)])
        assert rc == 0 and err == "", err
        results[t] = [r[:6] + r[-1:] for r in rows(out)]
        summary = dict(line.split("\t") for line in s.read_text().splitlines())
        assert summary["key"] == "value" and summary["pairs"] == summary["records_written"] == "2"
        assert summary["bases"] == str(2 * (len(X) + len(Y))) and summary["route:cpu-wfa"] == "2"
        assert float(summary["wall_seconds"]) > 0
        assert {"read_seconds", "align_seconds", "write_seconds"} <= set(summary)
    assert results["1"] == results["2"] == [["x", "x", "3000", "3000", "0", "1.000000", "cpu-wfa"],
                                            ["y", "y", "2000", "2000", "0", "1.000000", "cpu-wfa"]]


def test_summary_on_stderr_unless_quiet(files):
    rc, _, err = run([files["a"], files["b"], *CPU, "--query-record", "y"])
    assert rc == 0 and "gpualign summary" in err and "records_written" in err


# ---- the divergence estimate --------------------------------------------------------------------

REAL_PAIRS = [("virus_DWV_NC_004830.fa", "virus_VDV1_NC_006494.fa"), ("mtDNA_human_minimap2.fa", "mtDNA_orangutan.fa")]


@pytest.mark.parametrize("a,b", REAL_PAIRS)
def test_notice_divergence_on_real_pairs(real_data, a, b):
    """The CPU notice's `sampled divergence` against the exact distance / the longer length (DWV vs
    VDV1: 15.8%, human vs orangutan mtDNA: 20.0%), within a point."""
    rc, out, err = run([os.path.join(real_data, a), os.path.join(real_data, b), *CPU])
    assert rc == 0, err
    row = rows(out)[0]
    truth = 100 * int(row[4]) / max(int(row[2]), int(row[3]))
    shown = float(re.search(r"sampled divergence ([0-9.]+)%", err).group(1))
    assert 10 < truth and abs(shown - truth) <= 1.0, (shown, truth)


def test_notice_hints_at_opposite_strands(tmp_path):
    """genome aligns the records as given: a record against its own reverse complement (with edits) costs as
    much as unrelated DNA, and the CPU notice says to reverse-complement it; a related pair's notice does not, nor
    that of a record against a part of it (a divergence from the lengths alone, 58%)."""
    q = rand(60_000, 11)
    t = mutate(q, 0.02, 12)
    flipped = t[::-1].translate(bytes.maketrans(b"ACGT", b"TGCA"))
    a = write_fa(tmp_path / "a.fa", [("q", q)])
    for name, seq, hint in (("same", t, False), ("flipped", flipped, True), ("a_part", q[:25_000], False)):
        b = write_fa(tmp_path / f"{name}.fa", [("t", seq)])
        rc, _, err = run([a, b, *CPU])
        assert rc == 0, err
        assert ("reverse-complement it first" in err) == hint, err


@pytest.mark.parametrize("n,rate", [(200_000, 0.10), (200_000, 0.30), (200_000, 0.45), (1_000_000, 0.02)])
def test_estimate_on_simulated_pairs(n, rate):
    """Uniform edits (indels shift the windows' places by a random walk): the estimate within 15% of the
    exact value or 1 point (it was 4.9% for 1.8% at 1 Mbp, 11.2% for 8.5% at 200 kbp)."""
    q = rand(n, n)
    t = mutate(q, rate, n + 1)
    truth = dist(q, t) / max(len(q), len(t))
    assert abs(estimate_divergence(q, t) - truth) <= max(0.01, 0.15 * truth), (estimate_divergence(q, t), truth)


def test_estimate_short_unrelated_and_lopsided():
    """Short pairs: the exact value; unrelated strings: about 52% (what a global alignment costs);
    lengths far apart: at least |n - m| / max(n, m); an empty string against another: 100%."""
    q, t = rand(12_000, 7), mutate(rand(12_000, 7), 0.2, 8)
    assert estimate_divergence(q, t) == dist(q, t) / max(len(q), len(t))
    assert 0.49 < estimate_divergence(rand(300_000, 9), rand(300_000, 10)) < 0.55
    long = rand(300_000, 11)
    assert estimate_divergence(long[:20_000], long) >= 280_000 / 300_000
    assert estimate_divergence(b"", long[:10]) == 1.0 and estimate_divergence(b"", b"") == 0.0


@pytest.mark.parametrize("seed", [0, 1])
def test_estimate_with_uneven_divergence_and_large_indels(seed):
    """400 kbp in 20 kbp segments of log-normal divergence (median 4%) with two 3-8 kbp indels: windows at
    their relative places met unrelated sequence (estimate ~52% for a true ~10%); placed by their k-mers,
    the estimate is within half the true value either way."""
    rng = np.random.default_rng(seed)
    q = rand(400_000, 20 + seed)
    t = b"".join(mutate(q[i:i + 20_000], min(0.3, rng.lognormal(np.log(0.04), 0.8)), 100 * seed + i // 1000)
                 for i in range(0, len(q), 20_000))
    cut = int(rng.integers(3_000, 8_000))
    t = t[:100_000] + t[100_000 + cut:280_000] + rand(cut, 30 + seed) + t[280_000:]
    truth = dist(q, t) / max(len(q), len(t))
    assert 0.5 * truth <= estimate_divergence(q, t) <= 1.5 * truth, (estimate_divergence(q, t), truth)


def test_record_names_not_from_a_fai(files, tmp_path):
    """A .fai newer than its file that does not list its records as the file holds them is not used for the
    names: htslib's leaves out a record without bases and a repeated name (a helper's hunt: a named empty
    record was 'not found', a file's record count was wrong, and the TSV's first rows came out before the
    count's error), and one left from another file would give that file's names."""
    import pysam

    from gpualign.genome import record_names

    fai = files["dir"] / "b.fa.fai"
    fai.write_text("y\t1\t0\t1\t2\nonly_in_fai\t1\t0\t1\t2\n")
    assert record_names(files["b"]) == (["y", "z"], None)
    e = write_fa(tmp_path / "e.fa", [("a", X), ("b", b""), ("c", Y)])
    two = write_fa(tmp_path / "two.fa", [("x", X), ("y", Y)])
    pysam.faidx(e)
    assert [line.split("\t")[0] for line in open(e + ".fai")] == ["a", "c"]  # (htslib's)
    rc, out, err = run([e, two, *CPU, "--query-record", "b", "--target-record", "y"])
    assert rc == 0 and rows(out)[0][:5] == ["b", "y", "0", str(len(Y)), str(len(Y))], err
    rc, out, err = run([e, two, *CPU, "-o", str(tmp_path / "o.tsv")])
    assert rc == 1 and f"{e} has more records than {two}" in err and not (tmp_path / "o.tsv").exists(), err


def test_record_names_from_a_fai_that_lists_every_record(tmp_path, monkeypatch):
    """htslib's .fai gives the names without a first pass where it lists every record as the file holds them
    (LF or CR LF, the last line's end missing or not); a file it does not match is read: an empty record, a
    repeated name, a .fai of another file, blank lines between records, a gzip file."""
    import gzip

    import pysam

    from gpualign import genome
    from gpualign.errors import InputError

    body = b">a desc\nACGTACGTAC\nGT\n>b\nAAAAAAAAAA\n>c x y\nC\n"
    good = {"lf.fa": body, "crlf.fa": body.replace(b"\n", b"\r\n"), "noend.fa": body[:-1],
            "full.fa": b">a\nACGTACGTAC\n>b\nAAAAAAAAAA\n"}
    bad = {"empty.fa": b">a\nACGT\n>e\n>c\nGG\n", "dup.fa": b">a\nACGT\n>a\nGG\n>c\nT\n",
           "blank.fa": b">a\nACGT\n\n>c\nGG\n"}
    for name, data in {**good, **bad}.items():
        (tmp_path / name).write_bytes(data)
        pysam.faidx(str(tmp_path / name))
    first_pass = []
    records = genome.fastx.records
    monkeypatch.setattr(genome.fastx, "records", lambda *a, **k: first_pass.append(a[0]) or records(*a, **k))
    for name in good:
        want = ["a", "b"] if name == "full.fa" else ["a", "b", "c"]
        assert genome.record_names(str(tmp_path / name)) == (want, None) and not first_pass, name
    for name, want in (("empty.fa", ["a", "e", "c"]), ("dup.fa", ["a", "a", "c"]), ("blank.fa", ["a", "c"])):
        assert genome.record_names(str(tmp_path / name))[0] == want and first_pass[-1] == str(tmp_path / name)
    other = tmp_path / "other.fa"  # (the same count of records; lf.fa's .fai copied beside it, newer)
    other.write_bytes(b">x\nACGTACGTAC\nGT\n>y\nAAAAAAAAAA\n>z\nC\n")
    (tmp_path / "other.fa.fai").write_bytes((tmp_path / "lf.fa.fai").read_bytes())
    assert genome.record_names(str(other))[0] == ["x", "y", "z"] and first_pass[-1] == str(other)
    cr = tmp_path / "cr.fa"  # (a CR inside a header line: the reader's error, not the .fai's name)
    cr.write_bytes(b">a\rb\nACGT\n>c\nGG\n")
    (tmp_path / "cr.fa.fai").write_bytes(b"a\t4\t5\t4\t5\nc\t2\t13\t2\t3\n")
    with pytest.raises(InputError, match="record 1"):
        genome.record_names(str(cr))
    gz = tmp_path / "z.fa.gz"
    gz.write_bytes(gzip.compress(body))
    (tmp_path / "z.fa.gz.fai").write_bytes((tmp_path / "lf.fa.fai").read_bytes())
    assert genome.record_names(str(gz))[0] == ["a", "b", "c"] and first_pass[-1] == str(gz)


def test_stages_read_and_write_timed(files, tmp_path, monkeypatch):
    """run_genome's stages: the seconds spent reading the inputs (the first pass and the records) and writing the
    output, apart from the pairs' own time; the summary's read_seconds and write_seconds."""
    import time

    from gpualign import genome
    from gpualign.config import AlignConfig

    real_records, real_commit = genome.fastx.records, genome.Output.commit

    def slow_records(*a, **k):
        time.sleep(0.05)
        yield from real_records(*a, **k)

    def slow_commit(self):
        time.sleep(0.05)
        return real_commit(self)

    monkeypatch.setattr(genome.fastx, "records", slow_records)
    monkeypatch.setattr(genome.Output, "commit", slow_commit)
    stages = {}
    got = genome.run_genome(files["a"], files["a"], str(tmp_path / "o.tsv"),
                            AlignConfig(metric="edit", device="cpu", distance_only=True, threads=1), stages=stages)
    assert stages["read"] >= 0.2 and stages["write"] >= 0.05  # (a.fa read twice: names, then records)
    rows = dict(genome.summary(got, 1.0, stages=stages).rows())
    assert float(rows["read_seconds"]) >= 0.2 and float(rows["write_seconds"]) >= 0.05
    assert float(rows["align_seconds"]) == pytest.approx(sum(r.seconds for r in got), abs=1e-3)


@pytest.mark.parametrize("named", [False, True])
def test_one_record_files_read_once(files, tmp_path, monkeypatch, named):
    """A file of one record (a chromosome's) is read once: the first pass that checks it and finds its name
    gives its record to the run; a file of several is read again. The same rows either way."""
    from gpualign import genome
    from gpualign.config import AlignConfig

    one = write_fa(tmp_path / "y.fa", [("y", Y)])
    query, names = (files["a"], ("x", "y")) if named else (files["one"], ())
    rc, out, err = run([query, one, *CPU] + (["--query-record", "x", "--target-record", "y"] if named else []))
    assert rc == 0, err
    reads = []
    real = genome.fastx.records
    monkeypatch.setattr(genome.fastx, "records", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    lengths = genome.fastx.target_lengths
    monkeypatch.setattr(genome.fastx, "target_lengths", lambda *a, **k: reads.append(a[0]) or lengths(*a, **k))
    assert genome.record_names(one) == (["y"], ("y", Y, None))
    assert genome.record_names(files["a"]) == (["x", "y"], None)
    reads.clear()
    cfg = AlignConfig(metric="edit", device="cpu", distance_only=True, threads=1)
    got = genome.run_genome(query, one, str(tmp_path / "o.tsv"), cfg, *names)
    assert sorted(reads) == sorted([query, one] + ([query] if named else [])), reads
    assert [[r.query, r.target, str(r.distance)] for r in got] == [w[:2] + [w[4]] for w in rows(out)]
    reads.clear()  # (SAM: the target's @SQ length from the record held, not a read of its own)
    genome.run_genome(query, one, str(tmp_path / "o.sam"), AlignConfig(metric="edit", device="cpu", threads=1),
                      *names)
    assert sorted(reads) == sorted([query, one] + ([query] if named else [])), reads
    sq = [line for line in open(tmp_path / "o.sam") if line.startswith("@SQ")]
    assert sq == [f"@SQ\tSN:y\tLN:{len(Y)}\n"], sq
    reads.clear()  # (one file as both: its first passes give the record to both sides)
    got = genome.run_genome(one, one, str(tmp_path / "o.tsv"), cfg)
    assert reads == [one, one] and [(r.query, r.target, r.distance) for r in got] == [("y", "y", 0)]


@pytest.mark.parametrize("option", ["--query-record", "--target-record"])
def test_named_record_that_repeats_is_refused(files, tmp_path, option):
    """A record chosen by a name two records share (in either file, named or found by its partner's name):
    one line naming both records, exit 1, no output; not the first silently."""
    dup = write_fa(tmp_path / "dup.fa", [("y", Y), ("y", Z)])
    args = [dup, files["b"]] if option == "--query-record" else [files["a"], dup]
    rc, out, err = run([*args, *CPU, option, "y", "-o", str(tmp_path / "o.tsv")])
    assert rc == 1 and "dup.fa: records 1 and 2 are both named 'y'" in err, err
    assert not (tmp_path / "o.tsv").exists()
    other = "--target-record" if option == "--query-record" else "--query-record"
    rc, out, err = run([*args, *CPU, option, "y", other, "y"])
    assert rc == 1 and out == "" and "records 1 and 2 are both named 'y'" in err, err


def test_error_while_pairs_run_ends_them(tmp_path):
    """-t 2 on the CPU: record 3 cannot be read while record 2 (seconds of edlib) is still running: the
    error comes at once, record 2's computing process ended, no output file left."""
    import time

    long_q = rand(1_000_000, 40)
    a = write_fa(tmp_path / "a.fa", [("r1", Y), ("r2", long_q), ("r3", b"ACGT")])
    b = tmp_path / "b.fa"
    write_fa(b, [("r1", Y2), ("r2", mutate(long_q, 0.25, 41)), ("r3", b"ACGT")])
    b.write_bytes(b.read_bytes().replace(b">r3 soft-masked\nACGT", b">r3 soft-masked\nAC\x01GT"))
    t0 = time.perf_counter()
    rc, _, err = run([a, str(b), "--device", "cpu", "--distance-only", "-t", "2", "--cpu-method", "edlib", "-q",
                      "-o", str(tmp_path / "o.tsv")])
    took = time.perf_counter() - t0
    assert rc == 1 and "record 3" in err and not (tmp_path / "o.tsv").exists(), err
    started = time.perf_counter()
    assert edlib.align(long_q[:200_000], mutate(long_q[:200_000], 0.25, 41), task="distance")
    one_fifth = time.perf_counter() - started  # record 2 takes ~25 times this (5x the length and distance)
    assert took < 5 * one_fifth + 5, (took, one_fifth)


def test_bad_named_record_is_named_by_its_number(files):
    """A named record that cannot be read: the error gives its number in the file, not the pair's."""
    bad = files["dir"] / "bad.fa"
    bad.write_bytes(open(files["b"], "rb").read().replace(b">z soft-masked\n", b">z soft-masked\nAC\x01GT\n"))
    rc, out, err = run([files["a"], str(bad), *CPU, "--query-record", "x", "--target-record", "z"])
    assert rc == 1 and out == "" and "record 2" in err, err


def test_pairs_in_flight_bounded_by_bytes(monkeypatch):
    """-t N holds up to N record pairs at once, fewer when their bases pass IN_FLIGHT_BYTES (chromosomes)."""
    from gpualign import genome
    from gpualign.config import AlignConfig

    monkeypatch.setattr(genome, "IN_FLIGHT_BYTES", 250)
    held, most = [], []

    def submit(qn, tn, q, t):
        held.append(qn)
        most.append(len(held))
        return lambda: held.remove(qn) or (qn,)

    pairs = [(f"q{i}", f"t{i}", np.zeros(100, np.uint8), np.zeros(100, np.uint8)) for i in range(6)]
    out = list(genome._in_flight(iter(pairs), AlignConfig(), 4, submit))
    assert [o[0] for o in out] == [p[0] for p in pairs] and max(most) == 2  # 2 x 200 bases > 250: the first waits
    monkeypatch.setattr(genome, "IN_FLIGHT_BYTES", 1 << 30)
    most.clear()
    list(genome._in_flight(iter(pairs), AlignConfig(), 4, submit))
    assert max(most) == 4


@pytest.mark.parametrize("name", ["out.bam", "out.sam", "out.paf", "out.paf.gz", "out.bam.gz"])
def test_distance_only_refuses_an_alignment_format_name(files, name):
    """--distance-only writes TSV: -o out.bam wrote TSV under that name, exit 0 (pysam then refused the
    file). Refused like -f bam, before anything is written; .tsv, .txt and other names take the TSV, and so
    does any name with -f tsv."""
    out = files["dir"] / name
    p = run_cli("genome", files["a"], files["b"], *CPU, "-o", out)
    assert p.returncode == 2 and "TSV only" in p.stderr.decode() and not out.exists(), p.stderr.decode()
    for other, more in (("d.tsv", []), ("d.txt", []), ("d.dist", []), ("d.sam", ["-f", "tsv"])):
        p = run_cli("genome", files["a"], files["b"], *CPU, "-q", "-o", files["dir"] / other, *more)
        assert p.returncode == 0 and rows((files["dir"] / other).read_text())[0][:2] == ["x", "y"]


def test_sam_bam_keep_fastq_qualities(tmp_path):
    """genome's SAM/BAM records carry the FASTQ query's QUAL (they had '*', where pairs keeps it)."""
    import pysam

    (tmp_path / "q.fq").write_text("@r1\nACGTAC\n+\n#5?IIE\n@r2\nGGA\n+\nABC\n")
    (tmp_path / "t.fa").write_text(">t1\nACGTAA\n>t2\nGGTA\n")
    for fmt in ("sam", "bam"):
        out = tmp_path / f"o.{fmt}"
        p = run_cli("genome", tmp_path / "q.fq", tmp_path / "t.fa", "--device", "cpu", "-t", "1", "-q", "-o", out)
        assert p.returncode == 0, p.stderr.decode()
        with pysam.AlignmentFile(str(out)) as fh:
            got = [(r.query_sequence, pysam.qualities_to_qualitystring(r.query_qualities)) for r in fh]
        assert got == [("ACGTAC", "#5?IIE"), ("GGA", "ABC")]


def test_stdin_messages(tmp_path):
    """A query name SAM cannot hold, read from stdin (found as its record is written): numbered by its pair in
    the run (it said pair 1, its place in its write batch); both inputs '-': pairs' one-line refusal (it said
    the second found stdin empty)."""
    (tmp_path / "t.fa").write_text(">x\nACGT\n>y\nACGT\n>z\nACGT\n")
    p = run_cli("genome", "-", tmp_path / "t.fa", "--device", "cpu", "-o", tmp_path / "o.sam",
                stdin=b">a\nACGT\n>b\nACGT\n>@c\nACGT\n")
    assert p.returncode == 1 and "'@c' (pair 3)" in p.stderr.decode() and not (tmp_path / "o.sam").exists()
    p = run_cli("genome", "-", "-", "--device", "cpu", stdin=b">a\nACGT\n>b\nACGA\n")
    assert p.returncode == 2 and "only one of the two inputs can be '-'" in p.stderr.decode(), p.stderr.decode()


def test_sam_bam_refuse_a_target_name_twice(tmp_path):
    """genome pairs record i with record i: two target records of one name (and length) were one @SQ line,
    the second's alignment written against it (a reader fetching that name gets the first record's bases).
    SAM/BAM: one line naming the file, the record and the name, exit 1, no output; PAF takes it, and
    --target-record with another name is not held up by it."""
    (tmp_path / "q.fa").write_text(">a\nACGTACGTAC\n>b\nACGGACGTAC\n>c\nTTGGACGTAC\n")
    (tmp_path / "t.fa").write_text(">x\nACGAACGTAC\n>x\nTTTTACGTAC\n>y\nTTGGACGTAC\n")
    for fmt in ("sam", "bam"):
        out = tmp_path / f"o.{fmt}"
        p = run_cli("genome", tmp_path / "q.fa", tmp_path / "t.fa", "--device", "cpu", "-q", "-o", out)
        err = p.stderr.decode().strip().splitlines()
        assert p.returncode == 1 and not out.exists() and len(err) == 1, err
        assert "t.fa: record 2: target name 'x' appears twice" in err[0] and "Traceback" not in err[0], err
        p = run_cli("genome", tmp_path / "q.fa", tmp_path / "t.fa", "--device", "cpu", "-q", "-o", out,
                    "--query-record", "c", "--target-record", "y")
        assert p.returncode == 0, p.stderr.decode()
    p = run_cli("genome", tmp_path / "q.fa", tmp_path / "t.fa", "--device", "cpu", "-q", "-o", tmp_path / "o.paf")
    assert p.returncode == 0 and len((tmp_path / "o.paf").read_text().splitlines()) == 3, p.stderr.decode()


def test_alignment_path_stops_at_a_closed_pipe(tmp_path):
    """The alignment path's records go out batch by batch (as --distance-only's do): with its reader gone
    before the first byte, the run stops at the first pair's write (exit 141, one line), not after aligning
    every pair into the sink's buffer."""
    import subprocess

    from cli_helper import cli_command, cli_env

    pairs = [(rand(2000, 40 + i), mutate(rand(2000, 40 + i), 0.05, 80 + i)) for i in range(30)]
    a = write_fa(tmp_path / "a.fa", [(f"q{i}", q) for i, (q, _) in enumerate(pairs)])
    b = write_fa(tmp_path / "b.fa", [(f"t{i}", t) for i, (_, t) in enumerate(pairs)])
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(cli_command("genome", a, b, "--device", "cpu", "-t", "1"), stdout=w,
                           stderr=subprocess.PIPE, env=cli_env(), timeout=300)
    finally:
        os.close(w)
    err = p.stderr.decode()
    assert p.returncode == 141 and "Traceback" not in err, err
    assert "broken pipe" in err.splitlines()[-1]
    aligned = [ln for ln in err.splitlines() if re.search(r"^gpualign: q\d+ vs t\d+: distance", ln)]
    assert 1 <= len(aligned) <= 2, err
