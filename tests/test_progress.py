"""Feedback on long runs: progress lines off a terminal (minimap2-like), the CPU genome kernel's expected
time, -q silencing all of it; --help giving every command and option a description."""

import io
import subprocess
import sys

import pytest

from cli_helper import cli_env, run_cli
from gpualign import progress
from simulate import simulate, write_fasta


class _Console:
    is_terminal = False

    def __init__(self):
        self.file = io.StringIO()


def test_record_lines_off_a_terminal(monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    console = _Console()
    with progress.records(console, "pairs", quiet=False) as report:
        report(1000, 300_000)
        report(2000, 600_000)
    lines = console.file.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("[M::pairs::") and "2,000 records, 0.6 Mbp" in lines[1]
    assert "records/s" in lines[1] and "Mbp/s" in lines[1]
    with progress.records(console, "pairs", quiet=True) as report:
        assert report is None


def test_record_lines_wait_for_the_interval():
    console = _Console()
    with progress.records(console, "paf", quiet=False) as report:
        for i in range(100):
            report(i, i)
    assert console.file.getvalue() == ""


def test_cpu_genome_line_has_the_expected_time():
    p = {"kernel": "cpu", "method": "edlib", "pair": "a vs b", "expected": 600.0, "elapsed": 150.0}
    assert progress.describe_genome(p) == "cpu-edlib  a vs b  2.5 min of ~10.0 min expected (about 7.5 min left)"
    assert "longer than expected" in progress.describe_genome({**p, "elapsed": 700.0})


def test_genome_cpu_says_expected_time_and_q_silences_it(tmp_path):
    q, t = simulate(1, 300_000, 0.10, seed=7)
    write_fasta(str(tmp_path / "a.fa"), q, "a")
    write_fasta(str(tmp_path / "b.fa"), t, "b")
    args = ["genome", str(tmp_path / "a.fa"), str(tmp_path / "b.fa"),
            "--distance-only", "--device", "cpu", "-o", str(tmp_path / "d.tsv")]
    p = run_cli(*args, text=True)
    assert p.returncode == 0 and "a0 vs b0: cpu-edlib, sampled divergence" in p.stderr, p.stderr
    assert "expected to take " in p.stderr
    p = run_cli(*args, "-q", text=True)
    assert p.returncode == 0 and p.stderr == ""


def test_help_describes_every_command_and_option():
    from gpualign.cli import app

    for name, cmd in app.commands.items():
        short = cmd.get_short_help_str(limit=60)
        assert short and not short.endswith("..."), name
        for param in cmd.params:
            if param.param_type_name == "option" and not param.hidden:
                assert param.help, f"{name} {param.opts}"


def test_share_done_and_time_left_when_the_total_is_known(monkeypatch):
    """A known input size gives the share done and the time left; none without one (stdin); an estimate
    that falls short stays below 100% and gives no time left."""
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    console = _Console()
    with progress.records(console, "pairs", quiet=False, total=progress.Total(bases=1_000_000)) as report:
        report(1, 5_000)
        report(10, 250_000)
        report(99, 2_000_000)
    with progress.records(console, "pairs", quiet=False) as report:
        report(10, 250_000)
    early, first, over, unknown = console.file.getvalue().splitlines()
    assert "] 0% done; 1 records, " in early and "left" not in early  # (under 1%: no time left told yet)
    assert "] 25% done, about " in first and " s left; 10 records, 0.2 Mbp, " in first
    assert "99% done" in over and "left" not in over
    assert "done" not in unknown and "left" not in unknown


def test_input_sizes_estimated_from_the_first_mib(tmp_path, monkeypatch):
    """FASTA, FASTQ and (multi-member) gzip inputs: bases from the file size and the density of its start
    (exact when the sample is the whole file), an index's sum when there is one; PAF lines; stdin: None."""
    import gzip

    monkeypatch.setattr(progress, "SAMPLE", 4096)
    fa = tmp_path / "a.fa"
    fa.write_bytes(b"".join(b">r%05d some description\n%s\n%s\n" % (i, b"A" * 60, b"C" * 40) for i in range(2000)))
    assert abs(progress.input_bases(str(fa)) / 200_000 - 1) < 0.01
    fq = tmp_path / "a.fq"
    fq.write_bytes(b"".join(b"@r%05d\n%s\n+\n%s\n" % (i, b"G" * 150, b"I" * 150) for i in range(500)))
    assert abs(progress.input_bases(str(fq)) / 75_000 - 1) < 0.01
    gz = tmp_path / "a.fa.gz"
    text = fa.read_bytes()
    gz.write_bytes(gzip.compress(text[:100_000]) + gzip.compress(text[100_000:]))  # two members
    assert abs(progress.input_bases(str(gz)) / 200_000 - 1) < 0.2
    assert progress.input_bases(str(fa), str(fq)) > 270_000
    (tmp_path / "a.fa.fai").write_text("r0\t123\t4\t60\t61\nr1\t7\t200\t60\t61\n")
    assert progress.input_bases(str(fa)) == 130
    paf = tmp_path / "c.paf"
    paf.write_text("".join(f"q{i:05d}\t150\t0\t150\t+\tt{i:05d}\t150\t0\t150\t0\t150\t60\n" for i in range(3000)))
    assert abs(progress.input_lines(str(paf)) / 3000 - 1) < 0.01
    assert progress.input_bases("-") is None and progress.input_lines("-") is None
    assert progress.input_bases(str(tmp_path / "missing.fa")) is None


def _lines_every_batch(args, stdin=None) -> list:
    """The [M::...] lines of a run whose progress interval is 0 (a line per batch or chunk), off a terminal."""
    code = ("import sys\nfrom gpualign import progress\nprogress.INTERVAL_S = 0.0\n"
            f"sys.argv = ['gpualign', *{args!r}]\nfrom gpualign.__main__ import main\nmain()\n")
    p = subprocess.run([sys.executable, "-c", code], stdin=stdin, capture_output=True, text=True, env=cli_env(),
                       timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.startswith("[M::")]
    assert lines, p.stderr
    return lines


def test_pairs_paf_search_lines_give_the_share_done(tmp_path):
    """pairs, paf and search off a terminal: percent and time left when the input is a file; pairs with
    its targets on stdin: records and rates only."""
    from sim_inputs import pairs_and_candidates

    pairs_and_candidates(tmp_path, 400, 100, 0.05, seed=11)
    a, b, c, out = (str(tmp_path / n) for n in ("a.fa", "b.fa", "c.paf", "out"))
    cpu = ["--device", "cpu", "-t", "1"]
    for args in (["pairs", a, b, "-o", out + ".paf", *cpu, "--batch-bases", "8000"],
                 ["paf", c, a, b, "-o", out + "2.paf", *cpu, "--batch-bases", "8000"],
                 ["search", a, b, "-k", "1", "-o", out + ".tsv", *cpu, "--chunk-bases", "8000"]):
        lines = _lines_every_batch(args)
        assert any("% done, about " in line for line in lines), (args[0], lines)
        assert all(line.startswith(f"[M::{args[0]}::") for line in lines)
    with open(b) as stdin:
        lines = _lines_every_batch(["pairs", a, "-", "-o", out + "3.paf", *cpu, "--batch-bases", "8000"], stdin)
    assert not any("done" in line or "left" in line for line in lines), lines


def test_cluster_genome_line():
    p = {"kernel": "cluster", "done": 1, "running": 2, "workers": 2, "elapsed": 75.0}
    assert progress.describe_genome(p) == "record pairs: 1 done, 2 running on 2 worker(s), 75 s"
    assert progress.describe_genome({**p, "kernel": "gpus"}) == "record pairs: 1 done, 2 running on 2 GPU slot(s), 75 s"


@pytest.mark.slow
def test_genome_on_cpu_workers_reports_progress(tmp_path):
    """genome --cpu-workers: the record pairs done and running while the workers compute (it said
    nothing)."""
    q, t = simulate(1, 1_000_000, 0.10, seed=7)  # seconds on the worker
    write_fasta(str(tmp_path / "a.fa"), q, "a")
    write_fasta(str(tmp_path / "b.fa"), t, "b")
    lines = _lines_every_batch(["genome", str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), "--distance-only",
                                "--cpu-workers", "1", "-o", str(tmp_path / "d.tsv")])
    assert any("record pairs: 0 done, 1 running on 1 worker(s)" in line for line in lines), lines


@pytest.mark.parametrize("text", [
    b"r0\t123\t4\t60\t61\nr1\t7\t200\t60\t61\n", b"r0\t123456789012345\t4\t60\t61\n", b"r0\t007\t4\n",
    b"r0\t123\t4\t60\t61\nr1\t7\t200\t60\t61", b"r0\t123\t4\n\nr1\t7\t5\n", b"r0\t+5\t4\n", b"r0\t 5\t4\n",
    b"r0\t5\n", b"r0 5\n", b"\t1\t2\n", b"r0\t1\t2\r\nr1\t2\t3\r\n", b"r0\t999999999999999999\t4\n" * 10])
def test_index_sum_at_once_or_line_by_line(tmp_path, text):
    """An index's second column summed (numpy at once where its lines are plain, else a line at a time) as
    int() reads each line's, every layout."""
    fa = tmp_path / "a.fa"
    fa.write_bytes(b">r0\nACGT\n")
    (tmp_path / "a.fa.fai").write_bytes(text)
    try:
        want = sum(int(line.split(b"\t")[1]) for line in text.split(b"\n") if line.strip())
    except (ValueError, IndexError):
        want = 4  # (a .fai that cannot be read: the file's own bases)
    assert progress.input_bases(str(fa)) == float(want)
