"""Every engine against independent oracles (edlib, parasail) with every CIGAR checked.

The ``engine`` fixture runs the same bodies on the CPU engine and (marked gpu,
skipped without one) on each GPU engine.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpualign.config import AlignConfig, Penalties
from gpualign.engines import CpuEngine, gpu_engines
from gpualign.route import run_chain
from oracles import check_results
from strategies import adversarial, batches, to_batch

CONFIGS = [
    AlignConfig(),
    AlignConfig(n_mismatch=True),
    AlignConfig(metric="affine"),
    AlignConfig(metric="affine", penalties=Penalties(3, 5, 1), n_mismatch=True),
]


def _engines():
    yield pytest.param("cpu1", id="cpu-1proc")
    yield pytest.param("cpu2", id="cpu-2proc")
    yield pytest.param("gpu", id="gpu", marks=pytest.mark.gpu)


@pytest.fixture(params=list(_engines()))
def chain(request):
    if request.param == "gpu":
        gpus = gpu_engines(AlignConfig())
        if not gpus:
            pytest.skip("no GPU engine")
        engines = [*gpus, CpuEngine(1)]
    else:
        engines = [CpuEngine(1 if request.param == "cpu1" else 2, inline_bases=0)]
    yield engines
    for e in engines:
        e.close()


def _run(chain, batch, cfg):
    res, counts = run_chain(batch, chain, cfg)
    return res, counts


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.metric}{'-N' if c.n_mismatch else ''}")
def test_adversarial(chain, cfg):
    batch = to_batch(adversarial())
    res, _ = _run(chain, batch, cfg)
    check_results(batch, res, cfg)
    dist, _ = _run(chain, batch, cfg.with_(distance_only=True))
    assert not dist.has_cigar and len(dist.cigar) == 0
    assert dist.score.tolist() == res.score.tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(batches(max_pairs=15, max_len=400), st.sampled_from(CONFIGS))
def test_random_batches(chain, pairs, cfg):
    batch = to_batch(pairs)
    res, _ = _run(chain, batch, cfg)
    check_results(batch, res, cfg)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches(max_pairs=8, max_len=120, alphabet=b"ACGTNacgtnRY"), st.integers(1, 7), st.integers(0, 9),
       st.integers(1, 5), st.booleans())
def test_random_penalties_and_iupac(chain, pairs, x, o, e, n_mismatch):
    cfg = AlignConfig(metric="affine", penalties=Penalties(x, o, e), n_mismatch=n_mismatch)
    batch = to_batch(pairs)
    res, _ = _run(chain, batch, cfg)
    check_results(batch, res, cfg)


def test_insertion_and_deletion_orientation(chain):
    # a query with one extra base gives 1I; a query missing a base gives 1D (SAM)
    batch = to_batch([(b"ACGTTACGT", b"ACGTACGT"), (b"ACGACGT", b"ACGTACGT")])
    for cfg in (AlignConfig(), AlignConfig(metric="affine")):
        res, _ = _run(chain, batch, cfg)
        ops = [res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]] for i in range(2)]
        assert [int(o[(o & 15) == 1].sum() >> 4 if ((o & 15) == 1).any() else 0) for o in ops] == [1, 0]
        assert [int(((o & 15) == 2).sum()) for o in ops] == [0, 1]


def test_simulated_sets(chain):
    from simulate import simulate

    for n, ln, rate, prof in ((200, 150, 0.02, "uniform"), (40, 1000, 0.10, "uniform"), (10, 3000, 0.12, "long")):
        q, t = simulate(n, ln, rate, seed=ln, profile=prof)
        batch = to_batch(list(zip(q, t)))
        for cfg in (AlignConfig(), AlignConfig(metric="affine")):
            res, _ = _run(chain, batch, cfg)
            check_results(batch, res, cfg)


def test_real_sequences(chain, real_data):
    """Real genomes: human vs orangutan mtDNA windows, DWV vs VDV1 virus windows."""
    import os

    import pysam

    real = real_data
    seq = {}
    for f in ("mtDNA_human_minimap2.fa", "mtDNA_orangutan.fa", "virus_DWV_NC_004830.fa", "virus_VDV1_NC_006494.fa"):
        with pysam.FastxFile(os.path.join(real, f)) as fh:
            seq[f] = next(iter(fh)).sequence.encode()
    pairs = []
    for a, b in (("mtDNA_human_minimap2.fa", "mtDNA_orangutan.fa"), ("virus_DWV_NC_004830.fa", "virus_VDV1_NC_006494.fa")):
        for start in range(0, 8000, 1000):
            pairs.append((seq[a][start:start + 700], seq[b][start:start + 700]))
    batch = to_batch(pairs)
    for cfg in (AlignConfig(), AlignConfig(metric="affine")):
        res, _ = _run(chain, batch, cfg)
        check_results(batch, res, cfg)
    assert np.all(res.score > 0)


def test_long_pairs_take_biwfa_and_stay_exact(chain):
    """Pairs over 10 kbp use WFA2-lib's BiWFA on the CPU: scores and CIGARs judged like all others."""
    from simulate import simulate

    q, t = simulate(2, 12_000, 0.08, seed=12, profile="long")
    batch = to_batch(list(zip(q, t)))
    for cfg in (AlignConfig(), AlignConfig(metric="affine")):
        res, _ = _run(chain, batch, cfg)
        check_results(batch, res, cfg)


def test_costly_pairs_with_large_penalties(chain):
    """Pairs whose cost is large in the penalties' units (the documented range goes to 10,000 each): one base
    against 10,001 at 40/60/1000 (BiWFA gave up, status -300: now run as 2/3/50, their common divisor taken
    out) and 100 bases in 2,000 at 1/10000/10000 (WFA2-lib's high memory mode kept ~19 million wavefronts and
    crashed its process at 9,000: now the medium mode). The oracles judge both, with and without CIGARs."""
    import random

    rng = random.Random(1)
    t = "".join(rng.choice("ACGT") for _ in range(10_001)).encode()
    for pair, pen in (((b"A", t), Penalties(40, 60, 1000)), ((t[5000:5100], t[:2000]), Penalties(1, 10000, 10000))):
        batch = to_batch([pair])
        cfg = AlignConfig(metric="affine", penalties=pen)
        res, _ = _run(chain, batch, cfg)
        check_results(batch, res, cfg)
        dist, _ = _run(chain, batch, cfg.with_(distance_only=True))
        assert dist.score.tolist() == res.score.tolist()


def test_costly_pairs_aligned_by_the_dp(monkeypatch):
    """End-to-end affine pairs that cost WFA2-lib more than a DP of their cells (unrelated sequences, large
    penalties, a short sequence in a long one) are aligned by parasail's DP once WFA2-lib reaches its step cap
    (cpu_wfa.DP_BREAK_EVEN): 1 kbp unrelated at 97/100/89 took WFA2-lib ~0.26 s, the DP ~2 ms. Close pairs,
    ends-free pairs and edit distance stay with WFA2-lib. The oracles judge every score and CIGAR, with N
    unmatchable too, and with the bytes WFA2-lib pads with ('!', '?') in the sequences."""
    import random

    from gpualign import pack
    from gpualign.engines import cpu_wfa

    rng = random.Random(3)

    def rand(n, letters="ACGT"):
        return "".join(rng.choice(letters) for _ in range(n)).encode()

    def mutate(s, rate):
        return bytes(b if rng.random() > rate else rng.choice(b"ACGT") for b in s)

    base = rand(1000)
    costly = [(rand(1000), rand(1000)), (rand(300), rand(350)), (rand(50), rand(2000)), (rand(400, "ACGTN"),
              rand(400, "ACGTN")), (rand(200, "AC!?"), rand(200, "GT!?")), (b"A", rand(700))]
    close = [(base, mutate(base, 0.01)), (base[:150], mutate(base[:150], 0.02))]
    calls = []
    real = cpu_wfa._dp_align
    monkeypatch.setattr(cpu_wfa, "_dp_align", lambda *a: calls.append(1) or real(*a))

    def run(pairs, cfg):
        batch = to_batch(pairs)
        kw = (cfg.to_pywfa_kwargs(), cfg.to_pywfa_kwargs(long_pairs=True))
        free = np.stack([batch.t_len, batch.t_len], axis=1)
        part = cpu_wfa._align_chunk(*kw, pack.compare_view(batch, cfg.n_mismatch), batch.q_off, batch.q_len,
                                    batch.t_off, batch.t_len, free[:, 0], free[:, 1], not cfg.distance_only)
        return batch, cpu_wfa._assemble([part], not cfg.distance_only, cfg.ends_free_target)

    # at 1/10000/10000 the unrelated pairs of equal lengths cost their mismatches only: WFA2-lib's
    for pen, dp in ((Penalties(4, 6, 2), 6), (Penalties(97, 100, 89), 6), (Penalties(1, 10000, 10000), 3)):
        for n_mismatch in (False, True):
            cfg = AlignConfig(metric="affine", penalties=pen, n_mismatch=n_mismatch)
            calls.clear()
            batch, res = run(costly, cfg)
            check_results(batch, res, cfg)
            assert len(calls) == dp, (pen, len(calls))
            _, dist = run(costly, cfg.with_(distance_only=True))
            assert dist.score.tolist() == res.score.tolist()
    calls.clear()
    for cfg in (AlignConfig(metric="affine"), AlignConfig(metric="affine", ends_free_target=True), AlignConfig()):
        batch, res = run(close + costly[:2] if cfg.metric == "affine" and not cfg.ends_free_target else close, cfg)
        if not cfg.ends_free_target:
            check_results(batch, res, cfg)
    assert len(calls) == 2  # the two costly pairs of the end-to-end affine run only
    # related pairs of moderate divergence stay with WFA2-lib, whose narrow wavefronts beat the DP for them: the
    # cap is above their cost (at DP_BREAK_EVEN 0.4 these two went to the DP after WFA2-lib's work up to it)
    calls.clear()
    for pen, rate in ((Penalties(4, 6, 2), 0.4), (Penalties(97, 100, 89), 0.06)):
        cfg = AlignConfig(metric="affine", penalties=pen)
        batch, res = run([(base, mutate(base, rate)), (base[:150], mutate(base[:150], rate))], cfg)
        check_results(batch, res, cfg)
    assert not calls


def test_high_memory_mode_only_where_its_wavefronts_fit():
    """WFA2-lib's high memory mode (every wavefront kept) for pairs whose possible cost keeps it within
    cpu_wfa.HIGH_CELLS: every pair up to 10 kbp at the default 4/6/2 (its speed), not two unrelated 2 kbp
    sequences at 97/100/89 (2.5 GB there; 10 kbp would take ~60 GB) nor 100 bases in 2 kbp at 1/10000/10000."""
    from gpualign.engines.cpu_wfa import _high_fits, reduced

    def fits(pen, ql, tl, free=0, ends_free=False):
        cfg = AlignConfig(metric="affine", penalties=Penalties(*pen), ends_free_target=ends_free)
        return bool(_high_fits(reduced(cfg.to_pywfa_kwargs())[0], [ql], [tl], [free])[0])

    assert fits((4, 6, 2), 10_000, 10_000) and fits((4, 6, 2), 10_000, 12_000, 2_000, True)
    assert fits((4, 6, 2), 150, 10_000) and fits((97, 100, 89), 1_000, 1_000)
    assert not fits((97, 100, 89), 2_000, 2_000) and not fits((1, 10_000, 10_000), 100, 2_000)


def test_an_empty_side_against_a_long_pair(chain):
    """An empty query or target beside one over 10 kbp (BiWFA's pairs, which score an empty side INT_MIN):
    one gap, scored and written as for a short pair; the oracles judge every one."""
    pairs = [(b"", b"A" * 10_001), (b"C" * 10_001, b""), (b"", b"ACGT" * 5), (b"GT" * 7_000, b""), (b"", b""),
             (b"ACG", b"AG")]
    batch = to_batch(pairs)
    for cfg in (AlignConfig(), AlignConfig(metric="affine"), AlignConfig(metric="affine", penalties=Penalties(3, 5, 1))):
        res, _ = _run(chain, batch, cfg)
        check_results(batch, res, cfg)
        dist, _ = _run(chain, batch, cfg.with_(distance_only=True))
        assert dist.score.tolist() == res.score.tolist()


def test_bounded_ends_free(chain):
    """Ends-free with bounded free target ends: a longer overhang pays for its remainder as a gap."""
    from gpualign import cigar as C
    from gpualign.engines import reference
    from simulate import simulate

    q, t = simulate(30, 300, 0.05, seed=30)
    rng = np.random.default_rng(30)
    pairs, free = [], []
    for i, (a, b) in enumerate(zip(q, t)):
        lead = bytes(b"ACGT"[x] for x in rng.integers(0, 4, int(rng.integers(0, 120))))
        tail = bytes(b"ACGT"[x] for x in rng.integers(0, 4, int(rng.integers(0, 120))))
        pairs.append((a, lead + b + tail))
        free.append((int(rng.integers(0, 100)), int(rng.integers(0, 100))))
    pairs.append((b"", b"ACGTACGTAC"))
    free.append((3, 4))
    batch = to_batch(pairs)
    batch.t_free = np.array(free, dtype=np.int64)
    for cfg in (AlignConfig(metric="affine", ends_free_target=True), AlignConfig(ends_free_target=True)):
        res, _ = _run(chain, batch, cfg)
        pen = cfg.effective_penalties
        for i in range(batch.n):
            qq, tt = batch.query(i), batch.target(i)
            fb, fe = free[i]
            want = reference.affine_score(qq, tt, pen, False, fb, fe)
            assert res.score[i] == want, (i, res.score[i], want)
            s, e = int(res.t_start[i]), int(res.t_end[i])
            assert s <= fb and e >= len(tt) - fe
            ops = res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]]
            C.check_cigar(qq, tt[s:e], ops)
            assert C.score_cigar(ops, pen) == want


@pytest.mark.parametrize("medium_fails", [True, False], ids=["failed", "retried"])
@pytest.mark.parametrize("ends_free", [False, True])
def test_cpu_wfa_chunk_with_a_failed_pair(monkeypatch, ends_free, medium_fails):
    """A pair WFA2-lib fails (its status) between others, in its own memory mode and again in the medium mode it
    is retried in: FAILED with its reason, no CIGAR ops, its target range whole, and the pairs around it keep their
    own scores, CIGARs and (ends-free, free target flanks trimmed) target ranges: the chunk's flat op list stays
    in step. Where the medium mode succeeds (retried), every pair is as without the failure."""
    from gpualign.engines import cpu_wfa
    from gpualign.records import FAILED, OK

    seqs = [("ACGTACGTAC", "TTACGAACGTACGG"), ("GGGGCCCC", "GGGCCCCA"), ("ACGT", "CCTTTT"), ("", "ACG"),
            ("AC", "GGACGG")]
    text = "".join(q + t for q, t in seqs)
    q_off, t_off, pos = [], [], 0
    for q, t in seqs:
        q_off.append(pos)
        t_off.append(pos + len(q))
        pos += len(q) + len(t)
    q_len, t_len = [len(q) for q, _ in seqs], [len(t) for _, t in seqs]
    cfg = AlignConfig().with_(ends_free_target=ends_free)
    kw = cfg.to_pywfa_kwargs(), cfg.to_pywfa_kwargs(long_pairs=True)
    free = [min(2, n) for n in t_len]
    args = (*kw, text, q_off, q_len, t_off, t_len, free, free, True)
    clean = cpu_wfa._align_chunk(*args)
    real = cpu_wfa._aligner

    class Failing:  # the real aligner (its settings passed on), whose status says failed on the third pair
        # (in every memory mode: the retry in the medium mode fails too)
        def __init__(self, al):
            object.__setattr__(self, "al", al)
            object.__setattr__(self, "pair", None)

        def wavefront_align(self, t, q):
            object.__setattr__(self, "pair", (q, t))
            return self.al.wavefront_align(t, q)

        def __getattr__(self, name):
            return getattr(self.al, name)

        def __setattr__(self, name, value):
            setattr(self.al, name, value)

        @property
        def status(self):
            fails = self.pair == seqs[2] and (medium_fails or self.al.memory_mode != "medium")
            return -1 if fails else self.al.status

    fake = {}
    monkeypatch.setattr(cpu_wfa, "_aligner", lambda k: fake.setdefault(repr(sorted(k.items())), Failing(real(k))))
    score, status, ops, clen, reason, t_start, t_end = cpu_wfa._align_chunk(*args)
    if not medium_fails:
        assert status.tolist() == [OK] * 5 and not reason
        for got, want in zip((score, ops, clen, t_start, t_end), (clean[0], clean[2], clean[3], clean[5], clean[6])):
            assert got.tolist() == want.tolist()
        return
    assert status.tolist() == [OK, OK, FAILED, OK, OK] and reason == {2: "WFA2-lib status -1"}
    assert clen[2] == 0 and score[2] == 0 and (t_start[2], t_end[2]) == (0, t_len[2])
    keep = [0, 1, 3, 4]
    for got, want in ((score, clean[0]), (clen, clean[3]), (t_start, clean[5]), (t_end, clean[6])):
        assert got[keep].tolist() == want[keep].tolist()
    c_ends = np.cumsum(clean[3])
    own = [clean[2][c_ends[i] - clean[3][i]:c_ends[i]] for i in keep]
    assert ops.tolist() == np.concatenate(own).tolist()
    assert clean[3][2] > 0  # (the third pair has ops when it does not fail)
    if ends_free:  # (flanks trimmed: the first and last pairs' targets start and end inside)
        assert clean[5][[0, 4]].tolist() == [2, 2] and clean[6][[0, 4]].tolist() == [12, 4]
    else:
        import edlib

        assert clean[0].tolist() == [edlib.align(q, t, task="distance")["editDistance"] for q, t in seqs]


def test_rescue_pool_forked_at_first_use(monkeypatch):
    """A GPU chain's CPU engine (select_engines marks it rescue) forks no workers at start(); its first
    batch too large to align inline makes the pool, once, whichever of two aligner threads gets there first,
    and the scores are edlib's."""
    import threading
    import time

    import gpualign.engines as engines
    from gpualign.engines import select_engines
    from gpualign.engines import _pool
    from oracles import edit
    from simulate import simulate

    monkeypatch.setattr(engines, "gpu_status", lambda: (True, "a GPU (faked)"))
    chain, notice = select_engines(AlignConfig(device="gpu", threads=2))
    cpu = chain[-1]
    assert cpu.rescue and "rescue cpu-wfa" in notice and all(not getattr(e, "rescue", False) for e in chain[:-1])
    assert not select_engines(AlignConfig(device="cpu", threads=2))[0][0].rescue
    cpu.inline_bases = 0
    made = []
    real = _pool.fork_pool
    def slow(*a, **k):  # (the second thread comes while the first makes the pool)
        made.append(1)
        time.sleep(0.3)
        return real(*a, **k)

    monkeypatch.setattr(_pool, "fork_pool", slow)
    try:
        cpu.start()
        assert cpu._pool is None and not made
        q, t = simulate(40, 200, 0.1, seed=3)
        batch = to_batch(list(zip(q, t)))
        out = [None, None]

        def run(i):
            out[i] = cpu.align(batch, AlignConfig())

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert made == [1] and cpu._pool is not None
        want = [edit(a, b) for a, b in zip(q, t)]
        assert all(list(o.score) == want for o in out)
    finally:
        cpu.close()


@pytest.mark.gpu
def test_rescue_pool_forked_beside_the_gpu():
    """On a GPU: the chain's rescue forks its pool from an aligner thread while another thread aligns on the
    device (the run's shape once rescue is needed); both give edlib's scores, and the process goes on using
    the device after the fork."""
    import threading

    from gpualign.engines import select_engines
    from oracles import edit
    from simulate import simulate

    cfg = AlignConfig(device="gpu", threads=4)
    chain, _ = select_engines(cfg)
    cpu = chain[-1]
    assert cpu.rescue
    for e in reversed(chain):
        e.start()
    chain[0].warm(cfg)
    cpu.inline_bases = 0
    q, t = simulate(400, 300, 0.1, seed=8)
    batch = to_batch(list(zip(q, t)))
    want = [edit(a, b) for a, b in zip(q, t)]
    out = {}
    try:
        def gpu_side():
            for i in range(20):
                out[f"gpu{i}"] = chain[0].align(batch, cfg)

        th = threading.Thread(target=gpu_side)
        th.start()
        out["cpu"] = cpu.align(batch, cfg)
        th.join()
        out["after"] = chain[0].align(batch, cfg)
        assert cpu._pool is not None
        assert all(list(r.score) == want for r in out.values()), {k: int((r.score != want).sum()) for k, r in
                                                                  out.items()}
    finally:
        for e in chain:
            e.close()
