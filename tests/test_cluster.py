"""The distributed path (`--scheduler`, `--cpu-workers`) on a local CPU Dask cluster: the same bytes as a
one-process run, a worker killed mid-run loses nothing, and bad options (with --gpus's: test_devices.py runs
it) are refused."""

import logging
import os
import signal

import pytest

pytest.importorskip("distributed")

from cli_helper import run_cli  # noqa: E402
from gpualign.cluster import CONNECT_TIMEOUT_ENV, ClusterSpec, connect_timeout  # noqa: E402
from gpualign.cluster_worker import START_EVENT  # noqa: E402
from gpualign.config import AlignConfig  # noqa: E402
from gpualign.pipeline import run_pairs  # noqa: E402

UNREACHABLE = {CONNECT_TIMEOUT_ENV: "0.5"}  # a refused connection is retried until the timeout


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from simulate import simulate, write_fasta

    d = tmp_path_factory.mktemp("cluster")
    q, t = simulate(3000, 1000, 0.10, seed=3)
    write_fasta(str(d / "a.fa"), q, "q")
    write_fasta(str(d / "b.fa"), t, "t")
    return d


def gpualign(*args, timeout=300, env=None):
    return run_cli(*args, text=True, env=env, timeout=timeout)


@pytest.mark.parametrize("fmt", ["paf", pytest.param("sam", marks=pytest.mark.slow)])
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    """One worker SIGKILLed mid-batch once a batch is written: its batches run again elsewhere, the output
    is byte for byte the one-process run's, and the summary counts the batches that were re-run, also where
    the scheduler keeps fewer events than the run logs (one here; `dask scheduler`'s default is 1,000): the
    client counts them as they come."""
    import dask
    from distributed import Client, LocalCluster

    a, b = str(inputs / "a.fa"), str(inputs / "b.fa")
    ref = tmp_path / "ref.paf"
    cfg = AlignConfig(device="cpu", threads=1, batch_bases=200_000)
    run_pairs(a, b, str(ref), None, cfg, "test")
    with dask.config.set({"distributed.admin.low-level-log-length": 1}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        pids = client.run(os.getpid)  # worker address -> pid
        killed = []

        def progress(pairs, bases):
            """Kill a worker running a batch whose start the scheduler has logged (an idle worker leaves
            nothing to re-run, and a start event still in the dying worker's send buffer is never counted)."""
            if killed:
                return
            started = {m["batch"] for _, m in client.get_events(START_EVENT) if isinstance(m, dict)}
            for w, keys in client.processing().items():
                if any(int(str(key).rsplit("-", 1)[1]) in started for key in keys):
                    os.kill(pids[w], signal.SIGKILL)
                    killed.append(pairs)
                    return

        out = tmp_path / "dist.paf"
        summary = run_pairs(a, b, str(out), None, cfg, "test", progress=progress,
                            cluster=ClusterSpec(scheduler=cluster.scheduler_address))
    assert killed and out.read_bytes() == ref.read_bytes()
    rows = dict(summary.rows())
    assert summary.pairs == 3000 and summary.failed == 0
    assert int(rows["retried_batches"]) >= 1
    # Dask's log lines stay off our stderr: distributed.client has a level of its own (its "Couldn't gather"
    # warning once reached an interrupted run's stderr)
    assert all(logging.getLogger(n).getEffectiveLevel() >= logging.CRITICAL
               for n in ("distributed", "distributed.client", "distributed.worker"))


def test_local_workers_log_nothing_below_critical():
    """The spawned workers of a local cluster keep Dask's warnings off the run's stderr (a task cancelled by
    an interrupt logged one from distributed.worker.state_machine). Closed, the cluster gives Dask back its
    temporary directory: a later cluster of this process made its scratch inside the removed one, left."""
    import dask

    from gpualign.cluster import ClusterAligner

    before = dask.config.get("temporary-directory", None)
    remote = ClusterAligner(ClusterSpec(cpu_workers=1), AlignConfig(device="cpu"))
    try:
        remote.start()
        assert dask.config.get("temporary-directory") == remote.scratch
        levels = remote.client.run(lambda: logging.getLogger("distributed.worker.state_machine").getEffectiveLevel())
    finally:
        remote.close()
    assert list(levels.values()) == [logging.CRITICAL]
    assert dask.config.get("temporary-directory", None) == before


def test_local_workers_share_the_threads_asked():
    """--cpu-workers N with -t T: each worker's engines get T // N threads (at least 1; every core's share
    without -t). -t was ignored: each worker took its share of every core."""
    from gpualign.cluster import ClusterAligner
    from gpualign.config import usable_cores

    for threads, want in ((4, 2), (1, 1), (0, max(1, usable_cores() // 2))):
        remote = ClusterAligner(ClusterSpec(cpu_workers=2), AlignConfig(device="cpu", threads=threads))
        try:
            remote.start()
            assert remote.cfg.threads == want, (threads, remote.cfg.threads)
        finally:
            remote.close()


@pytest.mark.parametrize("args,message", [
    (["--gpus", "0"], "--gpus must be a number >= 1, 'all' or a list"),
    (["--gpus", "two"], "--gpus must be a number >= 1, 'all' or a list"),
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
                 str(out), env=UNREACHABLE)
    assert p.returncode == 1 and "cannot connect" in p.stderr and not out.exists()


def test_connect_timeout_is_a_setting(inputs, tmp_path, monkeypatch):
    """$GPUALIGN_CONNECT_TIMEOUT: --scheduler's connect timeout in seconds, 10 unless set; a value that is
    not a number > 0 is refused in one line (exit 2), nothing written."""
    from gpualign.errors import ConfigError

    monkeypatch.delenv(CONNECT_TIMEOUT_ENV, raising=False)
    assert connect_timeout() == 10
    monkeypatch.setenv(CONNECT_TIMEOUT_ENV, "0.5")
    assert connect_timeout() == 0.5
    for bad in ("0", "-1", "nan", "inf", "10s", ""):
        monkeypatch.setenv(CONNECT_TIMEOUT_ENV, bad)
        with pytest.raises(ConfigError, match=CONNECT_TIMEOUT_ENV):
            connect_timeout()
    out = tmp_path / "o.paf"
    p = gpualign("pairs", str(inputs / "a.fa"), str(inputs / "b.fa"), "--scheduler", "tcp://127.0.0.1:1", "-o",
                 str(out), env={CONNECT_TIMEOUT_ENV: "soon"})
    assert p.returncode == 2 and f"${CONNECT_TIMEOUT_ENV} must be a number" in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1 and not out.exists()


@pytest.fixture(scope="module")
def search_inputs(tmp_path_factory):
    """A 300 kbp text in 3 records and 20 patterns, 16 of them drawn from the text with up to 2 edits."""
    import numpy as np
    from search_oracle import mutate, random_dna, revcomp, write_fasta

    d = tmp_path_factory.mktemp("cluster_search")
    rng = np.random.default_rng(21)
    records = {f"chr{i}": random_dna(rng, n) for i, n in enumerate((150_000, 90_000, 60_000))}
    patterns = {f"r{i}": random_dna(rng, 11) for i in range(4)}
    for i in range(16):
        m = int(rng.choice([12, 23, 40, 70]))
        src = records[f"chr{i % 3}"]
        a = int(rng.integers(0, len(src) - m))
        p = mutate(rng, src[a:a + m], int(rng.integers(0, 3)))
        patterns[f"p{i}"] = revcomp(p) if i % 2 else p
    write_fasta(str(d / "p.fa"), patterns)
    write_fasta(str(d / "t.fa"), records)
    return d


def _without_pg(path):
    return b"".join(x for x in path.read_bytes().splitlines(True) if not x.startswith(b"@PG"))


@pytest.mark.parametrize("fmt", ["tsv", pytest.param("sam", marks=pytest.mark.slow)])
def test_search_cpu_workers_give_the_same_bytes(search_inputs, tmp_path, fmt):
    """`search --cpu-workers 2`: chunks of 50 kbp scanned by two workers, hits aligned here, the same bytes
    as the one-process CPU run (SAM: but for @PG, which holds the command line)."""
    d = search_inputs
    args = [str(d / "p.fa"), str(d / "t.fa"), "-k", "2", "--chunk-bases", "50000"]
    p = gpualign("search", *args, "-o", str(tmp_path / f"one.{fmt}"), "--device", "cpu", "-t", "2", "-q")
    assert p.returncode == 0, p.stderr
    p = gpualign("search", *args, "-o", str(tmp_path / f"dist.{fmt}"), "--cpu-workers", "2")
    assert p.returncode == 0, p.stderr
    one, dist = _without_pg(tmp_path / f"one.{fmt}"), _without_pg(tmp_path / f"dist.{fmt}")
    assert one == dist and one.count(b"\n") > 100
    assert "2 CPU worker(s)" in p.stderr and "retried_batches" in p.stderr and "cpu-sassy" in p.stderr
    workers = [line.split() for line in p.stderr.splitlines() if line.strip().startswith("worker:")]
    assert len(workers) == 2 and sum(int(w[1]) for w in workers) == 300_000
    assert sum(int(w[3]) for w in workers) >= 6  # several chunks per worker


@pytest.mark.parametrize("args,message", [
    (["--gpus", "0"], "--gpus must be a number >= 1, 'all' or a list"),
    (["--gpus", "2", "--device", "cpu"], "--gpus cannot run with --device cpu"),
    (["--gpus", "2", "--scheduler", "tcp://127.0.0.1:1"], "choose one of --gpus, --scheduler"),
    (["--cpu-workers", "2", "--device", "gpu"], "--cpu-workers runs the CPU engine"),
    (["--cpu-workers", "-1"], "--cpu-workers must be 0 (none) to 1024"),
    (["--cpu-workers", "99999999999999999999"], "--cpu-workers must be 0 (none) to 1024"),
])
def test_search_bad_cluster_options(search_inputs, tmp_path, args, message):
    out = tmp_path / "o.tsv"
    p = gpualign("search", str(search_inputs / "p.fa"), str(search_inputs / "t.fa"), "-k", "1", "-o", str(out), *args)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr and not out.exists()


def test_search_unreachable_scheduler(search_inputs, tmp_path):
    out = tmp_path / "o.tsv"
    p = gpualign("search", str(search_inputs / "p.fa"), str(search_inputs / "t.fa"), "-k", "1",
                 "--scheduler", "tcp://127.0.0.1:1", "-o", str(out), env=UNREACHABLE)
    assert p.returncode == 1 and "cannot connect" in p.stderr and not out.exists()


def test_plain_dask_worker_daemonic(inputs, search_inputs, tmp_path):
    """A plain `dask worker`'s process is daemonic under its Nanny and may not start a process pool: a run with
    -t 2 on one ended in a traceback (AssertionError: daemonic processes are not allowed to have children).
    Its CPU engines now run without a pool: pairs, search and genome give the one-process run's bytes."""
    import dask
    from distributed import LocalCluster
    from simulate import simulate, write_fasta

    q, t = simulate(2, 20_000, 0.05, seed=17)
    write_fasta(str(tmp_path / "ga.fa"), q, "a")
    write_fasta(str(tmp_path / "gb.fa"), t, "b")
    runs = [("pairs", [str(inputs / "a.fa"), str(inputs / "b.fa"), "--batch-bases", "400000"], "paf"),
            ("search", [str(search_inputs / "p.fa"), str(search_inputs / "t.fa"), "-k", "2"], "tsv"),
            ("genome", [str(tmp_path / "ga.fa"), str(tmp_path / "gb.fa")], "paf")]
    with dask.config.set({"distributed.worker.daemon": True}), \
            LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        for command, args, ext in runs:
            one, dist = tmp_path / f"one.{ext}", tmp_path / f"dist.{ext}"
            p = gpualign(command, *args, "-o", str(one), "-q", "--device", "cpu", "-t", "2")
            assert p.returncode == 0, p.stderr
            p = gpualign(command, *args, "-o", str(dist), "-q", "-t", "2", "--scheduler", cluster.scheduler_address)
            assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
            assert one.read_bytes() == dist.read_bytes(), command


def _warm_worker(address: str, *extra):
    """`gpualign worker --scheduler address` started (its engines made, joined): the process."""
    import subprocess

    from cli_helper import cli_command, cli_env

    proc = subprocess.Popen(cli_command("worker", "--scheduler", address, *extra), stderr=subprocess.PIPE,
                            text=True, env=cli_env())
    lines = []
    for line in proc.stderr:  # "engines ready ...", then "joined ..."
        lines.append(line)
        if "joined" in line:
            return proc, lines
    raise AssertionError(f"the worker did not join: {''.join(lines)}")


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("gpu", marks=pytest.mark.gpu)])
def test_gpualign_worker_serves_runs_warm(inputs, search_inputs, tmp_path, device):
    """`gpualign worker`: engines made before it joins (said on stderr), several runs served by the same warm
    worker with the one-process run's bytes (pairs, edit and affine; search; genome), its name in the summary;
    SIGTERM ends it (exit 143) with nothing left behind."""
    from distributed import LocalCluster
    from simulate import simulate, write_fasta

    a, b = str(inputs / "a.fa"), str(inputs / "b.fa")
    q, t = simulate(3, 30_000, 0.05, seed=13)
    write_fasta(str(tmp_path / "ga.fa"), q, "a")
    write_fasta(str(tmp_path / "gb.fa"), t, "b")
    dev = [] if device == "gpu" else ["--device", "cpu"]
    others = [("search", [str(search_inputs / "p.fa"), str(search_inputs / "t.fa"), "-k", "2", "--chunk-bases",
                          "50000"], "tsv"),
              ("genome", [str(tmp_path / "ga.fa"), str(tmp_path / "gb.fa")], "paf")]
    with LocalCluster(n_workers=0, dashboard_address=None, processes=False, protocol="tcp") as cluster:
        proc, lines = _warm_worker(cluster.scheduler_address, "-t", "2", "--name", "warm0",
                                   *(["--device", "cpu"] if device == "cpu" else []))
        try:
            assert "engines ready on " + ("the CPU" if device == "cpu" else "1 GPU slot") in lines[0]
            for metric in ("edit", "affine", "edit"):
                p = gpualign("pairs", a, b, "-o", str(tmp_path / "one.paf"), "--metric", metric, "-q",
                             "--batch-bases", "400000", *dev)
                assert p.returncode == 0, p.stderr
                p = gpualign("pairs", a, b, "-o", str(tmp_path / "warm.paf"), "--metric", metric,
                             "--batch-bases", "400000", "--scheduler", cluster.scheduler_address, *dev)
                assert p.returncode == 0, p.stderr
                assert (tmp_path / "one.paf").read_bytes() == (tmp_path / "warm.paf").read_bytes()
                assert "worker:warm0" in p.stderr
            for command, args, ext in others:
                p = gpualign(command, *args, "-o", str(tmp_path / f"one_{command}.{ext}"), "-q", *dev)
                assert p.returncode == 0, p.stderr
                p = gpualign(command, *args, "-o", str(tmp_path / f"warm_{command}.{ext}"), "-q", *dev,
                             "--scheduler", cluster.scheduler_address)
                assert p.returncode == 0, p.stderr
                assert (tmp_path / f"one_{command}.{ext}").read_bytes() == \
                    (tmp_path / f"warm_{command}.{ext}").read_bytes(), command
        finally:
            proc.terminate()
            rest = proc.stderr.read()
            assert proc.wait(30) == 143 and "Traceback" not in rest, rest


def test_gpualign_worker_default_threads_every_core():
    """`gpualign worker` without -t runs its CPU engines on every usable core (-t 0 is all cores, as in every
    command): it ran them with one process."""
    from distributed import LocalCluster

    from gpualign.config import usable_cores

    with LocalCluster(n_workers=0, dashboard_address=None, processes=False, protocol="tcp") as cluster:
        proc, lines = _warm_worker(cluster.scheduler_address, "--device", "cpu")
        try:
            assert f"CPU engines with {usable_cores()} process(es) each" in lines[0], lines
        finally:
            proc.terminate()
            proc.wait(30)


def test_gpualign_worker_bad_options(tmp_path):
    for args, message in ((["--scheduler", "nowhere"], "--scheduler must be an address"),
                          (["--scheduler", "tcp://127.0.0.1:1", "--gpus", "2", "--device", "cpu"],
                           "--gpus cannot run with --device cpu")):
        p = gpualign("worker", *args)
        assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = gpualign("worker", "--scheduler", "tcp://127.0.0.1:1", "--device", "cpu", "-t", "1", env=UNREACHABLE)
    assert p.returncode == 1 and "cannot connect" in p.stderr and "Traceback" not in p.stderr, p.stderr
