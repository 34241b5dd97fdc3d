"""`gpualign paf`: simulated reads from a real genome, re-aligned and judged independently."""

import gzip
import os
import re

import numpy as np
import parasail
import pysam
import pytest

from cli_helper import run_cli
from gpualign import cigar as C
from gpualign import interrupt
from gpualign.config import Penalties
from gpualign.engines import reference
from gpualign.io.paf import revcomp

P = Penalties()
MATRIX = parasail.matrix_create("ACGTN", 0, -P.mismatch)


def run(args):
    p = run_cli("paf", *args)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


@pytest.fixture
def sim(tmp_path, real_data):
    """60 reads (300-2000 bp, ~5% edits, both strands, random flanks) from the DWV genome, and
    candidates whose target ends are off by up to 15 bp (as minimap2 without -c gives)."""
    g = b"".join(x.strip().encode() for x in open(os.path.join(real_data, "virus_DWV_NC_004830.fa"))
                 if not x.startswith(">")).upper()
    rng = np.random.default_rng(7)
    reads, lines = [], []
    for i in range(60):
        L = int(rng.integers(300, 2000))
        s = int(rng.integers(0, len(g) - L))
        q = bytearray(g[s:s + L])
        for _ in range(L // 20):
            p, k = int(rng.integers(0, len(q))), int(rng.integers(0, 3))
            if k == 0:
                q[p] = b"ACGT"[rng.integers(0, 4)]
            elif k == 1:
                q.insert(p, b"ACGT"[rng.integers(0, 4)])
            else:
                del q[p]
        strand = "+-"[i % 2]
        q = bytes(q) if strand == "+" else revcomp(bytes(q))
        lead, tail = (bytes(b"ACGT"[x] for x in rng.integers(0, 4, int(rng.integers(0, 30)))) for _ in range(2))
        full = lead + q + tail
        ts, te = max(0, s + int(rng.integers(-15, 16))), min(len(g), s + L + int(rng.integers(-15, 16)))
        reads.append((f"r{i}", full))
        lines.append(f"r{i}\t{len(full)}\t{len(lead)}\t{len(lead) + len(q)}\t{strand}\tdwv\t{len(g)}\t{ts}\t{te}\t"
                     f"100\t{te - ts}\t60\ttp:A:P\tcm:i:30\ts1:i:200\tdv:f:0.01\n")
    (tmp_path / "ref.fa").write_bytes(b">dwv\n" + g + b"\n")
    (tmp_path / "reads.fa").write_bytes(b"".join(b">%s\n%s\n" % (n.encode(), s) for n, s in reads))
    with gzip.open(tmp_path / "reads.fq.gz", "wb") as fh:  # not indexable: streamed in order
        fh.write(b"".join(b"@%s\n%s\n+\n%s\n" % (n.encode(), s, b"I" * len(s)) for n, s in reads))
    (tmp_path / "c.paf").write_text("".join(lines))
    return tmp_path, g, dict(reads), lines


def _query_part(reads, f):
    part = reads[f[0]][int(f[2]):int(f[3])]
    return part if f[4] == "+" else revcomp(part)


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu),
                                    pytest.param("gpu-batches", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("mode", ["ends-free", "global"])
@pytest.mark.parametrize("queries", ["reads.fa", "reads.fq.gz"])
def test_paf_output_is_optimal(sim, mode, queries, device):
    """gpu-batches: batches of ~20 candidates, several aligned at once (GpuAffineEngine.concurrent)."""
    d, g, reads, cands = sim
    small = ["--batch-bases", "40000"] if device == "gpu-batches" else []
    rc, out, err = run([str(d / "c.paf"), str(d / queries), str(d / "ref.fa"), "--mode", mode, "--cs", "-t", "2",
                        "--device", device.split("-")[0], "--summary", str(d / "summary.tsv"), *small])
    assert rc == 0, err
    routes = dict(x.split("\t") for x in (d / "summary.tsv").read_text().splitlines()[1:])
    engine = "route:cpu-wfa" if device == "cpu" else "route:gpu-affine"
    assert int(routes.get(engine, 0)) == len(cands), routes
    rows = [x.split("\t") for x in out.splitlines()]
    assert len(rows) == len(cands)
    for f, cand in zip(rows, cands):
        c = cand.rstrip("\n").split("\t")
        assert f[:7] == c[:7] and f[11] == "60"
        tags = dict(x.split(":", 1) for x in f[12:])
        assert "tp" in tags and not {"cm", "s1", "dv"} & set(tags)
        q = _query_part(reads, f)
        ts, te = int(f[7]), int(f[8])
        ops = C.from_text(tags["cg"][2:])
        C.check_cigar(q, g[ts:te], ops)
        score = C.score_cigar(ops, P)
        assert tags["AS"] == f"i:{-score}"
        bts, bte = int(c[7]), int(c[8])
        if mode == "global":
            assert (ts, te) == (bts, bte)
            want = -parasail.nw(q.decode(), g[bts:bte].decode(), P.gap_open + P.gap_extend, P.gap_extend, MATRIX).score
        else:
            ws, we = max(0, bts - 100), min(len(g), bte + 100)
            assert bts - 100 <= ts <= te <= bte + 100 and ws <= ts and te <= we
            # the start may move up to 100 bases around the candidate's, the end likewise, for free:
            # the reference DP with those bounds (tests/test_reference.py pins it to parasail's sg_dx)
            want = reference.affine_score(q, g[ws:we], P, False, bts + 100 - ws, we - (bte - 100))
        assert score == want
        tot = C.op_totals(ops, np.array([0]), np.array([len(ops)]))
        assert int(f[9]) == tot["matches"][0] and int(f[10]) == sum(int(v[0]) for v in tot.values())
        assert tags["cs"].startswith("Z:")


def test_sam_and_bam_strands(sim):
    d, g, reads, cands = sim
    for ext in ("sam", "bam"):
        out = d / f"o.{ext}"
        rc, _, err = run([str(d / "c.paf"), str(d / "reads.fa"), str(d / "ref.fa"), "-o", str(out), "-q"])
        assert rc == 0, err
        with pysam.AlignmentFile(str(out)) as fh:
            assert fh.header.to_dict()["SQ"] == [{"SN": "dwv", "LN": len(g)}]
            recs = list(fh)
        assert len(recs) == len(cands)
        for r, cand in zip(recs, cands):
            c = cand.split("\t")
            full = reads[c[0]]
            assert r.is_reverse == (c[4] == "-") and r.mapping_quality == 60
            assert r.query_sequence.encode() == (full if c[4] == "+" else revcomp(full))
            ops = C.pack((op, ln) for op, ln in r.cigartuples if op != 4)
            # the aligned SEQ reproduces the target span through the CIGAR
            C.check_cigar(r.query_alignment_sequence.encode(), g[r.reference_start:r.reference_end], ops)
            assert r.query_alignment_sequence.encode() == (_query_part(reads, c) if c[4] == "+" else
                                                            _query_part(reads, c))
            assert r.get_tag("AS") == -C.score_cigar(ops, P)


def test_bad_candidates(sim):
    d, g, reads, cands = sim
    bad = list(cands)
    bad[1] = bad[1].replace("\t60\ttp", "\tx60\ttp")  # column 12 not an integer
    (d / "bad1.paf").write_text("".join(bad))
    rc, _, err = run([str(d / "bad1.paf"), str(d / "reads.fa"), str(d / "ref.fa")])
    assert rc == 1 and "line 2: column 12 is not an integer" in err and "Traceback" not in err
    bad = list(cands)
    f = bad[2].split("\t")
    f[5] = "nochr"
    bad[2] = "\t".join(f)
    f = bad[3].split("\t")
    f[8] = str(len(g) + 5)
    bad[3] = "\t".join(f)
    (d / "bad2.paf").write_text("".join(bad))
    rc, out, err = run([str(d / "bad2.paf"), str(d / "reads.fa"), str(d / "ref.fa"), "-o", str(d / "o.paf")])
    assert rc == 1 and ("line 3: target 'nochr'" in err or "line 4" in err) and not (d / "o.paf").exists()
    (d / "bad3.paf").write_text("".join(bad))
    rc, out, err = run([str(d / "bad3.paf"), str(d / "reads.fa"), str(d / "ref.fa"), "--skip-bad"])
    assert rc == 0 and err.count("skipped: ") == 2 and len(out.splitlines()) == len(cands) - 2
    assert "line 4: target coordinates" in err
    assert re.search(r"\bskipped\s+2\s", err) and re.search(r"\bfailed\s+0\s", err), err  # (the summary's rows)
    rc, _, err = run([str(d / "bad2.paf"), str(d / "reads.fa"), str(d / "ref.fa"), "--mode", "banded"])
    assert rc == 2


@pytest.mark.parametrize("cols,why", [((3, 6, 2), "query start 6 is after its end 2"),
                                      ((3, 2, 9), "query coordinates 2-9 outside 0-8"),
                                      ((8, 12, 4), "target start 12 is after its end 4"),
                                      ((8, 4, 17), "target coordinates 4-17 outside 0-16")])
def test_coordinates_out_of_order_or_range(tmp_path, cols, why):
    """A candidate whose start comes after its end is named so, not as outside the sequence (one line, exit 1)."""
    (tmp_path / "t.fa").write_text(">t2\nGGGGCCCCAAAATTTT\n")
    (tmp_path / "q.fa").write_text(">q2\nCCCCAAAA\n")
    f = "q2\t8\t0\t8\t+\tt2\t16\t4\t12\t8\t8\t60".split("\t")
    f[cols[0] - 1], f[cols[0]] = str(cols[1]), str(cols[2])
    (tmp_path / "c.paf").write_text("\t".join(f) + "\n")
    rc, _, err = run([str(tmp_path / "c.paf"), str(tmp_path / "q.fa"), str(tmp_path / "t.fa"), "--device", "cpu",
                      "-t", "1", "-o", str(tmp_path / "o.paf")])
    assert rc == 1 and "c.paf: line 1: " + why in err and "Traceback" not in err, err
    assert not (tmp_path / "o.paf").exists()


@pytest.mark.parametrize("col12,why", [("300", "column 12 (mapping quality) is 300, over 255"),
                                        ("-5", "column 12 is not an integer >= 0 ('-5')"),
                                        ("+60", "column 12 is not an integer >= 0 ('+60')"),
                                        ("\uff16\uff10", "column 12 is not an integer >= 0"),
                                        ("6_0", "column 12 is not an integer >= 0 ('6_0')")])
def test_mapping_quality_and_numbers_paf_cannot_hold(tmp_path, col12, why):
    """Column 12 goes to SAM's MAPQ (0-255): 300 or -5 was written as it came, exit 0, a SAM htslib cannot
    read (BAM: samtools' error on a temporary file). PAF's numbers are ASCII digits: int()'s '+60', '6_0' and
    fullwidth digits were taken. Each: one line naming the PAF and its line, exit 1, no output, in every
    format. 255 is taken (SAM's 'not available')."""
    (tmp_path / "t.fa").write_text(">t2\nGGGGCCCCAAAATTTT\n")
    (tmp_path / "q.fa").write_text(">q2\nCCCCAAAA\n")
    line = "q2\t8\t0\t8\t+\tt2\t16\t4\t12\t8\t8\t{}\n"
    (tmp_path / "c.paf").write_text(line.format(60) + line.format(col12), encoding="utf-8")
    for fmt in ("sam", "bam", "paf"):
        out = tmp_path / f"o.{fmt}"
        rc, _, err = run([str(tmp_path / "c.paf"), str(tmp_path / "q.fa"), str(tmp_path / "t.fa"), "-o", str(out),
                          "--device", "cpu", "-t", "1"])
        assert rc == 1 and "c.paf: line 2: " + why in err and "Traceback" not in err, err
        assert not out.exists()
    # (three reads: a read's secondary candidates get MAPQ 0)
    (tmp_path / "q.fa").write_text(">q2\nCCCCAAAA\n>q3\nCCCCAAAA\n>q4\nCCCCAAAA\n")
    (tmp_path / "c.paf").write_text(line.format(255) + line.format(0).replace("q2", "q3")
                                    + line.format(60).replace("\n", "\t\n").replace("q2", "q4"))
    rc, _, err = run([str(tmp_path / "c.paf"), str(tmp_path / "q.fa"), str(tmp_path / "t.fa"), "-o",
                      str(tmp_path / "o.bam"), "--device", "cpu", "-t", "1"])
    assert rc == 0, err
    with pysam.AlignmentFile(str(tmp_path / "o.bam")) as fh:
        assert sorted(r.mapping_quality for r in fh) == [0, 60, 255]
    rc, out, err = run([str(tmp_path / "c.paf"), str(tmp_path / "q.fa"), str(tmp_path / "t.fa"), "--device", "cpu"])
    assert rc == 0 and "\t\t" not in out, out  # (a trailing tab's empty column is not copied)


def _sam_and_bam(files, tmp_path):
    """The one record of the run's SAM output, then of its BAM output (CPU, one process)."""
    for fmt in ("sam", "bam"):
        rc, _, err = run([*files, "-o", str(tmp_path / f"o.{fmt}"), "--device", "cpu", "-t", "1"])
        assert rc == 0, err
        with pysam.AlignmentFile(str(tmp_path / f"o.{fmt}")) as fh:
            (r,) = list(fh)
        yield r


def test_empty_query_range_written_unmapped(tmp_path):
    """A candidate whose query range is empty (qs = qe) aligns, ends free, to nothing: SAM had CIGAR '4S4S' (two
    S in a row, no base aligned) at POS 20 of a 19-base target, exit 0. Now an unmapped record saying why (zr:Z),
    in SAM and BAM; PAF keeps the line; global mode aligns the window (8 deletions). Its score, 0, is the best
    there is: it was the read's primary record, unmapped, its real alignment secondary; ranked with the failed
    now (a read with both: the real one primary, tp:A:P in PAF)."""
    (tmp_path / "q.fq").write_text("@q1\nGGTCAAAC\n+\nABCDEFGH\n")
    (tmp_path / "t.fa").write_text(">t1\nACGTACGTACGTTTGACCA\n")
    (tmp_path / "c.paf").write_text("q1\t8\t4\t4\t+\tt1\t19\t11\t19\t0\t0\t60\n")
    files = [str(tmp_path / n) for n in ("c.paf", "q.fq", "t.fa")]
    for r in _sam_and_bam(files, tmp_path):
        assert r.is_unmapped and r.cigartuples is None and "empty" in r.get_tag("zr")
        assert r.query_sequence == "GGTCAAAC"
    rc, out, err = run([*files, "--device", "cpu", "-t", "1"])
    assert rc == 0 and out.startswith("q1\t8\t4\t4\t+\tt1\t19\t"), out
    (tmp_path / "c.paf").write_text("q1\t8\t4\t4\t+\tt1\t19\t11\t19\t0\t0\t60\ttp:A:P\n"
                                    "q1\t8\t0\t8\t+\tt1\t19\t11\t19\t6\t8\t60\ttp:A:S\n")
    rc, _, err = run([*files, "-o", str(tmp_path / "o.sam"), "--device", "cpu", "-t", "1"])
    with pysam.AlignmentFile(str(tmp_path / "o.sam")) as fh:
        recs = list(fh)
    assert rc == 0 and [(r.is_unmapped, r.is_secondary) for r in recs] == [(True, True), (False, False)], err
    rc, out, err = run([*files, "--device", "cpu", "-t", "1"])
    assert rc == 0 and [line.split("\t")[2] for line in out.splitlines() if "tp:A:P" in line] == ["0"], out
    rc, out, err = run([*files, "--device", "cpu", "-t", "1", "--mode", "global", "-f", "sam"])
    rec = [x for x in out.splitlines() if not x.startswith("@")][0].split("\t")
    assert rc == 0 and rec[5] == "4S8D4S" and rec[3] == "12", out


def test_candidate_on_an_empty_target_written_unmapped(tmp_path):
    """A candidate on a zero-length target (no @SQ line can name it): SAM wrote it mapped (FLAG 0, POS 0, CIGAR
    8I) on a reference the header lacks, BAM as FLAG 4 with the CIGAR kept and no reason, exit 0. Now unmapped
    in both, zr:Z:empty_target, as pairs writes such a pair; a read's other candidate is written as before."""
    (tmp_path / "q.fa").write_text(">q1\nGGTCAAAC\n")
    (tmp_path / "t.fa").write_text(">t1\nACGGGTCAAACT\n>e\n\n")
    (tmp_path / "c.paf").write_text("q1\t8\t0\t8\t+\te\t0\t0\t0\t0\t0\t60\n"
                                    "q1\t8\t0\t8\t+\tt1\t12\t3\t11\t8\t8\t60\n")
    files = [str(tmp_path / n) for n in ("c.paf", "q.fa", "t.fa")]
    recs = []
    for fmt in ("sam", "bam"):
        rc, _, err = run([*files, "-o", str(tmp_path / f"o.{fmt}"), "--device", "cpu", "-t", "1"])
        assert rc == 0, err
        with pysam.AlignmentFile(str(tmp_path / f"o.{fmt}")) as fh:
            assert fh.references == ("t1",)
            recs += list(fh)
    assert len(recs) == 4
    for r in recs:
        if r.reference_name is None:
            assert r.is_unmapped and r.cigartuples is None and r.get_tag("zr") == "empty_target"
        else:
            assert r.reference_name == "t1" and r.cigarstring == "8=" and r.reference_start == 3
    assert sum(r.is_unmapped for r in recs) == 2


def test_empty_query_range_unmapped_whatever_the_box(tmp_path):
    """An empty query range in a box wider than twice --target-pad: the window's free ends did not meet, so it
    aligned as deletions (SAM: FLAG 0, MAPQ 60, '100D40S', primary), against the rule that such a candidate
    aligns no base. Now an empty window at the box's start at every pad: SAM unmapped (zr:Z:empty_alignment),
    PAF an empty alignment at the box's start, without cg:Z or cs:Z (`cs:Z:` had no value)."""
    (tmp_path / "q.fq").write_text("@a\n" + "ACGT" * 10 + "\n+\n" + "I" * 40 + "\n")
    (tmp_path / "t.fa").write_text(">t1\n" + "ACGT" * 75 + "\n")
    (tmp_path / "c.paf").write_text("a\t40\t0\t0\t+\tt1\t300\t0\t300\t0\t0\t60\n")
    files = [str(tmp_path / n) for n in ("c.paf", "q.fq", "t.fa")]
    for pad in ("10", "100", "150"):
        rc, out, err = run([*files, "--device", "cpu", "-t", "1", "--target-pad", pad, "-f", "sam"])
        (rec,) = [x.split("\t") for x in out.splitlines() if not x.startswith("@")]
        assert rc == 0 and rec[1:6] == ["4", "*", "0", "0", "*"] and rec[11:] == ["zr:Z:empty_alignment"], out
        rc, out, err = run([*files, "--device", "cpu", "-t", "1", "--target-pad", pad, "--cs"])
        assert rc == 0 and out == "a\t40\t0\t0\t+\tt1\t300\t0\t0\t0\t0\t60\tNM:i:0\tAS:i:0\tde:f:0.0000\n", out


def test_candidate_on_an_empty_target_ranks_as_failed(tmp_path):
    """A read with a candidate on a zero-length target beside a real one: the empty target's record (unmapped,
    zr:Z:empty_target) ranked as aligned, so the read had two records without 256 or 2048 (or, the real box
    poor, an unmapped primary and its only alignment supplementary). It ranks with the failed ones now:
    FLAG 4 | 256, the real alignment primary, tp:A:S for the empty target's PAF line."""
    (tmp_path / "q.fq").write_text("@a\n" + "ACGT" * 25 + "T" * 10 + "\n+\n" + "I" * 110 + "\n")
    (tmp_path / "t.fa").write_text(">t1\n" + "ACGT" * 75 + "\n>empty\n\n")
    files = [str(tmp_path / n) for n in ("c.paf", "q.fq", "t.fa")]
    for box, pad in (("0\t100", "100"), ("180\t280", "0")):
        (tmp_path / "c.paf").write_text(f"a\t110\t0\t100\t+\tt1\t300\t{box}\t0\t0\t60\ttp:A:P\n"
                                        "a\t110\t100\t110\t+\tempty\t0\t0\t0\t0\t0\t60\ttp:A:P\n")
        rc, out, err = run([*files, "--device", "cpu", "-t", "1", "--target-pad", pad, "-f", "sam"])
        rows = [x.split("\t") for x in out.splitlines() if not x.startswith("@")]
        assert rc == 0 and [(r[1], r[2]) for r in rows] == [("0", "t1"), ("260", "*")], out
        assert rows[1][11:] == ["zr:Z:empty_target"] and not any(t.startswith("SA:Z:") for r in rows for t in r[11:])
        rc, out, err = run([*files, "--device", "cpu", "-t", "1", "--target-pad", pad])
        assert rc == 0 and [[t for t in x.split("\t") if t.startswith("tp:")] for x in out.splitlines()] == [
            ["tp:A:P"], ["tp:A:S"]], out


@pytest.mark.slow
def test_minimap2_candidates(tmp_path, real_data):
    """Candidates from minimap2 itself (mappy) on ONT-like reads from a real genome: every re-alignment
    is checked against the extracted sequences and the reference DP with the same free-end bounds."""
    mappy = pytest.importorskip("mappy")
    from gpualign.engines import reference
    from simulate import mutate

    with pysam.FastxFile(os.path.join(real_data, "virus_DWV_NC_004830.fa")) as fh:
        g = next(iter(fh)).sequence.upper().encode()
    rng = np.random.default_rng(3)
    starts = rng.integers(0, len(g) - 3000, 40).tolist()
    lens = rng.integers(800, 3000, 40).tolist()
    reads = mutate([g[s:s + n] for s, n in zip(starts, lens)], 0.08, seed=4, profile="long")
    reads = [r if i % 2 else revcomp(r) for i, r in enumerate(reads)]
    (tmp_path / "ref.fa").write_bytes(b">dwv\n" + g + b"\n")
    (tmp_path / "reads.fa").write_bytes(b"".join(b">m%d\n%s\n" % (i, r) for i, r in enumerate(reads)))
    al = mappy.Aligner(str(tmp_path / "ref.fa"), preset="map-ont")
    lines, boxes = [], {}
    for i, r in enumerate(reads):
        for h in al.map(r):
            if h.is_primary:
                lines.append(f"m{i}\t{len(r)}\t{h.q_st}\t{h.q_en}\t{'+-'[h.strand < 0]}\tdwv\t{len(g)}\t{h.r_st}\t"
                             f"{h.r_en}\t{h.mlen}\t{h.blen}\t{h.mapq}\ttp:A:P\tcm:i:1\n")
                boxes[f"m{i}"] = (h.r_st, h.r_en)
    assert len(lines) > 30
    (tmp_path / "c.paf").write_text("".join(lines))
    rc, out, err = run([str(tmp_path / "c.paf"), str(tmp_path / "reads.fa"), str(tmp_path / "ref.fa"), "-t", "2"])
    assert rc == 0, err
    rows = [x.split("\t") for x in out.splitlines()]
    assert len(rows) == len(lines)
    by_name = {f"m{i}": r for i, r in enumerate(reads)}
    for f in rows:
        q = by_name[f[0]][int(f[2]):int(f[3])]
        q = q if f[4] == "+" else revcomp(q)
        ts, te = int(f[7]), int(f[8])
        tags = dict(x.split(":", 1) for x in f[12:])
        ops = C.from_text(tags["cg"][2:])
        C.check_cigar(q, g[ts:te], ops)
        bs, be = boxes[f[0]]
        ws, we = max(0, bs - 100), min(len(g), be + 100)
        want = reference.affine_score(q, g[ws:we], P, False, bs + 100 - ws, we - (be - 100))
        assert -int(tags["AS"][2:]) == C.score_cigar(ops, P) == want


def _with_bad_field(lines, row, col, value, path):
    """Write the PAF lines to path with field col (0-based) of line row replaced by value."""
    bad = list(lines)
    f = bad[row].split("\t")
    f[col] = value
    bad[row] = "\t".join(f)
    path.write_text("".join(bad))


@pytest.mark.parametrize("readers", [0, 2], ids=["reader-thread", "reader-processes"])
def test_bad_candidate_after_batches_were_written(sim, readers):
    """Candidates stream in batches (reader thread or worker processes, aligner, writer): a bad line after
    several batches went out still fails the run with its line number and leaves no output; with
    skip_bad the run completes and counts it as skipped (a summary row of its own: not a pair, not failed)."""
    from gpualign.config import AlignConfig
    from gpualign.errors import InputError
    from gpualign.realign import run_paf

    d, g, reads, cands = sim
    _with_bad_field(cands, 45, 5, "nochr", d / "late.paf")
    cfg = AlignConfig(device="cpu", threads=2, batch_pairs=7)
    out = d / "late_out.paf"
    with pytest.raises(InputError, match="line 46"):
        run_paf(str(d / "late.paf"), str(d / "reads.fa"), str(d / "ref.fa"), str(out), None, cfg, "test",
                readers=readers)
    assert not out.exists() and not list(d.glob("*late_out*"))
    notes = []
    summary = run_paf(str(d / "late.paf"), str(d / "reads.fa"), str(d / "ref.fa"), str(out), None, cfg, "test",
                      skip_bad=True, readers=readers, on_notice=notes.append)
    assert [n for n in notes if n.startswith("skipped:")] == [f"skipped: {d / 'late.paf'}: line 46: target 'nochr' "
                                                             f"is not in {d / 'ref.fa'}"]
    assert summary.skipped == 1 and summary.failed == 0
    assert summary.pairs == len(cands) - 1 and summary.written == len(cands) - 1
    assert ("skipped", "1") in summary.rows()
    assert len(out.read_text().splitlines()) == len(cands) - 1


@pytest.mark.parametrize("fmt", ["paf", "sam"])
def test_reader_processes_give_the_same_output(sim, fmt):
    """Candidates fetched by worker processes (realign_readers; shared-memory sequences, batches sized
    from the candidates seen) give byte for byte the output of the reader thread, --cs and SAM's full
    query sequences included."""
    from gpualign.config import AlignConfig
    from gpualign.realign import run_paf

    d, g, reads, cands = sim
    cfg = AlignConfig(device="cpu", threads=2, batch_pairs=9)
    outs = []
    for readers in (0, 1, 3):
        out = d / f"r{readers}.{fmt}"
        summary = run_paf(str(d / "c.paf"), str(d / "reads.fa"), str(d / "ref.fa"), str(out), None, cfg, "test",
                          cs=True, readers=readers)
        assert summary.pairs == summary.written == len(cands)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2] and len(outs[0].splitlines()) >= len(cands)


@pytest.mark.parametrize("bgzip", [False, True])
def test_reader_processes_share_the_opened_files(sim, tmp_path, monkeypatch, bgzip):
    """The reader processes take the files this process opened (their indexes read once, here), and open none
    themselves; with a bgzip query (htslib's handle opened again in each, its file offset not shared) the output
    is the reader thread's."""
    import pysam

    from gpualign.config import AlignConfig
    from gpualign.io import faidx
    from gpualign.realign import run_paf

    d, g, reads, cands = sim
    query = str(d / "reads.fa")
    if bgzip:
        query = str(tmp_path / "reads.fa.gz")
        pysam.tabix_compress(str(d / "reads.fa"), query)
    log = tmp_path / "opened"
    init = faidx.IndexedFasta.__init__

    def logged(self, path):
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        init(self, path)

    monkeypatch.setattr(faidx.IndexedFasta, "__init__", logged)
    cfg = AlignConfig(device="cpu", threads=2, batch_pairs=5)
    outs = []
    for readers in (0, 3):
        out = tmp_path / f"r{readers}.paf"
        run_paf(str(d / "c.paf"), query, str(d / "ref.fa"), str(out), None, cfg, "test", readers=readers)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0]
    assert set(log.read_text().split()) == {str(os.getpid())}


def test_reader_chunks_spread_over_the_workers(sim, tmp_path, monkeypatch):
    """A PAF of a few batches' worth is cut into SHARES chunks a worker or more (its lines estimated), not into
    chunks as large as a batch holds, which would leave workers idle; the output is the reader thread's."""
    from gpualign import realign_readers
    from gpualign.config import AlignConfig
    from gpualign.realign import run_paf

    d, g, reads, cands = sim
    monkeypatch.setattr(realign_readers, "FIRST_CHUNK", 2)
    monkeypatch.setattr(realign_readers, "SPREAD_FLOOR", 2)
    sizes = []
    chunks = realign_readers.P.line_chunks

    def recorded(path, size):  # (the reader processes' chunks: not count_reads' pass over the PAF)
        for first, lines in chunks(path, size):
            if size.__name__ == "size":
                sizes.append(len(lines))
            yield first, lines

    monkeypatch.setattr(realign_readers.P, "line_chunks", recorded)
    cfg = AlignConfig(device="cpu", threads=2, batch_pairs=1000)
    outs = []
    for readers in (0, 3):
        out = tmp_path / f"r{readers}.paf"
        run_paf(str(d / "c.paf"), str(d / "reads.fa"), str(d / "ref.fa"), str(out), None, cfg, "test", readers=readers)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0]
    most = len(cands) / (realign_readers.SHARES * 3)
    assert sum(sizes) == len(cands) and len(sizes) >= realign_readers.SHARES * 3 and max(sizes) <= most * 1.2
    # a floor above that size: chunks grow as the batches allow (here to cfg.batch_pairs), not cut by the spread
    monkeypatch.setattr(realign_readers, "SPREAD_FLOOR", 40)
    sizes.clear()
    out = tmp_path / "floor.paf"
    run_paf(str(d / "c.paf"), str(d / "reads.fa"), str(d / "ref.fa"), str(out), None, cfg, "test", readers=3)
    assert out.read_bytes() == outs[0] and sum(sizes) == len(cands) and max(sizes) > most * 1.2


def test_reader_processes_leave_no_shared_memory(sim):
    """A run stopped by a bad line while chunks are in flight unlinks every shared-memory block the
    worker processes made."""
    import os

    from gpualign.config import AlignConfig
    from gpualign.errors import InputError
    from gpualign.realign import run_paf

    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    d, g, reads, cands = sim
    _with_bad_field(cands, 10, 7, "x", d / "early.paf")
    before = set(os.listdir("/dev/shm"))
    with pytest.raises(InputError, match="line 11: column 8"):
        run_paf(str(d / "early.paf"), str(d / "reads.fa"), str(d / "ref.fa"), str(d / "o.paf"), None,
                AlignConfig(device="cpu", threads=2, batch_pairs=3), "test", readers=2)
    ours = interrupt.shm_name().rsplit("_", 1)[0] + "_"  # (this run's: tests beside it, -n, make their own)
    assert not {x for x in set(os.listdir("/dev/shm")) - before if x.startswith(ours)}


@pytest.mark.parametrize("cs", [False, True])
def test_formatting_processes_give_the_same_paf(sim, monkeypatch, cs):
    """PAF lines formatted by worker processes (output/parallel.OrderedWriter) equal the lines formatted
    in the main thread, byte for byte."""
    from gpualign import realign
    from gpualign.config import AlignConfig

    d, g, reads, cands = sim
    cfg = AlignConfig(device="cpu", threads=4, batch_pairs=9)
    outs = []
    for formatters in (0, 2):
        monkeypatch.setattr(realign, "PAF_FORMATTERS", formatters)
        out = d / f"f{formatters}.paf"
        summary = realign.run_paf(str(d / "c.paf"), str(d / "reads.fa"), str(d / "ref.fa"), str(out), None, cfg,
                                  "test", cs=cs)
        assert summary.written == len(cands)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_formatting_job_leaves_out_what_lines_do_not_need(sim):
    """Without --cs, a result carrying the engine's CIGAR text and counts goes to a formatting process
    without its binary ops (and the batch without its sequences), and renders the same lines."""
    import dataclasses

    from gpualign import realign
    from gpualign.config import AlignConfig
    from gpualign.engines import select_engines
    from gpualign.output.realigned import RealignedPafLines

    d, g, reads, cands = sim
    cfg = AlignConfig(device="cpu", threads=1).with_(ends_free_target=True).validate()
    items = realign._candidates(str(d / "c.paf"), realign.P.Queries(str(d / "reads.fa")),
                                realign.P.Targets(str(d / "ref.fa")), "ends-free", 100, False, [], print)
    batch = next(realign._batches(items, cfg))
    res = select_engines(cfg)[0][0].align(batch, cfg)
    tot = C.op_totals(res.cigar, res.cigar_off, res.cigar_len)
    stats = np.stack([tot["matches"], tot["mismatches"], tot["ins"], tot["dels"],
                      C.gap_opens(res.cigar, res.cigar_off, res.cigar_len)], axis=1)
    rich = dataclasses.replace(res, cigar_text=C.to_text_buffer(res.cigar, res.cigar_off, res.cigar_len),
                               cigar_stats=stats)
    lines = RealignedPafLines(cs=False)
    sent_batch, sent = lines.prepare(dataclasses.replace(batch, seq=np.zeros(0, np.uint8)), rich)
    assert len(sent.cigar) == 0 and len(res.cigar) > 0
    assert lines.render(sent_batch, sent) == lines.render(batch, res)
    assert RealignedPafLines(cs=True).prepare(batch, rich)[1] is rich  # --cs replays the ops
    # cut into row runs for several formatting processes: the runs' lines, joined, are the batch's
    from gpualign.records import FAILED

    sent.status[1] = FAILED  # a failed pair's line is left out in its run too
    sent.reason[1] = "x"
    data, n = lines.render(sent_batch, sent)
    for parts in (2, 3):
        runs = lines.split(sent_batch, sent, parts)
        assert len(runs) == parts
        rendered = [lines.render(b, r) for b, r in runs]
        assert b"".join(x for x, _ in rendered) == data and sum(k for _, k in rendered) == n
    assert len(RealignedPafLines(cs=True).split(batch, rich, 2)) == 1


def test_unmapped_reverse_candidate_keeps_the_read(tmp_path):
    """An unmapped record (here an empty alignment) of a '-' candidate: SEQ and QUAL as the read was given
    (FLAG 4 has no 16 to say reversed); they were written reverse-complemented, so `samtools fastq` got a read
    that is not in the input."""
    (tmp_path / "t.fa").write_text(">chr1\nACGTACGTACGTACGTACGT\n")
    (tmp_path / "q.fq").write_text("@r1\nAACCG\n+\nABCDE\n")
    (tmp_path / "c.paf").write_text("r1\t5\t2\t2\t-\tchr1\t20\t4\t8\t0\t0\t60\n")
    for r in _sam_and_bam([str(tmp_path / n) for n in ("c.paf", "q.fq", "t.fa")], tmp_path):
        assert r.is_unmapped and not r.is_reverse
        assert r.query_sequence == "AACCG" and pysam.qualities_to_qualitystring(r.query_qualities) == "ABCDE"


def test_insertions_at_the_target_end_stay_on_the_reference(tmp_path):
    """A global box that is empty at the target's end (the read an insertion after its last base): SAM POS LN,
    not LN + 1 past the reference; PAF keeps the box."""
    (tmp_path / "t.fa").write_text(">chr1\nACGTACGTAC\n")
    (tmp_path / "q.fa").write_text(">r1\nGGGG\n")
    (tmp_path / "c.paf").write_text("r1\t4\t0\t4\t+\tchr1\t10\t10\t10\t0\t0\t60\n")
    files = [str(tmp_path / n) for n in ("c.paf", "q.fa", "t.fa")]
    rc, out, err = run([*files, "--device", "cpu", "-t", "1", "--mode", "global", "-f", "sam"])
    assert rc == 0, err
    rec = [x for x in out.splitlines() if not x.startswith("@")][0].split("\t")
    assert rec[3:6] == ["10", "60", "4I"], out
    rc, out, err = run([*files, "--device", "cpu", "-t", "1", "--mode", "global"])
    assert rc == 0 and out.split("\t")[6:9] == ["10", "10", "10"], out


def test_tags_of_the_old_alignment_dropped(tmp_path):
    """minimap2 -c --MD's MD:Z and nn:i describe the candidate's own alignment: dropped with cg/cs/NM/AS (an
    MD:Z:5 beside cg:Z:1=2I2= was written), other tags kept."""
    (tmp_path / "t.fa").write_text(">chr1\nACGTACGTACGTACGTACGT\n")
    (tmp_path / "q.fa").write_text(">r1\nACGTTTACGT\n")
    (tmp_path / "c.paf").write_text("r1\t10\t0\t10\t+\tchr1\t20\t0\t8\t8\t10\t60\ttp:A:P\tnn:i:0\tMD:Z:8\t"
                                    "zz:Z:kept\n")
    rc, out, err = run([str(tmp_path / n) for n in ("c.paf", "q.fa", "t.fa")] + ["--device", "cpu", "-t", "1"])
    tags = out.rstrip("\n").split("\t")[12:]
    assert rc == 0 and "zz:Z:kept" in tags and "tp:A:P" in tags, out
    assert not [t for t in tags if t[:2] in ("MD", "nn")], out


def test_cost_past_32_bits_fails_cleanly(tmp_path):
    """A pair whose least cost passes 2^31 - 1 (no base against 214,748 at -O/-E 10,000, global): WFA2-lib's
    int score came back INT_MIN and the run ended in a traceback (OverflowError). Now the pair fails with its
    reason (SAM: unmapped, zr:Z), exit 0, as a failed pair does."""
    seq = "ACGT" * 54000
    (tmp_path / "t.fa").write_text(">chr1\n" + "\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)) + "\n")
    (tmp_path / "q.fa").write_text(">r1\nA\n")
    (tmp_path / "c.paf").write_text("r1\t1\t0\t0\t+\tchr1\t216000\t0\t214748\t0\t0\t60\n")  # (no query base)
    rc, out, err = run([str(tmp_path / n) for n in ("c.paf", "q.fa", "t.fa")]
                       + ["--device", "cpu", "-t", "1", "--mode", "global", "-O", "10000", "-E", "10000", "-f", "sam",
                          "-q"])
    assert rc == 0 and "Traceback" not in err, err
    rec = [x for x in out.splitlines() if not x.startswith("@")][0].split("\t")
    assert rec[1] == "4" and "32-bit" in rec[-1], out


@pytest.mark.parametrize("pipe", ["query", "target"])
def test_pipes_with_reader_processes(tmp_path, pipe):
    """A query or target given as a pipe (a shell's <(...)) with a PAF big enough for reader processes (256 KiB):
    the processes opened the pipe again by name and found it drained (a traceback, BrokenProcessPool). Now it
    is spooled once, before they start: the same output as from the files."""
    import subprocess

    from cli_helper import cli_command, cli_env

    rng = np.random.default_rng(3)
    t = "".join(rng.choice(list("ACGT"), 1000))
    (tmp_path / "t.fa").write_text(f">chr1\n{t}\n")
    (tmp_path / "q.fa").write_text(f">r1\n{t[100:200]}\n")
    (tmp_path / "c.paf").write_text(f"r1\t100\t0\t100\t+\tchr1\t1000\t100\t200\t100\t100\t60\tzz:Z:{'x' * 60}\n" * 2500)
    files = {n: str(tmp_path / f"{n[0]}.fa") for n in ("query", "target")}
    want = run([str(tmp_path / "c.paf"), files["query"], files["target"], "--device", "cpu", "-t", "2"])
    files[pipe] = f"<(cat {files[pipe]})"
    cmd = " ".join(cli_command("paf", tmp_path / "c.paf", "QUERY", "TARGET", "--device", "cpu", "-t", "2"))
    p = subprocess.run(["bash", "-c", cmd.replace("QUERY", files["query"]).replace("TARGET", files["target"])],
                       capture_output=True, env=cli_env(), timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr.decode(), p.stderr.decode()
    assert want[0] == 0 and p.stdout.decode() == want[1] and len(want[1].splitlines()) == 2500


def test_reader_processes_meet_a_nul_name_as_the_reader_thread_does(tmp_path):
    """The reader processes share the index this process read (realign_readers.Readers), unless it cannot be
    taken: a target whose name holds a NUL is then met by a fetch, as with no processes: skipped with
    --skip-bad (the fetch that met it), not a failed run; an empty PAF succeeds."""
    from gpualign.config import AlignConfig
    from gpualign.errors import InputError
    from gpualign.realign import run_paf

    seq = "ACGT" * 40
    (tmp_path / "t.fa").write_bytes(b">t\x001\n" + seq.encode() + b"\n>u\n" + seq.encode() + b"\n")
    (tmp_path / "q.fa").write_text(">r1\n" + seq[:100] + "\n")
    (tmp_path / "c.paf").write_text("r1\t100\t0\t100\t+\tu\t160\t0\t100\t100\t100\t60\n" * 40)
    (tmp_path / "e.paf").write_text("# nothing\n")
    cfg = AlignConfig(device="cpu", threads=2, batch_pairs=4)
    for readers in (0, 2):
        outs, notes = [tmp_path / f"o{readers}.paf", tmp_path / f"e{readers}.paf"], []
        with pytest.raises(InputError, match="a NUL byte in its name"):
            run_paf(str(tmp_path / "c.paf"), str(tmp_path / "q.fa"), str(tmp_path / "t.fa"), str(outs[0]), None, cfg,
                    "test", readers=readers)
        s = run_paf(str(tmp_path / "c.paf"), str(tmp_path / "q.fa"), str(tmp_path / "t.fa"), str(outs[0]), None, cfg,
                    "test", readers=readers, skip_bad=True, on_notice=notes.append)
        assert s.skipped >= 1 and s.failed == 0 and s.written + s.skipped == 40
        assert sum("NUL byte" in n for n in notes) == s.skipped
        s = run_paf(str(tmp_path / "e.paf"), str(tmp_path / "q.fa"), str(tmp_path / "t.fa"), str(outs[1]), None, cfg,
                    "test", readers=readers)
        assert s.pairs == 0 and outs[1].read_bytes() == b""


def test_target_with_mixed_line_ends(tmp_path):
    """A target record whose lines end in CRLF and LF both (61 bytes each: 59 bases + CRLF, 60 + LF): htslib
    indexed it, and a window inside one line of its model came back shifted (NM:i:14 for an exact copy, exit 0).
    Now one line naming the record, exit 1, whether the index is made by the run or was there (samtools'); a
    whole CRLF file is read right."""
    rng = np.random.default_rng(5)
    t = "".join(rng.choice(list("ACGT"), 1259))
    lines = [t[:59] + "\r\n"] + [t[59 + 60 * i:119 + 60 * i] + "\n" for i in range(20)]
    (tmp_path / "t.fa").write_bytes((">chr1\n" + "".join(lines)).encode())
    (tmp_path / "crlf.fa").write_bytes((">chr1\r\n" + "".join(t[i:i + 60] + "\r\n" for i in range(0, 1259, 60)))
                                       .encode())
    for a, b in ((480, 500), (0, 70), (1200, 1259)):
        (tmp_path / "q.fa").write_text(f">r1\n{t[a:b]}\n")
        (tmp_path / "c.paf").write_text(f"r1\t{b - a}\t0\t{b - a}\t+\tchr1\t1259\t{a}\t{b}\t0\t0\t60\n")
        for target in ("t.fa", "crlf.fa"):
            for index in ("made by the run", "samtools'"):
                fai = tmp_path / f"{target}.fai"
                if fai.exists():
                    fai.unlink()
                if index == "samtools'":
                    pysam.faidx(str(tmp_path / target))
                rc, out, err = run([str(tmp_path / n) for n in ("c.paf", "q.fa", target)]
                                   + ["--device", "cpu", "-t", "1", "--mode", "global", "-q"])
                if target == "crlf.fa":
                    assert rc == 0 and f"cg:Z:{b - a}=" in out and "NM:i:0" in out, (target, a, out, err)
                else:
                    assert rc == 1 and out == "" and "Traceback" not in err, (index, out, err)
                    assert "t.fa: record 'chr1': its line ends mix CRLF and LF" in err, err


@pytest.mark.parametrize("side", ["query", "target"])
def test_index_left_from_before_a_rewrap(tmp_path, side):
    """A query or target FASTA wrapped again (80 -> 60 columns) with its old .fai left newer than it (cp -p,
    touch): the run said a sequence held byte 0x0a. Now it names the file, the record and the index, exit 1."""
    import os

    rng = np.random.default_rng(8)
    t = "".join(rng.choice(list("ACGT"), 2000))
    reads = {f"r{i}": t[100 * i:100 * i + 300] for i in range(5)}

    def wrap(records, w):
        return "".join(f">{n}\n" + "".join(s[i:i + w] + "\n" for i in range(0, len(s), w)) for n, s in records.items())

    files = {"q.fa": reads, "t.fa": {"chr1": t}}
    for name, records in files.items():
        (tmp_path / name).write_text(wrap(records, 80))
    stale = tmp_path / ("q.fa" if side == "query" else "t.fa")
    pysam.faidx(str(stale))
    stale.write_text(wrap(files[stale.name], 60))
    st = os.stat(stale)
    os.utime(str(stale) + ".fai", (st.st_atime + 5, st.st_mtime + 5))
    (tmp_path / "c.paf").write_text("".join(f"r{i}\t300\t0\t300\t+\tchr1\t2000\t{100 * i}\t{100 * i + 300}"
                                            "\t300\t300\t60\n" for i in range(5)))
    rc, out, err = run([str(tmp_path / n) for n in ("c.paf", "q.fa", "t.fa")] + ["--device", "cpu", "-t", "1", "-q"])
    assert rc == 1 and out == "" and "Traceback" not in err, err
    assert f"{stale.name}: record '" in err and "does not match its .fai index" in err and f"{stale.name}.fai" in err


def test_target_whose_last_line_alone_ends_in_crlf(tmp_path):
    """Only the record's last line ends in CRLF: htslib's .fai counts its CR as a base (length + 1), and the
    run said the PAF's length disagreed with the file. Now the line ends are named, whichever length the PAF
    gives, exit 1."""
    (tmp_path / "t.fa").write_bytes(b">t1\n" + b"ACGT" * 5 + b"\n" + b"ACGTACGTAC\r\n")
    (tmp_path / "q.fa").write_text(">r1\nACGTACGTACGTACGT\n")
    for tlen in (30, 31):
        (tmp_path / "c.paf").write_text(f"r1\t16\t0\t16\t+\tt1\t{tlen}\t0\t16\t16\t16\t60\n")
        fai = tmp_path / "t.fa.fai"
        if fai.exists():
            fai.unlink()
        rc, out, err = run([str(tmp_path / n) for n in ("c.paf", "q.fa", "t.fa")] + ["--device", "cpu", "-q"])
        assert rc == 1 and out == "" and "t.fa: record 't1': its line ends mix CRLF and LF" in err, (tlen, err)


def test_target_name_holding_a_nul(tmp_path):
    """A NUL byte in a target's name: htslib cut the name there while the .fai kept it whole (a KeyError's
    traceback, or the PAF's length blamed). Now one line naming the record, exit 1."""
    (tmp_path / "t.fa").write_bytes(b">t\x001\n" + b"ACGT" * 5 + b"\n")
    (tmp_path / "q.fa").write_text(">r1\nACGTACGTACGTACGT\n")
    for tlen in (20, 21):
        (tmp_path / "c.paf").write_text(f"r1\t16\t0\t16\t+\tt\t{tlen}\t0\t16\t16\t16\t60\n")
        rc, out, err = run([str(tmp_path / n) for n in ("c.paf", "q.fa", "t.fa")] + ["--device", "cpu", "-q"])
        assert rc == 1 and out == "" and "Traceback" not in err, (tlen, err)
        assert err.strip().endswith("t.fa: record 't\\x001': a NUL byte in its name"), (tlen, err)
