"""eWFA on the GPU against edlib and the CPU engine: on the device (pytest -m gpu), and with its kernels compiled for
the CPU (tests/emu: "emu", CI) on fewer pairs."""

import emu
import numpy as np
import pytest

from cli_helper import run_cli
from gpualign.config import AlignConfig
from gpualign.engines import CpuEngine
from gpualign.records import ENGINE_CODE
from gpualign.route import run_chain
from oracles import check_against, edit
from strategies import adversarial, to_batch

NO_CXX = pytest.mark.skipif(not emu.available(), reason="no g++ to compile the kernels for the CPU")


@pytest.fixture(scope="module")
def cpu():
    engine = CpuEngine(16)
    yield engine
    engine.close()


def edit_engine(kind: str, **kw):
    """The engine on the device (gpu) or with its kernels run on the CPU (emu)."""
    from gpualign.engines.gpu_edit import GpuEditEngine

    return (GpuEditEngine if kind == "gpu" else emu.emulated(GpuEditEngine))(**kw)


@pytest.fixture(scope="module", params=[pytest.param(("gpu", "auto"), marks=pytest.mark.gpu, id="gpu-auto"),
                                        pytest.param(("gpu", "E32"), marks=pytest.mark.gpu, id="gpu-E32"),
                                        pytest.param(("emu", "auto"), marks=NO_CXX, id="emu-auto"),
                                        pytest.param(("emu", "E32"), marks=NO_CXX, id="emu-E32")])
def chain(request, cpu):
    """The GPU engine with its sampled start level, and forced to start at E32 (every level runs)."""
    kind, start = request.param
    return [edit_engine(kind, first_level=None if start == "auto" else 32), cpu]


def scale(chain, n: int) -> int:
    """n pairs on the device, a fiftieth emulated (at least 10)."""
    return n if not type(chain[0]).__name__.startswith("Emulated") else max(10, n // 50)


def random_pairs(n_groups, per_group, seed, max_len=2000, max_rate=0.15, with_n=False):
    from simulate import simulate

    rng = np.random.default_rng(seed)
    pairs = []
    for g in range(n_groups):
        ln = int(rng.integers(1, max_len + 1))
        rate = float(rng.uniform(0, max_rate))
        q, t = simulate(per_group, ln, rate, seed=seed * 1000 + g)
        if with_n:
            q = [x[: len(x) // 3] + b"N" * min(7, len(x)) + x[len(x) // 3 + 7:] if len(x) > 10 else x for x in q]
            t = [x.lower() if i % 2 else x for i, x in enumerate(t)]
        pairs += list(zip(q, t))
    return pairs


def verify(batch, res, cfg, cpu_res=None, check_every=1):
    want = np.array([edit(batch.query(i), batch.target(i), cfg.n_mismatch) for i in range(batch.n)])
    check_against(batch, res, cfg, want, check_every)
    if cpu_res is not None:
        assert (cpu_res.score == res.score).all()


@pytest.mark.parametrize("cfg", [AlignConfig(), AlignConfig(distance_only=True)], ids=["cigar", "distance"])
def test_adversarial(chain, cfg):
    for n_mm in (False, True):
        c = cfg.with_(n_mismatch=n_mm)
        batch = to_batch(adversarial())
        res, _ = run_chain(batch, chain, c)
        verify(batch, res, c)


@pytest.mark.parametrize("cfg", [AlignConfig(), AlignConfig(distance_only=True)], ids=["cigar", "distance"])
def test_100k_random_pairs(chain, cfg):
    batch = to_batch(random_pairs(100, scale(chain, 1000), seed=7))
    res, counts = run_chain(batch, chain, cfg)
    verify(batch, res, cfg, run_chain(batch, chain[1:], cfg)[0])
    # every level and the CPU rescue were exercised
    levels = {k.split("-bytes")[0] for k in counts if k.startswith("gpu-edit:E")}
    if chain[0].first_level == 32:  # escalation through every level
        assert levels >= {"gpu-edit:E32", "gpu-edit:E128"} | ({"gpu-edit:E64"} if not cfg.distance_only else set()), counts
    if not cfg.distance_only:  # 2 kbp at 15% is beyond E128: rescued by the CPU engine
        assert counts.get("rescued", 0) > 0 and counts.get("cpu-wfa", 0) > 0, counts
    assert (res.engine == ENGINE_CODE["gpu-edit"]).sum() > 0.5 * batch.n


@pytest.mark.parametrize("n_mm", [False, True], ids=["N-matches", "N-mismatch"])
def test_100k_pairs_with_n_and_lowercase(chain, n_mm):
    cfg = AlignConfig(n_mismatch=n_mm)
    batch = to_batch(random_pairs(100, scale(chain, 1000), seed=8, with_n=True))
    res, counts = run_chain(batch, chain, cfg)
    verify(batch, res, cfg, check_every=3)
    assert any(k.endswith("-bytes") for k in counts), counts


def test_threshold_at_level_bounds(chain):
    """d = E-1, E, E+1 at every level: the boundary between levels and the rescue path."""
    pairs = []
    for e in (32, 64, 128):
        for d in (e - 1, e, e + 1):
            pairs.append((b"A" * 300, b"A" * (300 - d)))  # exactly d deletions
            pairs.append((b"AC" * 150, b"AC" * 150 + b"G" * d))
            q = bytearray(b"ACGT" * 100)
            for j in range(d):
                q[j * 3] = ord("T") if q[j * 3] != ord("T") else ord("A")
            pairs.append((bytes(q), b"ACGT" * 100))
            alt = bytearray(b"A" * 400)  # =X=X...X=: d mismatches make 2d + 1 CIGAR runs, the most a slot holds
            for j in range(d):
                alt[2 * j + 1] = ord("C")
            pairs.append((bytes(alt), b"A" * 400))
    batch = to_batch(pairs)
    for cfg in (AlignConfig(), AlignConfig(distance_only=True)):
        res, counts = run_chain(batch, chain, cfg)
        verify(batch, res, cfg)
        if chain[0].first_level == 32 and not cfg.distance_only:
            assert {"gpu-edit:E32", "gpu-edit:E64", "gpu-edit:E128", "cpu-wfa"} <= set(counts), counts


def test_real_reads_against_virus(chain, real_data):
    """Real Illumina reads (72 nt) against the DWV genome windows they come from, via mappy-free slicing."""
    import gzip
    import os

    real = real_data
    reads = []
    with gzip.open(os.path.join(real, "reads_honeybee_virus_Illumina_SRR059298_subset.fastq.gz"), "rt") as fh:
        for i, line in enumerate(fh):
            if i % 4 == 1:
                reads.append(line.strip().encode())
            if len(reads) >= scale(chain, 20000):
                break
    genome = b"".join(x.strip().encode() for x in open(os.path.join(real, "virus_DWV_NC_004830.fa")) if not x.startswith(">"))
    rng = np.random.default_rng(1)
    starts = rng.integers(0, len(genome) - 80, len(reads))
    pairs = [(r, genome[s: s + len(r)]) for r, s in zip(reads, starts)]
    batch = to_batch(pairs)
    cfg = AlignConfig()
    res, _ = run_chain(batch, chain, cfg)
    verify(batch, res, cfg, check_every=5)


@pytest.mark.gpu
def test_cli_gpu_equals_cpu(root, tmp_path):
    """`gpualign pairs --device gpu` end to end: same scores as the CPU engine, valid CIGARs, GPU routes."""
    import os

    a, b = (os.path.join(root, "data", "demo", f) for f in ("a.fa", "b.fa"))
    outs = {}
    for dev in ("gpu", "cpu"):
        summ = tmp_path / f"{dev}.tsv"
        p = run_cli("pairs", a, b, "--device", dev, "--format", "tsv", "--summary", summ, "--verify", "1")
        assert p.returncode == 0, p.stderr.decode()
        outs[dev] = [line.split("\t") for line in p.stdout.decode().splitlines()[1:]]
        rows = dict(line.split("\t") for line in summ.read_text().splitlines()[1:])
        assert rows["recall"] == "100.0000%"
        if dev == "gpu":
            assert int(rows.get("route:gpu-edit", 0)) > 0 and "gpu-edit" in p.stderr.decode()
    assert [r[4] for r in outs["gpu"]] == [r[4] for r in outs["cpu"]]
    for r in outs["gpu"]:
        assert r[7] == "ok"


@pytest.mark.parametrize("memory", ["pinned", "pageable", "device"])
@pytest.mark.parametrize("metric", ["edit", "affine"])
@pytest.mark.gpu
def test_prefetched_batches(cpu, metric, memory):
    """Batches uploaded ahead on the copy stream (as stages.stream does) while the one before aligns,
    one prefetched and never aligned, and --n-mismatch (not prefetched): the same scores as the CPU.
    Pageable batches (as `gpualign paf` makes them) go through the staging buffers, more batches than
    there are buffers; batches already on the device (as io/fastx_device.py makes them) send their rows
    alone."""
    import cupy

    from gpualign import pack
    from gpualign.engines import gpu_engines, host_allocator
    from gpualign.gpu.staging import raw_size
    from gpualign.records import PairBatch
    from gpualign.route import prefetch

    cfg = AlignConfig(metric=metric)
    chain = [*gpu_engines(cfg), cpu]
    alloc = np.empty if memory == "pageable" else host_allocator(chain)
    pairs = [(pack.fold(q), pack.fold(t)) for q, t in random_pairs(12, 500, seed=11, max_len=600, with_n=True)]
    batches = [PairBatch.from_sequences([q for q, _ in pairs[i:i + 1000]], [t for _, t in pairs[i:i + 1000]], alloc=alloc)
               for i in range(0, len(pairs), 1000)]
    for b in batches if memory == "device" else []:  # (the reader's layout: the bytes, zeros to raw_size)
        b.device = cupy.zeros(raw_size(len(b.seq)), cupy.uint8)
        b.device[:len(b.seq)].set(b.seq)
    for c in (cfg, cfg.with_(n_mismatch=True)):
        prefetch(batches[0], chain, c)
        if not c.n_mismatch:  # (its rows, or all of it, on their way: taken by upload)
            assert id(batches[0]) in chain[0]._staging._ahead
        prefetch(batches[-1], chain, c)  # never aligned in this round: dropped when newer ones come
        for i, b in enumerate(batches[:-1]):
            if i + 1 < len(batches) - 1:
                prefetch(batches[i + 1], chain, c)
            res, _ = run_chain(b, chain, c)
            want = run_chain(b, [cpu], c.with_(distance_only=True))[0]
            assert (res.status == 0).all() and (res.score == want.score).all()
            if metric == "edit":
                verify(b, res, c, check_every=7)


@pytest.mark.parametrize("kind", [pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("emu", marks=NO_CXX)])
def test_start_level_learnt_between_samples(cpu, kind):
    """Batches after a sampled one start where the batch before them would have (gpu_edit.next_level), a
    sample again every SAMPLE_EVERY batches: exact through a shift from close pairs to distant ones and
    back, the shift up followed at once, and one sampled launch (distance only) in SAMPLE_EVERY batches."""
    from gpualign.engines import gpu_edit
    from simulate import simulate

    eng = edit_engine(kind)
    eng.start()
    cfg = AlignConfig()
    samples, real = [], eng._run_level

    def spy(e, dev, ids, nl, want_cigar):
        if not want_cigar:
            samples.append(nl)
        return real(e, dev, ids, nl, want_cigar)

    eng._run_level = spy
    firsts = []
    for i, (ln, rate) in enumerate([(150, 0.02)] * 5 + [(300, 0.15)] * 4 + [(150, 0.02)] * 3):
        q, t = simulate(3000 if kind == "gpu" else 1100, ln, rate, seed=100 + i)
        batch = to_batch(list(zip(q, t)))
        res, _ = run_chain(batch, [eng, cpu], cfg)
        verify(batch, res, cfg)
        firsts.append(eng._start[gpu_edit.CIGAR_LEVELS][0])
    assert samples == [1024, 1024]  # batches 0 and SAMPLE_EVERY (gpu_edit.SAMPLE_EVERY = 8)
    assert firsts[:5] == [32] * 5 and firsts[5] > 32  # (150 bp at 2%: 3 edits; 300 bp at 15%: 45)


@pytest.mark.parametrize("kind", [pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("emu", marks=NO_CXX)])
def test_tiny_batches(kind):
    """Batches of no pair and of one (aligned, and beyond every level), with CIGARs and scores only."""
    from gpualign.records import EXCEEDED, OK

    eng = edit_engine(kind)
    far = (b"A" * 600, b"C" * 600)  # 600 edits: beyond E128 (and E512 scores only)
    for cfg in (AlignConfig(), AlignConfig(distance_only=True)):
        assert eng.align(to_batch([]), cfg).n == 0
        one = to_batch([(b"ACGTACGTTT", b"ACGACGTTTA")])
        res = eng.align(one, cfg)
        verify(one, res, cfg)
        res = eng.align(to_batch([far]), cfg)
        assert res.status[0] == EXCEEDED and not res.reason
        res = eng.align(to_batch([far, (b"ACGT", b"ACGT")]), cfg)
        assert list(res.status) == [EXCEEDED, OK] and res.score[1] == 0


def scale_n(kind: str, n: int) -> int:
    """n pairs on the device, a thirtieth emulated (at least 5)."""
    return n if kind == "gpu" else max(5, n // 30)


def _device_text_checks(res) -> None:
    """The CIGARs' text and counts made on the device (AlignBatch.device_cigar, and the host's copy of them)
    equal what the writers derive from the ops on the host."""
    from gpualign import cigar as C
    from test_dp import writers_text

    res.cigar_text  # noqa: B018 - (the deferred copies: brought over now)
    assert writers_text(res)
    dev = res.device_cigar
    host = [a.get() if hasattr(a, "get") else np.asarray(a) for a in (dev[k] for k in ("text", "start", "length"))]
    assert C.text_list(*host) == \
        C.to_text(res.cigar, res.cigar_off, res.cigar_len)


@pytest.mark.parametrize("kind", [pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("emu", marks=NO_CXX)])
def test_every_level_in_one_batch(kind):
    """One batch whose pairs end at every level and beyond (from E32 up): scores as edlib's, CIGARs checked,
    the device's text as the host's, exceeded pairs without ops; scores only likewise."""
    from simulate import simulate

    from gpualign.records import EXCEEDED, OK

    pairs = []
    for i, rate in enumerate((0.0, 0.02, 0.08, 0.15, 0.3, 0.5)):  # 400 bp: 0 to ~200 edits
        q, t = simulate(scale_n(kind, 300), 400, rate, seed=70 + i)
        pairs += list(zip(q, t))
    batch = to_batch([pairs[i] for i in np.random.default_rng(7).permutation(len(pairs))])
    want = np.array([edit(batch.query(i), batch.target(i), False) for i in range(batch.n)])
    for cfg in (AlignConfig(), AlignConfig(distance_only=True)):
        eng = edit_engine(kind, first_level=32)
        res = eng.align(batch, cfg)
        ok = res.status == OK
        assert (ok == (want <= (128 if not cfg.distance_only else 512))).all()
        assert (res.status[~ok] == EXCEEDED).all() and (res.score[ok] == want[ok]).all()
        assert len({k.split("-bytes")[0] for k in eng.last_counts}) == 3, eng.last_counts
        if not cfg.distance_only:
            assert (res.cigar_len[~ok] == 0).all()
            check_against(batch.take(np.nonzero(ok)[0]), res.take(np.nonzero(ok)[0]), cfg, want[ok], 5)
            _device_text_checks(res)


@pytest.mark.parametrize("kind", [pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("emu", marks=NO_CXX)])
@pytest.mark.parametrize("d", [31, 32, 60, 64])
def test_cigars_that_fill_their_slots(kind, d):
    """=X=X...X=: d mismatches make 2d + 1 runs, all of a slot at d = E (the ops kept where they were
    gathered, not compacted: their total is over half the room)."""
    alt = bytearray(b"A" * 400)
    for j in range(d):
        alt[2 * j + 1] = ord("C")
    batch = to_batch([(bytes(alt), b"A" * 400)] * 3)
    cfg = AlignConfig()
    res = edit_engine(kind, first_level=32).align(batch, cfg)
    verify(batch, res, cfg)
    assert (res.cigar_len == 2 * d + 1).all()
    _device_text_checks(res)
