"""The CLI as a user runs it: formats read back, streams, and every bad input."""

import gzip
import os
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pysam
import pytest

from cli_helper import cli_command, cli_env, run_cli
from gpualign import cigar as C
from gpualign.config import AlignConfig
from oracles import oracle


def run(args, stdin=None, cwd=None):
    p = run_cli(*args, stdin=stdin, cwd=cwd, timeout=120)
    return p.returncode, p.stdout, p.stderr.decode()


def write(path, text, gz=False):
    data = text.encode() if isinstance(text, str) else text
    with (gzip.open(path, "wb") if gz else open(path, "wb")) as fh:
        fh.write(data)
    return str(path)


@pytest.fixture
def demo(root):
    return os.path.join(root, "data", "demo", "a.fa"), os.path.join(root, "data", "demo", "b.fa")


def fasta_seqs(path):
    with pysam.FastxFile(path) as fh:
        return [(r.name, r.sequence.upper().encode(), r.quality) for r in fh]


def test_demo_paf_is_exact(demo):
    rc, out, err = run(["pairs", *demo, "-t", "2"])
    assert rc == 0, err
    assert "cpu-wfa" in err  # the notice says which engine ran
    qs, ts = fasta_seqs(demo[0]), fasta_seqs(demo[1])
    lines = out.decode().splitlines()
    assert len(lines) == len(qs) == 300
    for line, (qn, q, _), (tn, t, _) in zip(lines, qs, ts):
        f = line.split("\t")
        assert f[0] == qn and f[5] == tn and int(f[1]) == len(q) and int(f[6]) == len(t)
        assert f[4] == "+" and f[11] == "255" and f[2] == "0" and f[7] == "0"
        tags = dict(x.split(":", 1) for x in f[12:])
        ops = C.from_text(tags["cg"][2:])
        C.check_cigar(q, t, ops)
        score = oracle(q, t, "edit", AlignConfig().penalties)
        assert tags["AS"] == f"i:{-score}" and C.score_cigar(ops, AlignConfig().effective_penalties) == score
        tot = C.op_totals(ops, np.array([0]), np.array([len(ops)]))
        assert int(f[9]) == tot["matches"][0]
        assert int(f[10]) == sum(int(v[0]) for v in tot.values())
        assert tags["NM"] == f"i:{tot['mismatches'][0] + tot['ins'][0] + tot['dels'][0]}"


@pytest.mark.parametrize("ext", ["sam", "bam"])
def test_sam_bam_read_back(demo, tmp_path, ext):
    out = str(tmp_path / f"o.{ext}")
    rc, _, err = run(["pairs", *demo, "--metric", "affine", "-o", out, "-q"])
    assert rc == 0, err
    assert err == ""  # -q: nothing on stderr
    qs, ts = fasta_seqs(demo[0]), fasta_seqs(demo[1])
    with pysam.AlignmentFile(out, check_sq=True) as fh:
        hd = fh.header.to_dict()
        assert hd["HD"]["VN"] == "1.6" and hd["HD"]["GO"] == "query"
        assert [s["SN"] for s in hd["SQ"]] == [n for n, _, _ in ts]
        assert hd["PG"][0]["ID"] == "gpualign" and "pairs" in hd["PG"][0]["CL"]
        recs = list(fh)
    assert len(recs) == len(qs)
    p = AlignConfig(metric="affine").penalties
    for r, (qn, q, _), (tn, t, _) in zip(recs, qs, ts):
        assert r.query_name == qn and r.reference_name == tn and r.reference_start == 0
        assert r.flag == 0 and r.mapping_quality == 255
        assert r.query_sequence.encode() == q
        ops = C.pack((op, ln) for op, ln in r.cigartuples)
        C.check_cigar(q, t, ops)
        assert r.get_tag("AS") == -oracle(q, t, "affine", p) == -C.score_cigar(ops, p)
        assert r.reference_end == len(t)


def test_samtools_style_validation(demo, tmp_path):
    """htslib parses the SAM text strictly: reading every record must not raise."""
    out = str(tmp_path / "o.sam")
    assert run(["pairs", *demo, "-o", out, "-q"])[0] == 0
    with pysam.AlignmentFile(out) as fh:
        n = sum(1 for r in fh if r.get_tag("NM") >= 0)
    assert n == 300


def test_tsv_and_distance_only(demo, tmp_path):
    rc, out, err = run(["pairs", *demo, "--distance-only", "-q"])
    assert rc == 0, err
    lines = out.decode().splitlines()
    assert lines[0].split("\t")[:6] == ["query", "target", "query_len", "target_len", "score", "edit_distance"]
    qs, ts = fasta_seqs(demo[0]), fasta_seqs(demo[1])
    for line, (_, q, _), (_, t, _) in zip(lines[1:], qs, ts):
        f = line.split("\t")
        assert int(f[4]) == oracle(q, t, "edit", None) and f[6] == "*"
    rc, out, err = run(["pairs", *demo, "--distance-only", "--format", "paf"])
    assert rc == 2 and "PAF" in err


@pytest.mark.parametrize("fmt", ["paf", "bam"])
def test_output_to_a_pipe_is_written_in_place(demo, tmp_path, fmt):
    """-o naming a FIFO (as /dev/null, /dev/stdout or a shell's >(...) do: not regular files) is written
    through, never replaced by a file renamed over it (as root that replaced device nodes)."""
    import stat

    fifo, got = str(tmp_path / "fifo"), tmp_path / f"got.{fmt}"
    os.mkfifo(fifo)
    with open(got, "wb") as fh:
        reader = subprocess.Popen(["cat", fifo], stdout=fh)
        try:
            rc, _, err = run(["pairs", *demo, "-o", fifo, "-f", fmt, "-q"])
            reader.wait(timeout=30)
        finally:
            reader.kill()
    assert rc == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and not [n for n in os.listdir(tmp_path) if n.startswith(".gpualign")]
    if fmt == "paf":
        assert got.read_text().count("\tcg:Z:") == len(fasta_seqs(demo[0]))
    else:
        with pysam.AlignmentFile(str(got), "rb", check_sq=False) as bam:
            assert sum(1 for _ in bam) == len(fasta_seqs(demo[0]))


def test_fastq_gz_stdin_stdout_and_quality(tmp_path):
    a = write(tmp_path / "a.fq.gz", "@r1 desc\nACGTACGT\n+\nIIIIIIII\n@r2\nacgtnn\n+\n!!!!!!\n", gz=True)
    b = "\r\n".join([">t1", "ACGTTACGT", ">t2", "ACG", "TNN", ""])  # CRLF, multi-line
    rc, out, err = run(["pairs", a, "-", "--format", "sam", "-q"], stdin=b.encode())
    assert rc == 0, err
    lines = [x for x in out.decode().splitlines() if not x.startswith("@")]
    f1, f2 = lines[0].split("\t"), lines[1].split("\t")
    assert f1[0] == "r1" and f1[5] == "4=1D4=" and f1[10] == "IIIIIIII"
    assert f2[9] == "ACGTNN" and f2[10] == "!!!!!!" and f2[5] == "6="
    assert "@SQ\tSN:t2\tLN:6" in out.decode()


def test_empty_sequences_are_valid(tmp_path):
    a = write(tmp_path / "a.fa", ">q1\n\n>q2\nACGT\n>q3\n\n")
    b = write(tmp_path / "b.fa", ">t1\nACG\n>t2\n\n>t3\n\n")
    rc, out, err = run(["pairs", a, b, "-q"])
    assert rc == 0, err
    cg = [line.split("\t")[-1] for line in out.decode().splitlines()]
    assert cg == ["cg:Z:3D", "cg:Z:4I", "AS:i:0"]  # two empty sequences: no cg:Z (a tag needs a value)
    rc, out, err = run(["pairs", a, b, "-q", "--format", "sam"])
    recs = [x.split("\t") for x in out.decode().splitlines() if not x.startswith("@")]
    assert recs[0][5] == "3D" and recs[0][9] == "*"
    assert recs[1][1] == "4" and "zr:Z:empty_target" in recs[1]  # no @SQ for a zero-length target


def test_n_mismatch_rule(tmp_path):
    a = write(tmp_path / "a.fa", ">q\nACNNGT\n")
    b = write(tmp_path / "b.fa", ">t\nACNNGT\n")
    assert run(["pairs", a, b, "-q"])[1].decode().rstrip().endswith("cg:Z:6=")
    out = run(["pairs", a, b, "-q", "--n-mismatch"])[1].decode()
    assert "cg:Z:2=2X2=" in out and "NM:i:2" in out and "\t4\t6\t255" in out


def test_summary_file_and_version(demo, tmp_path):
    s = tmp_path / "s.tsv"
    rc, _, err = run(["pairs", *demo, "-o", str(tmp_path / "o.paf"), "--summary", str(s)])
    assert rc == 0 and "pairs" in err
    rows = dict(line.split("\t") for line in s.read_text().splitlines()[1:])
    assert rows["pairs"] == "300" and rows["route:cpu-wfa"] == "300" and rows["failed"] == "0"
    rc, out, _ = run(["--version"])
    assert rc == 0 and out.decode().startswith("gpualign ")
    rc, out, _ = run(["pairs", "--help"])
    assert rc == 0 and b"--n-mismatch" in out and b"case-insensitively" in out


def test_broken_pipe_is_quiet(demo):
    p = subprocess.run(f"{shlex.join(cli_command('pairs', *demo, '-q'))} | head -n 1",
                       shell=True, capture_output=True, env=cli_env(), timeout=120)
    assert p.stdout.count(b"\n") == 1
    assert b"Traceback" not in p.stderr and b"Error" not in p.stderr


BAD = {
    "missing": (None, "no such file"),
    "empty": ("", "empty file"),
    "not_fasta": ("hello world\n", "not FASTA or FASTQ"),
    "bad_quality": ("@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\nIII\n", "record 2 (line 5): quality length"),
    "bad_char": (">r1\nACGT\n>r2\nAC GT\n", "record 2 (line 4): invalid sequence character"),
    "non_ascii": (b">r1\nACGT\n>r2\nAC\xc3\xa9GT\n", "record 2"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_one_line(tmp_path, case):
    content, expect = BAD[case]
    a = str(tmp_path / f"{case}.fa")
    if content is not None:
        write(a, content)
    b = write(tmp_path / "b.fa", ">t1\nACGT\n>t2\nACGT\n")
    out = tmp_path / "o.paf"
    rc, _, err = run(["pairs", a, b, "-o", str(out)])
    assert rc == 1, err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and expect in lines[0] and case in lines[0], err
    assert "Traceback" not in err
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".gpualign")]


def test_truncated_gzip(tmp_path):
    data = gzip.compress(b"".join(b">r%d\nACGTACGTACGTTTGACCA\n" % i for i in range(20000)))
    a = write(tmp_path / "a.fa.gz", data[: len(data) // 2])
    b = write(tmp_path / "b.fa", "".join(f">t{i}\nACGT\n" for i in range(20000)))
    rc, _, err = run(["pairs", a, b, "-o", str(tmp_path / "o.paf")])
    assert rc == 1 and "a.fa.gz: record" in err and "truncated" in err and "Traceback" not in err
    assert not (tmp_path / "o.paf").exists()


def test_record_count_mismatch(tmp_path):
    a = write(tmp_path / "a.fa", ">q1\nACGT\n>q2\nACGT\n>q3\nA\n")
    b = write(tmp_path / "b.fa", ">t1\nACGT\n")
    rc, out, err = run(["pairs", a, b])
    assert rc == 1 and "a.fa has more records than" in err and "ends after 1 record)" in err
    rc, out, err = run(["pairs", b, a])
    assert rc == 1 and "a.fa has more records than" in err


def test_bad_options(demo):
    assert run(["pairs", *demo, "--metric", "hamming"])[0] == 2
    assert run(["pairs", *demo, "--gap-extend", "0", "--metric", "affine"])[0] == 2
    assert run(["pairs", *demo, "-o", "out.xyz"])[0] == 2
    rc, _, err = run(["pairs", "-", "-"])
    assert rc == 2 and "only one" in err


def test_device_gpu_without_gpu(demo):
    from gpualign.gpu.kernels import gpu_status

    if gpu_status()[0]:
        pytest.skip("a GPU is present")
    rc, _, err = run(["pairs", *demo, "--device", "gpu"])
    assert rc == 1 and "--device gpu: no usable GPU (" in err and "Traceback" not in err


def test_verify_reports_recall(demo, tmp_path):
    s = tmp_path / "s.tsv"
    rc, _, err = run(["pairs", *demo, "-o", str(tmp_path / "o.paf"), "--verify", "0.5", "--summary", str(s)])
    assert rc == 0, err
    rows = dict(line.split("\t") for line in s.read_text().splitlines()[1:])
    assert 100 < int(rows["verified"]) < 200 and rows["recall"] == "100.0000%"
    assert run(["pairs", *demo, "--verify", "2"])[0] == 2


@pytest.mark.slow
def test_ctrl_c_exits_130(tmp_path):
    import signal
    import time

    from simulate import simulate, write_fasta

    q, t = simulate(20000, 2000, 0.15, seed=1)
    write_fasta(str(tmp_path / "a.fa"), q, "q")
    write_fasta(str(tmp_path / "b.fa"), t, "t")
    p = subprocess.Popen(cli_command("pairs", tmp_path / "a.fa", tmp_path / "b.fa", "-o", tmp_path / "o.paf",
                                     "-t", "1"), stderr=subprocess.PIPE, env=cli_env())
    time.sleep(2.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert b"Traceback" not in err and not (tmp_path / "o.paf").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".gpualign")]


def test_api_rejects_non_ascii():
    import gpualign
    from gpualign.errors import InputError

    with pytest.raises(InputError, match="query 1: invalid sequence character"):
        gpualign.align_pairs(["ACGT", "ACéGT"], ["ACGT", "ACGT"])


def test_profile_host_script_runs(root, tmp_path):
    """scripts/profile.py host (host-side ceiling of `gpualign pairs`) runs on the demo data, and leaves
    nothing in the temporary directory."""
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "profile.py"), "host", "pairs",
                        os.path.join(root, "data", "demo", "a.fa"), os.path.join(root, "data", "demo", "b.fa")],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert p.returncode == 0, p.stderr
    assert not os.listdir(tmp_path)
    assert p.stdout.startswith("pairs: ") and "pairs/s" in p.stdout
    assert p.stdout.rstrip().endswith("; instant engine")  # (the engines replaced: the host side alone)


def test_bench_reader_script_runs(root, tmp_path):
    """scripts/bench_reader.py times the host's pair reader on FASTA and FASTQ, plain and bgzip, one worker and
    parts (the same batches required of every run): a row per form, workers and tree."""
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "bench_reader.py"), "--pairs", "2000",
                        "--rounds", "1", "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=300,
                       env=cli_env())
    assert p.returncode == 0, p.stderr
    rows = [line.split("\t") for line in p.stdout.splitlines()]
    assert rows[0] == ["form", "workers", "tree", "seconds"] and len(rows) == 9
    assert {(r[0], r[1]) for r in rows[1:]} == {(f, w) for f in ("FASTA", "bgzip FASTA", "FASTQ", "bgzip FASTQ")
                                                for w in ("1", "2")}


def test_paf_ranks_script_runs(root, tmp_path):
    """scripts/paf_ranks.py maps reads with mappy and compares `paf`'s ranks with minimap2's: chimeric reads (two
    fragments of two records, the second reversed) have two tp:A:P parts in both, and reads of one fragment one
    candidate; every read with several ranked the same."""
    rng = np.random.default_rng(8)
    genome = [rng.choice(list(b"ACGT"), 30000).astype(np.uint8).tobytes() for _ in range(2)]
    comp = bytes.maketrans(b"ACGT", b"TGCA")
    (tmp_path / "ref.fa").write_bytes(b">g1\n%s\n>g2\n%s\n" % tuple(genome))
    reads = []
    for i in range(12):
        s, t = (int(x) for x in rng.integers(0, 27000, 2))
        part = genome[1][t:t + 2000].translate(comp)[::-1] if i % 2 else b""
        reads.append(b">r%d\n%s%s\n" % (i, genome[0][s:s + 2000], part))
    (tmp_path / "reads.fa").write_bytes(b"".join(reads))
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "paf_ranks.py"), "--reads",
                        str(tmp_path / "reads.fa"), "--ref", str(tmp_path / "ref.fa"), "--preset", "map-ont",
                        "--device", "cpu", "-t", "1", "--workdir", str(tmp_path / "w")],
                       capture_output=True, text=True, timeout=300, env=cli_env())
    assert p.returncode == 0, p.stderr
    head, row = p.stdout.splitlines()
    got = dict(zip(head.split("\t"), row.split("\t")))
    assert {k: got.pop(k, None) for k in ("reads_mapped", "several_candidates", "minimap2_two_or_more_P",
                                          "same_ranks", "differ")} == {
        "reads_mapped": "12", "several_candidates": "6", "minimap2_two_or_more_P": "6", "same_ranks": "6",
        "differ": "0"}, p.stdout
    # (which part is primary: the better scored, as minimap2 picks it, but a junction's few edits can tie or
    # tip its score the other way than gpualign's: at most one of six here)
    assert got.keys() == {"same_primary"} and int(got["same_primary"]) >= 5, p.stdout


def test_profile_targets_script_runs(root):
    """scripts/profile.py targets scans the demo's targets (SAM's @SQ pass) and says how many it found."""
    demo_b = os.path.join(root, "data", "demo", "b.fa")
    want = sum(1 for line in open(demo_b) if line.startswith(">"))
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "profile.py"), "targets", demo_b,
                        "--block-mb", "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("scan ") and p.stdout.strip().endswith(f"targets {want}")


def test_profile_spans_script_runs(root, tmp_path):
    """scripts/profile.py spans runs a gpualign command in its process and lists the traced spans' seconds by
    thread: the demo's pairs on the CPU, its output written, the aligning and writing spans listed."""
    out = tmp_path / "out.paf"
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "profile.py"), "spans", "--", "pairs",
                        os.path.join(root, "data", "demo", "a.fa"), os.path.join(root, "data", "demo", "b.fa"),
                        "--device", "cpu", "-t", "1", "-o", str(out), "-q"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [ln.split() for ln in p.stderr.splitlines()[2:]]
    assert out.stat().st_size > 0 and "exit 0" in p.stderr.splitlines()[0]
    spans = {" ".join(r[1:-2]) for r in rows}
    assert {"align", "write submit"} <= spans, p.stderr
    assert all(float(r[-2]) >= 0 and int(r[-1]) >= 1 for r in rows)


def test_sass_mix_script_counts_a_loop(root, tmp_path):
    """scripts/sass_mix.py on a made-up SASS listing: two functions, an unrolled run of 17 marker steps of 4
    instructions each (LOP3, LOP3, IMAD, SHFL): per step 2 ALU, 1 FMA, 1 memory instruction; 4 clocks a step
    (issue-bound), so 132 SMs x 4 sub-partitions x 1.98 GHz x 1,024 cells / 4 clocks."""
    body = []
    at = 0

    def line(op):
        nonlocal at
        body.append(f"        /*{at:04x}*/                   {op} ;   /* 0x000 */")
        at += 16

    body.append("\t\tFunction : other")
    for _ in range(20):
        line("SHFL.UP PT, R1, R2, 0x1, RZ")
    body.append("\t\tFunction : kern")
    line("MOV R1, R2")
    for _ in range(17):
        line("SHFL.UP PT, R1, R2, 0x1, RZ")
        line("LOP3.LUT R3, R1, R2, RZ, 0xc0, !PT")
        line("@!P0 LOP3.LUT R4, R1, R3, RZ, 0xfc, !PT")
        line("IMAD.MOV.U32 R5, RZ, RZ, R4")
    (tmp_path / "k.sass").write_text("\n".join(body) + "\n")
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "sass_mix.py"), str(tmp_path / "k.sass"), "kern"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    row = p.stdout.splitlines()[-1].split("\t")
    assert p.stdout.startswith("kern: 69 SASS instructions")
    assert row[1:8] == ["16", "4.00", "2.00", "1.00", "1.00", "0.00", "4.0"]
    assert float(row[8]) == pytest.approx(132 * 4 * 1.98e9 * 1024 / 4, rel=5e-3)  # (3 digits printed)


def test_sass_mix_script_counts_a_loop_body(root, tmp_path):
    """--loops: the body from a backward branch's target to it, counted once: 120 instructions (40 each of
    VIADDMNMX, ALU by the script's rule; IMAD, FMA; LDS, memory) and the BRA: 80 ALU clocks < 121 issued, so
    121 clocks a pass of 2,048 cells a warp. A forward branch and a short loop (under --min-body) are no
    bodies."""
    body, at = ["\t\tFunction : kern"], 0

    def line(op):
        nonlocal at
        body.append(f"        /*{at:04x}*/                   {op} ;   /* 0x000 */")
        at += 16

    line("@P0 BRA 0x0200")
    start = at
    for _ in range(40):
        line("VIADDMNMX R1, R2, R3, R4, !PT")
        line("IMAD.MOV.U32 R5, RZ, RZ, R4")
        line("LDS R6, [R7]")
    line(f"@P1 BRA 0x{start:x}")
    short = at
    line("IADD3 R1, R1, 0x1, RZ")
    line(f"@P2 BRA 0x{short:x}")
    line("EXIT")
    (tmp_path / "k.sass").write_text("\n".join(body) + "\n")
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "sass_mix.py"), str(tmp_path / "k.sass"), "kern",
                        "--loops", "--cells", "2048"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [r.split("\t") for r in p.stdout.splitlines()[2:]]
    assert len(rows) == 1, p.stdout
    assert rows[0][0] == f"{start:#x}-{start + 120 * 16:#x}"
    assert rows[0][1:8] == ["1", "121.00", "40.00", "40.00", "40.00", "0.00", "121.0"]
    assert float(rows[0][8]) == pytest.approx(132 * 4 * 1.98e9 * 2048 / 121, rel=5e-3)


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) not installed")
def test_sass_mix_script_names_one_function(root, tmp_path):
    """A function given by its demangled name without arguments: kern<1> is found among kern<1>(int) and
    kern<10>(int); a name two functions share (kern(), kern(int)) is an error, not their listings joined."""
    body = []
    for mangled in ("_Z4kernILi1EEvi", "_Z4kernILi10EEvi", "_Z4kernv", "_Z4kerni"):
        body.append(f"\t\tFunction : {mangled}")
        body += [f"        /*{16 * k:04x}*/                   IADD3 R1, R1, 0x1, RZ ;   /* 0x000 */"
                 for k in range(3 if mangled == "_Z4kernILi1EEvi" else 5)]
    (tmp_path / "k.sass").write_text("\n".join(body) + "\n")

    def run(name):
        return subprocess.run([sys.executable, os.path.join(root, "scripts", "sass_mix.py"), str(tmp_path / "k.sass"),
                               name], capture_output=True, text=True, timeout=60)

    assert run("kern<1>").stdout.startswith("kern<1>: 3 SASS instructions")
    p = run("kern")
    assert p.returncode != 0 and "names 2 functions" in p.stderr


def test_profile_timeline_lists_what_follows_the_last_alignment(root, tmp_path):
    """scripts/profile.py timeline (a run on the CPU: no kernels) lists what the run did after its last batch
    aligned, in time order: the last batch's lines written and the output committed."""
    out = tmp_path / "out.tsv"
    p = subprocess.run([sys.executable, os.path.join(root, "scripts", "profile.py"), "timeline", "pairs",
                        os.path.join(root, "data", "demo", "a.fa"), os.path.join(root, "data", "demo", "b.fa"),
                        "-o", str(out), "--", "--device", "cpu", "-t", "1", "-f", "tsv"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("after the last alignment ("))
    last = float(lines[head].split("(")[1].split(" s)")[0])
    rows = []
    for ln in lines[head + 1:]:
        if not ln.startswith("  "):
            break
        t, _, what = ln.split(maxsplit=2)
        rows.append((float(t), what))
    whats = [w for _, w in rows]
    assert {"tsv render begin", "tsv render end", "commit begin", "commit end"} <= set(whats), p.stdout
    assert whats.index("commit begin") > whats.index("tsv render end")
    assert all(t >= last for t, _ in rows) and [t for t, _ in rows] == sorted(t for t, _ in rows)
    assert out.stat().st_size > 0


def test_failed_pairs_warning_names_the_first_and_why(tmp_path):
    """A run with a failed pair (over the CPU traceback's cells, local scoring) says how many failed, which was
    the first (its number and name) and why, on one line; -q says nothing; SAM's zr:Z has the same reason."""
    rng = np.random.default_rng(5)
    big = [bytes(rng.choice(list(b"ACGT"), 50_000).astype(np.uint8)) for _ in range(2)]
    a = write(tmp_path / "a.fa", b">ok1\nACGT\n>big\n%s\n>ok3\nACGT\n" % big[0])
    b = write(tmp_path / "b.fa", b">t1\nACGA\n>tbig\n%s\n>t3\nACGT\n" % big[1])
    opts = ["--device", "cpu", "-t", "1", "--mode", "local", "--match", "1"]
    rc, _, err = run(["pairs", a, b, "-o", str(tmp_path / "o.paf"), *opts])
    assert rc == 0, err
    warn = [ln for ln in err.splitlines() if "warning:" in ln]
    assert len(warn) == 1 and "1 pair(s) failed; the first: pair 2 (big): 50000 x 50000 cells exceed" in warn[0], err
    assert (tmp_path / "o.paf").read_text().count("\n") == 2
    rc, _, err = run(["pairs", a, b, "-o", str(tmp_path / "o.sam"), "-q", *opts])
    assert rc == 0 and "warning" not in err
    sam = [ln for ln in (tmp_path / "o.sam").read_text().splitlines() if ln.startswith("big\t")]
    assert len(sam) == 1 and "zr:Z:50000 x 50000 cells exceed" in sam[0]
