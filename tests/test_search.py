"""gpualign search: hits equal Sellers' DP (search_oracle.py) on random and adversarial cases, every
alignment re-checked, output formats readable, bad input answered with one line. The `device` fixture
runs the same bodies on the GPU where there is one."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cli_helper import run_cli
from gpualign.config import SearchConfig
from gpualign.search.run import run_search
from search_oracle import (contigs, edlib_check, expected, judge, mutate, paths, random_dna, read_tsv, revcomp,
                           sorted_like_output, write_fasta)


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    return request.param


def search(tmp_path, patterns, records, k, device="cpu", rule="default", chunk=0, all_ends=False,
           strand="both", threads=2, fmt=None, out="hits.tsv", **kw):
    pp, tp = paths(tmp_path, patterns, records)
    out = os.path.join(tmp_path, out)
    cfg = SearchConfig(k=k, rule=rule, chunk_bases=chunk, all_ends=all_ends, strand=strand, device=device,
                       threads=threads, **kw)
    summary = run_search(pp, tp, out, fmt, cfg, "gpualign search (test)")
    return out, summary


def check(tmp_path, patterns, records, k, device, rule="default", all_ends=False, chunk=0, strand="both"):
    out, _ = search(tmp_path, patterns, records, k, device, rule, chunk, all_ends, strand)
    rows = read_tsv(out)
    got = judge(rows, patterns, records, k, rule)
    strands = ("+", "-") if strand == "both" else (strand,)
    assert got == expected(patterns, records, k, rule, strands, all_ends)
    assert sorted_like_output(rows, list(patterns), list(records))
    return rows


@pytest.mark.parametrize("k", [0, 2, pytest.param(4, marks=pytest.mark.slow)])
def test_edlib_on_many_records(tmp_path, device, k):
    """Independent of the DP above: 200 kbp cut into 400 records of any length, 40 patterns (half drawn from the
    text with edits), every end with <= k edits against edlib's infix search (every record and strand), small
    chunks so that records and pieces cross chunk borders."""
    rng = np.random.default_rng(10 + k)
    genome = random_dna(rng, 200_000)
    records = contigs(rng, genome, 400)
    patterns = {}
    for i in range(40):
        m = int(rng.choice([12, 23, 40]))
        a = int(rng.integers(0, len(genome) - m))
        patterns[f"p{i}"] = mutate(rng, genome[a:a + m], int(rng.integers(0, k + 1))) if i % 2 else random_dna(rng, m)
    out, _ = search(tmp_path, patterns, records, k, device, all_ends=True, chunk=20_000)
    rows = read_tsv(out)
    judge(rows, patterns, records, k, "default")
    assert edlib_check(rows, patterns, records, k) >= 10  # (a drawn pattern may span two records)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("all_ends", [False, True])
def test_random_planted(tmp_path, device, seed, all_ends):
    rng = np.random.default_rng(seed)
    records = {f"r{i}": random_dna(rng, int(rng.integers(300, 1500))) for i in range(3)}
    patterns = {}
    for i in range(6):
        m = int(rng.choice([5, 12, 23, 33, 40, 70]))
        src = records[f"r{i % 3}"]
        a = int(rng.integers(0, len(src) - m))
        p = mutate(rng, src[a:a + m], int(rng.integers(0, 3)))
        patterns[f"p{i}"] = revcomp(p) if i % 2 else p
    k = int(rng.integers(0, 4))
    check(tmp_path, patterns, records, k, device, all_ends=all_ends)


@pytest.mark.parametrize("threads", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_chunk_borders(tmp_path, device, threads):
    """Tiny chunks: every record cut into many pieces; hits across borders found once, runs kept whole. One
    thread: the text read here in chunks of `chunk` bytes; two: a chunk per range of `chunk` bytes."""
    rng = np.random.default_rng(7)
    unit = random_dna(rng, 37)
    records = {"rep": unit * 30, "rand": random_dna(rng, 2000)}
    patterns = {"u": unit[3:30], "poly": "A" * 20, "r": records["rand"][100:150], "edge": records["rand"][-25:]}
    for chunk in (16, 64, 200, 1000):
        for all_ends in (False, True):
            out, _ = search(tmp_path, patterns, records, 3, device, chunk=chunk, all_ends=all_ends, threads=threads)
            rows = read_tsv(out)
            assert judge(rows, patterns, records, 3, "default") == expected(patterns, records, 3, "default",
                                                                           ("+", "-"), all_ends)


def test_run_ending_at_a_range_border(tmp_path, device, monkeypatch):
    """Runs of ends that stop at the last base of a range (a chunk each), where the record goes on: each run
    is carried into the next chunk and closed there, its hit given with its record's."""
    from gpualign.search import text_ranges

    size = 600
    monkeypatch.setattr(text_ranges, "RANGE", size)
    rng = np.random.default_rng(3)
    seq = list(random_dna(rng, 4000, "CGT"))
    head = len(">r0\n")
    for a in range(size, head + 4000 * 61 // 60, size):  # the base before each range's first byte (60 a line)
        b = (a - head) - (a - head) // 61
        seq[b - 20:b] = "A" * 20
    records = {"r0": "".join(seq), "r1": random_dna(rng, 500)}
    rows = check(tmp_path, {"pA": "A" * 12}, records, 0, device, chunk=1 << 20)
    assert len(rows) == 6


def test_device_auto_same_bytes(tmp_path):
    """--device auto (GPU or not: the text is cut for the GPU engine before the engine is known) gives the
    bytes of --device cpu, across chunk borders, read in ranges or here."""
    rng = np.random.default_rng(12)
    records = {"a": random_dna(rng, 3000), "b": random_dna(rng, 700)}
    patterns = {f"p{i}": mutate(rng, records["a"][i * 300:i * 300 + 23], 1) for i in range(6)}
    for threads in (1, 2):
        outs = [open(search(tmp_path, patterns, records, 2, device, chunk=200, threads=threads)[0], "rb").read()
                for device in ("auto", "cpu")]
        assert outs[0] == outs[1] and outs[0].count(b"\n") > 6


def test_poly_a_and_ends(tmp_path, device):
    records = {"a": "C" * 10 + "A" * 200 + "G" * 10, "b": "AAAAAAAAAATTTTT"}
    patterns = {"pA": "A" * 12, "first": "CCCCCAAAA", "last": "AAAAGGGGGGGGGG", "short": "ACG"}
    for all_ends in (False, True):
        check(tmp_path, patterns, records, 2, device, all_ends=all_ends)


def test_k0_strands_lowercase_n(tmp_path, device):
    rng = np.random.default_rng(3)
    t = random_dna(rng, 800)
    t = t[:200] + "N" * 50 + t[250:400].lower() + t[400:]
    records = {"x": t}
    patterns = {"a": t[300:320].upper(), "b": revcomp(t[500:530]), "n": t[190:215]}
    for k in (0, 1, 3):
        for strand in ("both", "+", "-"):
            check(tmp_path, patterns, records, k, device, strand=strand)


@pytest.mark.parametrize("rule", ["default", "n_mismatch", "iupac"])
def test_rules(tmp_path, device, rule):
    rng = np.random.default_rng(11)
    t = random_dna(rng, 600, "ACGT") + "NNNNRYACGTNACGGT" + random_dna(rng, 300, "ACGTN")
    records = {"x": t}
    patterns = {"n": "ACGTNACG", "iu": "ACRYSWKMGT", "plain": t[100:118], "nn": t[606:614]}
    for all_ends in (False, True):
        check(tmp_path, patterns, records, 2, device, rule=rule, all_ends=all_ends)


def test_long_patterns(tmp_path, device):
    rng = np.random.default_rng(5)
    records = {"g": random_dna(rng, 4000)}
    patterns = {f"L{m}": mutate(rng, records["g"][m:m + m], 5) for m in (100, 200, 300)}
    check(tmp_path, patterns, records, 12, device)


def test_long_pattern_traceback_against_edlib():
    """search/hits.align (the CPU traceback of hits) on 1,000-nt patterns: the cost at each window's last
    column equals edlib's (the reversed pattern as a prefix of the reversed window: end fixed, start free), and
    each CIGAR spends the whole pattern, the window's text from its start column, and exactly that cost."""
    import edlib

    from gpualign import cigar as C
    from gpualign.search import alphabet, hits

    rng = np.random.default_rng(12)
    letters = alphabet.LETTERS[:4].decode()
    n, m = 6, 1000
    pats, wins, firsts = [], [], []
    for i in range(n):
        p = random_dna(rng, m)
        t = mutate(rng, p, 30 * i)  # 0 to 150 edits
        first = int(rng.integers(0, 40))
        win = random_dna(rng, first) + random_dna(rng, 5) + t
        pats.append(p)
        wins.append(win)
        firsts.append(first)
    L = max(len(w) for w in wins)
    code = lambda s: [letters.index(c) for c in s]  # noqa: E731
    pattern = np.array([code(p) for p in pats], np.uint8)
    window = np.full((n, L), alphabet.PAD, np.uint8)
    first = np.zeros(n, np.int64)
    for i, w in enumerate(wins):  # each window ends at column L: PAD before its real text
        window[i, L - len(w):] = code(w)
        first[i] = L - len(w) + firsts[i]
    cost, start, cigar, off, length, _ = hits.align_job((pattern, window, first, alphabet.match_table("default")))
    for i in range(n):
        text = wins[i][firsts[i]:]
        want = edlib.align(pats[i][::-1], text[::-1], mode="SHW")["editDistance"]
        assert int(cost[i]) == want
        ops = cigar[off[i]:off[i] + length[i]]
        qn, tn = C.consumed(ops)
        assert qn == m and tn == L - int(start[i]) and int(start[i]) >= first[i]
        tot = C.op_totals(ops, np.zeros(1, np.int64), np.array([len(ops)]))
        assert int(tot["mismatches"][0] + tot["ins"][0] + tot["dels"][0]) == want


def test_formats(tmp_path, device):
    import pysam

    rng = np.random.default_rng(9)
    records = {"c1": random_dna(rng, 3000), "empty": "", "c2": random_dna(rng, 500)}
    patterns = {"g1": records["c1"][10:33], "g2": revcomp(records["c2"][100:123]), "none": "ACGT" * 6}
    tsv_rows = read_tsv(search(tmp_path, patterns, records, 2, device)[0])
    for fmt in ("sam", "bam"):
        out, _ = search(tmp_path, patterns, records, 2, device, out=f"h.{fmt}")
        pysam.set_verbosity(3)
        with pysam.AlignmentFile(out, "r" if fmt == "sam" else "rb") as fh:
            assert [sq["SN"] for sq in fh.header.to_dict()["SQ"]] == ["c1", "c2"]
            recs = list(fh)
        assert len(recs) == len(tsv_rows)
        for a, r in zip(recs, tsv_rows):
            assert a.query_name == r["pattern"] and a.reference_name == r["record"]
            assert a.reference_start == int(r["start"]) and a.reference_end == int(r["end"])
            assert a.is_reverse == (r["strand"] == "-") and a.get_tag("NM") == int(r["edits"])
            assert a.cigarstring == r["cigar"]
        assert sum(not a.is_secondary for a in recs) == len({r["pattern"] for r in tsv_rows})
    out, _ = search(tmp_path, patterns, records, 2, device, out="h.paf")
    paf = [line.rstrip("\n").split("\t") for line in open(out)]
    assert [(p[0], p[4], p[5], int(p[7]), int(p[8])) for p in paf] == \
        [(r["pattern"], r["strand"], r["record"], int(r["start"]), int(r["end"])) for r in tsv_rows]
    assert all(p[6] == str(len(records[p[5]])) and p[-1] == "cg:Z:" + r["cigar"] for p, r in zip(paf, tsv_rows))
    out, _ = search(tmp_path, patterns, records, 2, device, out="h.bed")
    bed = [line.rstrip("\n").split("\t") for line in open(out)]
    assert bed == [[r["record"], r["start"], r["end"], r["pattern"], r["edits"], r["strand"]] for r in tsv_rows]


def test_max_hits(tmp_path):
    records = {"a": "ACGT" * 100, "b": "ACGT" * 50}
    patterns = {"rep": "ACGTACGTAC", "once": "TTTTTTTTTTTT"}
    out, summary = search(tmp_path, patterns, records, 1, max_hits=5)
    rows = read_tsv(out)
    assert sum(r["pattern"] == "rep" for r in rows) == 5
    assert summary.capped == ["rep"]
    full = read_tsv(search(tmp_path, patterns, records, 1, out="all.tsv")[0])
    assert rows == [r for r in full if r["pattern"] == "rep"][:5] + [r for r in full if r["pattern"] != "rep"]


def test_max_hits_later_chunks_not_traced(tmp_path, monkeypatch):
    """--max-hits-per-pattern over many chunks: once the records written hold more hits of a pattern than the
    cap, its candidates in later chunks are not traced; the output is the uncapped run's first hits of it all
    the same, and the pattern is reported as capped."""
    from gpualign.search import hits as H

    rng = np.random.default_rng(13)
    records = {f"r{i}": random_dna(rng, 200) + "ACGT" * 50 + random_dna(rng, 200) for i in range(40)}
    patterns = {"rep": "ACGTACGTAC", "some": records["r7"][20:44], "rep24": "ACGT" * 6}
    traced, real = [], H.trace
    monkeypatch.setattr(H, "trace", lambda chunk, pats, rows, *a, **kw: traced.append(len(rows.ps)) or
                        real(chunk, pats, rows, *a, **kw))
    out, summary = search(tmp_path, patterns, records, 1, chunk=4000, max_hits=5)
    capped, traced[:] = sum(traced), []
    full = read_tsv(search(tmp_path, patterns, records, 1, chunk=4000, out="all.tsv")[0])
    seen: dict = {}
    want = [r for r in full if seen.setdefault(r["pattern"], []).append(r) or len(seen[r["pattern"]]) <= 5]
    assert read_tsv(out) == want and sum(r["pattern"] == "some" for r in want) == 1
    assert summary.capped == ["rep", "rep24"] and len(full) > 40 * 5
    assert capped < sum(traced) / 4


@pytest.mark.parametrize("seed", range(6))
def test_max_hits_bounded_within_a_chunk(tmp_path, monkeypatch, seed):
    """--max-hits-per-pattern: a chunk's candidates past each pattern's quota (Collector._within) are not
    traced, and the output and the capped patterns are those of the run that traces them all, on texts of
    repeats (many hits of a pattern in one chunk, runs across chunk edges, records of one chunk or several),
    both strands, with and without --all-ends; the hits traced are bounded by the cap, not the repeats."""
    from gpualign.search import hits as H

    rng = np.random.default_rng(seed)
    unit = random_dna(rng, int(rng.integers(9, 30)))
    records = {f"r{i}": random_dna(rng, int(rng.integers(0, 300))) + unit * int(rng.integers(5, 120))
               + random_dna(rng, int(rng.integers(0, 300))) for i in range(int(rng.integers(1, 6)))}
    patterns = {"rep": unit[3:] + unit[:3], "rc": revcomp(unit * 2)[:int(rng.integers(12, 2 * len(unit)))],
                "one": records["r0"][-20:] or "ACGTACGTACGT"}
    k, cap = int(rng.integers(0, 4)), int(rng.integers(1, 9))
    chunk = int(rng.choice([300, 700, 2000]))
    for all_ends in (False, True):
        traced, real = [], H.trace
        monkeypatch.setattr(H, "trace", lambda chunk_, pats, rows, *a, **kw: traced.append(len(rows.ps)) or
                            real(chunk_, pats, rows, *a, **kw))
        out, summary = search(tmp_path, patterns, records, k, chunk=chunk, all_ends=all_ends, max_hits=cap)
        bounded = sum(traced)
        monkeypatch.setattr(H.Collector, "_within", lambda self, chunk_, cands, quota: cands)
        traced.clear()
        ref, ref_summary = search(tmp_path, patterns, records, k, chunk=chunk, all_ends=all_ends, max_hits=cap,
                                  out="ref.tsv")
        monkeypatch.undo()
        assert read_tsv(out) == read_tsv(ref)
        assert summary.capped == ref_summary.capped
        assert bounded <= sum(traced)


@pytest.mark.parametrize("chunk", [0, 2000, 256])
def test_max_hits_traces_a_bounded_number(tmp_path, monkeypatch, chunk):
    """A record holding thousands of a pattern's hits, in one chunk or in hundreds: with --max-hits-per-pattern
    3 a few are traced, however many chunks the record spans."""
    from gpualign.search import hits as H

    rng = np.random.default_rng(21)
    unit = random_dna(rng, 25)
    records = {"r": unit * 4000}  # 100 kbp: 8,000 hits (both strands' patterns)
    traced, real = [], H.trace
    monkeypatch.setattr(H, "trace", lambda chunk_, pats, rows, *a, **kw: traced.append(len(rows.ps)) or
                        real(chunk_, pats, rows, *a, **kw))
    out, summary = search(tmp_path, {"u": unit, "v": revcomp(unit)}, records, 1, chunk=chunk, max_hits=3)
    assert summary.capped == ["u", "v"] and len(read_tsv(out)) == 6
    assert sum(traced) < 30


def test_failed_write_leaves_no_output(tmp_path, monkeypatch):
    """The writer (on its own thread) fails at its second write: the run raises its error and leaves neither
    the output nor a temporary file."""
    from gpualign.search import output

    real, calls = output.HitWriter.write, []

    def write(self, done):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(self, done)

    monkeypatch.setattr(output.HitWriter, "write", write)
    rng = np.random.default_rng(4)
    records = {f"r{i}": random_dna(rng, 3000) for i in range(4)}
    patterns = {f"p{i}": records[f"r{i}"][100:120] for i in range(4)}
    with pytest.raises(OSError, match="No space"):
        search(tmp_path, patterns, records, 2, chunk=700)
    assert len(calls) == 2
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tsv")]


def test_gzip_text_and_threads(tmp_path):
    import gzip

    rng = np.random.default_rng(2)
    records = {"z": random_dna(rng, 5000)}
    patterns = {"p": records["z"][4000:4025]}
    ref = read_tsv(search(tmp_path, patterns, records, 3, threads=1)[0])
    pp, tp = paths(tmp_path, patterns, records)
    with open(tp, "rb") as fh, gzip.open(tp + ".gz", "wb") as gz:
        gz.write(fh.read())
    out = os.path.join(tmp_path, "gz.tsv")
    run_search(pp, tp + ".gz", out, None, SearchConfig(k=3, device="cpu", threads=2, chunk_bases=700), "x")
    assert read_tsv(out) == ref
    import pysam  # bgzip: read in ranges by the worker processes, which inflate its members

    pysam.tabix_compress(tp, tp + ".bgz", force=True)
    run_search(pp, tp + ".bgz", out, None, SearchConfig(k=3, device="cpu", threads=2, chunk_bases=700), "x")
    assert read_tsv(out) == ref


def _cli(*args, cwd):
    return run_cli("search", *args, cwd=cwd, text=True)


def test_sam_bam_keep_fastq_qualities(tmp_path):
    """FASTQ patterns: SAM/BAM's QUAL is the pattern's quality string (reversed on '-', as SEQ is the
    reverse complement there), as pairs and genome keep the query's; FASTA patterns: '*'."""
    import pysam

    (tmp_path / "p.fq").write_text("@p1\nACGTTGCA\n+\nIIII#5?A\n@p2\nGGCCAATT\n+\n!!!!AAAA\n")
    (tmp_path / "p.fa").write_text(">p1\nACGTTGCA\n>p2\nGGCCAATT\n")
    write_fasta(tmp_path / "t.fa", {"chr1": "TTTTTTACGTTGCATTTTTTTGCCAATTGGCCTTTTTT"})
    for fmt in ("sam", "bam"):
        for pats, want in (("p.fq", [("p1", 0, "ACGTTGCA", "IIII#5?A"), ("p2", 16, "AATTGGCC", "AAAA!!!!")]),
                           ("p.fa", [("p1", 0, "ACGTTGCA", None), ("p2", 16, "AATTGGCC", None)])):
            r = _cli(pats, "t.fa", "-k", "0", "-o", f"o.{fmt}", "--device", "cpu", "-q", cwd=tmp_path)
            assert r.returncode == 0, r.stderr
            with pysam.AlignmentFile(str(tmp_path / f"o.{fmt}")) as fh:
                got = [(x.query_name, x.flag, x.query_sequence, None if x.query_qualities is None else
                        pysam.qualities_to_qualitystring(x.query_qualities)) for x in fh]
            assert got == want, (fmt, pats)


def test_bad_input(tmp_path):
    write_fasta(tmp_path / "t.fa", {"x": "ACGTACGTAC" * 5})
    cases = [
        ({"e": ""}, ["-k", "1"], "is empty"),
        ({"p": "ACGTXACGT"}, ["-k", "1"], "not a DNA/IUPAC letter"),
        ({"p": "ACGT"}, ["-k", "-1"], "-k must be >= 0"),
        ({"p": "ACGT"}, ["-k", "4"], "use --force"),
        ({"p": "ACGT" * 300}, ["-k", "1"], "up to 1024"),
        ({"p": "ACGT"}, ["-k", "1", "-o", "x.xyz"], "cannot tell the format"),
        ({"p": "ACGT"}, ["-k", "1", "--chunk-bases", "-5"], "--chunk-bases must be >= 0"),
    ]
    for pats, args, msg in cases:
        write_fasta(tmp_path / "p.fa", pats)
        r = _cli("p.fa", "t.fa", *args, "--device", "cpu", cwd=tmp_path)
        assert r.returncode != 0 and msg in r.stderr, (pats, args, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    (tmp_path / "bad.fa").write_text(">x\nACGT\nAC-GT\n")
    write_fasta(tmp_path / "p.fa", {"p": "ACGT"})
    r = _cli("p.fa", "bad.fa", "-k", "1", "-o", "out.tsv", cwd=tmp_path)
    assert r.returncode == 1 and "bad.fa: record 1: '-' at base 7" in r.stderr
    assert not os.path.exists(tmp_path / "out.tsv")
    r = _cli("p.fa", "missing.fa", "-k", "1", cwd=tmp_path)
    assert r.returncode == 1 and "missing.fa: no such file" in r.stderr
    import gzip

    whole = gzip.compress(b">z\n" + b"ACGT" * 50_000 + b"\n")
    (tmp_path / "cut.fa.gz").write_bytes(whole[:len(whole) // 2])
    r = _cli("p.fa", "cut.fa.gz", "-k", "1", "-o", "cut.tsv", cwd=tmp_path)
    assert r.returncode == 1 and "cut.fa.gz: record 1 (line 2): corrupt or truncated input: its data stops in this record" \
        in r.stderr  # (io/damage.py: where the data stops)
    assert len(r.stderr.strip().splitlines()) == 1 and not os.path.exists(tmp_path / "cut.tsv")
    r = _cli("p.fa", "t.fa", "-k", "1", "--force", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("pattern\tstrand\trecord")
    r = _cli("p.fa", "t.fa", "-k", "1", "--force", "--device", "cpu", "-t", "2", cwd=tmp_path)  # (as pairs says)
    assert r.returncode == 0 and r.stderr.startswith("gpualign: engine: cpu-sassy (sassy-rs, 2 threads)\n"), r.stderr
    # both inputs '-': the patterns took stdin and the text found it empty ("no FASTA records", exit 1)
    r = run_cli("search", "-", "-", "-k", "1", "--device", "cpu", cwd=tmp_path, text=True,
                stdin=(tmp_path / "t.fa").read_text())
    assert r.returncode == 2 and "only one of the two inputs can be '-'" in r.stderr, r.stderr


def test_bed_score_within_bed_range(tmp_path):
    """BED's score column holds 0-1000: a hit of more edits (k reaches 1023) writes 1000 there; TSV keeps the
    edits."""
    write_fasta(tmp_path / "p.fa", {"p": "C" * 1010 + "A" * 14})
    write_fasta(tmp_path / "t.fa", {"t": "A" * 1100})
    r = _cli("p.fa", "t.fa", "-k", "1011", "--strand", "+", "-o", "h.bed", "--device", "cpu", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "h.bed").read_text() == "t\t0\t14\tp\t1000\t+\n"
    r = _cli("p.fa", "t.fa", "-k", "1011", "--strand", "+", "--device", "cpu", "-q", cwd=tmp_path)
    assert r.stdout.splitlines()[1].split("\t")[5] == "1010"


def test_mixed_lengths_across_chunk_borders(tmp_path, device):
    """Runs of patterns of different lengths carried over chunk borders keep their own hits (the
    alignments come back in the candidates' order)."""
    records = {"r": "G" * 10 + "AAAAA" + "G" * 46 + "CCCC" + "G" * 40}
    patterns = {"p0": "AAAAA", "p1": "CCCC"}
    for chunk in (64, 0):
        check(tmp_path, patterns, records, 1, device, chunk=chunk, strand="+")
    check(tmp_path, {"p0": "AAAA", "p1": "CCC"}, {"r0": "GGAAAAGG", "r1": "C" * 100}, 0, device, chunk=64)
    rng = np.random.default_rng(21)
    text = random_dna(rng, 3000)
    pats = {f"m{m}": mutate(rng, text[m * 40:m * 40 + m], 1) for m in (5, 9, 14, 23, 37)}
    check(tmp_path, pats, {"x": text, "y": text[::-1]}, 2, device, chunk=64)


def test_text_names_and_block_borders(tmp_path, monkeypatch):
    import gpualign.search.text_scan as T
    from gpualign.errors import InputError

    patterns = {"p": "ACGT"}
    pp, _ = paths(tmp_path, patterns, {"x": "A"})
    monkeypatch.setattr(T, "BLOCK", 8)  # '>' inside a line that starts a read block
    (tmp_path / "mid.fa").write_bytes(b">a\nACGTA>CGTAC\n")
    with pytest.raises(InputError, match="'>' inside a sequence line"):
        run_search(pp, str(tmp_path / "mid.fa"), str(tmp_path / "o.tsv"), None, SearchConfig(k=1, device="cpu"), "x")
    (tmp_path / "dup.fa").write_bytes(b">a\nACGTACGT\n>a x\nACGT\n")
    with pytest.raises(InputError, match="appears twice"):  # (SAM/BAM: @SQ; other formats take it)
        run_search(pp, str(tmp_path / "dup.fa"), str(tmp_path / "o.sam"), None, SearchConfig(k=1, device="cpu"), "x")
    (tmp_path / "u.fa").write_bytes(">chr_é\nTTACGTTT\n".encode())
    with pytest.raises(InputError, match="printable ASCII"):  # (SAM/BAM's names; other formats take it)
        run_search(pp, str(tmp_path / "u.fa"), str(tmp_path / "o.sam"), None, SearchConfig(k=0, device="cpu"), "x")
    out = str(tmp_path / "o.tsv")
    run_search(pp, str(tmp_path / "u.fa"), out, None, SearchConfig(k=0, device="cpu"), "x")
    assert "chr_é\t" in open(out, encoding="utf-8").read()


def test_progress_reports(tmp_path):
    rng = np.random.default_rng(8)
    records = {f"r{i}": random_dna(rng, 500) for i in range(6)}
    pp, tp = paths(tmp_path, {"p": records["r1"][10:30]}, records)
    calls = []
    run_search(pp, tp, str(tmp_path / "o.tsv"), None, SearchConfig(k=1, device="cpu", chunk_bases=1000), "x",
               report=lambda r, b: calls.append((r, b)))
    assert len(calls) >= 3 and calls[-1] == (6, 3000)
    assert all(b1 <= b2 for (_, b1), (_, b2) in zip(calls, calls[1:]))


def test_patterns_per_thread_rule(monkeypatch):
    """Several one-word patterns per thread only as many as there are (no empty ones when avoidable), one
    per thread for longer patterns."""
    from gpualign.search import gpu

    assert [gpu.per_thread(1, n) for n in (1, 2, 3, 4, 5, 8, 624)] == [1, 2, 2, 4, 4, 8, 8]
    assert [gpu.per_thread(w, 624) for w in (2, 5, 32)] == [1, 1, 1]
    monkeypatch.setattr(gpu, "PER_THREAD", 2)
    assert [gpu.per_thread(1, n) for n in (1, 3, 624)] == [1, 2, 2]


def test_patterns_per_block_rule():
    """The block's pattern group: per x a power of two threads per tile, no larger than a block's threads
    allow, no more groups than a grid's 65,535 blocks in y, and the fewest idle pattern slots of all such
    groups (counted here by laying the kernel's threads out: thread t of a block holds patterns
    group * y + per * (t % lanes) + 0..per-1, and a warp with one live thread costs a whole one), e.g. 624
    guide-strands at eight per thread in 5 groups of 128 (640 slots), not 3 of 256 (768)."""
    from gpualign.search import gpu

    def slots(n_ps, per, group, threads):  # pattern slots run per tile of text
        lanes = group // per
        first = per * (np.arange(threads) % lanes)  # each thread's first pattern in its group
        total = 0.0
        for y in range(-(-n_ps // group)):
            live = (group * y + first < n_ps).reshape(-1, 32).any(axis=1)  # warps with a live thread
            total += live.sum() * 32 * per / (threads // lanes)  # a block holds threads / lanes tiles
        return total

    for n_ps in (1, 2, 3, 5, 7, 16, 100, 129, 624, 1000, 2_000, 2_001):
        for per, threads in ((1, 64), (1, 256), (2, 256), (4, 256), (8, 256)):
            group = gpu._group(n_ps, per, threads)
            lanes = group // per
            assert group % per == 0 and lanes & (lanes - 1) == 0 and group <= max(per, threads), (n_ps, per)
            need = 1 << (-(-n_ps // per) - 1).bit_length()  # threads per tile that all patterns fill
            allowed = [per << i for i in range(12) if (per << i) <= max(per, threads) and 1 << i >= min(8, need)]
            best = min(slots(n_ps, per, g, threads) for g in allowed)
            assert group == max(g for g in allowed if slots(n_ps, per, g, threads) == best), (n_ps, per, group)
    assert gpu._group(624, 8, 256) == 128 and gpu._group(624, 4, 256) == 256 and gpu._group(20_000, 4, 256) == 32
    for n_ps in (524_289, 1_000_001, gpu.MAX_PS - 1):  # many long patterns: the grid's limit in y
        for per, threads in ((1, 64), (1, 128), (1, 256), (8, 256)):
            assert -(-n_ps // gpu._group(n_ps, per, threads)) <= 65_535, (n_ps, per, threads)


def test_seed_tiles():
    """seeds.tiles: per piece its first and last seed offsets and its first thread; thread i of piece p (the last
    whose first thread is at or before i, as the kernel finds it) takes ft offsets from first[p] + (i - tile0[p])
    * ft: the same (piece, a, b) as cutting each piece's offsets into spans of ft, empty pieces among them."""
    from types import SimpleNamespace

    from gpualign.search import seeds

    rng = np.random.default_rng(5)
    for rep in range(200):
        plan = SimpleNamespace(back=30, q=5, ft=(seeds.FT, seeds.DENSE_FT)[rep % 2])
        n = int(rng.integers(1, 40))
        length = rng.integers(0, 3 * plan.ft, n) * (rng.random(n) < 0.8)  # (empty pieces too)
        context = rng.integers(0, 40, n)
        buf = 16 + np.cumsum(np.append(0, (context + length)[:-1] // 16 * 16 + 64))
        chunk = SimpleNamespace(buf=buf, context=context, length=length)
        sp = seeds.tiles(chunk, plan).astype(np.int64)
        first, last, tile0 = sp[:n], sp[n:2 * n], sp[2 * n:]
        i = np.arange(tile0[-1])
        piece = np.searchsorted(tile0[:n], i, side="right") - 1
        a = first[piece] + (i - tile0[piece]) * plan.ft
        got = np.column_stack([piece, a, np.minimum(a + plan.ft, last[piece])])
        lo, rep, hi = seeds.bounds(chunk)
        start = np.maximum(lo, rep - plan.back)
        end = np.where(length > 0, np.maximum(start, hi - plan.q + 1), start)
        assert np.array_equal(got, seeds.spans(start, end, plan.ft).astype(np.int64))


def test_seed_plan():
    """search/seeds.py's plan: k + 1 pieces per strand keyed by their first q codes, each entry naming its
    strand, offset and next code; None for letters other than A/C/G/T, pieces under QMIN, patterns over one
    word, or seeds that would cost more than the scan."""
    from gpualign.search import seeds

    rng = np.random.default_rng(2)
    codes = [rng.integers(0, 4, m).astype(np.uint8) for m in (23, 24, 32, 20)]
    p = seeds.plan(codes, 3, "default")
    assert p.q == 5 and p.back == 32 + 3 - 1 and len(p.entries) == 4 * 4
    assert p.offsets[0] == 0 and p.offsets[-1] == len(p.entries) and np.all(np.diff(p.offsets.astype(int)) >= 0)
    weights = 4 ** np.arange(p.q - 1, -1, -1)
    seen = set()
    for key in range(4 ** p.q):
        for e in p.entries[p.offsets[key]:p.offsets[key + 1]].tolist():
            s, o, nxt = e >> 8, (e >> 3) & 31, e & 7
            c = codes[s]
            assert int(c[o:o + p.q].astype(np.int64) @ weights) == key
            cut = [(i * len(c)) // 4 for i in range(5)]
            end = cut[cut.index(o) + 1]
            assert nxt == (c[o + p.q] if end - o > p.q else 4)
            seen.add((s, o))
    assert seen == {(s, (i * len(c)) // 4) for s, c in enumerate(codes) for i in range(4)}
    cuts = [[(i * len(c)) // 4 for i in range(5)] for c in codes]
    assert p.per_base == pytest.approx(sum(4.0 ** -min(b - a, p.q + 1) for cut in cuts for a, b in zip(cut, cut[1:])))
    n = codes[:1] + [np.array([0, 1, 4, 2, 3] * 4, np.uint8)]  # an N
    assert seeds.plan(n, 3, "default") is None and seeds.plan(n, 3, "n_mismatch") is None
    assert seeds.plan(codes, 4, "default") is None  # (pieces of 4: more window columns than 4 strands' scan)
    assert seeds.plan(codes, 5, "default") is None  # (20 // 6 = 3 < QMIN)
    assert seeds.plan([rng.integers(0, 4, 33).astype(np.uint8)], 1, "default") is None  # two words
    many = [rng.integers(0, 4, 23).astype(np.uint8) for _ in range(1_000)]
    assert seeds.plan(many, 3, "default") is not None and seeds.plan(many, 4, "default") is None  # (cost)
    assert seeds.plan(many + many, 3, "default") is None  # (past MAX_PER_BASE: dense, and that costs too much)


def test_seed_plan_dense():
    """The dense form (thousands of strands): the pieces of q codes keyed by them, the longer ones by their first
    q + 1 codes, every piece once; its lane slots per base as the tables give them; none where a text of one
    key's letters (poly-A) would cost more than the scan."""
    from gpualign.search import seeds

    rng = np.random.default_rng(3)
    codes = [rng.integers(0, 4, 23).astype(np.uint8) for _ in range(20_000)]  # (bench_search's set b: k = 4)
    p = seeds.plan(codes, 4, "default")
    assert p.dense and p.q == 4 and p.ft == seeds.DENSE_FT and p.per_base > seeds.MAX_PER_BASE
    cut = [(i * 23) // 5 for i in range(6)]  # 0 4 9 13 18 23
    seen = []
    for q, offsets, entries in ((4, p.offsets, p.entries), (5, p.long_offsets, p.long_entries)):
        assert len(offsets) == 4 ** q + 1 and offsets[-1] == len(entries)
        weights = 4 ** np.arange(q - 1, -1, -1)
        key = np.repeat(np.arange(4 ** q), np.diff(offsets.astype(np.int64)))
        s, o = entries >> 8, (entries >> 3) & 31
        for i in rng.choice(len(entries), 300, replace=False).tolist():
            c = codes[s[i]]
            assert int(c[o[i]:o[i] + q].astype(np.int64) @ weights) == key[i]
            assert cut[cut.index(o[i]) + 1] - o[i] == q  # (a piece of 5 is keyed by all of it)
        seen += list(zip(s.tolist(), o.tolist()))
    assert sorted(seen) == [(s, a) for s in range(20_000) for a in cut[:-1]]
    table = p.table()
    assert len(table) == 4 ** 4 + 1 + len(p.entries) + 4 ** 5 + 1 + len(p.long_entries)
    # keys of 1, 33, 0 and 32 entries: 32, 64, 0 and 32 lane slots, each key a 4^-1 share of the bases
    assert seeds._lanes(np.cumsum([0, 1, 33, 0, 32]).astype(np.uint32), 1) == (128 / 4, 64)
    slots = seeds._lanes(p.offsets, 4)[0] + seeds._lanes(p.long_offsets, 5)[0]
    assert p.per_base < slots < p.per_base + 2 * 32  # (a key's turns hold its entries and fewer than 32 idle lanes)
    poly = [np.zeros(23, np.uint8)] * 2_000 + codes[:18_000]  # (a poly-A text: 10,000 windows at each base)
    assert seeds.plan(poly, 4, "default") is None
