"""`gpualign paf` whatever the input's form and order (issue 51): candidates in any order against reads in
every form, inputs on read-only directories, one primary record per read."""

import gzip
import os
import shutil
import subprocess
import sys

import numpy as np
import pysam
import pytest

from cli_helper import cli_command, cli_env, run_cli
from gpualign.config import AlignConfig
from gpualign.io.paf import revcomp
from gpualign.realign import run_paf

ENV = cli_env()
FORMS = ["fa", "fa.gz", "fa.bgz", "fq", "fq.gz", "fq.bgz"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A random 20 kb genome (two records), 30 reads with edits on both strands and qualities, their
    candidates (ends off by a few bases, as minimap2 without -c gives), and the reads in every form."""
    d = tmp_path_factory.mktemp("pafstrict")
    rng = np.random.default_rng(51)
    genome = {"chrA": rng.choice(list(b"ACGT"), 12000).astype(np.uint8).tobytes(),
              "chrB": rng.choice(list(b"ACGT"), 8000).astype(np.uint8).tobytes()}
    reads, lines = {}, []
    for i in range(30):
        tname = "chrA" if i % 3 else "chrB"
        g = genome[tname]
        L = int(rng.integers(150, 600))
        s = int(rng.integers(0, len(g) - L))
        q = bytearray(g[s:s + L])
        for _ in range(L // 25):
            p = int(rng.integers(0, len(q)))
            q[p] = b"ACGT"[int(rng.integers(0, 4))]
        strand = "+-"[i % 2]
        q = bytes(q) if strand == "+" else revcomp(bytes(q))
        qual = bytes(rng.integers(33, 74, len(q)).astype(np.uint8))
        reads[f"read{i}"] = (q, qual)
        ts, te = max(0, s + int(rng.integers(-5, 6))), min(len(g), s + L + int(rng.integers(-5, 6)))
        lines.append(f"read{i}\t{L}\t0\t{L}\t{strand}\t{tname}\t{len(g)}\t{ts}\t{te}\t{L}\t{te - ts}\t60\ttp:A:P\n")
    (d / "ref.fa").write_bytes(b"".join(b">%s\n%s\n" % (n.encode(), _wrap(s)) for n, s in genome.items()))
    fa = b"".join(b">%s\n%s\n" % (n.encode(), _wrap(q)) for n, (q, _) in reads.items())
    fq = b"".join(b"@%s\n%s\n+\n%s\n" % (n.encode(), q, x) for n, (q, x) in reads.items())
    for ext, text in (("fa", fa), ("fq", fq)):
        (d / f"reads.{ext}").write_bytes(text)
        (d / f"reads.{ext}.gz").write_bytes(gzip.compress(text))
        pysam.tabix_compress(str(d / f"reads.{ext}"), str(d / f"reads.{ext}.bgz"))
    (d / "sorted.paf").write_text("".join(lines))
    order = rng.permutation(len(lines))
    (d / "shuffled.paf").write_text("".join(lines[k] for k in order))
    return d, genome, reads, lines


def _wrap(seq: bytes, width: int = 70) -> bytes:
    return b"\n".join(seq[i:i + width] for i in range(0, len(seq), width))


def _fresh_copy(d, tmp_path, names):
    """The named files of d copied into tmp_path (no index beside them)."""
    for n in names:
        shutil.copy(d / n, tmp_path / n)
    return tmp_path


def _records(path):
    """SAM/BAM records as comparable tuples, with the header's targets."""
    with pysam.AlignmentFile(str(path), check_sq=False) as fh:
        recs = [(r.query_name, r.flag, r.reference_name, r.reference_start, r.cigarstring, r.query_sequence,
                 None if r.query_qualities is None else pysam.qualities_to_qualitystring(r.query_qualities),
                 r.get_tag("AS")) for r in fh]
        return recs, fh.header.to_dict()["SQ"]


def _run(paf, queries, target, out, readers=0, **kw):
    cfg = AlignConfig(device="cpu", threads=2, batch_pairs=kw.pop("batch_pairs", 7))
    return run_paf(str(paf), str(queries), str(target), str(out), None, cfg, "test", readers=readers, **kw)


@pytest.mark.parametrize("readers", [0, 2], ids=["reader-thread", "reader-processes"])
@pytest.mark.parametrize("form", FORMS)
def test_any_candidate_order_every_read_form(data, tmp_path, form, readers):
    """Shuffled candidates give the records of the sorted ones (in their own order) whatever the reads'
    form: plain, gzip or bgzip, FASTA or FASTQ; FASTQ's qualities reach SAM's QUAL in every form."""
    d, genome, reads, lines = data
    d = _fresh_copy(d, tmp_path, sorted({"ref.fa", "reads.fa", f"reads.{form}", "sorted.paf", "shuffled.paf"}))
    want, sq = _records(_sam(d, "sorted.paf", "reads.fa", "want.sam"))
    got, got_sq = _records(_sam(d, "shuffled.paf", f"reads.{form}", "got.sam", readers))
    assert got_sq == sq
    fastq = form.startswith("fq")
    for r in got:
        q, qual = reads[r[0]]
        assert r[5] == (q if r[1] & 16 == 0 else revcomp(q)).decode()
        assert r[6] == ((qual if r[1] & 16 == 0 else qual[::-1]).decode() if fastq else None)
    strip = [r[:6] + r[7:] for r in got]
    assert sorted(strip) == sorted(r[:6] + r[7:] for r in want) and len(got) == len(lines)


def _ragged(records: dict, fastq: bool) -> bytes:
    """records (name -> (seq, qual)) as FASTA (qual None) or multi-line FASTQ, lines of varying width and a
    blank line inside each FASTA record: layouts the reader takes and htslib's indexer refuses."""
    out = []
    for n, (q, x) in records.items():
        cuts = [0, 7, 30, 31, 95] + list(range(160, len(q), 70)) + [len(q)]
        parts = [q[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]
        if fastq:
            out.append(b"@%s\n%s\n+\n%s\n" % (n.encode(), b"\n".join(parts), b"\n".join(x[a:b] for a, b in
                                                                                        zip(cuts, cuts[1:]) if b > a)))
        else:
            out.append(b">%s\n%s\n\n%s\n" % (n.encode(), b"\n".join(parts[:2]), b"\n".join(parts[2:])))
    return b"".join(out)


@pytest.mark.parametrize("readers", [0, 2], ids=["reader-thread", "reader-processes"])
def test_layouts_the_indexer_refuses(data, tmp_path, readers):
    """A target or reads with lines of varying width, a blank line inside a record (FASTA), or multi-line
    FASTQ reads, plain or bgzip: `paf` refused them ("cannot index for random access": htslib's indexer) where
    every other command reads them; they are read into a copy, and give the records of the regular files."""
    d, genome, reads, lines = data
    d = _fresh_copy(d, tmp_path, ["ref.fa", "reads.fa", "sorted.paf"])
    (d / "ragged.fa").write_bytes(_ragged({n: (g, None) for n, g in genome.items()}, False))
    (d / "reads_ragged.fq").write_bytes(_ragged(reads, True))
    pysam.tabix_compress(str(d / "ragged.fa"), str(d / "ragged.fa.bgz"))
    want, _ = _records(_sam(d, "sorted.paf", "reads.fa", "want.sam"))
    for queries, target in (("reads.fa", "ragged.fa"), ("reads_ragged.fq", "ref.fa"), ("reads.fa", "ragged.fa.bgz")):
        out = d / f"got_{queries}_{target}.sam"
        summary = _run(d / "sorted.paf", d / queries, d / target, out, readers)
        assert summary.written == summary.pairs == len(lines)
        got, _ = _records(out)
        assert [r[:5] + r[7:] for r in got] == [r[:5] + r[7:] for r in want], (queries, target)


def _sam(d, paf, queries, name, readers=0):
    summary = _run(d / paf, d / queries, d / "ref.fa", d / name, readers)
    assert summary.written == summary.pairs
    return d / name


def _cli(args, stdin=None, env=None):
    p = run_cli("paf", *args, stdin=stdin, env=env, timeout=120)
    return p.returncode, p.stdout, p.stderr.decode()


def test_reads_on_stdin_in_any_order(data, tmp_path):
    """gzip FASTQ reads on stdin against shuffled candidates (once only in the reads' order)."""
    d, genome, reads, lines = data
    want = _cli([str(d / "sorted.paf"), str(d / "reads.fq"), str(d / "ref.fa"), "--device", "cpu", "-t", "1", "-q"])
    rc, out, err = _cli([str(d / "shuffled.paf"), "-", str(d / "ref.fa"), "--device", "cpu", "-t", "1", "-q"],
                        stdin=(d / "reads.fq.gz").read_bytes())
    assert rc == 0, err
    assert sorted(out.splitlines()) == sorted(want[1].splitlines()) and len(out.splitlines()) == len(lines)


def test_gzip_reference(data, tmp_path):
    """A reference compressed with gzip (not bgzip) is read through a scratch copy, nothing written
    beside it, nothing left in TMPDIR."""
    d, genome, reads, lines = data
    src = _fresh_copy(d, tmp_path, ["sorted.paf", "reads.fa"])
    (src / "ref.fa.gz").write_bytes(gzip.compress((d / "ref.fa").read_bytes()))
    (tmp_path / "tmp").mkdir()
    env = dict(ENV, TMPDIR=str(tmp_path / "tmp"))
    want = _cli([str(d / "sorted.paf"), str(d / "reads.fa"), str(d / "ref.fa"), "--device", "cpu", "-t", "1", "-q"])
    rc, out, err = _cli([str(src / "sorted.paf"), str(src / "reads.fa"), str(src / "ref.fa.gz"), "--device", "cpu",
                         "-t", "1", "-q"], env=env)
    assert rc == 0, err
    assert out == want[1] and len(out.splitlines()) == len(lines)
    assert not list(src.glob("ref.fa.gz.*")) and not os.listdir(tmp_path / "tmp")


def _read_only_runner(directory):
    """A command prefix that runs a command with directory read-only for real (root ignores a mode: a
    read-only bind mount in a private mount namespace then), or None when this machine allows neither."""
    if os.geteuid() != 0:
        os.chmod(directory, 0o555)
        return []
    d = str(directory)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {d} {d} && mount -o remount,ro,bind {d} {d}"
                            f" && ! touch {d}/.probe 2>/dev/null"], capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", "-m", "sh", "-c", f'mount --bind {d} {d} && mount -o remount,ro,bind {d} {d} && exec "$@"',
            "sh"]


@pytest.mark.parametrize("ref", ["ref.fa", "ref.fa.gz", "ref.fa.bgz", "ref.fa stale"])
@pytest.mark.parametrize("queries", ["reads.fa", "reads.fq"])
def test_inputs_on_a_read_only_directory(data, tmp_path, ref, queries):
    """Reference and reads on a directory that takes no files, without a .fai (or with a stale one):
    indexed in a scratch directory, the output as from a writable one, nothing written beside them."""
    d, genome, reads, lines = data
    ro = tmp_path / "ro"
    ro.mkdir()
    _fresh_copy(d, ro, ["shuffled.paf", queries])
    name = ref.split()[0]
    if name == "ref.fa.gz":
        (ro / name).write_bytes(gzip.compress((d / "ref.fa").read_bytes()))
    elif name == "ref.fa.bgz":
        pysam.tabix_compress(str(d / "ref.fa"), str(ro / name))
    else:
        shutil.copy(d / "ref.fa", ro / name)
    if ref.endswith("stale"):  # an index of other contents, older than the FASTA
        (ro / "ref.fa.fai").write_text("chrA\t5\t6\t70\t71\n")
        os.utime(ro / "ref.fa.fai", (1, 1))
    before = sorted(os.listdir(ro))
    want = _cli([str(d / "shuffled.paf"), str(d / queries), str(d / "ref.fa"), "--device", "cpu", "-t", "1", "-q",
                 "-f", "sam"])
    prefix = _read_only_runner(ro)
    if prefix is None:
        pytest.skip("no way to make a directory read-only here (root without mount namespaces)")
    p = subprocess.run([*prefix, *cli_command("paf"), str(ro / "shuffled.paf"),
                        str(ro / queries), str(ro / name), "--device", "cpu", "-t", "1", "-q", "-f", "sam"],
                       capture_output=True, env=ENV, timeout=120)
    os.chmod(ro, 0o755)
    assert p.returncode == 0, p.stderr.decode()
    body = [x for x in p.stdout.splitlines() if not x.startswith(b"@PG")]
    assert body == [x for x in want[1].splitlines() if not x.startswith(b"@PG")]
    assert sorted(os.listdir(ro)) == before


@pytest.fixture(scope="module")
def several(data):
    """Candidates with several per read, shuffled: each read's true locus, a decoy elsewhere, and for
    every third read the true locus twice (a tie: the first in the PAF is the primary)."""
    d, genome, reads, lines = data
    rng = np.random.default_rng(7)
    out = []
    for i, line in enumerate(lines):
        f = line.rstrip("\n").split("\t")
        tlen, span = int(f[6]), int(f[8]) - int(f[7])
        s = (int(f[7]) + int(rng.integers(span + 50, tlen - span - 50))) % (tlen - span)
        decoy = f[:7] + [str(s), str(s + span)] + f[9:12] + ["tp:A:S"]
        out += [line, "\t".join(decoy) + "\n"] + ([line] if i % 3 == 0 else [])
    order = rng.permutation(len(out))
    text = "".join(out[k] for k in order)
    (d / "several.paf").write_text(text)
    return d, text.splitlines(), reads


def _check_one_primary(recs, paf_lines, path):
    """recs (output order = PAF order): per read exactly one record without FLAG 256/2048, the best of the
    read's aligned records by 4(query span + target span) + 6 AS (the score with a match reward for WFA's
    4/6/2), the first of them in the PAF on a tie; the others secondary (every candidate of a read covers its
    query range), MAPQ 0; the output in the PAF's order."""
    assert [r[0] for r in recs] == [x.split("\t")[0] for x in paf_lines]
    with pysam.AlignmentFile(str(path), check_sq=False) as fh:
        placed = [(r.mapping_quality, r.reference_length or 0, r.is_unmapped) for r in fh]
    by_read: dict = {}
    for k, (r, line, (mapq, tspan, unmapped)) in enumerate(zip(recs, paf_lines, placed)):
        f = line.split("\t")
        value = None if unmapped else 4 * (int(f[3]) - int(f[2]) + tspan) + 6 * r[7]
        by_read.setdefault(r[0], []).append((k, r, value, mapq))
    for name, rs in by_read.items():
        primaries = [(k, r) for k, r, _, _ in rs if r[1] & 0x900 == 0]
        assert len(primaries) == 1, (name, [r[1] for _, r, _, _ in rs])
        best = max(v for _, _, v, _ in rs if v is not None)
        assert primaries[0][0] == min(k for k, _, v, _ in rs if v == best)  # ties: the first in the PAF
        assert all(r[1] & 0x900 == 0x100 and mapq == 0 for k, r, _, mapq in rs if k != primaries[0][0])
    assert any(len(rs) > 2 for rs in by_read.values())  # ties were there to decide


@pytest.mark.parametrize("readers", [0, 2], ids=["reader-thread", "reader-processes"])
@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_one_primary_record_per_read(several, tmp_path, fmt, readers):
    """Several candidates per read, spread over batches of 5: one primary per read (best re-aligned
    score, ties by PAF order), the others FLAG 256; read back with pysam."""
    d, paf_lines, reads = several
    out = tmp_path / f"o.{fmt}"
    summary = _run(d / "several.paf", d / "reads.fq.gz", d / "ref.fa", out, readers, batch_pairs=5)
    assert summary.written == summary.pairs == len(paf_lines)
    recs, _ = _records(out)
    _check_one_primary(recs, paf_lines, out)
    for r in recs:  # secondary records keep SEQ and QUAL (fetched again for batches that waited)
        q, qual = reads[r[0]]
        assert r[5] == (q if r[1] & 16 == 0 else revcomp(q)).decode()
        assert r[6] == (qual if r[1] & 16 == 0 else qual[::-1]).decode()


def test_paf_tp_follows_the_same_rule(several, tmp_path):
    """PAF output: minimap2's tp:A:P/tp:A:S rewritten to the re-aligned rank, the same records as SAM's; its
    inversion tags (I, i) too (a read whose best candidate came as I had no P)."""
    d, paf_lines, reads = several
    inv = [x.replace("tp:A:P", "tp:A:I") if k % 2 else x.replace("tp:A:S", "tp:A:i") for k, x in enumerate(paf_lines)]
    (tmp_path / "inv.paf").write_text("".join(x + "\n" for x in inv))
    _run(tmp_path / "inv.paf", d / "reads.fa", d / "ref.fa", tmp_path / "o.paf", batch_pairs=5)
    _run(d / "several.paf", d / "reads.fa", d / "ref.fa", tmp_path / "o.sam", batch_pairs=5)
    rows = [x.split("\t") for x in (tmp_path / "o.paf").read_text().splitlines()]
    recs, _ = _records(tmp_path / "o.sam")
    assert len(rows) == len(recs) == len(paf_lines)
    for f, r in zip(rows, recs):
        tags = [t for t in f[12:] if t.startswith("tp:")]
        assert tags == ["tp:A:S" if r[1] & 0x100 else "tp:A:P"] and f[0] == r[0]
        assert f"AS:i:{r[7]}" in f


def test_one_primary_with_skipped_candidates_and_stdin(several, tmp_path):
    """A read's candidate skipped (--skip-bad) and the PAF on stdin: still one primary per read among
    the records written."""
    d, paf_lines, reads = several
    bad = list(paf_lines)
    k = next(i for i, x in enumerate(bad) if sum(y.split("\t")[0] == x.split("\t")[0] for y in bad) == 3)
    f = bad[k].split("\t")
    f[5] = "nochr"
    bad[k] = "\t".join(f)
    rc, out, err = _cli(["-", str(d / "reads.fq"), str(d / "ref.fa"), "--device", "cpu", "-t", "1", "-q",
                         "-f", "sam", "--skip-bad", "-o", str(tmp_path / "o.sam")],
                        stdin="".join(x + "\n" for x in bad).encode())
    assert rc == 0, err
    recs, _ = _records(tmp_path / "o.sam")
    _check_one_primary(recs, bad[:k] + bad[k + 1:], tmp_path / "o.sam")


def _mutate(seq: bytes, at) -> bytes:
    """seq with a substitution at each position of at."""
    q = bytearray(seq)
    for p in at:
        q[p] = b"ACGT"[(b"ACGT".index(q[p]) + 1) % 4]
    return bytes(q)


@pytest.mark.parametrize("fmt", ["sam", "paf"])
def test_a_longer_alignment_outranks_a_shorter_one_with_fewer_edits(tmp_path, fmt):
    """A 48 bp part of a 72 bp read with 1 mismatch against the whole read with 4, which minimap2 has as
    primary: the penalty alone ranks the part first (-4 against -16), the score with a match reward the whole
    read (4(72 + 72) - 6 * 16 = 480 against 4(48 + 48) - 6 * 4 = 360). The whole read is primary, the part
    secondary with MAPQ 0 whatever its line said; a part sharing less than half its range is supplementary."""
    rng = np.random.default_rng(3)
    t = rng.choice(list(b"ACGT"), 600).astype(np.uint8).tobytes()
    read = _mutate(t[200:272], [3, 10, 17, 50])  # one mismatch in read[24:72]
    (tmp_path / "t.fa").write_text(f">t1\n{t.decode()}\n")
    (tmp_path / "r.fa").write_text(f">r1\n{read.decode()}\n")
    paf = ("r1\t72\t24\t72\t+\tt1\t600\t224\t272\t47\t48\t60\ttp:A:P\n"
           "r1\t72\t0\t72\t+\tt1\t600\t200\t272\t68\t72\t3\ttp:A:S\n")
    (tmp_path / "c.paf").write_text(paf)
    rc, out, err = _cli([str(tmp_path / n) for n in ("c.paf", "r.fa", "t.fa")] + ["--device", "cpu", "-t", "1",
                                                                                   "-q", "-f", fmt])
    assert rc == 0, err
    rows = [x.split("\t") for x in out.decode().splitlines() if not x.startswith("@")]
    if fmt == "paf":
        assert [(r[2], r[11], r[12:16]) for r in rows] == [
            ("24", "0", ["NM:i:1", "AS:i:-4", "de:f:0.0208", "tp:A:S"]),
            ("0", "3", ["NM:i:4", "AS:i:-16", "de:f:0.0556", "tp:A:P"])]
    else:
        assert [(r[1], r[4], r[5], r[11:13]) for r in rows] == [
            ("256", "0", "24S26=1X21=", ["NM:i:1", "AS:i:-4"]),
            ("0", "3", "3=1X6=1X6=1X32=1X21=", ["NM:i:4", "AS:i:-16"])]
    # less than half of the part's range shared: both chosen, the part supplementary
    (tmp_path / "c.paf").write_text("r1\t72\t40\t72\t+\tt1\t600\t240\t272\t31\t32\t60\ttp:A:P\n"
                                    "r1\t72\t0\t48\t+\tt1\t600\t200\t248\t44\t48\t60\ttp:A:P\n")
    rc, out, err = _cli([str(tmp_path / n) for n in ("c.paf", "r.fa", "t.fa")] + ["--device", "cpu", "-t", "1",
                                                                                   "-q", "-f", fmt])
    rows = [x.split("\t") for x in out.decode().splitlines() if not x.startswith("@")]
    assert rc == 0 and len(rows) == 2, err
    if fmt == "paf":  # both P, as minimap2 writes a chimeric read's parts
        assert [r[15] for r in rows] == ["tp:A:P", "tp:A:P"] and [r[11] for r in rows] == ["60", "60"]
    else:
        assert [r[1] for r in rows] == ["2048", "0"]


def test_a_chimeric_read_has_a_primary_and_a_supplementary_record(tmp_path):
    """A read whose halves map to two records (the second half reversed), each a tp:A:P candidate as minimap2
    writes them, and a decoy over the first half: SAM has the better half primary, the other supplementary
    (FLAG 2048, its own MAPQ), each with SA:Z naming the other as its record says (samtools' form:
    rname,pos,strand,CIGAR,mapQ,NM;), the decoy secondary with MAPQ 0 and no SA; PAF keeps both halves' P."""
    rng = np.random.default_rng(11)
    t1 = rng.choice(list(b"ACGT"), 2000).astype(np.uint8).tobytes()
    t2 = rng.choice(list(b"ACGT"), 2000).astype(np.uint8).tobytes()
    a = _mutate(t1[500:800], [40, 200])
    b = revcomp(_mutate(t2[1000:1300], [10, 20, 30, 150, 290]))
    (tmp_path / "t.fa").write_text(f">t1\n{t1.decode()}\n>t2\n{t2.decode()}\n")
    (tmp_path / "r.fq").write_text(f"@r1\n{(a + b).decode()}\n+\n{'I' * 600}\n")
    (tmp_path / "c.paf").write_text("r1\t600\t300\t600\t-\tt2\t2000\t1000\t1300\t295\t300\t40\ttp:A:P\n"
                                    "r1\t600\t0\t300\t+\tt2\t2000\t100\t400\t90\t300\t5\ttp:A:S\n"
                                    "r1\t600\t0\t300\t+\tt1\t2000\t500\t800\t298\t300\t60\ttp:A:P\n")
    files = [str(tmp_path / n) for n in ("c.paf", "r.fq", "t.fa")]
    for fmt in ("sam", "bam"):
        out = tmp_path / f"o.{fmt}"
        rc, _, err = _cli(files + ["--device", "cpu", "-t", "1", "-q", "-o", str(out)])
        assert rc == 0, err
        with pysam.AlignmentFile(str(out)) as fh:
            recs = list(fh)
        assert [(r.reference_name, r.flag, r.mapping_quality) for r in recs] == [
            ("t2", 2048 | 16, 40), ("t2", 256, 0), ("t1", 0, 60)]

        def sa(r):
            return (f"{r.reference_name},{r.reference_start + 1},{'-' if r.is_reverse else '+'},{r.cigarstring},"
                    f"{r.mapping_quality},{r.get_tag('NM')};")

        sup, dec, pri = recs
        assert pri.get_tag("SA") == sa(sup) and sup.get_tag("SA") == sa(pri) and not dec.has_tag("SA")
        assert pri.cigarstring.endswith("300S") and sup.cigarstring.endswith("300S")  # (the read reversed)
        assert pri.get_tag("NM") == 2 and sup.get_tag("NM") == 5
        assert [r.query_sequence for r in recs] == [revcomp(a + b).decode(), (a + b).decode(), (a + b).decode()]
    rc, out, err = _cli(files + ["--device", "cpu", "-t", "1", "-q"])
    rows = [x.split("\t") for x in out.decode().splitlines()]
    assert rc == 0 and [(r[5], r[11], [t for t in r if t.startswith("tp:")]) for r in rows] == [
        ("t2", "40", ["tp:A:P"]), ("t2", "0", ["tp:A:S"]), ("t1", "60", ["tp:A:P"])], err


def test_an_empty_query_range_is_never_chosen(tmp_path):
    """--mode global aligns an empty query range (deletions only). By its score (4 * 1 - 6 * 8 against the
    whole read's 4 * 98 - 6 * 122) and overlapping nothing, it would be chosen, the primary even; it ranks with
    the failed candidates: secondary, MAPQ 0, no SA:Z."""
    rng = np.random.default_rng(4)
    t = rng.choice(list(b"ACGT"), 6000).astype(np.uint8).tobytes()
    read = _mutate(t[1000:1049], list(range(2, 49, 2))[:20])
    (tmp_path / "t.fa").write_text(f">chrA\n{t.decode()}\n")
    (tmp_path / "r.fa").write_text(f">x\n{read.decode()}\n")
    (tmp_path / "c.paf").write_text("x\t49\t0\t49\t+\tchrA\t6000\t1000\t1049\t0\t49\t60\ttp:A:P\n"
                                    "x\t49\t25\t25\t+\tchrA\t6000\t5000\t5001\t0\t1\t7\ttp:A:S\n")
    files = [str(tmp_path / n) for n in ("c.paf", "r.fa", "t.fa")]
    rc, out, err = _cli(files + ["--mode", "global", "--device", "cpu", "-t", "1", "-q", "-f", "sam"])
    rows = [x.split("\t") for x in out.decode().splitlines() if not x.startswith("@")]
    assert rc == 0 and [(r[1], r[3], r[4]) for r in rows] == [("0", "1001", "60"), ("256", "5001", "0")], err
    assert not any(t.startswith("SA:Z:") for r in rows for t in r[11:])


def test_no_sa_tag_where_a_target_name_holds_a_semicolon(tmp_path):
    """SA:Z's entries end in ';': a target named 'b;2' would split its entry. The chimeric read's records are
    still primary and supplementary, without SA:Z. A target named 'a,1' (a comma: SA:Z's field separator, which
    SAM 1.6 allows in no reference name) is refused for SAM: one line, exit 1."""
    rng = np.random.default_rng(6)
    t1, t2 = (rng.choice(list(b"ACGT"), 1000).astype(np.uint8).tobytes() for _ in range(2))
    for name in ("a,1", "b;2"):
        (tmp_path / "t.fa").write_text(f">{name}\n{t1.decode()}\n>chrC\n{t2.decode()}\n")
        (tmp_path / "r.fa").write_text(f">r\n{(t1[100:300] + t2[500:700]).decode()}\n")
        (tmp_path / "c.paf").write_text(f"r\t400\t0\t200\t+\t{name}\t1000\t100\t300\t200\t200\t60\ttp:A:P\n"
                                        "r\t400\t200\t400\t+\tchrC\t1000\t500\t700\t200\t200\t60\ttp:A:P\n")
        files = [str(tmp_path / n) for n in ("c.paf", "r.fa", "t.fa")]
        rc, out, err = _cli(files + ["--device", "cpu", "-t", "1", "-q", "-f", "sam"])
        if "," in name:
            assert rc == 1 and not out and "holds ','" in err, err
            continue
        rows = [x.split("\t") for x in out.decode().splitlines() if not x.startswith("@")]
        assert rc == 0 and [r[1] for r in rows] == ["0", "2048"] and all(len(r) == 13 for r in rows), out


@pytest.mark.parametrize("form", ["fa", "fa.gz", "fq.gz"])
def test_a_read_name_twice_is_an_error(data, tmp_path, form):
    """Two read records of one name: a candidate cannot tell them apart (htslib's index would keep the
    first silently): one line naming the file, exit 1, nothing written."""
    d, genome, reads, lines = data
    q, qual = reads["read1"]
    recs = [("read1", q, qual), ("other", q[:50], qual[:50]), ("read1", q[::-1], qual)]
    if form.startswith("fa"):
        text = b"".join(b">%s\n%s\n" % (n.encode(), s) for n, s, _ in recs)
    else:
        text = b"".join(b"@%s\n%s\n+\n%s\n" % (n.encode(), s, x) for n, s, x in recs)
    path = tmp_path / f"dup.{form}"
    path.write_bytes(gzip.compress(text) if form.endswith("gz") else text)
    rc, out, err = _cli([str(d / "sorted.paf"), str(path), str(d / "ref.fa"), "--device", "cpu", "-t", "1", "-q"])
    assert rc == 1 and out == b"" and "Traceback" not in err
    assert err.startswith("error: ") and err.count("\n") == 1 and str(path) in err and "'read1' again" in err


def test_candidates_and_reads_from_pipes(data, tmp_path):
    """The PAF and the reads from a shell's <(...) (pipes, readable once): the output of the files."""
    d, genome, reads, lines = data
    want = _cli([str(d / "shuffled.paf"), str(d / "reads.fq"), str(d / "ref.fa"), "--device", "cpu", "-t", "1", "-q",
                 "-f", "sam"])
    cmd = (f'exec "$0" -m gpualign paf <(cat {d / "shuffled.paf"}) <(cat {d / "reads.fq.gz"}) {d / "ref.fa"} '
           "--device cpu -t 1 -q -f sam")
    p = subprocess.run(["bash", "-c", cmd, sys.executable], capture_output=True, env=ENV, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    body = [x for x in p.stdout.splitlines() if not x.startswith(b"@PG")]
    assert body == [x for x in want[1].splitlines() if not x.startswith(b"@PG")] and len(body) > len(lines)


@pytest.mark.parametrize("pad", ["-1", "99999999999999999999"])
def test_target_pad_out_of_range(tmp_path, pad):
    (tmp_path / "p.paf").write_text("r0\t10\t0\t10\t+\tchr\t18\t4\t14\t10\t10\t60\n")
    (tmp_path / "r.fa").write_text(">r0\nACGTACGTAC\n")
    (tmp_path / "g.fa").write_text(">chr\nTTTTACGTACGTACTTTT\n")
    p = run_cli("paf", str(tmp_path / "p.paf"), str(tmp_path / "r.fa"), str(tmp_path / "g.fa"), "--device", "cpu",
                "-q", "--target-pad", pad, text=True)
    assert p.returncode == 2 and p.stdout == "" and "--target-pad must be >= 0 and < 2^31" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("readers", [0, 2], ids=["reader-thread", "reader-processes"])
def test_header_says_query_grouping_only_when_true(several, tmp_path, readers):
    """@HD's GO:query says a read's records are together: so for a PAF whose read's candidates are (minimap2's
    order), not for one they are spread over (the shuffled PAF: it said GO:query too)."""
    d, paf_lines, reads = several
    grouped = sorted(paf_lines, key=lambda x: x.split("\t")[0])
    (tmp_path / "grouped.paf").write_text("".join(x + "\n" for x in grouped))
    for paf, want in ((d / "several.paf", "@HD\tVN:1.6\tSO:unsorted\n"),
                      (tmp_path / "grouped.paf", "@HD\tVN:1.6\tSO:unsorted\tGO:query\n")):
        for fmt in ("sam", "bam"):
            out = tmp_path / f"o.{fmt}"
            _run(paf, d / "reads.fa", d / "ref.fa", out, readers, batch_pairs=5)
            with pysam.AlignmentFile(str(out), check_sq=False) as fh:
                assert str(fh.header).splitlines(True)[0] == want, (paf, fmt)


def test_a_lone_cr_inside_a_paf_line(data, tmp_path):
    """Lines end at LF (or CR LF): a CR alone inside a line made two candidates of one line (universal
    newlines), and later lines' numbers were one too many; now one error naming the line, as the FASTA
    readers refuse it."""
    d, genome, reads, lines = data
    joined = lines[0].rstrip("\n") + "\r" + lines[1]
    (tmp_path / "cr.paf").write_text(joined + lines[2].replace("\n", "\r\n"), newline="")
    rc, out, err = _cli([str(tmp_path / "cr.paf"), str(d / "reads.fa"), str(d / "ref.fa"), "--device", "cpu", "-q"])
    assert rc == 1 and out == b"" and err == (f"error: {tmp_path / 'cr.paf'}: line 1: a carriage return (CR) inside "
                                              "the line: PAF lines end with LF or CR LF\n"), err
    (tmp_path / "crlf.paf").write_text("".join(x.replace("\n", "\r\n") for x in lines[:3]), newline="")
    rc, out, err = _cli([str(tmp_path / "crlf.paf"), str(d / "reads.fa"), str(d / "ref.fa"), "--device", "cpu",
                         "-q"])
    assert rc == 0 and len(out.splitlines()) == 3, err


@pytest.mark.parametrize("form", ["fa", "fq", "fa.bgz"])
def test_records_without_bases(tmp_path, form):
    """htslib's index leaves records without bases out: a PAF line naming one said the record 'is not in' the
    file (it aligned when the record was the file's last), and a name given to an empty record and to another
    passed. Now the empty records are in the index (length 0): candidates of an empty read or target align as
    the ones of the last record did, and a name twice is refused whichever copy is empty."""
    def write(name, recs):
        if form.startswith("fq"):
            text = "".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for n, s in recs)
        else:
            text = "".join(f">{n}\n{s}\n" for n, s in recs)
        path = tmp_path / f"{name}.{form}"
        (tmp_path / name).write_text(text)
        if form.endswith("bgz"):
            pysam.tabix_compress(str(tmp_path / name), str(path))
        else:
            path.write_text(text)
        return str(path)

    reads = write("reads", [("r0", ""), ("r1", "ACGTACGTAC"), ("r2", "")])
    ref = write("ref", [("t0", ""), ("t1", "TTACGTACGTACTT")])
    (tmp_path / "c.paf").write_text("r0\t0\t0\t0\t+\tt1\t14\t2\t12\t0\t10\t60\n"
                                    "r1\t10\t0\t10\t+\tt0\t0\t0\t0\t0\t10\t60\n"
                                    "r1\t10\t0\t10\t+\tt1\t14\t2\t12\t10\t10\t60\n"
                                    "r2\t0\t0\t0\t-\tt1\t14\t2\t12\t0\t10\t60\n")
    rc, out, err = _cli([str(tmp_path / "c.paf"), reads, ref, "--device", "cpu", "-q", "--mode", "global"])
    assert rc == 0, err
    rows = [x.split("\t") for x in out.decode().splitlines()]
    assert [(f[0], f[5], [t for t in f[12:] if t.startswith("cg:Z:")]) for f in rows] == [
        ("r0", "t1", ["cg:Z:10D"]), ("r1", "t0", ["cg:Z:10I"]), ("r1", "t1", ["cg:Z:10="]), ("r2", "t1", ["cg:Z:10D"])]
    dup = write("dup", [("r2", ""), ("r1", "ACGTACGTAC"), ("r2", "ACGTA")])
    rc, out, err = _cli([str(tmp_path / "c.paf"), dup, ref, "--device", "cpu", "-q"])
    assert rc == 1 and out == b"" and err.startswith(f"error: {dup}") and "'r2' again" in err, err
    assert err.count("\n") == 1


def test_format_messages_name_only_what_paf_writes(data, tmp_path):
    """`paf -o out` (a name without an extension) listed tsv among the formats to pick, which paf then refuses.
    (`-o .`, a directory, is refused as one: test_cli_strict.)"""
    d, genome, reads, lines = data
    args = [str(d / "sorted.paf"), str(d / "reads.fa"), str(d / "ref.fa"), "--device", "cpu", "-q"]
    nameless = str(tmp_path / "out")
    for opts, want in ((["-o", nameless], "use --format paf|sam|bam, or a name ending in .bam, .paf, .sam "),
                       (["-o", str(tmp_path / "x.tsv")], "gpualign paf writes paf, sam or bam"),
                       (["-f", "TSV"], "gpualign paf writes paf, sam or bam")):
        rc, out, err = _cli(args + opts)
        assert rc == 2 and out == b"" and err.count("\n") == 1 and want in err, err
