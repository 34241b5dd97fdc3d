"""--gpus: this host's GPUs from one process (devices.py). Without a GPU the dispatcher runs on emulated
devices (no CUDA: a device is a name and its slot's threads): tasks dealt to every slot, results in the
runner's order, a device lost mid-run (injected through $GPUALIGN_FAIL_DEVICE) giving its work to the
others or to the CPU, and `pairs` through it the same bytes as one process. On a GPU: `--gpus 1` and
`--gpus 0,0` (two slots on one GPU) give the bytes of the one-process run for pairs, paf, genome and search,
with and without a lost device."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from cli_helper import run_cli
from gpualign import devices, engines, stages
from gpualign.cluster import ClusterSpec
from gpualign.config import AlignConfig
from gpualign.devices import DeviceLost, DeviceSet
from gpualign.errors import ConfigError, DeviceError


def emulated(device):
    return contextlib.nullcontext()


def test_gpus_values():
    assert devices.parse("all") == ("all",)
    assert devices.parse("3") == ("count", 3)
    assert devices.parse("0,2,3") == ("ids", (0, 2, 3))
    assert devices.parse("0,0") == ("ids", (0, 0))
    for bad in ("0", "-1", "two", "1,", ",1", "1,a", ""):
        with pytest.raises(ConfigError, match="--gpus must be"):
            devices.parse(bad)
    assert devices.device_ids("all", 4) == [0, 1, 2, 3]
    assert devices.device_ids("2", 4) == [0, 1]
    assert devices.device_ids("3,1", 4) == [3, 1]
    with pytest.raises(ConfigError, match="this host has 2 GPU"):
        devices.device_ids("3", 2)
    with pytest.raises(ConfigError, match="no device 2"):
        devices.device_ids("0,2", 2)
    with pytest.raises(DeviceError, match="no CUDA device"):
        devices.device_ids("1", 0)
    assert devices.on_device_zero("1") and devices.on_device_zero("0,0")
    assert not devices.on_device_zero("2") and not devices.on_device_zero("0,1") and not devices.on_device_zero(None)


def test_device_failures_told_from_other_errors():
    class CUDARuntimeError(RuntimeError):
        pass

    assert devices.is_device_failure(DeviceLost("x"))
    assert devices.is_device_failure(CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access"))
    assert not devices.is_device_failure(CUDARuntimeError("cudaErrorMemoryAllocation: out of memory"))
    assert not devices.is_device_failure(ValueError("a bug"))


def _set(ids, opened=None, **kw):
    """A DeviceSet on emulated devices whose state is its device (None: the CPU), tasks fn(state, x)."""
    opened = opened if opened is not None else []

    def open_slot(device):
        opened.append(device)
        return device

    return DeviceSet(ids, open_slot, lambda state: None, context=emulated, **kw)


def test_drop_a_slot_whose_device_failed_under_another_task():
    """DeviceSet.drop: the slot with that state leaves the run (the rows say why), the others keep working."""
    ds = DeviceSet([0, 1, 2], lambda device: ["state", device], lambda state: None, context=emulated)
    ds.start()
    try:
        ds.drop(ds.slots[1].state, DeviceLost("gpu1: an illegal memory access"))
        assert [s.name for s in ds.live()] == ["gpu0", "gpu2"] and ds.states() == [s.state for s in ds.live()]
        futs = [ds.submit_task(_slow_square, x) for x in range(6)]
        assert [f.result()[0][0] for f in futs] == [x * x for x in range(6)]
        assert ds.slots[1].tasks == 0 and ds.slots[0].tasks + ds.slots[2].tasks == 6
        rows = dict(ds.rows())
        assert "left the run: gpu1: an illegal memory access" in rows["device:gpu1"] and rows["devices_lost"] == "1"
    finally:
        ds.close()


class _Peers:
    """genome_pair.on_slot's peers (a DeviceSet's states() and drop()) on fake slot states."""

    def __init__(self, n):
        self.live = [("gpu", [f"chain{k}"], k) for k in range(n)]
        self.dropped = []

    def states(self):
        return list(self.live)

    def drop(self, state, err):
        self.dropped.append((state[2], str(err)))
        self.live.remove(state)


@pytest.mark.parametrize("failure", ["none", "peer part", "backward half", "this device", "a bug"])
def test_genome_pair_shared_and_a_shared_device_lost(monkeypatch, failure):
    """on_slot shares its pair with the other live slots (spread: their devices and leaf chains); a shared
    device that fails is dropped and the pair computed again without it: named by its part (PeerLost), or, for
    the backward half's device, found by this device computing alone; this device's own failure and other
    errors are raised (the slot leaves: DeviceSet._serve)."""
    from gpualign import genome_pair
    from gpualign.genome_path import PeerLost

    calls = []

    def fake(qn, tn, q, t, cfg, gpu, prune, cpu_method, progress, on_notice, chain, spread=None):
        calls.append([d for d, _ in spread or []])
        first = len(calls) == 1
        if failure == "peer part" and first:
            raise PeerLost(1, DeviceLost("gpu2 gone"))
        if failure == "backward half" and first:
            raise DeviceLost("gpu1 gone")
        if failure == "this device" and spread is None:
            raise DeviceLost("gpu0 gone")
        if failure in ("this device", "a bug") and first:
            raise DeviceLost("gpu0 gone") if failure == "this device" else ValueError("a bug")
        return ("result", chain, spread)

    monkeypatch.setattr(genome_pair, "compute_pair", fake)
    peers = _Peers(3)
    state = peers.live[0]
    args = ("a", "b", None, None, AlignConfig(), True, "auto")
    if failure in ("this device", "a bug"):
        with pytest.raises((DeviceLost, ValueError)):
            genome_pair.on_slot(state, *args, peers=peers)
        assert peers.dropped == [] and calls[0] == [1, 2]
        return
    out, counts = genome_pair.on_slot(state, *args, peers=peers)
    assert counts == {} and out[1] == ["chain0"]
    want = {"none": ([[1, 2]], [], [(1, ["chain1"]), (2, ["chain2"])]),
            "peer part": ([[1, 2], [1]], [(2, "gpu2 gone")], [(1, ["chain1"])]),
            "backward half": ([[1, 2], []], [(1, "gpu1 gone")], None)}[failure]
    assert (calls, peers.dropped, out[2]) == want
    assert genome_pair.on_slot(state, *args)[0][2] is None  # no peers: not shared


def _slow_square(state, x):
    time.sleep(0.002)
    return (x * x, threading.current_thread().name), {str(state): 1}


def test_tasks_dealt_to_every_slot_and_awaited_in_order():
    ds = _set([0, 0, 1], concurrent=lambda state: 2)
    assert ds.start() == "3 device slot(s) in this process (gpu0#1, gpu0#2, gpu1)"
    try:
        futs = [ds.submit_task(_slow_square, x, pairs=10) for x in range(60)]
        out = [f.result() for f in futs]
    finally:
        ds.close()
    assert [v[0][0] for v in out] == [x * x for x in range(60)]
    threads = {v[0][1] for v in out}
    assert {t.rsplit("-", 1)[0] for t in threads} == {"gpualign-gpu0#1", "gpualign-gpu0#2", "gpualign-gpu1"}
    rows = dict(ds.rows())
    assert sum(int(rows[f"device:{n}"].split()[0]) for n in ("gpu0#1", "gpu0#2", "gpu1")) == 600
    assert rows["devices_lost"] == "0" and ds.window == 9


def test_a_lost_device_gives_its_work_to_the_others(monkeypatch):
    monkeypatch.setenv(devices.FAIL_ENV, "1:2")  # slot 1's third task
    ds = _set([0, 1])
    ds.start()
    try:
        out = [f.result()[0][0] for f in [ds.submit_task(_slow_square, x) for x in range(40)]]
    finally:
        ds.close()
    assert out == [x * x for x in range(40)]
    rows = dict(ds.rows())
    assert rows["devices_lost"] == "1" and "left the run" in rows["device:gpu1"]
    assert "GPUALIGN_FAIL_DEVICE 1:2" in rows["device:gpu1"] and "left" not in rows["device:gpu0"]
    assert int(rows["device:gpu1"].split()[2]) == 2 and int(rows["device:gpu0"].split()[2]) == 38


def test_every_device_lost_leaves_the_rest_to_the_cpu(monkeypatch):
    monkeypatch.setenv(devices.FAIL_ENV, "0:1")
    opened = []
    ds = _set([0], opened)
    ds.start()
    try:
        out = [f.result() for f in [ds.submit_task(_slow_square, x) for x in range(10)]]
    finally:
        ds.close()
    assert [v[0][0] for v in out] == [x * x for x in range(10)]
    assert [v[1] for v in out] == [{"0": 1}] + [{"None": 1}] * 9  # the CPU's state is open(None)'s
    assert opened == [0, None] and dict(ds.rows())["device:cpu"].startswith("9 pairs, 9 batches")


def test_other_errors_reach_the_runner_and_the_slot_goes_on():
    def task(state, x):
        if x == 3:
            raise ValueError("bad pair 3")
        return x, {}

    ds = _set([0, 0])
    ds.start()
    try:
        futs = [ds.submit_task(task, x) for x in range(8)]
        with pytest.raises(ValueError, match="bad pair 3"):
            futs[3].result()
        assert [futs[i].result()[0] for i in (0, 1, 2, 4, 5, 6, 7)] == [0, 1, 2, 4, 5, 6, 7]
    finally:
        ds.close()
    assert dict(ds.rows())["devices_lost"] == "0"


def test_no_cpu_to_fall_back_on_fails_the_tasks():
    """Every device lost and open(None) failing: the tasks fail with its error (none waits forever), and later
    submits raise it too."""
    def open_slot(device):
        if device is None:
            raise DeviceError("no CPU engine here")
        return device

    import os

    os.environ[devices.FAIL_ENV] = "0:0"
    try:
        ds = DeviceSet([0], open_slot, lambda s: None, context=emulated)
    finally:
        del os.environ[devices.FAIL_ENV]
    ds.start()
    try:
        fut = ds.submit_task(_slow_square, 2)
        with pytest.raises(DeviceError, match="no CPU engine here"):
            fut.result(timeout=10)
        with pytest.raises(DeviceError, match="no CPU engine here"):
            ds.submit_task(_slow_square, 3)
        assert ds.cpu is None
    finally:
        ds.close()


def test_close_ends_begun_tasks_dealt_again(monkeypatch):
    """A task begun on a slot that failed and dealt to another that has not started it yet: close() fails its
    future (CancelledError) rather than leaving it running for ever."""
    from concurrent.futures import CancelledError

    monkeypatch.setenv(devices.FAIL_ENV, "0:0")
    hold = threading.Event()

    def task(state, x):
        hold.wait(5)
        return x, {}

    ds = DeviceSet([0, 1], lambda d: d, lambda s: None, context=emulated)
    ds.start()
    futs = [ds.submit_task(task, x) for x in range(2)]  # slot 0 fails the first: slot 1 holds the second
    time.sleep(0.1)  # (the first now waits, begun, in slot 1's queue)
    closing = threading.Thread(target=ds.close)
    closing.start()
    time.sleep(0.1)
    hold.set()
    closing.join(10)
    assert futs[1].result() == (1, {})
    with pytest.raises(CancelledError):
        futs[0].result(timeout=1)


def test_host_allocator_on_the_first_live_device():
    """Page-locked buffers are made with the first live slot's device current (no context on a device left
    out), numpy's when the chain wants none."""
    import numpy as np

    from gpualign.engines import CpuEngine

    used = []

    @contextlib.contextmanager
    def recording(device):
        used.append(device)
        yield

    class Pinned(CpuEngine):
        pinned_input = True

    ds = DeviceSet([2, 3], lambda d: [Pinned(1)], lambda s: None, context=recording)
    ds.start()
    try:
        alloc = ds.host_allocator()
        assert alloc is not np.empty
        used.clear()
        import gpualign.gpu.staging as staging

        real = staging.pinned_empty
        staging.pinned_empty = lambda n, dtype=np.uint8: np.empty(n, dtype)  # (no CUDA here)
        try:
            buf = ds.host_allocator()(10)
        finally:
            staging.pinned_empty = real
        assert len(buf) == 10 and used == [2]
    finally:
        ds.close()
    plain = DeviceSet([0], lambda d: [CpuEngine(1)], lambda s: None, context=emulated)
    plain.start()
    try:
        assert plain.host_allocator() is np.empty
    finally:
        plain.close()


def test_a_device_that_does_not_start():
    def open_slot(device):
        if device == 1:
            raise DeviceLost("gpu1 is gone")
        return device

    ds = DeviceSet([0, 1], open_slot, lambda s: None, context=emulated)
    assert "1 device slot(s)" in ds.start()
    try:
        assert ds.submit_task(_slow_square, 3).result()[0][0] == 9
    finally:
        ds.close()
    assert "did not start (gpu1 is gone)" in dict(ds.rows())["device:gpu1"]
    none = DeviceSet([1], open_slot, lambda s: None, context=emulated)
    with pytest.raises(DeviceError, match="no device started"):
        none.start()


def test_close_cancels_what_waits_and_closes_each_slot():
    closed = []
    release = threading.Event()

    def wait(state, x):
        release.wait(5)
        return x, {}

    ds = DeviceSet([0, 1], lambda d: d, closed.append, context=emulated)
    ds.start()
    futs = [ds.submit_task(wait, x) for x in range(6)]
    time.sleep(0.05)
    release.set()
    ds.close()
    assert sorted(closed) == [0, 1]
    assert sum(f.cancelled() for f in futs) >= 2 and all(f.done() for f in futs)


@pytest.fixture(scope="module")
def pair_inputs(tmp_path_factory):
    from simulate import simulate, write_fasta

    d = tmp_path_factory.mktemp("devices")
    q, t = simulate(1500, 300, 0.08, seed=21)
    write_fasta(str(d / "a.fa"), q, "q")
    write_fasta(str(d / "b.fa"), t, "t")
    return d


@pytest.mark.parametrize("fail", ["", "1:1", "0:0,1:0"])
def test_pairs_on_emulated_devices_give_the_same_bytes(pair_inputs, tmp_path, monkeypatch, fail):
    """run_pairs with --gpus 0,0 on emulated devices (each slot's 'GPU engine' a one-process WFA2-lib engine):
    the bytes of the one-process CPU run, with no device lost, one lost, or both (the CPU takes the rest)."""
    from gpualign.engines import CpuEngine
    from gpualign.pipeline import run_pairs

    a, b = str(pair_inputs / "a.fa"), str(pair_inputs / "b.fa")
    cfg = AlignConfig(device="cpu", threads=2, batch_bases=40_000)
    one = run_pairs(a, b, str(tmp_path / "one.paf"), None, cfg, "gpualign")

    def chain(cfg):
        return [CpuEngine(1), CpuEngine(cfg.n_threads)], "engines: stand-in"

    monkeypatch.setattr(stages, "select_engines", chain)
    monkeypatch.setattr(engines, "select_engines", chain)  # (each slot's own: devices.chain_set)
    monkeypatch.setattr(devices, "present", lambda gpus: [0, 0])
    monkeypatch.setattr(devices, "on_device", emulated)
    monkeypatch.setenv(devices.FAIL_ENV, fail)
    dev = run_pairs(a, b, str(tmp_path / "dev.paf"), None, cfg.with_(device="auto"), "gpualign",
                    cluster=ClusterSpec(gpus="0,0"))
    assert (tmp_path / "one.paf").read_bytes() == (tmp_path / "dev.paf").read_bytes()
    assert dev.pairs == one.pairs == 1500 and dev.failed == 0
    rows = dict(dev.rows())
    lost = len(fail.split(",")) if fail else 0
    assert rows["devices_lost"] == str(lost)
    assert ("device:cpu" in rows) == (lost == 2)
    assert sum(int(v.split()[0]) for k, v in rows.items() if k.startswith("device:")) == 1500


def test_gpus_paths_need_no_dask(pair_inputs, tmp_path, monkeypatch):
    """--gpus runs without Dask's distributed installed: pairs through emulated devices, and search's chunks
    through device slots (an engine that tags each chunk), in order."""
    import sys
    import types

    import numpy as np

    from gpualign.engines import CpuEngine
    from gpualign.pipeline import run_pairs
    from gpualign.search.run import SearchSummary, _scanned

    monkeypatch.setitem(sys.modules, "distributed", None)  # (any import of it raises ImportError)
    monkeypatch.delitem(sys.modules, "gpualign.cluster_worker", raising=False)  # (imported again: it fails)
    with pytest.raises(ImportError):
        import distributed  # noqa: F401
    monkeypatch.setattr(stages, "select_engines", lambda cfg: ([CpuEngine(1), CpuEngine(1)], "stand-in"))
    monkeypatch.setattr(engines, "select_engines", lambda cfg: ([CpuEngine(1), CpuEngine(1)], "stand-in"))
    monkeypatch.setattr(devices, "present", lambda gpus: [0, 1])
    monkeypatch.setattr(devices, "on_device", emulated)
    a, b = str(pair_inputs / "a.fa"), str(pair_inputs / "b.fa")
    cfg = AlignConfig(device="cpu", threads=1, batch_bases=40_000)
    run_pairs(a, b, str(tmp_path / "one.paf"), None, cfg, "gpualign")
    run_pairs(a, b, str(tmp_path / "dev.paf"), None, cfg.with_(device="auto"), "gpualign",
              cluster=ClusterSpec(gpus="2"))
    assert (tmp_path / "one.paf").read_bytes() == (tmp_path / "dev.paf").read_bytes()

    class Tagger:
        name = "tagger"

        def search(self, chunk):
            time.sleep(0.001 * (chunk.i % 3))
            return ("cands", chunk.i)

    ds = DeviceSet([0, 1], lambda d: Tagger(), lambda e: None, context=emulated, units=("bases", "chunks"))
    ds.start()
    try:
        chunks = [types.SimpleNamespace(i=i, length=np.array([10, 5])) for i in range(12)]
        pats = types.SimpleNamespace(codes=[], pattern=np.zeros(0), minus=np.zeros(0))
        summary = SearchSummary()
        out = list(_scanned(iter(chunks), None, ds, pats, summary))
    finally:
        ds.close()
    assert [c.i for c, _ in out] == list(range(12)) and [x for _, (_, x) in out] == list(range(12))
    assert summary.engine == "tagger" and sum(int(v.split()[0]) for k, v in ds.rows() if k != "devices_lost") == 180


def test_gpus_without_a_gpu_is_a_clear_error(pair_inputs, tmp_path):
    from gpualign.gpu.kernels import gpu_status

    if gpu_status()[0]:
        pytest.skip("a GPU is present")
    out = tmp_path / "o.paf"
    p = run_cli("pairs", pair_inputs / "a.fa", pair_inputs / "b.fa", "--gpus", "2", "-o", out, text=True)
    assert p.returncode == 1 and "--gpus: no usable GPU" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not out.exists()


# -- on a GPU --------------------------------------------------------------------------------------------------

def _gpualign(*args, env=None):
    p = run_cli(*args, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    return p


def _body(path):
    return b"".join(x for x in path.read_bytes().splitlines(True) if not x.startswith(b"@PG"))


def _same_scores_valid_cigars(one, dev, a, b, metric):
    """Every PAF line of dev has one's names, lengths, coordinates and score (AS) and a CIGAR that spells its
    pair and costs that score (the CPU engine, which takes over once every device has left, may pick another
    optimal CIGAR: the matches, block length and NM may differ)."""
    import pysam

    from gpualign.cigar import check_cigar, consumed, from_text, score_cigar

    qs, ts = ([r.sequence.encode() for r in pysam.FastxFile(path)] for path in (a, b))
    pen = AlignConfig(metric=metric).effective_penalties
    rows = [(x.split("\t"), y.split("\t")) for x, y in zip(one.read_text().splitlines(), dev.read_text().splitlines())]
    assert len(rows) == len(qs) == len(one.read_text().splitlines()) == len(dev.read_text().splitlines())
    differ = 0
    for i, (x, y) in enumerate(rows):
        assert x[:9] + x[13:14] == y[:9] + y[13:14], (x, y)
        ops = from_text(y[14].removeprefix("cg:Z:"))
        check_cigar(qs[i], ts[i], ops)
        assert consumed(ops) == (len(qs[i]), len(ts[i]))
        assert score_cigar(ops, pen) == -int(y[13].removeprefix("AS:i:"))
        differ += x[14] != y[14]
    return differ


@pytest.mark.gpu
@pytest.mark.parametrize("gpus,fail", [("1", ""), ("0,0", ""), ("0,0", "0:1"), ("1", "0:1")])
def test_pairs_and_paf_on_this_hosts_gpus(pair_inputs, tmp_path, gpus, fail):
    """pairs (edit and affine) and paf with --gpus: the one-process GPU run's bytes; a lost device's batches
    go to the other slot (or the CPU) and the summary names it."""
    from sim_inputs import pairs_and_candidates

    a, b = str(pair_inputs / "a.fa"), str(pair_inputs / "b.fa")
    env = {devices.FAIL_ENV: fail} if fail else None
    for metric in ("edit", "affine"):
        args = ["--metric", metric, "--batch-bases", "60000"]
        _gpualign("pairs", a, b, "-o", tmp_path / "one.paf", *args, "-q")
        p = _gpualign("pairs", a, b, "-o", tmp_path / "dev.paf", *args, "--gpus", gpus, env=env)
        if gpus == "1" and fail:  # the rest on the CPU engine: the same scores, CIGARs checked
            _same_scores_valid_cigars(tmp_path / "one.paf", tmp_path / "dev.paf", a, b, metric)
            assert "device:cpu" in p.stderr
        else:
            assert (tmp_path / "one.paf").read_bytes() == (tmp_path / "dev.paf").read_bytes()
        assert "device slot(s) in this process" in p.stderr and "devices_lost" in p.stderr
        assert f"devices_lost {1 if fail else 0}" in " ".join(p.stderr.split())
    pairs_and_candidates(tmp_path, 400, 2000, 0.08, seed=4)
    cargs = [tmp_path / "c.paf", tmp_path / "a.fa", tmp_path / "b.fa", "--batch-bases", "200000"]
    _gpualign("paf", *cargs, "-o", tmp_path / "one_r.paf", "-q")
    _gpualign("paf", *cargs, "-o", tmp_path / "dev_r.paf", "--gpus", gpus, "-q", env=env)
    if not (gpus == "1" and fail):
        assert (tmp_path / "one_r.paf").read_bytes() == (tmp_path / "dev_r.paf").read_bytes()
    else:  # (on the CPU engine after the first batch: the same names, query coordinates and AS; the target's
        # free ends may be placed otherwise by another optimal alignment)
        rows = [[(c := ln.split("\t"))[:7] + [t for t in c if t.startswith("AS:i:")]
                 for ln in (tmp_path / n).read_text().splitlines()] for n in ("one_r.paf", "dev_r.paf")]
        assert rows[0] == rows[1] and len(rows[0]) > 300


@pytest.mark.gpu
@pytest.mark.parametrize("gpus,fail", [("1", ""), ("0,0", ""), ("0,0", "0:0")])
def test_genome_and_search_on_this_hosts_gpus(tmp_path, gpus, fail):
    """genome and search with --gpus: the one-process run's bytes. ("0,0", ""): two pairs side by side on one
    GPU, each kernel launched as if it had the GPU alone (what gpu_long.BP_DEAL must not hang on)."""
    from simulate import simulate, write_fasta

    env = {devices.FAIL_ENV: fail} if fail else None
    q, t = simulate(3, 150_000, 0.05, seed=5)
    write_fasta(str(tmp_path / "ga.fa"), q, "a")
    write_fasta(str(tmp_path / "gb.fa"), t, "b")
    _genome_same_bytes(tmp_path, gpus, env, 3)
    pats = simulate(40, 24, 0.0, seed=8)[0]
    write_fasta(str(tmp_path / "p.fa"), pats, "p")
    text = simulate(4, 400_000, 0.0, seed=9)[0]
    write_fasta(str(tmp_path / "t.fa"), text, "chr")
    args = [tmp_path / "p.fa", tmp_path / "t.fa", "-k", "3", "--chunk-bases", "100000"]
    for fmt in ("tsv", "sam"):
        _gpualign("search", *args, "-o", tmp_path / f"one.{fmt}", "--device", "gpu", "-q")
        p = _gpualign("search", *args, "-o", tmp_path / f"dev.{fmt}", "--gpus", gpus, env=env)
        assert _body(tmp_path / f"one.{fmt}") == _body(tmp_path / f"dev.{fmt}")
        assert "gpu-myers" in p.stderr and "device slot(s) in this process" in p.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("fail", ["", "0:0"])
def test_genome_one_pair_shared_by_two_slots(tmp_path, fail):
    """One record pair, --gpus 0,0: the pair shared by both slots (the bit-parallel halves, the levels and the
    leaves), the one-process run's bytes; slot 0 lost at the pair: slot 1 alone computes it again."""
    from simulate import simulate, write_fasta

    env = {devices.FAIL_ENV: fail} if fail else None
    q, t = simulate(1, 400_000, 0.15, seed=6)
    write_fasta(str(tmp_path / "ga.fa"), q, "a")
    write_fasta(str(tmp_path / "gb.fa"), t, "b")
    for err in _genome_same_bytes(tmp_path, "0,0", env, 1):
        assert "each pair shared by them all" in err
        assert f"devices_lost {1 if fail else 0}" in " ".join(err.split())


def _genome_same_bytes(tmp_path, gpus: str, env, pairs: int) -> list:
    """genome ga.fa gb.fa (PAF, and --distance-only TSV) in one process and with --gpus: the same bytes (the TSV
    but its seconds); the --gpus runs' stderr."""
    errs = []
    for extra, ext in (([], "paf"), (["--distance-only"], "tsv")):
        _gpualign("genome", tmp_path / "ga.fa", tmp_path / "gb.fa", "-o", tmp_path / f"g1.{ext}", "-q", *extra)
        p = _gpualign("genome", tmp_path / "ga.fa", tmp_path / "gb.fa", "-o", tmp_path / f"g2.{ext}", "--gpus",
                      gpus, *extra, env=env)
        errs.append(p.stderr)
        if ext == "paf":
            assert (tmp_path / "g1.paf").read_bytes() == (tmp_path / "g2.paf").read_bytes()
        else:  # (the seconds column differs)
            cols = [[ln.split("\t")[:6] for ln in (tmp_path / n).read_text().splitlines()]
                    for n in ("g1.tsv", "g2.tsv")]
            assert cols[0] == cols[1] and len(cols[0]) == pairs + 1
    return errs


def test_genome_slots_share_one_started_cpu_engine(monkeypatch):
    """genome_pair.device_set: each slot's leaf chain has GPU engines of its own and the one CPU rescue engine,
    started before the slots (not once per slot, late); closing closes each slot's GPU engines and the CPU
    engine once, after the slots. With --distance-only no leaf chain and no CPU engine."""
    from gpualign import genome_path
    from gpualign.genome_pair import device_set

    made = []

    class Fake:
        def __init__(self, kind):
            self.kind, self.started, self.closed = kind, 0, 0
            made.append(self)

        def start(self):
            self.started += 1

        def close(self):
            self.closed += 1

    monkeypatch.setattr(genome_path, "leaf_chain", lambda cfg: [Fake("gpu"), Fake("cpu")])
    ds = device_set(AlignConfig(), [0, 0, 1], context=emulated)
    cpu = made[-1]
    assert cpu.started == 1 and [m.kind for m in made] == ["gpu", "cpu"]
    ds.start()
    chains = [s.state[1] for s in ds.slots]
    assert all(c[-1] is cpu for c in chains) and len({id(c[0]) for c in chains}) == 3
    assert [s.state[2] for s in ds.slots] == [0, 0, 1] and cpu.closed == 0
    ds.close()
    assert all(c[0].closed == 1 for c in chains) and cpu.closed == 1 and cpu.started == 1
    made.clear()
    ds = device_set(AlignConfig(distance_only=True), [0], context=emulated)
    ds.start()
    assert ds.slots[0].state == ("gpu", [], 0) and made == []
    ds.close()


def test_kernel_functions_looked_up_once_per_device(monkeypatch):
    """gpu.kernels.Kernels: one lookup per name for a one-device holder; per_device (gpu/arrays.py's,
    module-wide): one per (current device, name), each device's own function."""
    import sys
    import types

    from gpualign.gpu.kernels import Kernels

    current = [0]
    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: current[0]))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    loads = []

    class Module:
        def __init__(self, device):
            self.device = device

        def get_function(self, name):
            return (self.device, name)

    def load(*spec):
        loads.append(spec)
        return Module(current[0])

    one = Kernels(("x.cu", ("f", "g"), ()), load)
    assert one("f") == (0, "f") and one("f") == (0, "f") and len(loads) == 1
    current[0] = 1
    assert one("f") == (0, "f") and len(loads) == 1  # (a one-device holder keeps its device's)
    many = Kernels(("x.cu", ("f", "g"), ()), load, per_device=True)
    assert many("f") == (1, "f") and many("g") == (1, "g")
    current[0] = 0
    assert many("f") == (0, "f") and many("f") == (0, "f")
    current[0] = 1
    assert many("f") == (1, "f") and len(loads) == 4
