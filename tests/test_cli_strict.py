"""Issue 51, errors and conventions: bad --scheduler addresses, -x/-O/-E where the metric ignores them,
inputs checked before anything starts or is written, -h and plain usage lines, --verify's independent
judge."""

import os
import re
import subprocess

import numpy as np
import pytest

from cli_helper import cli_command, cli_env, run_cli
from gpualign.config import AlignConfig, Penalties, Scoring
from gpualign.records import PairBatch

def run(*args, timeout=60):
    p = run_cli(*args, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def one_error_line(err: str) -> str:
    """The single stderr line of a refused run (no notice, no traceback before or after it)."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def fa(tmp_path):
    q = tmp_path / "q.fa"
    t = tmp_path / "t.fa"
    q.write_text(">a\nACGTACGTAC\n>b\nGGGTTTAAAC\n")
    t.write_text(">a\nACGTTCGTAC\n>b\nGGGTTAAAC\n")
    return str(q), str(t)


# --scheduler: an address is checked (exit 2, one line) before anything starts

@pytest.mark.parametrize("address", ["foo", "tcp://foo", "tcp://host:99999", "host:port", "tcp://:8786", ""])
def test_bad_scheduler_address_is_one_line(fa, tmp_path, address):
    out = tmp_path / "o.paf"
    rc, _, err = run("pairs", *fa, "--scheduler", address, "-o", str(out))
    assert rc == 2 and "--scheduler must be an address [tcp://]host:port" in one_error_line(err)
    assert not out.exists()


@pytest.mark.parametrize("command", ["search", "genome"])
def test_bad_scheduler_address_other_commands(fa, command):
    extra = ["-k", "1"] if command == "search" else []
    rc, _, err = run(command, *fa, *extra, "--scheduler", "foo")
    assert rc == 2 and "--scheduler must be an address" in one_error_line(err)


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "localhost:8786", "tcp://[::1]:8786",
                                     "tls://sched.example.org:8786", "ucx://10.0.0.1:13337"])
def test_good_scheduler_addresses_pass(address):
    from gpualign.cluster import ClusterSpec

    ClusterSpec(scheduler=address).validate("auto")


# -x/-O/-E: refused where the edit metric would ignore them

@pytest.mark.parametrize("args,named", [
    (["-x", "3"], "-x set affine penalties"),  # pairs: edit is the default metric
    (["-m", "edit", "-O", "2", "-E", "1"], "-O/-E set affine penalties"),
    (["--metric", "edit", "--mismatch", "2", "--gap-open", "1", "--gap-extend", "1"], "-x/-O/-E set affine"),
])
def test_pairs_refuses_penalties_with_edit(fa, args, named):
    rc, out, err = run("pairs", *fa, "--device", "cpu", "-t", "1", *args)
    assert rc == 2 and out == "" and named in one_error_line(err) and "--metric affine" in err


def test_paf_refuses_penalties_with_edit(fa, tmp_path):
    cands = tmp_path / "c.paf"
    cands.write_text("a\t10\t0\t10\t+\ta\t10\t0\t10\t9\t10\t60\n")
    rc, out, err = run("paf", str(cands), *fa, "--device", "cpu", "-t", "1", "-m", "edit", "-E", "3")
    assert rc == 2 and out == "" and "-E set affine penalties" in one_error_line(err)
    # the affine default takes them, and edit alone runs
    rc, out, err = run("paf", str(cands), *fa, "--device", "cpu", "-t", "1", "-q", "-x", "3")
    assert rc == 0 and "AS:i:-3" in out, err
    rc, out, err = run("paf", str(cands), *fa, "--device", "cpu", "-t", "1", "-q", "-m", "edit")
    assert rc == 0 and "AS:i:-1" in out, err


def test_distance_only_to_paf_names_every_format_that_takes_it(fa, tmp_path):
    """PAF's columns come from the CIGAR: --distance-only with a .paf output is refused, naming the formats that
    take it (BAM was left out of the list)."""
    rc, out, err = run("pairs", *fa, "--device", "cpu", "-t", "1", "--distance-only", "-o", str(tmp_path / "x.paf"))
    assert rc == 2 and out == "" and "use --format sam, bam or tsv with --distance-only" in one_error_line(err)
    assert not (tmp_path / "x.paf").exists()
    rc, out, err = run("pairs", *fa, "--device", "cpu", "-t", "1", "--distance-only", "-q", "-o",
                       str(tmp_path / "x.bam"))
    assert rc == 0 and (tmp_path / "x.bam").exists(), err


def test_penalties_given_where_used_still_apply(fa):
    rc, out, err = run("pairs", *fa, "--device", "cpu", "-t", "1", "-q", "-m", "affine", "-x", "3")
    assert rc == 0 and out.splitlines()[0].split("\t")[13] == "AS:i:-3", err
    rc, out, err = run("pairs", *fa, "--device", "cpu", "-t", "1", "-q", "--mode", "local", "--match", "2", "-x", "3",
                       "-f", "tsv")
    assert rc == 0, err  # --match selects the affine metric: -x is used


# inputs checked before engines, workers, notices and the output

def _bad_inputs(tmp_path):
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    text = tmp_path / "notes.fa"
    text.write_text("hello\n")
    bom = tmp_path / "bom.fa"
    bom.write_bytes(b"\xef\xbb\xbf>a\nACGT\n")
    return {"missing": (str(tmp_path / "nope.fa"), "no such file"), "empty": (str(empty), "empty file"),
            "not FASTA": (str(text), "not FASTA or FASTQ"), "directory": (str(tmp_path), "is a directory"),
            "BOM": (str(bom), "starts with a UTF-8 byte-order mark")}


@pytest.mark.parametrize("kind", ["missing", "empty", "not FASTA", "directory", "BOM"])
@pytest.mark.parametrize("side", [0, 1])
def test_pairs_bad_input_before_anything(fa, tmp_path, kind, side):
    """No engine notice, no worker, the existing output untouched and a new one not created. A cluster
    that cannot be reached shows that nothing started: the input's error comes at once, not its timeout."""
    bad, message = _bad_inputs(tmp_path)[kind]
    paths = list(fa)
    paths[side] = bad
    old = tmp_path / "old.paf"
    old.write_text("kept\n")
    for out, extra in ((old, ["--device", "cpu", "-t", "2"]), (tmp_path / "new.sam", ["--cpu-workers", "2"]),
                       (tmp_path / "new.paf", ["--scheduler", "tcp://127.0.0.1:1"])):
        rc, stdout, err = run("pairs", *paths, "-o", str(out), *extra, timeout=8)
        assert rc == 1 and stdout == "" and message in one_error_line(err)
    assert old.read_text() == "kept\n" and not (tmp_path / "new.sam").exists() and not (tmp_path / "new.paf").exists()


@pytest.mark.parametrize("fmt", ["paf", "tsv", "sam", "bam"])
def test_two_empty_inputs_are_no_pairs(tmp_path, fmt):
    """Two empty files (blank lines, an empty gzip) are no pairs, as minimap2 takes an empty reads file: the
    format's header alone, exit 0. One empty file against records stays an error (above)."""
    import gzip

    import pysam

    a = tmp_path / "a.fq"
    a.write_text("\n\n")
    b = tmp_path / "b.fa.gz"
    b.write_bytes(gzip.compress(b""))
    out = tmp_path / f"o.{fmt}"
    rc, stdout, err = run("pairs", str(a), str(b), "-o", str(out), "--device", "cpu", "-q")
    assert rc == 0 and stdout == "" and err == "", err
    if fmt == "paf":
        assert out.read_bytes() == b""
    elif fmt == "tsv":
        assert out.read_text().count("\n") == 1 and out.read_text().startswith("query\ttarget\t")
    else:
        assert pysam.view(str(out)) == ""  # (htslib reads it: no records)
        with pysam.AlignmentFile(str(out), check_sq=False) as f:
            header = f.header.to_dict()
        assert header["PG"][0]["ID"] == "gpualign" and header["HD"]["SO"] == "unsorted" and not header.get("SQ")
    rc, stdout, err = run("pairs", str(a), str(b), "--device", "cpu", "-f", "sam")
    assert rc == 0 and stdout.startswith("@HD\t") and "@SQ" not in stdout and "Traceback" not in err


def test_empty_inputs_checked_and_summarised(tmp_path):
    """Two empty inputs: --verify's rows in the summary (recall '-'), the devices asked for checked; an empty
    file beside an empty stdin is an error that says why."""
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_bytes(b"")
    b.write_bytes(b" \n")
    rc, _, err = run("pairs", str(a), str(b), "--device", "cpu", "-q", "--verify", "0.5", "--summary",
                     str(tmp_path / "s.tsv"))
    rows = dict(line.split("\t") for line in (tmp_path / "s.tsv").read_text().splitlines())
    assert rc == 0 and rows["pairs"] == "0" and rows["verified_by"] == "edlib" and rows["recall"] == "-", err
    p = run_cli("pairs", "-", str(b), "--device", "cpu", "-q", stdin=b"", timeout=60)
    line = one_error_line(p.stderr.decode())
    assert p.returncode == 1 and f"{b}: empty file" in line and "not stdin or a pipe" in line, line
    rc, _, err = run("pairs", str(a), str(b), "--gpus", "99", "-q")  # (none, or fewer than 99)
    assert rc != 0 and one_error_line(err).startswith("error: --gpus")


def test_format_against_the_name_is_noticed(fa, tmp_path):
    """-f wins over the output's name, said in a notice (none with -q, none for .txt or a matching name)."""
    out = tmp_path / "o.bam"
    rc, _, err = run("pairs", *fa, "-f", "sam", "-o", str(out), "--device", "cpu")
    assert rc == 0 and out.read_text().startswith("@HD\t"), err
    assert f"gpualign: writing SAM to {out} as --format says, though its name ends in .bam" in err.splitlines()
    for name, fmt, flags in (("o.bam", "sam", ["-q"]), ("o.txt", "sam", []), ("o.sam", "sam", []),
                             ("o.paf.gz", "paf", [])):
        rc, _, err = run("pairs", *fa, "-f", fmt, *flags, "-o", str(tmp_path / name), "--device", "cpu")
        assert rc == 0 and "--format says" not in err, (name, err)
    # an error found after the format's is the one line on stderr: the notice comes with the engines'
    star = tmp_path / "star.fa"
    star.write_text(">*x\nACGT\n>b\nACGT\n")
    rc, _, err = run("pairs", fa[0], str(star), "-f", "sam", "-o", str(tmp_path / "s.bam"), "--device", "cpu")
    assert rc == 1 and "'*'" in one_error_line(err)
    cands = tmp_path / "c.paf"
    cands.write_text("a\t10\t0\t10\t+\ta\t10\t0\t10\t9\t10\t60\n")
    rc, _, err = run("paf", str(cands), fa[0], str(tmp_path / "nope.fa"), "-f", "sam", "-o", str(tmp_path / "r.paf"),
                     "--device", "cpu")
    assert rc == 1 and "nope.fa: no such file" in one_error_line(err)
    rc, _, err = run("paf", str(cands), *fa, "-f", "sam", "-o", str(tmp_path / "r.paf"), "--device", "cpu")
    assert rc == 0 and "writing SAM to" in err.splitlines()[0] and "engine" in err.splitlines()[1], err
    rc, _, err = run("genome", *fa[:1], *fa[:1], "--distance-only", "-f", "tsv", "-o", str(tmp_path / "d.bam"),
                     "--device", "cpu")
    assert rc == 0 and "writing TSV to" in err and (tmp_path / "d.bam").read_text().startswith("query"), err


def test_byte_order_mark_on_stdin(fa):
    """A UTF-8 byte-order mark first (the message showed its first byte as 'ï'): named, on stdin too."""
    p = run_cli("pairs", "-", fa[1], "--device", "cpu", "-t", "1", "-q", stdin=b"\xef\xbb\xbf>a\nACGT\n", timeout=60)
    line = one_error_line(p.stderr.decode())
    assert p.returncode == 1 and line.startswith("error: stdin: ") and "byte-order mark" in line, line


@pytest.mark.parametrize("content,message", [(None, "cannot read"), ("a\t10\t0\n", "line 1: 3 columns, PAF needs 12")])
def test_paf_bad_candidates_before_anything(fa, tmp_path, content, message):
    cands = tmp_path / "c.paf"
    if content is not None:
        cands.write_text(content)
    old = tmp_path / "old.paf"
    old.write_text("kept\n")
    rc, out, err = run("paf", str(cands), *fa, "-o", str(old), "--device", "cpu", "-t", "2")
    assert rc == 1 and out == "" and message in one_error_line(err) and old.read_text() == "kept\n"


@pytest.mark.parametrize("side", [1, 2])
def test_paf_bad_sequences_before_anything(fa, tmp_path, side):
    cands = tmp_path / "c.paf"
    cands.write_text("a\t10\t0\t10\t+\ta\t10\t0\t10\t9\t10\t60\n")
    args = [str(cands), *fa]
    args[side] = str(tmp_path / "nope.fa")
    rc, out, err = run("paf", *args, "--device", "cpu", "-t", "2")
    assert rc == 1 and out == "" and "no such file" in one_error_line(err)


@pytest.mark.parametrize("args,message", [(["--matrix", "NOPE"], "--matrix NOPE: neither a file nor"),
                                          (["--match", "2", "--unknown", "J"], "--unknown J: not a letter")])
def test_pairs_bad_scoring_option_before_anything(fa, args, message):
    """A bad --matrix or --unknown: one line, and nothing on stdout (SAM's header was written before)."""
    rc, out, err = run("pairs", *fa, "-f", "sam", "--device", "cpu", "-t", "1", *args)
    assert rc == 2 and out == "" and message in one_error_line(err)


def test_search_bad_input_before_anything(fa, tmp_path):
    for args in ((str(tmp_path / "nope.fa"), fa[1]), (fa[0], str(tmp_path / "nope.fa"))):
        rc, out, err = run("search", *args, "-k", "1", "--device", "cpu", "-t", "2")
        assert rc == 1 and out == "" and "no such file" in one_error_line(err)


@pytest.mark.parametrize("command", ["pairs", "paf", "genome", "search"])
def test_unwritable_output_before_any_notice(fa, tmp_path, command):
    """An output whose directory does not exist: its one line before any engine notice (it came after)."""
    cands = tmp_path / "c.paf"
    cands.write_text("a\t10\t0\t10\t+\ta\t10\t0\t10\t9\t10\t60\n")
    args = {"pairs": [*fa], "paf": [str(cands), *fa], "genome": [*fa], "search": [*fa, "-k", "1"]}[command]
    out = tmp_path / "no-such-dir" / "x.paf"
    rc, stdout, err = run(command, *args, "-o", str(out), "--device", "cpu", "-t", "1")
    assert rc == 1 and stdout == "" and "cannot write" in one_error_line(err)


def test_pairs_inputs_from_pipes(fa):
    """Inputs given as pipes (a shell's <(...), gzip included) are read once, as they come: the first bytes
    are not used up by the checks before the run (the run failed: 'not FASTA or FASTQ')."""
    want = run("pairs", *fa, "--device", "cpu", "-t", "1", "-q")
    assert want[0] == 0 and want[1]
    cmd = " ".join(cli_command("pairs")) + f" <(cat {fa[0]}) <(gzip -c {fa[1]}) --device cpu -t 1 -q"
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=cli_env(), timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (0, want[1], "")


@pytest.mark.parametrize("command", [["pairs", "-f", "sam"], ["genome", "--distance-only"]])
def test_pipes_read_twice_are_spooled(fa, command):
    """SAM's @SQ lines (pairs) and genome's record names take a first pass: a pipe is kept for the second
    (both failed: 'no FASTA/FASTQ records')."""
    want = run(command[0], *fa, *command[1:], "--device", "cpu", "-t", "1", "-q")
    assert want[0] == 0 and want[1]
    cmd = " ".join([*cli_command(command[0]), f"<(cat {fa[0]})", f"<(cat {fa[1]})", *command[1:],
                    "--device cpu -t 1 -q"])
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=cli_env(), timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    # (SAM's @PG holds the command line; a genome row's seconds and rates differ from run to run)
    got, expected = ([x.split("\t")[:6] for x in text.splitlines() if not x.startswith("@PG")]
                     for text in (p.stdout, want[1]))
    assert got == expected


@pytest.mark.parametrize("text", [">a\nACGT\n>\nACGT\n", "@a\nAC\n+\nII\n@\nAC\n+\nII\n", ">a\nAC\nGT\n>\t\nAC\n"])
def test_empty_record_name_is_refused(fa, tmp_path, text):
    """A record without a name (SAM's QNAME and @SQ, PAF's columns 1 and 6 need one: the SAM written had
    an empty @SQ SN), in the fast and the strict reader's layouts."""
    bad = tmp_path / "e.fx"
    bad.write_text(text)
    rc, out, err = run("pairs", str(bad), str(bad), "-f", "sam", "--device", "cpu", "-t", "1")
    assert rc == 1 and out == "" and "record 2 (line " in one_error_line(err) and "empty record name" in err


def test_progress_sample_of_a_gzip_bomb_is_bounded(tmp_path):
    """A gzip text of Ns (1 MiB of it inflates to ~1 GB): the size estimate reads a bounded sample."""
    import gzip
    import resource

    from gpualign import progress

    path = tmp_path / "n.fa.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b">n\n")
        for _ in range(200):
            fh.write(b"N" * (1 << 20) + b"\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert abs(progress.input_bases(str(path)) / (200 << 20) - 1) < 0.05
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB


# -h and the usage lines

@pytest.mark.parametrize("command,usage", [
    ("pairs", "Usage: gpualign pairs [OPTIONS] QUERY TARGET"),
    ("paf", "Usage: gpualign paf [OPTIONS] CANDIDATES QUERY TARGET"),
    ("genome", "Usage: gpualign genome [OPTIONS] QUERY TARGET"),
    ("search", "Usage: gpualign search [OPTIONS] PATTERNS TEXT"),
])
def test_help_short_flag_and_plain_usage(command, usage):
    rc, out, err = run(command, "-h")
    assert rc == 0 and err == "" and out.splitlines()[0] == usage
    assert run(command, "--help")[1] == out
    options = out.split("\nOptions:\n", 1)[1].split("\n\n", 1)[0]
    assert not re.search(r"<\w+>|\{\w+\}", out.split("Examples:")[0]), out  # no <str>, <int>, {query}
    assert re.search(r"-o, --output FILE\s", options) and "-h, --help" in options
    assert command == "genome" or re.search(r"-t, --threads INT\s", options)
    for line in options.splitlines():  # every option that takes a value names it in upper case
        m = re.match(r"\s+(-\w, )?--[\w-]+ (\S+)", line)
        if m and not m.group(2).startswith(("(", "[")):
            assert m.group(2).isupper(), line


def test_root_short_help_flag():
    rc, out, _ = run("-h")
    assert rc == 0 and out.startswith("Usage: gpualign [OPTIONS] COMMAND [ARGS]...") and "pairs" in out


def test_missing_argument_is_named_plainly(fa):
    rc, _, err = run("pairs", fa[0])
    assert rc == 2 and "Missing argument 'TARGET'" in err and "Usage: gpualign pairs [OPTIONS] QUERY TARGET" in err


# --verify: an independent judge

def _random_pairs(rng, n, letters=b"ACGT", max_len=60, empties=True):
    alphabet = np.frombuffer(letters, np.uint8)
    qs, ts = [], []
    for i in range(n):
        q = alphabet[rng.integers(0, len(alphabet), int(rng.integers(0 if empties else 1, max_len)))].tobytes()
        t = bytearray(q)
        for _ in range(int(rng.integers(0, 6))):  # a few edits
            if t and rng.random() < 0.5:
                del t[int(rng.integers(0, len(t)))]
            else:
                t.insert(int(rng.integers(0, len(t) + 1)), int(alphabet[rng.integers(0, len(alphabet))]))
        qs.append(q)
        ts.append(bytes(t))
    return qs, ts


CONFIGS = [
    AlignConfig(metric="edit"),
    AlignConfig(metric="edit", n_mismatch=True),
    AlignConfig(metric="affine"),
    AlignConfig(metric="affine", penalties=Penalties(3, 5, 1), n_mismatch=True),
    AlignConfig(metric="affine", scoring=Scoring(mode="global", match=2)),
    AlignConfig(metric="affine", scoring=Scoring(mode="local", match=2), penalties=Penalties(3, 5, 2)),
    AlignConfig(metric="affine", scoring=Scoring(mode="semi-global", match=1), n_mismatch=True),
    AlignConfig(metric="affine", scoring=Scoring(mode="local", alphabet="protein"), penalties=Penalties(4, 11, 1)),
    AlignConfig(metric="affine", scoring=Scoring(mode="semi-global", alphabet="protein"),
                penalties=Penalties(4, 10, 1)),
    AlignConfig(metric="affine", scoring=Scoring(mode="global", alphabet="protein", unknown="X"),
                penalties=Penalties(4, 10, 1)),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.metric}-{c.scoring.mode}-{c.scoring.alphabet}-"
                         f"m{c.scoring.match}-n{int(c.n_mismatch)}")
def test_judge_agrees_with_the_engines(cfg):
    """The judge's scores equal the CPU engines' (WFA2-lib, parasail) on random pairs, empty sides and N
    included: the same conventions, computed by other code."""
    from gpualign.engines import select_engines
    from gpualign.engines.check import CheckEngine, cigar_faults

    rng = np.random.default_rng(51)
    protein = cfg.scoring.alphabet == "protein"
    letters = b"ACDEFGHIKLMNPQRSTVWY" + (b"JJ" if cfg.scoring.unknown else b"")
    qs, ts = _random_pairs(rng, 120, letters if protein else b"ACGTNacgt", empties=not protein)
    qs, ts = [q.upper() for q in qs], [t.upper() for t in ts]  # the readers' case folding
    batch = PairBatch.from_sequences(qs, ts)
    cfg = cfg.with_(device="cpu", threads=1, distance_only=True).validate()
    chain, _ = select_engines(cfg)
    res = chain[0].align(batch, cfg)
    judge = CheckEngine(1).scores(batch, cfg)
    assert (res.status == 0).all()
    assert np.array_equal(judge, res.score.astype(np.int64)), np.nonzero(judge != res.score)[0][:5]
    # the engines' CIGARs pass --verify's check (check.cigar_faults: no false alarm)
    from gpualign.route import run_chain

    with_cigars = cfg.with_(distance_only=False)
    res, _ = run_chain(batch, select_engines(with_cigars)[0], with_cigars)  # (--unknown's =/X restated there)
    faults = cigar_faults(batch, res, np.arange(batch.n), with_cigars)
    assert not faults.any(), np.nonzero(faults)[0][:5]


def _verify_with(tmp_path, monkeypatch, general: bool, change, mode: str, seed: int):
    """run_pairs with --verify 1 on 40 random pairs, the CPU engine's chunk results passed through change
    (cpu_dp's under general scoring in mode, else cpu_wfa's, edit): the summary."""
    from gpualign.engines import cpu_dp, cpu_wfa
    from gpualign.pipeline import run_pairs

    module = cpu_dp if general else cpu_wfa
    right = module._align_chunk
    monkeypatch.setattr(module, "_align_chunk", lambda *args: change(list(right(*args))))
    q, t = tmp_path / "q.fa", tmp_path / "t.fa"
    qs, ts = _random_pairs(np.random.default_rng(seed), 40, empties=False)
    q.write_text("".join(f">p{i}\n{s.decode()}\n" for i, s in enumerate(qs)))
    t.write_text("".join(f">p{i}\n{s.decode()}\n" for i, s in enumerate(ts)))
    scoring = Scoring(mode=mode, match=2) if general else Scoring()
    cfg = AlignConfig(metric="affine" if general else "edit", scoring=scoring, device="cpu", threads=1)
    return run_pairs(str(q), str(t), str(tmp_path / "o.tsv"), None, cfg, "gpualign pairs", verify=1.0)


@pytest.mark.parametrize("general", [False, True])
def test_verify_catches_a_wrong_cpu_engine(tmp_path, monkeypatch, general):
    """A CPU engine that reports every score one off: --verify on the CPU finds none optimal (it used to run
    the same engine again and report 100%)."""
    summary = _verify_with(tmp_path, monkeypatch, general, lambda out: (out[0] + 1, *out[1:]), "local", 3)
    assert summary.verified == 40 and summary.verified_optimal == 0
    assert dict(summary.rows())["verified_by"] == ("Biopython" if general else "edlib")


@pytest.mark.parametrize("general", [False, True])
def test_verify_catches_a_wrong_cigar(tmp_path, monkeypatch, general):
    """A CPU engine whose scores are right and whose CIGARs say X where the bases are equal: --verify found
    every pair optimal (it checked scores only); now none."""
    def eq_as_x(out):
        ops = out[2]  # (the packed ops: both engines' chunk results hold them third)
        out[2] = np.where((ops & 15) == 7, (ops & ~np.uint32(15)) | np.uint32(8), ops).astype(np.uint32)
        return tuple(out)

    summary = _verify_with(tmp_path, monkeypatch, general, eq_as_x, "global", 4)
    rows = dict(summary.rows())
    assert summary.verified == 40 and summary.verified_optimal == 0 and rows["verified_cigar_faults"] == "40"


def test_verify_rows_when_no_pair_is_drawn(tmp_path):
    """--verify 0.1 on one pair draws none (the draw is seeded): the summary said nothing of the check; it now
    says 0 verified, recall '-'."""
    from gpualign.pipeline import run_pairs

    q, t = tmp_path / "q.fa", tmp_path / "t.fa"
    q.write_text(">p\nACGTACGT\n")
    t.write_text(">p\nACGTTCGT\n")
    summary = run_pairs(str(q), str(t), str(tmp_path / "o.tsv"), None, AlignConfig(device="cpu", threads=1),
                        "gpualign pairs", verify=0.1)
    rows = dict(summary.rows())
    assert rows["verified"] == "0" and rows["recall"] == "-" and rows["verified_by"] == "edlib"


def test_cigar_faults_each_kind():
    """check.cigar_faults on hand-made results: right ones pass; a CIGAR short of its ranges, one with a false
    =, one of the right shape scoring another score (4I4D for a distance of 0), a zero-length op, ops not
    merged (2=2=), all fault; a local result whose range passes its query's end faults (it indexed past the
    batch), and a global one that leaves a base out."""
    from gpualign import cigar as C
    from gpualign.engines.check import cigar_faults
    from gpualign.records import AlignBatch

    def results(cigars, scores):
        ops = [np.array([ln << 4 | op for op, ln in c], np.uint32) for c in cigars]
        lens = np.array([len(o) for o in ops], np.int64)
        n = len(cigars)
        return AlignBatch(np.array(scores, np.int32), np.zeros(n, np.uint8), np.zeros(n, np.uint8),
                          np.concatenate(ops), np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)

    batch = PairBatch.from_sequences([b"ACGT"] * 6 + [b"AC"], [b"ACGT", b"ACGT", b"ACGA"] + [b"ACGT"] * 3 + [b"AG"])
    res = results([[(C.EQ, 4)], [(C.EQ, 3)], [(C.EQ, 4)], [(C.I, 4), (C.D, 4)], [(C.EQ, 0), (C.EQ, 4)],
                   [(C.EQ, 2), (C.EQ, 2)], [(C.EQ, 1), (C.X, 1)]], [0, 0, 1, 0, 0, 0, 1])
    faults = cigar_faults(batch, res, np.arange(7), AlignConfig(metric="edit"))
    assert faults.tolist() == [False, True, True, True, True, True, False]
    local = AlignConfig(metric="affine", scoring=Scoring(mode="local", match=1), penalties=Penalties(1, 1, 1))
    batch = PairBatch.from_sequences([b"ACGT", b"ACGT"], [b"ACGTACGT", b"ACGTACGT"])
    res = results([[(C.EQ, 4)], [(C.EQ, 4)]], [4, 4])
    res.q_start, res.q_end = np.array([0, 2]), np.array([4, 6])  # (the second passes its query's end)
    res.t_start, res.t_end = np.array([4, 4]), np.array([8, 8])
    assert cigar_faults(batch, res, np.arange(2), local).tolist() == [False, True]
    res = results([[(C.EQ, 4)], [(C.EQ, 4)]], [-4, -4])
    glob = AlignConfig(metric="affine", scoring=Scoring(mode="global", match=1), penalties=Penalties(1, 0, 1))
    res.t_start, res.t_end = np.array([0, 4]), np.array([4, 8])
    assert cigar_faults(batch, res, np.arange(2), glob).tolist() == [True, True]


def test_verify_help_names_the_judges():
    out = run("pairs", "-h")[1]
    assert "edlib for edit" in out and "parasail for affine" in out and "Biopython" in out


@pytest.mark.parametrize("layout", ["two-line", "multi-line later", "crlf"])
@pytest.mark.parametrize("gz", [False, True])
def test_stream_fast_path_then_strict(tmp_path, monkeypatch, layout, gz):
    """A pipe is read by the fast path (2-line FASTA, 4-line FASTQ), and from the block where the layout
    changes by the strict parser, from the bytes the fast path held: the same records as from a file."""
    import gzip
    import threading

    from gpualign.io import fastx, fastx_fast

    monkeypatch.setattr(fastx_fast, "_BLOCK", 4096)
    rng = np.random.default_rng(5)
    recs = []
    for i in range(600):
        s = "".join(rng.choice(list("ACGT"), int(rng.integers(0, 200))))
        wrap = layout == "multi-line later" and i >= 400
        body = "\n".join(s[j:j + 50] for j in range(0, len(s), 50)) if wrap else s
        recs.append(f">r{i} x\n{body}\n" if layout != "crlf" or i < 300 else f">r{i}\r\n{body}\r\n")
    data = "".join(recs).encode()
    path = tmp_path / "a.fa"
    path.write_bytes(data)
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb") as fh:
            fh.write(gzip.compress(data) if gz else data)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        got = list(fastx.records(f"/dev/fd/{r}"))
    finally:
        writer.join()
        os.close(r)
    assert got == list(fastx.records(str(path))) and len(got) == 600


def test_search_text_from_a_pipe(tmp_path):
    """search's text from a pipe (gzip too): the same hits as from the file (the text lost its first 64 KiB
    to the check before the run, exit 0)."""
    pat = tmp_path / "p.fa"
    pat.write_text(">p\nACGTACGT\n")
    rng = np.random.default_rng(2)
    text = tmp_path / "t.fa"
    text.write_text("".join(f">r{i:05d}\n{''.join(rng.choice(list('ACGT'), 8))}\n" for i in range(6000)))
    want = run("search", str(pat), str(text), "-k", "1", "--device", "cpu", "-t", "1", "-q")
    assert want[0] == 0 and len(want[1].splitlines()) > 5
    for feed in (f"cat {text}", f"gzip -c {text}"):
        cmd = " ".join([*cli_command("search"), str(pat), f"<({feed})", "-k 1 --device cpu -t 1 -q"])
        p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=cli_env(), timeout=60)
        assert (p.returncode, p.stdout, p.stderr) == (0, want[1], ""), feed


@pytest.mark.parametrize("command", ["pairs", "genome", "paf"])
def test_bam_refuses_letters_it_cannot_hold(fa, tmp_path, command):
    """BAM's SEQ holds A/C/G/T/N and the IUPAC codes: a query with another letter (X, J, E, protein read as
    DNA) is refused and no BAM is left (htslib wrote N, exit 0); SAM keeps the letters."""
    q = tmp_path / "x.fa"
    q.write_text(">a\nACGTXJEF\n")
    cands = tmp_path / "c.paf"
    cands.write_text("a\t8\t0\t8\t+\ta\t8\t0\t8\t4\t8\t60\n")
    args = {"pairs": [q, q], "genome": [q, q], "paf": [cands, q, q]}[command]
    out = tmp_path / "o.bam"
    rc, stdout, err = run(command, *args, "-o", str(out), "--device", "cpu", "-t", "1", "-q")
    line = one_error_line(err)
    assert rc == 1 and "'X' cannot be written to BAM" in line and not out.exists()
    assert ("c.paf: query 'a' (line 1)" if command == "paf" else f"{q}: query 'a' (pair 1)") in line, line
    rc, stdout, err = run(command, *args, "-f", "sam", "--device", "cpu", "-t", "1", "-q")
    assert rc == 0 and "\tACGTXJEF\t" in stdout, err
    iupac = tmp_path / "i.fa"
    iupac.write_text(">a\nACGTRYKMN\n")
    assert run("pairs", iupac, iupac, "-o", str(out), "--device", "cpu", "-t", "1", "-q")[0] == 0


def test_bam_gz_name_refused_and_summary_write_error(fa, tmp_path):
    rc, out, err = run("pairs", *fa, "-o", str(tmp_path / "x.bam.gz"), "--device", "cpu", "-t", "1")
    assert rc == 2 and "BAM is compressed already" in one_error_line(err)
    rc, out, err = run("pairs", *fa, "-o", "/dev/null", "--summary", "/dev/full", "--device", "cpu", "-q")
    assert rc == 1 and one_error_line(err) == "error: /dev/full: cannot write the summary (No space left on device)"


# -o and --summary: never an input nor each other (the output was replaced by the summary, or an input
# overwritten, with exit 0)

def _inputs(tmp_path, command):
    (tmp_path / "p.paf").write_text("a\t10\t0\t10\t+\ta\t10\t0\t10\t9\t10\t60\n")
    (tmp_path / "q.fa").write_text(">a\nACGTACGTAC\n")
    (tmp_path / "t.fa").write_text(">a\nACGTTCGTAC\n")
    q, t, p = (str(tmp_path / n) for n in ("q.fa", "t.fa", "p.paf"))
    return {"pairs": [q, t], "genome": [q, t], "search": [q, t], "paf": [p, q, t]}[command]


@pytest.mark.parametrize("command", ["pairs", "genome", "search", "paf"])
@pytest.mark.parametrize("case", ["summary is output", "output is input", "summary is input", "summary on stdout",
                                  "output is where an input's link leads"])
def test_output_and_summary_are_no_input(tmp_path, command, case):
    """(the last case: an input given as a link to the file -o names was replaced by the output, exit 0: a
    helper's hunt)"""
    inputs = _inputs(tmp_path, command)
    before = {p: open(p, "rb").read() for p in inputs}
    out = str(tmp_path / "o.tsv")
    fmt = "tsv" if command == "search" else "paf"  # (a format given: the name alone was refused for its extension)
    opts = {"summary is output": ["-o", out, "--summary", out], "output is input": ["-o", inputs[0], "-f", fmt],
            "summary is input": ["-o", out, "--summary", inputs[-1]], "summary on stdout": ["-o", out, "--summary", "-"],
            "output is where an input's link leads": ["-o", inputs[-1], "-f", fmt]}
    k = ["-k", "1"] if command == "search" else []
    given = list(inputs)
    if case == "output is where an input's link leads":
        os.symlink(inputs[-1], tmp_path / "link.fa")
        given[-1] = str(tmp_path / "link.fa")
    rc, stdout, err = run(command, *given, *k, *opts[case], "--device", "cpu", "-q")
    line = one_error_line(err)
    assert rc == 2 and stdout == "" and ("-o" in line or "--summary" in line), line
    assert {p: open(p, "rb").read() for p in inputs} == before and not os.path.exists(out)


def test_summary_in_a_missing_directory_fails_before_the_run(fa, tmp_path):
    out = tmp_path / "o.paf"
    rc, _, err = run("pairs", *fa, "-o", str(out), "--summary", str(tmp_path / "no" / "s.tsv"), "--device", "cpu", "-q")
    assert rc == 1 and "cannot write" in one_error_line(err) and not out.exists()


@pytest.mark.parametrize("cmd", ["pairs", "genome", "search"])
def test_empty_output_name_refused_before_the_run(fa, tmp_path, cmd):
    """-o '' with a format given (without one, the format could not be told: refused already) aligned everything,
    then failed at the rename: refused first, as an empty --summary name is."""
    q, t = fa
    args = {"pairs": ["pairs", q, t, "-t", "1"], "genome": ["genome", q, t], "search": ["search", q, t, "-k", "1"]}[cmd]
    for extra in (["-o", "", "-f", "bed" if cmd == "search" else "paf"], ["--summary", ""]):
        rc, out, err = run(*args, *extra, "--device", "cpu", "-q")
        assert rc == 2 and "an empty file name" in one_error_line(err) and not out, err


@pytest.mark.parametrize("command", ["pairs", "genome", "search", "paf"])
def test_a_directory_as_the_output_is_one_answer(tmp_path, command):
    """-o naming a directory: exit 1, 'cannot write (a directory)', with or without -f (without, it was exit 2,
    'cannot tell the format from the name': a helper's audit)."""
    inputs = _inputs(tmp_path, command)
    (tmp_path / "d").mkdir()
    k = ["-k", "1"] if command == "search" else []
    for fmt in ([], ["-f", "tsv" if command == "search" else "paf"]):
        rc, out, err = run(command, *inputs, *k, "-o", str(tmp_path / "d"), *fmt, "--device", "cpu", "-q")
        assert rc == 1 and one_error_line(err) == f"error: {tmp_path / 'd'}: cannot write (a directory)", err
        assert not list((tmp_path / "d").iterdir())


def test_output_paths_that_stay_allowed(fa, tmp_path):
    """/dev/stdout for the summary, a link named as the output (the finished output replaces what it points
    to, the link kept, as a plain open() writes through it; a link to an input is refused: the run would
    overwrite the input), a summary file that exists in place: the run writes them, the inputs stay."""
    q, t = fa
    before = open(q, "rb").read()
    link = tmp_path / "link.paf"
    os.symlink(q, link)
    rc, out, err = run("pairs", q, t, "-o", str(link), "--device", "cpu", "-q")
    assert rc == 2 and "is an input file" in one_error_line(err) and open(q, "rb").read() == before, err
    link.unlink()
    os.symlink(tmp_path / "real.paf", link)
    rc, out, err = run("pairs", q, t, "-o", str(link), "--summary", "/dev/stdout", "--device", "cpu", "-q")
    assert rc == 0 and out.startswith("key\tvalue\n"), err
    assert open(q, "rb").read() == before and link.is_symlink() and (tmp_path / "real.paf").read_text().count("\n") == 2
    summary = tmp_path / "s.tsv"
    summary.write_text("old")
    rc, out, err = run("pairs", q, t, "--summary", str(summary), "--device", "cpu", "-q")
    assert rc == 0 and summary.read_text().startswith("key\tvalue\n"), err


def test_matrix_and_index_files_are_inputs(fa, tmp_path):
    q, t = fa
    matrix = tmp_path / "m.txt"
    matrix.write_text("   A  C  G  T\nA  5 -4 -4 -4\nC -4  5 -4 -4\nG -4 -4  5 -4\nT -4 -4 -4  5\n")
    rc, _, err = run("pairs", q, t, "--matrix", str(matrix), "-o", str(tmp_path / "o.paf"), "--summary", str(matrix),
                     "--device", "cpu", "-q")
    assert rc == 2 and "is an input file" in one_error_line(err) and matrix.read_text().startswith("   A")
    rc, _, err = run("genome", q, t, "-o", str(tmp_path / "o.paf"), "--summary", t + ".fai", "--device", "cpu", "-q")
    assert rc == 2 and "is an input file" in one_error_line(err)


@pytest.mark.parametrize("target,needle", [
    (b">t1\nAC GT\n", "error: stdin: record 1 (line 2): invalid sequence character ' '"),
    (b">t1\nACGT\n>t1\nACG\n", "error: stdin: target name 't1' appears twice with different lengths (4 and 3)"),
    (b">t1\nACGT\n>t1\nACGA\n", "error: stdin: record 2: target name 't1' appears again with a different sequence"),
    (b"x\n", "error: stdin: not FASTA or FASTQ (first character 'x'"),  # (fastx.sniff's messages)
    (b"", "error: stdin: empty file"),
])
def test_errors_name_stdin_not_its_spooled_copy(tmp_path, target, needle):
    """SAM with the target on stdin reads a copy of it in the scratch directory (faidx.spool): its errors
    named that copy's path (/tmp/gpualign-idx-.../1--.spool), not stdin (a helper's hunt)."""
    q = tmp_path / "q.fa"
    q.write_text(">q1\nACGT\n>q2\nACG\n")
    p = run_cli("pairs", str(q), "-", "-f", "sam", "--device", "cpu", "-q", "-t", "1", stdin=target)
    assert p.returncode != 0 and one_error_line(p.stderr.decode()).startswith(needle), p.stderr.decode()


@pytest.mark.parametrize("fmt", ["sam", "bam", "paf"])
def test_pairs_a_target_name_with_two_sequences(tmp_path, fmt):
    """pairs: target records of one name and one length were one @SQ line whatever their bases (a newcomer's
    run), the second pair's alignment written against the first record's sequence. SAM/BAM: one line naming
    the file, both records and the name, exit 1, no output; the same sequence again (case aside) is one @SQ;
    PAF takes both."""
    q, t = tmp_path / "q.fa", tmp_path / "t.fa"
    q.write_text(">a\nACGTACGTAC\n>b\nACGGACGTAC\n>c\nTTGGACGTAC\n")
    t.write_text(">x\nACGAACGTAC\n>y\nTTGGACGTAC\n>x\nacgaACGTAC\n")
    out = tmp_path / f"o.{fmt}"
    p = run_cli("pairs", q, t, "--device", "cpu", "-q", "-o", out)
    assert p.returncode == 0, p.stderr.decode()
    if fmt == "sam":
        assert [x for x in out.read_text().splitlines() if x.startswith("@SQ")] == ["@SQ\tSN:x\tLN:10",
                                                                                   "@SQ\tSN:y\tLN:10"]
    t.write_text(">x\nACGAACGTAC\n>y\nTTGGACGTAC\n>x\nACGAACGTAA\n")
    out.unlink()
    p = run_cli("pairs", q, t, "--device", "cpu", "-q", "-o", out)
    if fmt == "paf":
        assert p.returncode == 0 and len(out.read_text().splitlines()) == 3, p.stderr.decode()
        return
    assert p.returncode == 1 and not out.exists(), p.stderr.decode()
    assert one_error_line(p.stderr.decode()) == (
        f"error: {t}: record 3: target name 'x' appears again with a different sequence (record 1 has the same "
        "name and length); SAM/BAM give a name one sequence (@SQ): rename one, or write PAF or TSV")
