"""Affine WFA on the GPU against parasail, WFA2-lib (CPU engine) and edlib: on the device (pytest -m gpu), and
with its kernels compiled for the CPU (tests/emu: "emu", CI) where a test's sizes allow."""

import emu
import numpy as np
import pytest

from gpualign import cigar as C
from gpualign.config import AlignConfig, Penalties
from gpualign.engines import CpuEngine
from gpualign.records import ENGINE_CODE, OK
from gpualign.route import run_chain
from oracles import affine, edit
from oracles import check_against as verify
from strategies import adversarial, to_batch

NO_CXX = pytest.mark.skipif(not emu.available(), reason="no g++ to compile the kernels for the CPU")
GPU_OR_EMU = [pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("emu", marks=NO_CXX)]
GPU = [pytest.param("gpu", marks=pytest.mark.gpu)]  # (sizes or threads the emulation does not take)

PENALTIES = [Penalties(4, 6, 2), Penalties(1, 0, 1), Penalties(3, 5, 1), Penalties(5, 1, 3), Penalties(2, 12, 1),
             Penalties(6, 2, 2)]


@pytest.fixture(scope="module")
def cpu():
    engine = CpuEngine(16)
    yield engine
    engine.close()


def affine_engine(kind: str, **kw):
    """The engine on the device (gpu) or with its kernels run on the CPU (emu)."""
    from gpualign.engines.gpu_affine import GpuAffineEngine

    return (GpuAffineEngine if kind == "gpu" else emu.emulated(GpuAffineEngine))(**kw)


@pytest.fixture(scope="module", params=GPU_OR_EMU)
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def gpu(kind):
    return affine_engine(kind)


def pairs_random(n_groups, per_group, seed, max_len=2000, max_rate=0.2, profile="uniform", min_len=1):
    from simulate import simulate

    rng = np.random.default_rng(seed)
    out = []
    for g in range(n_groups):
        ln = int(rng.integers(min_len, max_len + 1))
        q, t = simulate(per_group, ln, float(rng.uniform(0, max_rate)), seed=seed * 1000 + g, profile=profile)
        out += list(zip(q, t))
    return out


@pytest.mark.parametrize("pen", PENALTIES, ids=lambda p: f"{p.mismatch},{p.gap_open},{p.gap_extend}")
def test_random_pairs_vs_parasail(gpu, kind, pen):
    """Pairs up to 2 kbp, error 0-20%, uniform and indel-heavy: scores equal parasail's, CIGARs check (emulated:
    a tenth of them)."""
    if kind == "emu" and pen not in PENALTIES[:3]:
        pytest.skip("emulated on the first three penalty sets (CI's time)")
    per = 40 if kind == "gpu" else 3
    pairs = pairs_random(30, per, seed=pen.mismatch * 7 + pen.gap_open) + \
        pairs_random(10, per, seed=5, profile="long", max_len=1500)
    batch = to_batch(pairs)
    want = np.array([affine(q, t, pen) for q, t in pairs])
    for do in (False, True):
        cfg = AlignConfig(metric="affine", penalties=pen, distance_only=do)
        res = gpu.align(batch, cfg)
        verify(batch, res, cfg, want)
        assert (res.engine == ENGINE_CODE["gpu-affine"]).all()


@pytest.mark.parametrize("n_mm", [False, True], ids=["N-matches", "N-mismatch"])
def test_adversarial(gpu, cpu, n_mm):
    pairs = adversarial()
    batch = to_batch(pairs)
    for pen in PENALTIES[:3]:
        for do in (False, True):
            cfg = AlignConfig(metric="affine", penalties=pen, distance_only=do, n_mismatch=n_mm)
            want = np.array([affine(batch.query(i), batch.target(i), pen, n_mm) for i in range(batch.n)])
            res, _ = run_chain(batch, [gpu, cpu], cfg)
            verify(batch, res, cfg, want)


def test_long_pairs_vs_wfa2(gpu, kind, cpu):
    """10-50 kbp, long-read profile up to 15%: scores equal WFA2-lib's (CPU engine). Emulated: two pairs of
    33-34 kbp at up to 2% (beyond int16: the rings in device memory)."""
    if kind == "gpu":
        pairs = pairs_random(6, 3, seed=11, min_len=10_000, max_len=50_000, max_rate=0.15, profile="long")
    else:
        pairs = pairs_random(1, 2, seed=11, min_len=33_000, max_len=34_000, max_rate=0.02, profile="long")
    batch = to_batch(pairs)
    cfg = AlignConfig(metric="affine")
    want = cpu.align(batch, cfg).score
    res = gpu.align(batch, cfg)
    verify(batch, res, cfg, want, check_every=1)
    assert (res.engine == ENGINE_CODE["gpu-affine"]).all()


@pytest.mark.gpu
def test_edit_metric_beyond_ewfa(cpu):
    """Edit metric: pairs eWFA cannot hold (d > 128, length differences) go to the affine engine; edlib agrees."""
    from gpualign.engines import gpu_engines

    pairs = pairs_random(20, 20, seed=3, min_len=800, max_len=3000, max_rate=0.25)
    pairs += [(b"ACGT" * 300, b"ACGT" * 100), (b"A" * 2000, b"C" * 1500)]
    batch = to_batch(pairs)
    want = np.array([edit(q, t) for q, t in pairs])
    for do in (False, True):
        cfg = AlignConfig(distance_only=do)
        res, counts = run_chain(batch, [*gpu_engines(cfg), cpu], cfg)
        verify(batch, res, cfg, want)
        # every pair on the GPU but the last: 2,000 bp against 1,500 (d = 2,000) is beyond both levels
        assert counts.get("gpu-affine", 0) > 0 and counts.get("cpu-wfa", 0) == 1, counts


def test_forced_rescue(cpu, kind):
    """A tiny first level and a small second: escalation, then CPU rescue, all exact."""
    pairs = pairs_random(20, 25, seed=9, max_len=1500, max_rate=0.2)
    batch = to_batch(pairs)
    pen = Penalties()
    want = np.array([affine(q, t, pen) for q, t in pairs])
    for do in (False, True):
        cfg = AlignConfig(metric="affine", distance_only=do)
        res, counts = run_chain(batch, [affine_engine(kind, levels=(0.02, 0.08)), cpu], cfg)
        verify(batch, res, cfg, want)
        assert counts.get("gpu-affine:L0", 0) > 0 and counts.get("gpu-affine:L1", 0) > 0, counts
        assert counts.get("rescued", 0) > 0 and counts.get("cpu-wfa", 0) > 0, counts


@pytest.mark.gpu
def test_concurrent_threads(cpu):
    """Two threads aligning batches at once through one engine (as stages.stream does with
    `concurrent`), each batch's rings in shared memory beyond the default 48 KB with its own size (the
    function's cap is shared by the threads), both modes: scores equal WFA2-lib's, every CIGAR checks,
    and each thread's counts are its own call's."""
    from concurrent.futures import ThreadPoolExecutor

    from gpualign.engines.gpu_affine import GpuAffineEngine

    eng = GpuAffineEngine()
    assert eng.concurrent >= 2
    batches = [to_batch(pairs_random(1, 12, seed=40 + i, min_len=ln, max_len=ln, max_rate=0.12, profile="long"))
               for i, ln in enumerate((9_000, 16_000, 11_000, 14_000))]
    for ends_free in (False, True):
        cfg = AlignConfig(metric="affine", ends_free_target=ends_free)
        if ends_free:
            for b in batches:
                b.t_free = np.stack([np.minimum(b.t_len, 200), np.minimum(b.t_len, 200)], axis=1)
        want = [cpu.align(b, cfg).score for b in batches]

        def run(i):
            res = eng.align(batches[i], cfg)
            return res, dict(eng.last_counts)

        with ThreadPoolExecutor(2) as pool:
            for _ in range(2):
                outs = list(pool.map(run, range(len(batches))))
                for b, w, (res, counts) in zip(batches, want, outs):
                    verify(b, res, cfg, w)
                    assert sum(v for k, v in counts.items()) == b.n, counts


@pytest.mark.parametrize("kind", GPU, indirect=True)
def test_gpu_equals_cpu_many_pairs(gpu, cpu):
    """50,000 pairs of 100-1000 bp at up to 15%: GPU scores == CPU engine scores; CIGARs checked on a sample."""
    pairs = pairs_random(50, 1000, seed=21, max_len=1000, max_rate=0.15, min_len=100)
    batch = to_batch(pairs)
    cfg = AlignConfig(metric="affine")
    res = gpu.align(batch, cfg)
    ref = cpu.align(batch, cfg)
    assert (res.status == OK).all() and (ref.score == res.score).all()
    verify(batch, res, cfg, ref.score, check_every=97)


@pytest.mark.parametrize("kind", GPU, indirect=True)
def test_real_mito_windows(gpu, cpu, real_data):
    """Human vs orangutan mtDNA windows (real divergence, indels): GPU == WFA2-lib."""
    import os

    def read(name):
        return b"".join(x.strip().encode() for x in open(os.path.join(real_data, name)) if not x.startswith(">"))

    a, b = read("mtDNA_human_minimap2.fa"), read("mtDNA_orangutan.fa")
    rng = np.random.default_rng(2)
    pairs = []
    for _ in range(200):
        ln = int(rng.integers(200, 3000))
        s = int(rng.integers(0, min(len(a), len(b)) - ln))
        pairs.append((a[s:s + ln], b[s:s + ln + int(rng.integers(-20, 20))]))
    batch = to_batch(pairs)
    cfg = AlignConfig(metric="affine")
    ref = cpu.align(batch, cfg)
    res = gpu.align(batch, cfg)
    verify(batch, res, cfg, ref.score, check_every=1)


@pytest.mark.parametrize("metric", ["affine", "edit"])
def test_ends_free_bounded(gpu, cpu, metric):
    """Ends-free (query end to end, at most t_free target bases skipped at each end): scores equal the
    reference DP with those bounds and the CPU engine; the CIGAR spans [t_start, t_end) and checks."""
    from gpualign.engines import reference

    rng = np.random.default_rng(4)
    pairs, free = [], []
    for q, t in pairs_random(20, 15, seed=13, max_len=600, max_rate=0.15):
        lead = bytes(b"ACGT"[i] for i in rng.integers(0, 4, int(rng.integers(0, 60))))
        tail = bytes(b"ACGT"[i] for i in rng.integers(0, 4, int(rng.integers(0, 60))))
        pairs.append((q, lead + t + tail))
        free.append((int(rng.integers(0, 80)), int(rng.integers(0, 80))))
    pairs += [(b"", b"ACGT"), (b"ACGT", b""), (b"", b""), (b"ACGTACGT", b"TTTTACGTACGTTTTT")]
    free += [(4, 0), (3, 3), (0, 0), (4, 4)]
    batch = to_batch(pairs)
    batch.t_free = np.array(free, dtype=np.int64)
    pen = Penalties(4, 6, 2) if metric == "affine" else Penalties(1, 0, 1)
    want = np.array([reference.affine_score(q, t, pen, False, fb, fe) for (q, t), (fb, fe) in zip(pairs, free)])
    for do in (False, True):
        cfg = AlignConfig(metric=metric, penalties=pen, ends_free_target=True, distance_only=do)
        res = gpu.align(batch, cfg)
        assert (res.status == OK).all() and (res.score == want).all(), np.nonzero(res.score != want)
        assert (cpu.align(batch, cfg).score == want).all()
        if do:
            continue
        for i in range(batch.n):
            ops = res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]]
            t0, t1 = int(res.t_start[i]), int(res.t_end[i])
            assert 0 <= t0 <= free[i][0] and len(pairs[i][1]) - free[i][1] <= t1 <= len(pairs[i][1])
            C.check_cigar(batch.query(i), batch.target(i)[t0:t1], ops)
            assert C.score_cigar(ops, pen) == want[i]


@pytest.mark.parametrize("ends_free", [False, True], ids=["global", "ends-free"])
@pytest.mark.parametrize("pen", PENALTIES[:4], ids=lambda p: f"{p.mismatch},{p.gap_open},{p.gap_extend}")
def test_estimated_caps_at_the_score(cpu, kind, pen, ends_free):
    """The pruned level with every pair's cap set to its exact score finds every pair (no cell of an
    optimal path is pruned); one below it finds none (they go on to level E2, the levels and the CPU): scores
    exact either way."""
    from gpualign.engines import reference
    from gpualign.engines.affine_plan import reduced

    if kind == "emu" and pen not in PENALTIES[:2]:
        pytest.skip("emulated on the first two penalty sets (CI's time)")
    per = 20 if kind == "gpu" else 6
    pairs = pairs_random(12, per, seed=31 + pen.gap_open, max_len=900, max_rate=0.2) + \
        pairs_random(4, per, seed=32, profile="long", max_len=900)
    pairs += [(b"", b"ACGT"), (b"ACGT", b""), (b"", b""), (b"ACGTACGT", b"ACGTACGT"), (b"A" * 300, b"C" * 200)]
    batch = to_batch(pairs)
    free = None
    if ends_free:
        rng = np.random.default_rng(8)
        free = rng.integers(0, 60, (batch.n, 2))
        batch.t_free = free
        want = np.array([reference.affine_score(q, t, pen, False, int(a), int(b))
                         for (q, t), (a, b) in zip(pairs, free)])
    else:
        want = np.array([affine(q, t, pen) for q, t in pairs])
    _, g = reduced(pen.mismatch, pen.gap_open, pen.gap_extend)
    for do in (False, True):
        cfg = AlignConfig(metric="affine", penalties=pen, distance_only=do, ends_free_target=ends_free)
        for delta, n_est in ((0, batch.n), (-1, int((want == 0).sum()))):
            eng = affine_engine(kind, estimate_min=1)
            eng.tune["caps"] = want // g + delta
            res, counts = run_chain(batch, [eng, cpu], cfg)
            assert (res.status == OK).all() and (res.score == want).all(), np.nonzero(res.score != want)
            assert counts.get("gpu-affine:E", 0) == n_est, (delta, counts)
            if not do and not ends_free:
                verify(batch, res, cfg, want, check_every=1)
            elif not do:
                for i in range(batch.n):
                    ops = res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]]
                    C.check_cigar(batch.query(i), batch.target(i)[res.t_start[i]:res.t_end[i]], ops)
                    assert C.score_cigar(ops, pen) == want[i]


@pytest.mark.parametrize("where", ["E2", "L0"])
@pytest.mark.parametrize("ends_free", [False, True], ids=["global", "ends-free"])
def test_rescue_of_groups_merged(cpu, kind, ends_free, where):
    """The pairs that the estimated levels of several length groups leave (every 7th pair here, its cap
    below its score) run at level E2 (RAISED times their caps) in one launch, not one per group, and those
    above that too (where="L0": caps under half the score) at level 0 in one launch: scores and CIGARs
    exact either way."""
    from gpualign.engines import reference
    from gpualign.engines.affine_plan import RAISED, length_groups, reduced

    pen = Penalties(4, 6, 2)
    pairs = pairs_random(6, 30 if kind == "gpu" else 10, seed=77, max_len=3000, max_rate=0.15, min_len=100)
    batch = to_batch(pairs)
    n_groups = len(length_groups(np.maximum(batch.q_len, batch.t_len)))
    assert n_groups >= 3
    if ends_free:
        batch.t_free = np.random.default_rng(9).integers(0, 50, (batch.n, 2))
        want = np.array([reference.affine_score(q, t, pen, False, int(a), int(b))
                         for (q, t), (a, b) in zip(pairs, batch.t_free)])
    else:
        want = np.array([affine(q, t, pen) for q, t in pairs])
    _, g = reduced(pen.mismatch, pen.gap_open, pen.gap_extend)
    s = want // g
    low = (np.arange(batch.n) % 7 == 3) & (s >= 3)
    caps = np.where(low, s - 1 if where == "E2" else (s - 1) // 2, s)
    assert (np.ceil(RAISED * caps[low]) >= s[low] if where == "E2" else np.ceil(RAISED * caps[low]) < s[low]).all()
    eng = affine_engine(kind, estimate_min=1)
    eng.tune["caps"] = caps
    if kind == "emu":  # (an H100's SMs: the emulation's two would not take the merged launch in one wave)
        eng._module()
        eng._sms = 132
    launches = []
    launch = eng._launch

    def counted(plan, p, d_raw, d_meta, d_free, ids, *rest):
        launches.append((len(rest) > 1 and rest[1] is not None, len(ids)))
        return launch(plan, p, d_raw, d_meta, d_free, ids, *rest)

    eng._launch = counted
    cfg = AlignConfig(metric="affine", penalties=pen, ends_free_target=ends_free)
    res, counts = run_chain(batch, [eng, cpu], cfg)
    assert (res.status == OK).all() and (res.score == want).all(), np.nonzero(res.score != want)
    pruned = [n for est, n in launches if est]
    assert len(pruned) == n_groups + 1 and pruned[-1] == low.sum(), launches  # level E per group, then E2
    assert counts.get("gpu-affine:E2", 0) == (low.sum() if where == "E2" else 0), counts
    assert [n for est, n in launches if not est] == ([] if where == "E2" else [int(low.sum())]), launches
    assert counts.get("gpu-affine:L0", 0) == (0 if where == "E2" else low.sum()), counts
    for i in range(batch.n):
        ops = res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]]
        t0, t1 = (int(res.t_start[i]), int(res.t_end[i])) if ends_free else (0, len(pairs[i][1]))
        C.check_cigar(pairs[i][0], pairs[i][1][t0:t1], ops)
        assert C.score_cigar(ops, pen) == want[i]


@pytest.mark.parametrize("pen", PENALTIES[:3], ids=lambda p: f"{p.mismatch},{p.gap_open},{p.gap_extend}")
def test_estimated_caps_from_sample(kind, pen):
    """Groups of every size take the sampled estimate (estimate_min=1): scores equal parasail's and
    most pairs finish at the estimated level (emulated: a fifth of the pairs)."""
    per = 200 if kind == "gpu" else 40
    pairs = pairs_random(8, per, seed=41 + pen.mismatch, max_len=1500, max_rate=0.15, min_len=200) + \
        pairs_random(4, per // 2, seed=43, profile="long", max_len=1500, min_len=200)
    batch = to_batch(pairs)
    want = np.array([affine(q, t, pen) for q, t in pairs])
    for do in (False, True):
        cfg = AlignConfig(metric="affine", penalties=pen, distance_only=do)
        eng = affine_engine(kind, estimate_min=1)
        res = eng.align(batch, cfg)
        verify(batch, res, cfg, want)
        assert eng.last_counts.get("gpu-affine:E", 0) > batch.n // 2, eng.last_counts


@pytest.mark.parametrize("ends_free", [False, True], ids=["global", "ends-free"])
def test_estimate_carried_across_batches(monkeypatch, kind, ends_free):
    """Once the engine has seen enough pairs of a setting and length class, later batches take their caps
    from those pairs' rates (no sample run): scores still equal parasail's / the reference DP, most pairs
    finish at the estimated level, and a batch far noisier than the history stays exact (its pairs
    exceed the carried caps and go on to level E2 and the levels). Emulated: pairs of 400 bp, not 1,500."""
    import gpualign.engines.gpu_affine as GA
    from gpualign.engines import reference

    monkeypatch.setattr(GA, "HISTORY_MIN", 100)
    pen = Penalties(4, 6, 2)
    cfg = AlignConfig(metric="affine", penalties=pen, ends_free_target=ends_free)
    eng = affine_engine(kind, estimate_min=1)
    rng = np.random.default_rng(5)
    for rate, seed in ((0.05, 1), (0.05, 2), (0.05, 3), (0.25, 4)):
        from simulate import simulate

        q, t = simulate(150, 1500 if kind == "gpu" else 400, rate, seed=seed)
        batch = to_batch(list(zip(q, t)))
        longest = np.maximum(batch.q_len, batch.t_len)
        # one length class: one history
        assert int(longest.min() - 1).bit_length() == int(longest.max() - 1).bit_length()
        if ends_free:
            batch.t_free = rng.integers(0, 40, (batch.n, 2))
            want = np.array([reference.affine_score(a, b, pen, False, int(f0), int(f1))
                             for a, b, (f0, f1) in zip(q, t, batch.t_free)])
        else:
            want = np.array([affine(a, b, pen) for a, b in zip(q, t)])
        res = eng.align(batch, cfg)
        assert (res.status == OK).all() and (res.score == want).all(), np.nonzero(res.score != want)
        for i in range(0, batch.n, 7):
            ops = res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]]
            t0, t1 = (int(res.t_start[i]), int(res.t_end[i])) if ends_free else (0, len(t[i]))
            C.check_cigar(q[i], t[i][t0:t1], ops)
            assert C.score_cigar(ops, pen) == want[i]
        if seed == 1:
            assert eng.last_sampled > 0
        else:  # the history (150 pairs or more) serves
            assert eng.last_sampled == 0, seed
        if rate < 0.1:
            assert eng.last_counts.get("gpu-affine:E", 0) > batch.n // 2, eng.last_counts


def test_device_cigar_text_equals_host(gpu, kind):
    """The CIGAR text and counts the engine makes on the device (AlignBatch.cigar_text / cigar_stats)
    equal what the writers derive from the ops on the host; writers given either write the same bytes."""
    import io

    from gpualign.output.paf import PafWriter

    rng = np.random.default_rng(3)
    long_gap = (b"ACGT" * 700, b"ACGT" * 150 + b"ACGT" * 400)  # a 600-base deletion: 3-digit ops
    big = bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), 4000))
    pairs = pairs_random(6, 30 if kind == "gpu" else 6, seed=9, max_len=3000, max_rate=0.2, profile="long") + \
        adversarial() + \
        [long_gap, (big, big[:1000] + big[2500:]), (big, big), (b"", b"ACG"), (b"ACG", b"")]
    batch = to_batch(pairs)
    res = gpu.align(batch, AlignConfig(metric="affine"))
    assert res.cigar_text is not None and res.cigar_stats is not None
    buf, start, length = C.to_text_buffer(res.cigar, res.cigar_off, res.cigar_len)
    dbuf, dstart, dlength = res.cigar_text
    assert (dlength == length).all()
    assert C.text_list(dbuf, dstart, dlength) == C.text_list(buf, start, length)
    assert max(len(t) for t in C.text_list(dbuf, dstart, dlength)) > 0
    assert (res.cigar_len > 0).sum() > batch.n // 2
    tot = C.op_totals(res.cigar, res.cigar_off, res.cigar_len)
    for k, key in enumerate(("matches", "mismatches", "ins", "dels")):
        assert (res.cigar_stats[:, k] == tot[key]).all(), key
    assert (res.cigar_stats[:, 4] == C.gap_opens(res.cigar, res.cigar_off, res.cigar_len)).all()
    assert (res.cigar >> 4).max() >= 600
    outs = []
    for r in (res, res.take(np.arange(batch.n))):  # take() leaves the device text out: host path
        assert (r.cigar_text is None) == (r is not res)
        sink = io.BytesIO()
        PafWriter(sink).write(batch, r)
        outs.append(sink.getvalue())
    assert outs[0] == outs[1] and len(outs[0]) > 0
