"""Feedback on long runs: progress lines off a terminal (minimap2-like), the CPU genome kernel's expected
time, -q silencing all of it; --help giving every command and option a description."""

import io
import typer.main

from cli_helper import run_cli
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
    assert "expected to take about" in p.stderr
    p = run_cli(*args, "-q", text=True)
    assert p.returncode == 0 and p.stderr == ""


def test_help_describes_every_command_and_option():
    from gpualign.cli import app

    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():
        short = cmd.get_short_help_str(limit=60)
        assert short and not short.endswith("..."), name
        for param in cmd.params:
            if param.param_type_name == "option" and not param.hidden:
                assert param.help, f"{name} {param.opts}"
