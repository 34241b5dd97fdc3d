"""The distributed path (`--gpus`, `--scheduler`, `--cpu-workers`) on a local CPU Dask cluster: the same
bytes as a one-process run, a worker killed mid-run loses nothing, and bad options are refused."""

import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("distributed")

from gpualign.cluster import ClusterSpec  # noqa: E402
from gpualign.config import AlignConfig  # noqa: E402
from gpualign.pipeline import run_pairs  # noqa: E402

ENV = dict(os.environ, PYTHONUNBUFFERED="1")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from simulate import simulate, write_fasta

    d = tmp_path_factory.mktemp("cluster")
    q, t = simulate(3000, 1000, 0.10, seed=3)
    write_fasta(str(d / "a.fa"), q, "q")
    write_fasta(str(d / "b.fa"), t, "t")
    return d


def gpualign(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "gpualign", *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout)


@pytest.mark.parametrize("fmt", ["paf", "sam"])
def test_cpu_workers_give_the_same_bytes(inputs, fmt):
    a, b = str(inputs / "a.fa"), str(inputs / "b.fa")
    one, dist = inputs / f"one.{fmt}", inputs / f"dist.{fmt}"
    p = gpualign("pairs", a, b, "-o", str(one), "--device", "cpu", "-t", "2", "-q", "--batch-bases", "400000")
    assert p.returncode == 0, p.stderr
    p = gpualign("pairs", a, b, "-o", str(dist), "--cpu-workers", "2", "--batch-bases", "400000")
    assert p.returncode == 0, p.stderr
    body = lambda path: b"".join(x for x in path.read_bytes().splitlines(True) if not x.startswith(b"@PG"))  # noqa: E731
    assert body(one) == body(dist)  # (SAM's @PG line holds the command line)
    assert "2 CPU worker(s)" in p.stderr and "retried_batches" in p.stderr
    workers = [line for line in p.stderr.splitlines() if line.strip().startswith("worker:")]
    assert len(workers) == 2 and sum(int(w.split()[1]) for w in workers) == 3000


def test_paf_cpu_workers_give_the_same_bytes(tmp_path):
    """`paf` through the cluster (ends-free batches with their target windows): the same PAF."""
    from sim_inputs import pairs_and_candidates

    pairs_and_candidates(tmp_path, 2000, 800, 0.08, seed=9)
    args = [str(tmp_path / "c.paf"), str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), "--batch-bases", "300000", "-q"]
    p = gpualign("paf", *args, "-o", str(tmp_path / "one.paf"), "--device", "cpu", "-t", "2")
    assert p.returncode == 0, p.stderr
    p = gpualign("paf", *args, "-o", str(tmp_path / "dist.paf"), "--cpu-workers", "2")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "one.paf").read_bytes() == (tmp_path / "dist.paf").read_bytes()


def test_genome_on_cpu_workers(tmp_path):
    """`genome`: record pairs on two CPU workers at once, the alignments (PAF) the same bytes as one
    process, the distances (TSV) the same numbers."""
    from simulate import simulate, write_fasta

    q, t = simulate(3, 60_000, 0.05, seed=12)
    write_fasta(str(tmp_path / "a.fa"), q, "a")
    write_fasta(str(tmp_path / "b.fa"), t, "b")
    args = [str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), "-q"]
    p = gpualign("genome", *args, "-o", str(tmp_path / "one.paf"), "--device", "cpu")
    assert p.returncode == 0, p.stderr
    p = gpualign("genome", *args, "-o", str(tmp_path / "dist.paf"), "--cpu-workers", "2")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "one.paf").read_bytes() == (tmp_path / "dist.paf").read_bytes()
    rows = [gpualign("genome", *args, "--distance-only", *extra).stdout.splitlines()
            for extra in (["--device", "cpu"], ["--cpu-workers", "2"])]
    assert [r.split("\t")[:6] for r in rows[0]] == [r.split("\t")[:6] for r in rows[1]] and len(rows[0]) == 4


def test_worker_killed_mid_run_loses_nothing(inputs, tmp_path):
    """One worker SIGKILLed after the first batch is written: its batches run again elsewhere, the output
    is byte for byte the one-process run's, and the summary counts the batches that were re-run."""
    from distributed import Client, LocalCluster

    a, b = str(inputs / "a.fa"), str(inputs / "b.fa")
    ref = tmp_path / "ref.paf"
    cfg = AlignConfig(device="cpu", threads=1, batch_bases=200_000)
    run_pairs(a, b, str(ref), None, cfg, "test")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        killed = []

        def progress(pairs, bases):
            if not killed:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pairs)

        out = tmp_path / "dist.paf"
        summary = run_pairs(a, b, str(out), None, cfg, "test", progress=progress,
                            cluster=ClusterSpec(scheduler=cluster.scheduler_address))
    assert killed and out.read_bytes() == ref.read_bytes()
    rows = dict(summary.rows())
    assert summary.pairs == 3000 and summary.failed == 0
    assert int(rows["retried_batches"]) >= 1


@pytest.mark.parametrize("args,message", [
    (["--gpus", "0"], "--gpus must be a number >= 1 or 'all'"),
    (["--gpus", "two"], "--gpus must be a number >= 1 or 'all'"),
    (["--gpus", "2", "--device", "cpu"], "--gpus cannot run with --device cpu"),
    (["--gpus", "2", "--cpu-workers", "2"], "choose one of --gpus, --cpu-workers"),
    (["--cpu-workers", "2", "--device", "gpu"], "--cpu-workers runs the CPU engine"),
])
def test_bad_cluster_options(inputs, args, message):
    p = gpualign("pairs", str(inputs / "a.fa"), str(inputs / "b.fa"), *args)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr


def test_unreachable_scheduler(inputs, tmp_path):
    out = tmp_path / "o.paf"
    p = gpualign("pairs", str(inputs / "a.fa"), str(inputs / "b.fa"), "--scheduler", "tcp://127.0.0.1:1", "-o",
                 str(out))
    assert p.returncode == 1 and "cannot connect" in p.stderr and not out.exists()
