"""General scoring (cpu-dp engine): scores against two independent oracles (parasail's plain,
non-vectorised functions and Biopython's PairwiseAligner), every CIGAR re-scored here from the
sequences, the matrix and the gap costs, and the CLI's bad-input cases."""

import os

import numpy as np
import parasail
import pytest
from Bio.Align import PairwiseAligner, substitution_matrices

import emu
import gpualign
from cli_helper import run_cli
from gpualign import cigar as C
from gpualign.config import AlignConfig, Penalties, Scoring
from gpualign.engines.cpu_dp import CpuDpEngine
from gpualign.engines.gpu_dp import GpuDpEngine
from gpualign.errors import ConfigError, InputError
from gpualign.records import OK, PairBatch

MODES = ("global", "local", "semi-global")
DNA = Penalties(mismatch=3, gap_open=5, gap_extend=2)  # +2 / -3 / -(5 + 2L)
PROT = Penalties(mismatch=1, gap_open=11, gap_extend=1)  # BLOSUM62 11/1 (BLAST's convention)
AA = "ACDEFGHIKLMNPQRSTVWY"


def dna_cfg(mode, match=2, **kw):
    return AlignConfig(metric="affine", penalties=DNA, scoring=Scoring(mode=mode, match=match), device="cpu", **kw)


def prot_cfg(mode, **kw):
    return AlignConfig(metric="affine", penalties=PROT, scoring=Scoring(mode=mode, alphabet="protein",
                                                                        matrix="BLOSUM62"), device="cpu", **kw)


NO_CXX = pytest.mark.skipif(not emu.available(), reason="no g++ to compile the kernels for the CPU")
SLOW_EMU = [NO_CXX, pytest.mark.slow]  # emulated runs of 4-30 s each on 2 cores


@pytest.fixture(params=["cpu1", "cpu2", pytest.param("gpu", marks=pytest.mark.gpu),
                        pytest.param("gpu-long", marks=pytest.mark.gpu), pytest.param("emu", marks=NO_CXX),
                        pytest.param("emu-long", marks=SLOW_EMU)])
def engine(request, monkeypatch):
    """The engines under test: cpu1; cpu2 cuts every batch into chunks aligned by two worker processes;
    gpu (gpu-dp, marked gpu: skipped without a device); gpu-long (gpu-dp with every pair on dp_long, a
    block per pair); emu and emu-long (slow): the same two with dp.cu's kernels compiled for the CPU
    (tests/emu), so that CI checks the kernels' arithmetic."""
    if request.param.startswith(("gpu", "emu")):
        from gpualign.engines import gpu_dp

        if request.param.endswith("-long"):
            monkeypatch.setattr(gpu_dp, "LONG_ROWS", 0)
            monkeypatch.setattr(gpu_dp, "LONG_CELLS", 0)
        yield gpu_engine(request.param.split("-")[0])
        return
    e = CpuDpEngine(1) if request.param == "cpu1" else CpuDpEngine(2, inline_bases=0)
    yield e
    e.close()


def align(engine, qs, ts, cfg):
    batch = PairBatch.from_sequences([q.encode() for q in qs], [t.encode() for t in ts])
    return engine.align(batch, cfg)


# ---- oracles ----

def parasail_score(q, t, cfg):
    """parasail's plain (non-SIMD) DP, its own matrix: open = o + e, extend = e."""
    if not q or not t:
        return None
    p = cfg.penalties
    if cfg.scoring.matrix:
        m = parasail.blosum62
    else:
        m = parasail.matrix_create("ACGTURYKMSWBDHVN", cfg.scoring.match, -p.mismatch)
    fn = {"global": parasail.nw, "local": parasail.sw, "semi-global": parasail.sg_dx}[cfg.scoring.mode]
    return fn(q, t, p.gap_open + p.gap_extend, p.gap_extend, m).score


def biopython_score(q, t, cfg):
    """Biopython's PairwiseAligner: target = t, query = q; semi-global frees the deletions (target-only
    bases) at both ends."""
    p = cfg.penalties
    al = PairwiseAligner(mode="local" if cfg.scoring.mode == "local" else "global")
    if cfg.scoring.matrix:
        al.substitution_matrix = substitution_matrices.load(cfg.scoring.matrix)
    else:
        al.match_score, al.mismatch_score = cfg.scoring.match, -p.mismatch
    al.open_gap_score, al.extend_gap_score = -(p.gap_open + p.gap_extend), -p.gap_extend
    if cfg.scoring.mode == "semi-global":
        al.end_deletion_score = 0
    if not q or not t:
        return None
    return round(al.score(t, q))


def empty_score(q, t, cfg):
    """The score of a pair with an empty side (the oracles refuse those)."""
    p, mode, n = cfg.penalties, cfg.scoring.mode, len(q) + len(t)
    if mode == "local" or n == 0 or (mode == "semi-global" and not q):
        return 0
    return -(p.gap_open + n * p.gap_extend)


def rescore(q, t, res, i, cfg):
    """Walk pair i's CIGAR: =/X against the sequences (with n_mismatch, letters other than ACGT equal
    nothing), matrix scores (row: the target's letter) and gap costs summed; consumed lengths equal the aligned ranges; returns the
    score."""
    if cfg.scoring.matrix:
        m = substitution_matrices.load(cfg.scoring.matrix)
    p = cfg.penalties
    ops = res.cigar[res.cigar_off[i]:res.cigar_off[i] + res.cigar_len[i]]
    qs, qe, ts, te = (int(a[i]) for a in (res.q_start, res.q_end, res.t_start, res.t_end))
    x, y, total = qs, ts, 0
    for v in ops.tolist():
        op, ln = v & 15, v >> 4
        assert ln > 0
        if op in (C.EQ, C.X):
            for _ in range(ln):
                a, b = q[x], t[y]
                same = a == b and not (cfg.n_mismatch and a not in "ACGT")
                assert same == (op == C.EQ), (q, t, C.to_text(ops, [0], [len(ops)]))
                total += int(m[b, a]) if cfg.scoring.matrix else (cfg.scoring.match if same else -p.mismatch)
                x, y = x + 1, y + 1
        elif op == C.I:
            total -= p.gap_open + ln * p.gap_extend
            x += ln
        elif op == C.D:
            total -= p.gap_open + ln * p.gap_extend
            y += ln
        else:
            raise AssertionError(f"op {op}")
    assert (x, y) == (qe, te), (q, t, qs, qe, ts, te)
    mode = cfg.scoring.mode
    if mode == "global":
        assert (qs, qe, ts, te) == (0, len(q), 0, len(t))
    elif mode == "semi-global" and q:
        assert (qs, qe) == (0, len(q))
    if mode == "local" and ops.size:
        assert ops[0] & 15 in (C.EQ, C.X) and ops[-1] & 15 in (C.EQ, C.X)  # no gap at a local end
    return total


def check(engine, qs, ts, cfg):
    res = align(engine, qs, ts, cfg)
    assert (res.status == OK).all()
    for i, (q, t) in enumerate(zip(qs, ts)):
        want = {parasail_score(q, t, cfg), biopython_score(q, t, cfg)} - {None} or {empty_score(q, t, cfg)}
        assert len(want) == 1, (q, t, want)  # the two oracles agree
        assert int(res.score[i]) == want.pop(), (q, t)
        assert rescore(q, t, res, i, cfg) == res.score[i], (q, t)
        if res.score[i] == 0 and cfg.scoring.mode == "local":
            assert res.cigar_len[i] == 0 and res.q_end[i] == res.q_start[i] == 0
    writers_text(res)
    return res


def writers_text(res) -> bool:
    """Where the engine made the CIGARs' text and counts itself (gpu-dp: lines.cu's cigar_measure and
    cigar_write), they equal what the writers derive from the ops on the host; whether it made them."""
    text, stats = res.__dict__.get("cigar_text"), res.__dict__.get("cigar_stats")
    if text is None:
        return False
    assert C.text_list(*text) == C.to_text(res.cigar, res.cigar_off, res.cigar_len)
    tot = C.op_totals(res.cigar, res.cigar_off, res.cigar_len)
    want = np.stack([tot["matches"], tot["mismatches"], tot["ins"], tot["dels"],
                     C.gap_opens(res.cigar, res.cigar_off, res.cigar_len)], axis=1)
    assert stats.shape == want.shape and (stats == want).all()
    return True


# ---- pairs ----

def mutate(rng, s, letters, rate):
    out = []
    for c in s:
        r = rng.random()
        if r < rate / 3:
            out.append(letters[rng.integers(len(letters))])
        elif r < 2 * rate / 3:
            continue
        elif r < rate:
            out.extend([c, letters[rng.integers(len(letters))]])
        else:
            out.append(c)
    return "".join(out)


def random_pairs(seed, letters, n, max_len):
    rng = np.random.default_rng(seed)
    qs, ts = [], []
    for _ in range(n):
        a = "".join(rng.choice(list(letters), rng.integers(0, max_len)))
        kind = rng.integers(3)
        if kind == 0:  # unrelated
            b = "".join(rng.choice(list(letters), rng.integers(0, max_len)))
        elif kind == 1:  # a mutated copy
            b = mutate(rng, a, letters, 0.15)
        else:  # a copy inside flanks (local/semi-global find it)
            b = "".join(rng.choice(list(letters), rng.integers(0, 20))) + mutate(rng, a, letters, 0.05) + \
                "".join(rng.choice(list(letters), rng.integers(0, 20)))
        qs.append(a)
        ts.append(b)
    return qs, ts


ADVERSARIAL_DNA = [
    ("", ""), ("", "ACGT"), ("ACGT", ""), ("A", "A"), ("A", "C"),
    ("AAAAAAAA", "CCCCCCCC"),  # all mismatch: local is empty
    ("ACGTACGTAC" * 3, "ACGTACGTAC" + "T" * 40 + "ACGTACGTAC" * 2),  # one long gap
    ("ACGT" * 10 + "G" * 30, "ACGT" * 10),  # a long query-only tail
    ("ACACACAC", "CACACACA"),  # ties
    ("ACGT", "TTTTACGTTTTT"), ("TTTTACGTTTTT", "ACGT"),
    ("NNNN", "NNNN"), ("ACGTNRYK", "ACGTNRYA"),
]


@pytest.mark.parametrize("mode", MODES)
def test_dna_random_and_adversarial(engine, mode):
    qs, ts = random_pairs(1, "ACGT", 150, 60)
    qs += [a for a, _ in ADVERSARIAL_DNA]
    ts += [b for _, b in ADVERSARIAL_DNA]
    check(engine, qs, ts, dna_cfg(mode))
    full = [(a, b) for a, b in zip(qs, ts) if a and b]  # (no empty sequence: gpu-dp's text made on the device)
    res = check(engine, [a for a, _ in full], [b for _, b in full], dna_cfg(mode))
    assert writers_text(res) == isinstance(engine, GpuDpEngine)


@pytest.mark.parametrize("mode", MODES)
def test_protein_blosum62(engine, mode):
    qs, ts = random_pairs(2, AA, 100, 80)
    qs += ["", "WWWW", "MKVLAAGIVGLLLA", "MKV"]
    ts += ["MKV", "PPPP", "MKVLATGIVGLLA", ""]
    check(engine, qs, ts, prot_cfg(mode))


def test_semi_global_frees_only_target_ends(engine):
    """Hand-made: the query inside a longer target costs nothing extra; the other way round, the query's
    overhang is paid (parasail's sg_qx would free it)."""
    res = align(engine, ["ACGT", "TTTTACGTTTTT"], ["TTTTACGTTTTT", "ACGT"], dna_cfg("semi-global"))
    assert res.score.tolist() == [8, 8 - 2 * (5 + 4 * 2)]  # 4 matches; then 4I 4= 4I
    assert (int(res.t_start[0]), int(res.t_end[0])) == (4, 8)
    assert C.to_text(res.cigar, res.cigar_off, res.cigar_len)[0] == "4="


def test_gap_convention_pinned(engine):
    """One gap of length 3 in a global alignment costs o + 3e = 5 + 6 = 11."""
    res = align(engine, ["AAAACCCGGGG"], ["AAAAGGGG"], dna_cfg("global"))
    assert int(res.score[0]) == 8 * 2 - 11


@pytest.mark.parametrize("mode", MODES)
def test_gap_open_zero(engine, mode):
    """o = 0 (parasail's open equals its extend, where parasail 1.3.4's striped sw scores wrong): scores with
    CIGARs equal both oracles', and scores alone the same."""
    qs, ts = random_pairs(3, "ACGT", 24, 500)
    for pen in (Penalties(3, 0, 1), Penalties(3, 0, 2)):
        cfg = dna_cfg(mode).with_(penalties=pen)
        res = check(engine, qs, ts, cfg)
        assert align(engine, qs, ts, cfg.with_(distance_only=True)).score.tolist() == res.score.tolist()


def test_negative_only_local_is_empty(engine):
    res = align(engine, ["AAAA", ""], ["CCCC", "ACGT"], dna_cfg("local"))
    assert res.score.tolist() == [0, 0] and res.cigar_len.tolist() == [0, 0]
    assert res.q_start.tolist() == res.q_end.tolist() == res.t_start.tolist() == res.t_end.tolist() == [0, 0]


def test_int16_saturation_falls_back_to_int32(engine):
    q = "ACGT" * 150
    cfg = dna_cfg("global", match=100)  # 600 * 100 = 60,000 > 32,767
    res = align(engine, [q], [q], cfg)
    assert int(res.score[0]) == 60_000
    assert rescore(q, q, res, 0, cfg) == 60_000
    res = align(engine, [q], [q], cfg.with_(distance_only=True))
    assert int(res.score[0]) == 60_000


@pytest.mark.parametrize("mode,q,t,match,pen", [
    ("local", "A" * 49, "A", 1, Penalties(1, 0, 10000)),  # gap open 0: parasail's sw_scan_16 gave 22,767
    ("local", "A" * 300, "A", 1, Penalties(1, 0, 2000)),
    ("global", "A" * 14, "A", 10000, Penalties(3, 1, 3000)),  # nw_scan_16 (scores only) gave -22,768
    ("semi-global", "A" * 14, "A", 10000, Penalties(3, 1, 3000)),
    ("global", "GAATCTGTATGTCC", "CC", 10000, Penalties(3, 1, 3000)),
])
def test_values_past_int16_without_saturation(engine, mode, q, t, match, pen):
    """Pairs whose DP values pass int16 where parasail's 16-bit scan kernels wrap without reporting
    saturation (a helper's hunt: exit 0, impossible scores): every engine's score is Biopython's, with and
    without CIGARs, and each CIGAR re-scores to it."""
    cfg = AlignConfig(metric="affine", penalties=pen, scoring=Scoring(mode=mode, match=match), device="cpu")
    want = biopython_score(q, t, cfg)
    res = align(engine, [q], [t], cfg)
    assert int(res.score[0]) == want and rescore(q, t, res, 0, cfg) == want
    assert int(align(engine, [q], [t], cfg.with_(distance_only=True)).score[0]) == want


@pytest.mark.parametrize("distance_only", [False, True])
def test_values_past_int32_fail_the_pair(distance_only):
    """A pair whose scores could pass parasail's 32-bit lanes (1 against 214,748 bases, gaps of 10,000 a
    base: -2,147,480,001) fails with its reason; cpu-dp wrote score 0 and a CIGAR of one base (exit 0). Its
    neighbour aligns."""
    from gpualign.engines import cpu_dp

    cfg = AlignConfig(metric="affine", penalties=Penalties(1, 10000, 10000), scoring=Scoring(mode="global", match=1),
                      device="cpu", distance_only=distance_only)
    res = align(CpuDpEngine(1), ["A", "A"], ["C" * 214_748, "A"], cfg)
    assert res.status.tolist() == [2, OK] and int(res.score[1]) == 1
    assert "32-bit lanes hold" in res.reason[0] and f"{cpu_dp.RANGE32:,}" in res.reason[0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("distance_only", [False, True])
def test_parasail_out_of_memory_fails_the_pair(monkeypatch, mode, distance_only):
    """parasail's result is NULL when it cannot allocate (under `ulimit -v`, a scheduler's limit: it prints
    'posix_memalign failed'); reading its score raised ValueError('NULL pointer access'), its CIGAR
    AttributeError, through the run (a traceback, exit 1). Now that pair fails with its reason; its neighbours
    align. The NULL result here is parasail's own Result over a NULL pointer, as parasail returns it (its
    traceback, the matrices' size, is allocated there; the CIGAR's is a sequence's length)."""
    from gpualign.engines import cpu_dp

    real = cpu_dp._function

    def short(mode_, want_cigar, bits, gaps):
        fn = real(mode_, want_cigar, bits, gaps)

        def call(q, t, *args):
            if len(q) == 7:
                return parasail.Result(parasail.c_result_p(), len(q), len(t))
            return fn(q, t, *args)
        return call

    monkeypatch.setattr(cpu_dp, "_function", short)
    cfg = AlignConfig(metric="affine", penalties=Penalties(2, 3, 1), scoring=Scoring(mode=mode, match=2),
                      device="cpu", distance_only=distance_only)
    res = align(CpuDpEngine(1), ["ACGT", "ACGTACG", "TTGCA"], ["ACGT", "ACGTACG", "TTGCA"], cfg)
    assert res.status.tolist() == [OK, 2, OK] and res.score[[0, 2]].tolist() == [8, 10]
    assert res.reason[1].startswith("the CPU aligner could not allocate the memory of 7 x 7 cells")
    assert ("--distance-only" in res.reason[1]) != distance_only


@pytest.mark.parametrize("mode", ["local", "semi-global"])
def test_long_gaps_bound_by_mode(mode):
    """cpu-dp's bound on parasail's values follows the mode: one base against 107,400 with gaps of 10,000 a
    base was refused as if its all-gap path (global's) could be taken ("its scores could reach 1,074,030,013"),
    where local and semi-global align it at score 2, one =."""
    rng = np.random.default_rng(31)
    t = "".join(rng.choice(list("ACGT"), 107_400))
    cfg = AlignConfig(metric="affine", penalties=Penalties(3, 5, 10000), scoring=Scoring(mode=mode, match=2),
                      device="cpu")
    res = align(CpuDpEngine(1), ["A"], [t], cfg)
    assert res.status.tolist() == [OK] and int(res.score[0]) == 2
    assert C.to_text(res.cigar, res.cigar_off, res.cigar_len) == ["1="]


@pytest.mark.parametrize("mode", MODES)
def test_parasail_16_bit_lanes_agree_within_reach(mode):
    """cpu-dp runs a pair on parasail's 16-bit lanes where cpu_dp.reach stays below RANGE16: there, for each
    function cpu-dp calls (scores, and CIGARs), the 16-bit result equals the 32-bit one, on pairs whose bound
    lies at 0.5 to 1 of the range (match 100, mismatch 100, gaps 100 + 50 L; lengths 30 to 150, a query of
    300 A against one base (the gaps along the query), related and unrelated pairs)."""
    from gpualign import scoring
    from gpualign.engines import cpu_dp

    rng = np.random.default_rng(32)
    cfg = dna_cfg(mode, match=100).with_(penalties=Penalties(100, 100, 50))
    sub, gaps = scoring.substitution(cfg), cfg.parasail_gaps()
    smax = int(np.abs(sub.array()).max())
    qs = ["".join(rng.choice(list("ACGT"), int(n))) for n in rng.integers(30, 150, 120)] + ["A" * 300]
    ts = [mutate(rng, q, "ACGT", 0.1) if i % 2 else "".join(rng.choice(list("ACGT"), len(q)))
          for i, q in enumerate(qs[:-1])] + ["A"]
    tried = 0
    for q, t in zip(qs, ts):
        bound = cpu_dp.reach(len(q), len(t), smax, gaps, mode)
        if not cpu_dp.RANGE16 // 2 <= bound < cpu_dp.RANGE16:
            continue
        tried += 1
        for trace in (False, True):
            a, b = (cpu_dp._function(mode, trace, bits, gaps)(q, t, *gaps, cpu_dp._matrix(sub)) for bits in (16, 32))
            assert not a.saturated and a.score == b.score, (mode, trace, q, t, a.score, b.score)
            if trace and a.score > 0:
                assert list(a.get_cigar().seq) == list(b.get_cigar().seq)
    assert tried >= 20


def test_unknown_letters_keep_their_identity(engine):
    """--unknown scores characters the table lacks as its letter, but a CIGAR's =/X compare the characters
    themselves (a helper's hunt: J against O, both scored as X, was written '=', NM 0): DNA (E, I, J, ... as N)
    and protein (J as X) pairs; each =/X says whether the characters are equal, the consumed lengths are the
    ranges', and the score is Biopython's on the mapped sequences."""
    from gpualign.route import run_chain

    rng = np.random.default_rng(41)
    dna = AlignConfig(metric="affine", penalties=DNA, scoring=Scoring(mode="global", match=2, unknown="N"), device="cpu")
    prot = AlignConfig(metric="affine", penalties=PROT, device="cpu",
                       scoring=Scoring(mode="local", alphabet="protein", matrix="BLOSUM62", unknown="X"))
    for cfg, letters, odd, as_ in ((dna, "ACGT", "EIJ", "N"), (prot, "ACDEFGHIKLMNPQRSTVWY", "J-", "X")):
        qs = ["".join(rng.choice(list(letters + odd * 3), int(n))) for n in rng.integers(1, 60, 30)]
        ts = [mutate(rng, x, letters + odd, 0.3) or "A" for x in qs]
        qs[0], ts[0] = "AC" + odd[0] + "GT", "AC" + odd[-1] + "GT"  # (DNA: E against J, protein: J against -)
        batch = PairBatch.from_sequences([q.encode() for q in qs], [t.encode() for t in ts])
        res, _ = run_chain(batch, [engine], cfg)  # (the chain restates =/X: route.run_chain)
        mapped = [[s.translate(str.maketrans(odd, as_ * len(odd))) for s in side] for side in (qs, ts)]
        assert res.score.tolist() == [biopython_score(q, t, cfg) for q, t in zip(*mapped)]
        for i, (q, t) in enumerate(zip(qs, ts)):
            x, y = int(res.q_start[i]), int(res.t_start[i])
            for v in res.cigar[res.cigar_off[i]:res.cigar_off[i] + res.cigar_len[i]].tolist():
                op, ln = v & 15, v >> 4
                if op in (C.EQ, C.X):
                    assert all((q[x + k] == t[y + k]) == (op == C.EQ) for k in range(ln)), (q, t, i)
                x += ln if op in (C.EQ, C.X, C.I) else 0
                y += ln if op in (C.EQ, C.X, C.D) else 0
            assert (x, y) == (int(res.q_end[i]), int(res.t_end[i]))
        first = C.to_text(res.cigar, res.cigar_off, res.cigar_len)[0]
        assert first == "2=1X2="


def test_score_only_equals_traced(engine):
    qs, ts = random_pairs(3, "ACGT", 60, 50)
    for mode in MODES:
        cfg = dna_cfg(mode)
        a, b = align(engine, qs, ts, cfg), align(engine, qs, ts, cfg.with_(distance_only=True))
        assert a.score.tolist() == b.score.tolist()


def test_n_mismatch_rule(engine):
    cfg = dna_cfg("global", n_mismatch=True)
    res = align(engine, ["ACNT"], ["ACNT"], cfg)
    assert int(res.score[0]) == 3 * 2 - 3
    assert C.to_text(res.cigar, res.cigar_off, res.cigar_len) == ["2=1X1="]


GPU_OR_EMU = [pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("emu", marks=NO_CXX)]
GPU_OR_SLOW_EMU = [GPU_OR_EMU[0], pytest.param("emu", marks=SLOW_EMU)]


def gpu_engine(kind: str):
    """gpu-dp on the device (gpu) or with its kernels compiled for the CPU (emu)."""
    from gpualign.engines import gpu_dp

    return (gpu_dp.GpuDpEngine if kind == "gpu" else emu.emulated(gpu_dp.GpuDpEngine))()


@pytest.mark.parametrize("kind", ["cpu", *GPU_OR_EMU])
@pytest.mark.parametrize("distance_only", [False, True])
def test_a_gap_past_int32_against_an_empty_sequence_fails_the_pair(kind, distance_only):
    """214,748 bases against an empty sequence, gaps of 10,000 a base: the one gap's score, -2,147,490,000,
    does not fit the results' int32 (both engines write an empty side's alignment down on the host: an
    OverflowError there ends the run in a traceback). The pair fails with its reason, both ways round; its
    neighbour aligns, and 214,747 bases fit."""
    from gpualign.engines import cpu_dp

    cfg = AlignConfig(metric="affine", penalties=Penalties(1, 10000, 10000), scoring=Scoring(mode="global", match=1),
                      device="cpu", distance_only=distance_only)
    engine = CpuDpEngine(1) if kind == "cpu" else gpu_engine(kind)
    try:
        for qs, ts in ((["A" * 214_748, "A"], ["", "A"]), (["", "A"], ["A" * 214_748, "A"])):
            res = align(engine, qs, ts, cfg)
            assert res.status.tolist() == [2, OK] and int(res.score[1]) == 1
            assert "a 32-bit score holds" in res.reason[0] and f"{cpu_dp.INT32_MAX:,}" in res.reason[0]
        res = align(engine, ["A" * 214_747], [""], cfg)  # (-2,147,480,000: held)
        assert res.status.tolist() == [OK] and int(res.score[0]) == -2_147_480_000
    finally:
        engine.close()


@pytest.mark.parametrize("kind", GPU_OR_SLOW_EMU)
@pytest.mark.parametrize("mode", MODES)
def test_gpu_equals_cpu_scores(mode, kind, monkeypatch):
    """gpu-dp against cpu-dp on larger sets: mixed lengths up to 2 kbp (DNA) and ~350 aa (protein),
    launches cut small (many warps' groups), scores equal, every GPU CIGAR re-scored; pairs beyond the
    GPU's cell limit go on to cpu-dp in the same chain. Emulated: a quarter of the pairs, up to 700 bp."""
    from gpualign.engines import gpu_dp
    from gpualign.route import run_chain

    monkeypatch.setattr(gpu_dp, "DIR_BYTES", 1 << 22)
    cpu, gpu = CpuDpEngine(2), gpu_engine(kind)
    try:
        n, top = (600, 2000) if kind == "gpu" else (150, 700)
        for cfg, (qs, ts) in ((dna_cfg(mode), random_pairs(21, "ACGT", n, top)),
                              (prot_cfg(mode), random_pairs(22, AA, n, 400))):
            for c in (cfg, cfg.with_(distance_only=True)):
                a, b = align(gpu, qs, ts, c), align(cpu, qs, ts, c)
                assert a.score.tolist() == b.score.tolist()
            res = align(gpu, qs, ts, cfg)
            for i in range(0, len(qs), 7):
                assert rescore(qs[i], ts[i], res, i, cfg) == res.score[i]
        monkeypatch.setattr(gpu_dp, "MAX_CELLS", 50 * 50)
        monkeypatch.setattr(gpu_dp, "LONG_MAX_CELLS", 50 * 50)
        qs, ts = random_pairs(23, "ACGT", 100, 120)
        cfg = dna_cfg(mode)
        batch = PairBatch.from_sequences([q.encode() for q in qs], [t.encode() for t in ts])
        res, counts = run_chain(batch, [gpu, cpu], cfg)
        assert counts.get("gpu-dp", 0) > 0 and counts.get("cpu-dp", 0) > 0
        assert res.score.tolist() == align(cpu, qs, ts, cfg).score.tolist()
    finally:
        cpu.close()


@pytest.mark.parametrize("kind", GPU_OR_SLOW_EMU)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cols,team", [(1, 1), (2, 2), (2, 4)])
def test_gpu_long_pairs(mode, cols, team, kind, monkeypatch):
    """dp_long (cols: columns per lane and step; team: warps per pair) on pairs up to 3 kbp, some beyond
    dp_fill's cell limit: scores equal cpu-dp's, CIGARs re-scored; and every pair forced onto dp_long
    gives dp_fill's very CIGARs and coordinates (the same tie rule), over launches cut small. Emulated:
    12 pairs up to 1.4 kbp (still over two tiles of 512 rows), and a 2.2 kbp query against 400 bases of
    it (five tiles: rounds of whole teams and of part of one)."""
    from gpualign.engines import gpu_dp

    monkeypatch.setattr(gpu_dp, "COLS", cols)
    monkeypatch.setattr(gpu_dp, "TEAM", team)
    monkeypatch.setattr(gpu_dp, "INT16", False)  # (test_gpu_long16_cigars: dp_long16's)

    rng = np.random.default_rng(24)
    n, top, x = (40, 3000, 1) if kind == "gpu" else (12, 1400, 2)  # x: the hand-made pairs shorter by x
    qs = ["".join(rng.choice(list("ACGT"), rng.integers(200, top))) for _ in range(n)]
    ts = [mutate(rng, q, "ACGT", 0.15) for q in qs]
    qs += ["A" * (2500 // x), "ACGT" * (700 // x), "ACGT" * (200 // x), "".join(rng.choice(list("ACGT"), 2200))]
    ts += ["A" * (2100 // x), "TTT" + "ACGT" * (650 // x), "C" * (3000 // x), mutate(rng, qs[-1][900:1300], "ACGT", 0.1)]
    cfg = dna_cfg(mode)
    cpu, gpu = CpuDpEngine(2), gpu_engine(kind)
    try:
        res = align(gpu, qs, ts, cfg)
        assert res.score.tolist() == align(cpu, qs, ts, cfg).score.tolist()
        for i in range(len(qs)):
            assert rescore(qs[i], ts[i], res, i, cfg) == res.score[i]
    finally:
        cpu.close()
    monkeypatch.setattr(gpu_dp, "LONG_DIR_BYTES", 1 << 23)
    monkeypatch.setattr(gpu_dp, "MAX_CELLS", 1 << 24)
    runs = []
    for rows, cells in ((10 ** 9, 10 ** 18), (0, 0)):
        monkeypatch.setattr(gpu_dp, "LONG_ROWS", rows)
        monkeypatch.setattr(gpu_dp, "LONG_CELLS", cells)
        r = align(gpu, qs, ts, cfg)
        runs.append((r.score.tolist(), C.to_text(r.cigar, r.cigar_off, r.cigar_len), r.q_start.tolist(),
                     r.q_end.tolist(), r.t_start.tolist(), r.t_end.tolist()))
    assert runs[0] == runs[1]


def long16_sets(kind: str, seed: int, mode: str) -> tuple:
    """(queries, targets, sets) for dp_long16: DNA pairs of one to three tiles of 1,024 rows (lengths not
    multiples of 16 or of the columns per step, N runs, poly-A, a query much longer than its target and
    the reverse); sets: (config, (queries, targets), its EQ flag) for DNA match/mismatch (EQ: scored from
    the letters' codes), DNA with --n-mismatch and protein BLOSUM62 (the shared matrix)."""
    rng = np.random.default_rng(seed)
    top = 3000 if kind == "gpu" else 1400
    qs = ["".join(rng.choice(list("ACGTN"), rng.integers(1, top))) for _ in range(10)]
    ts = [mutate(rng, q, "ACGT", 0.15) or "A" for q in qs]
    qs += ["A" * 1100, "ACGT" * 300, "ACGT" * 50, "C", "G" * 40, "N" * 700 + "ACGT" * 60,
           "".join(rng.choice(list("ACGT"), 2100))]
    ts += ["A" * 900, "TTT" + "ACGT" * 260, "C" * 1200, "C" * 500, "G", "N" * 600, mutate(rng, qs[-1][800:1300], "ACGT", 0.1)]
    aa = ["".join(rng.choice(list(AA), rng.integers(300, top // 2))) for _ in range(6)]
    sets = [(dna_cfg(mode), (qs, ts), "true"), (dna_cfg(mode, n_mismatch=True), (qs, ts), "false"),
            (prot_cfg(mode), (aa, [mutate(rng, x, AA, 0.2) for x in aa]), "false")]
    return qs, ts, sets


def record_fills(monkeypatch) -> list:
    """Every long pair on the long kernels; the names of the kernels each launch runs, recorded."""
    from gpualign.engines import gpu_dp

    monkeypatch.setattr(gpu_dp, "LONG_ROWS", 0)
    monkeypatch.setattr(gpu_dp, "LONG_CELLS", 0)
    names = []
    fill = gpu_dp.GpuDpEngine._fill
    monkeypatch.setattr(gpu_dp.GpuDpEngine, "_fill", lambda self, name, *a: names.append(name) or fill(self, name, *a))
    return names


@pytest.mark.parametrize("kind", GPU_OR_SLOW_EMU)
@pytest.mark.parametrize("mode", MODES)
def test_gpu_long16(mode, kind, monkeypatch):
    """dp_long16 (long pairs, two int16 cells a word) with scores only: scores equal cpu-dp's for DNA
    match/mismatch (EQ: scored from the letters' codes), DNA with --n-mismatch and protein BLOSUM62 (the
    shared matrix), on long16_sets; a mismatch of 700 (-infinity plus it, o and e: 32 short of wrapping)
    on dp_long16 and of 900 on dp_long; and with a match bonus of 40, the pairs whose values could pass
    int16 go to dp_long in the same batch, right too."""
    from gpualign.engines import gpu_dp

    names = record_fills(monkeypatch)
    qs, ts, sets = long16_sets(kind, 25, mode)
    cpu, gpu = CpuDpEngine(2), gpu_engine(kind)
    try:
        for cfg, (q, t), eq in sets:
            names.clear()
            c = cfg.with_(distance_only=True)
            assert align(gpu, q, t, c).score.tolist() == align(cpu, q, t, c).score.tolist()
            assert set(names) == {f"dp_long16<{gpu_dp.MODES[mode]}, {eq}, false>"}
        for mismatch in (700, 900):  # (global and semi-global: the longer pairs' bounds pass int16 too)
            names.clear()
            c = dna_cfg(mode, distance_only=True).with_(penalties=Penalties(mismatch, 2, 1))
            assert align(gpu, qs, ts, c).score.tolist() == align(cpu, qs, ts, c).score.tolist()
            kernels = {n.split("<")[0] for n in names}
            assert kernels == ({"dp_long"} if mismatch == 900 else {"dp_long16"} if mode == "local" else
                               {"dp_long16", "dp_long"})
        names.clear()
        c = dna_cfg(mode, match=40, distance_only=True)
        assert align(gpu, qs, ts, c).score.tolist() == align(cpu, qs, ts, c).score.tolist()
        assert {n.split("<")[0] for n in names} == {"dp_long16", "dp_long"}
    finally:
        cpu.close()


@pytest.mark.parametrize("kind", GPU_OR_SLOW_EMU)
@pytest.mark.parametrize("mode", MODES)
def test_gpu_long16_cigars(mode, kind, monkeypatch):
    """dp_long16 with CIGARs (global and semi-global; local stays on dp_long), on long16_sets: the very
    CIGARs, coordinates and scores of dp_long (int32, the same tie rule), scores equal cpu-dp's, every
    CIGAR re-scored; with a match bonus of 40 the pairs that could pass int16 stay on dp_long in the same
    batch."""
    from gpualign.engines import gpu_dp

    names = record_fills(monkeypatch)
    qs, ts, sets = long16_sets(kind, 26, mode)
    cpu, gpu = CpuDpEngine(2), gpu_engine(kind)
    try:
        for cfg, (q, t), eq in sets + [(dna_cfg(mode, match=40), (qs, ts), "true")]:
            runs, first = [], None
            for narrow in (True, False):
                monkeypatch.setattr(gpu_dp, "INT16", narrow)
                names.clear()
                r = align(gpu, q, t, cfg)
                first = r if first is None else first
                runs.append((r.score.tolist(), C.to_text(r.cigar, r.cigar_off, r.cigar_len), r.q_start.tolist(),
                             r.q_end.tolist(), r.t_start.tolist(), r.t_end.tolist()))
                kernels = {n.split("<")[0] for n in names}
                if not narrow or mode == "local":
                    assert kernels == {"dp_long"}
                elif cfg.scoring.match == 40:
                    assert kernels == {"dp_long16", "dp_long"}
                else:
                    assert set(names) == {f"dp_long16<{gpu_dp.MODES[mode]}, {eq}, true>"}
            assert runs[0] == runs[1]
            assert runs[0][0] == align(cpu, q, t, cfg).score.tolist()
            for i in range(len(q)):
                assert rescore(q[i], t[i], first, i, cfg) == first.score[i]
    finally:
        cpu.close()


def fill16_sets(kind: str, seed: int, mode: str) -> list:
    """(config, (queries, targets), the kernel's name without its TRACE flag and closing bracket) for
    dp_fill16: DNA pairs of every length around the double stripes' 32 rows and the step pairs (1 to 70 rows,
    1 to 70 columns: every remainder), random ones up to 300 bases, N runs, poly-A, long gaps, alignments whose
    first match follows a gap in a second stripe's column 0; scored by DNA match/mismatch (EQ: from the
    letters' codes), DNA with --n-mismatch and protein BLOSUM62 (the shared matrix)."""
    from gpualign.engines import gpu_dp

    rng = np.random.default_rng(seed)
    sizes = [(m, n) for m in (1, 2, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 70) for n in (1, 2, 3, 16, 33, 70)]
    qs = ["".join(rng.choice(list("ACGTN" if i % 5 == 0 else "ACGT"), m)) for i, (m, _) in enumerate(sizes)]
    ts = [mutate(rng, q, "ACGT", 0.2)[:n].ljust(n, "A") for q, (_, n) in zip(qs, sizes)]
    top = 300 if kind == "gpu" else 120
    more = random_pairs(seed, "ACGT", 40 if kind == "gpu" else 15, top)
    qs += more[0] + ["A" * 80, "ACGT" * 20, "N" * 40 + "ACGT" * 5, "ACGTACGTAC" * 3, "G" * 33]
    ts += more[1] + ["A" * 60, "TTT" + "ACGT" * 18, "N" * 30, "ACGTACGTAC" + "T" * 40 + "ACGTACGTAC" * 2, "C" * 90]
    # the best alignment leaves a second stripe's column 0 (rows 17 and 49) for column 1 diagonally
    qs += ["T" * 16 + "ACGTACGTGG", "T" * 48 + "ACGTACGTGG", "T" * 16 + "ACGTACGTGG"]
    ts += ["ACGTACGTGG", "ACGTACGTGG", "ACGTACGTGGCC"]
    aa = random_pairs(seed + 1, AA, 40 if kind == "gpu" else 15, 200)
    aa = ([a or "W" for a in aa[0]] + ["MKV" * 20], [b or "W" for b in aa[1]] + ["MKV" * 11 + "PP"])
    m = gpu_dp.MODES[mode]
    from gpualign import scoring

    def lanes(cfg) -> str:  # (a copy of the matrix a lane where the device has room: the emulator's an H100's)
        k = len(scoring.substitution(cfg).letters)
        return "true" if kind == "emu" or gpu_dp._lane_copies(k) else "false"

    return [(dna_cfg(mode), (qs, ts), f"dp_fill16<{m}, true, false"),
            (dna_cfg(mode, n_mismatch=True), (qs, ts),
             f"dp_fill16<{m}, false, {lanes(dna_cfg(mode, n_mismatch=True))}"),
            (prot_cfg(mode), aa, f"dp_fill16<{m}, false, {lanes(prot_cfg(mode))}")]


def matrix_file(path, letters: str, scores) -> str:
    """A matrix in Biopython's text format: rows are the target's letters, columns the query's."""
    path.write_text("  " + " ".join(letters) + "\n" + "".join(c + " " + " ".join(map(str, row)) + "\n"
                                                            for c, row in zip(letters, scores)))
    return str(path)


@pytest.mark.parametrize("kind", GPU_OR_EMU)
@pytest.mark.parametrize("letters", [4, 27, 28])
def test_gpu_asymmetric_matrices(tmp_path, letters, kind, monkeypatch):
    """A random asymmetric matrix of 4, 27 and 28 letters (rows: the target's letters): gpu-dp's scores equal
    Biopython's score(target, query) and cpu-dp's in every mode, on every kernel (scores only: dp_fill16,
    with a copy of the matrix a lane (27 and 28 letters: more shared memory than a block gets unasked) and,
    semi-global, with one copy (LANE_BLOCKS past any device);
    with CIGARs dp_fill16 too; long pairs dp_long16 and dp_long), and each CIGAR re-scored gives its score. gpu-dp
    read the matrix transposed: a query letter's row."""
    from gpualign.engines import gpu_dp

    abc = "ACGTBDEFHIKLMNOPQRSUVWXYZJ*-"[:letters]
    rng = np.random.default_rng(letters)
    path = matrix_file(tmp_path / "m.txt", abc, rng.integers(-6, 10, (letters, letters)))
    names = record_fills(monkeypatch)
    qs = ["".join(rng.choice(list(abc), int(n))) for n in rng.integers(1, 90, 40)]
    ts = [mutate(rng, x, abc, 0.2) or "A" for x in qs]
    cpu, gpu = CpuDpEngine(2), gpu_engine(kind)
    try:
        for mode, copies in zip(MODES, (4, 10 ** 9, 4)):  # (an SM with room for LANE_BLOCKS blocks of copies, or not)
            monkeypatch.setattr(gpu_dp, "LANE_BLOCKS", copies)
            cfg = AlignConfig(metric="affine", penalties=Penalties(mismatch=1, gap_open=7, gap_extend=2),
                              scoring=Scoring(mode=mode, matrix=path), device="cpu")
            want = [biopython_score(q, t, cfg) for q, t in zip(qs, ts)]
            assert align(cpu, qs, ts, cfg).score.tolist() == want
            for long in (False, True):
                monkeypatch.setattr(gpu_dp, "LONG_ROWS", 0 if long else 384)
                monkeypatch.setattr(gpu_dp, "LONG_CELLS", 0 if long else 1 << 17)
                names.clear()
                assert align(gpu, qs, ts, cfg.with_(distance_only=True)).score.tolist() == want
                res = align(gpu, qs, ts, cfg)
                assert res.score.tolist() == want
                assert [rescore(q, t, res, i, cfg) for i, (q, t) in enumerate(zip(qs, ts))] == want
                kernels = {n.split("<")[0] for n in names}
                assert kernels == ({"dp_long16"} | ({"dp_long"} if mode == "local" else set()) if long else
                                   {"dp_fill16"}), kernels  # (local CIGARs: dp_long)
                if not long:  # (on the GPU: a copy per lane where the device has room for them)
                    lanes = copies == 4 and (kind == "emu" or gpu_dp._lane_copies(letters))  # (emu: an H100's room)
                    for t in ("false", "true"):
                        assert f"dp_fill16<{gpu_dp.MODES[mode]}, false, {'true' if lanes else 'false'}, {t}>" in names
    finally:
        cpu.close()


@pytest.mark.parametrize("kind", GPU_OR_EMU)
@pytest.mark.parametrize("mode", MODES)
def test_gpu_fill16(mode, kind, monkeypatch):
    """dp_fill16 (short pairs, scores only, two int16 cells a word) on fill16_sets: scores equal cpu-dp's,
    and with INT16 off dp_fill's (int32); with a match bonus of 120 the pair whose values could pass int16
    (120 x ~300 > 32,767) goes to dp_fill in the same batch, right too; a mismatch of 700 (-infinity plus
    it, o and e: 32 short of wrapping) on dp_fill16, and global and semi-global pairs whose lower bound
    passes it on dp_fill."""
    from gpualign.engines import gpu_dp

    names = []
    fill = gpu_dp.GpuDpEngine._fill
    monkeypatch.setattr(gpu_dp.GpuDpEngine, "_fill", lambda self, name, *a: names.append(name) or fill(self, name, *a))
    cpu, gpu = CpuDpEngine(2), gpu_engine(kind)
    try:
        for cfg, (q, t), name in fill16_sets(kind, 27, mode):
            c = cfg.with_(distance_only=True)
            names.clear()
            want = align(cpu, q, t, c).score.tolist()
            assert align(gpu, q, t, c).score.tolist() == want
            assert set(names) == {name + ", false>"}
            monkeypatch.setattr(gpu_dp, "INT16", False)
            names.clear()
            assert align(gpu, q, t, c).score.tolist() == want
            assert set(names) == {f"dp_fill<{gpu_dp.MODES[mode]}, false>"}
            monkeypatch.setattr(gpu_dp, "INT16", True)
        rng = np.random.default_rng(28)
        qs = ["".join(rng.choice(list("ACGT"), n)) for n in (30, 60, 100, 300, 250)]
        ts = [mutate(rng, x, "ACGT", 0.1) for x in qs]
        for c in (dna_cfg(mode, match=120, distance_only=True),
                  dna_cfg(mode, distance_only=True).with_(penalties=Penalties(700, 2, 1))):
            names.clear()
            assert align(gpu, qs, ts, c).score.tolist() == align(cpu, qs, ts, c).score.tolist()
            kernels = {n.split("<")[0] for n in names}
            both = c.scoring.match == 120 or mode != "local"
            assert kernels == ({"dp_fill16", "dp_fill"} if both else {"dp_fill16"})
    finally:
        cpu.close()


@pytest.mark.parametrize("kind", GPU_OR_EMU)
@pytest.mark.parametrize("mode", MODES)
def test_gpu_fill16_cigars(mode, kind, monkeypatch):
    """dp_fill16 with CIGARs (TRACE: directions in 16-byte words of two stripes, dp_trace's LAYOUT 3; local's end
    cell found per column) on fill16_sets and on local ties (the best score in both stripes of a double
    stripe, in several columns and rows, at its first column and in its last): the very CIGARs, coordinates
    and scores of dp_fill (int32, the same tie rule), over launches cut small; scores equal cpu-dp's, every
    CIGAR re-scored; with a match bonus of 120 the pairs that could pass int16 go to dp_fill in the same
    batch."""
    from gpualign.engines import gpu_dp

    names = []
    fill = gpu_dp.GpuDpEngine._fill
    monkeypatch.setattr(gpu_dp.GpuDpEngine, "_fill", lambda self, name, *a: names.append(name) or fill(self, name, *a))
    monkeypatch.setattr(gpu_dp, "DIR_BYTES", 1 << 16)
    ties = (["ACGT" * 12, "T" * 20 + "GATTACA" + "T" * 9 + "GATTACA" + "T" * 30, "GATTACA" * 9, "A" * 31 + "C",
             "C" + "A" * 40, "GG" + "ACGT" * 9 + "GG"],
            ["ACGT", "GATTACA", "TTGATTACAGATTACATT", "AC", "CA", "ACGT" * 9])
    cpu, gpu = CpuDpEngine(2), gpu_engine(kind)
    try:
        rng = np.random.default_rng(30)
        big = ["".join(rng.choice(list("ACGT"), n)) for n in (30, 60, 100, 300, 250)]
        sets = fill16_sets(kind, 29, mode)
        sets += [(dna_cfg(mode), ties, sets[0][2]),
                 (dna_cfg(mode, match=120), (big, [mutate(rng, x, "ACGT", 0.1) for x in big]), None)]
        for cfg, (q, t), name in sets:
            runs = []
            for narrow in (True, False):
                monkeypatch.setattr(gpu_dp, "TRACE16", narrow)
                names.clear()
                r = align(gpu, q, t, cfg)
                runs.append((r.score.tolist(), C.to_text(r.cigar, r.cigar_off, r.cigar_len), r.q_start.tolist(),
                             r.q_end.tolist(), r.t_start.tolist(), r.t_end.tolist()))
                kernels = {n.split("<")[0] for n in names}
                if not narrow:
                    assert kernels == {"dp_fill"}
                elif name is None:  # (match 120: the longer pairs' values could pass int16)
                    assert kernels == {"dp_fill16", "dp_fill"}
                else:
                    assert set(names) == {name + ", true>"}
                if narrow:
                    for i in range(len(q)):
                        assert rescore(q[i], t[i], r, i, cfg) == r.score[i], (q[i], t[i])
            assert runs[0] == runs[1]
            assert runs[0][0] == align(cpu, q, t, cfg).score.tolist()
    finally:
        cpu.close()


def test_equality_scores():
    """dp_long16's EQ instance takes only an M diagonal with X <= 0 <= M - X elsewhere."""
    from gpualign import scoring
    from gpualign.engines import gpu_dp

    def table(diag, off, k=4):
        rows = tuple(tuple(diag if i == j else off for j in range(k)) for i in range(k))
        return scoring.Substitution("t", "ACGT"[:k], rows)

    assert gpu_dp.equality_scores(scoring.substitution(dna_cfg("local")))
    assert gpu_dp.equality_scores(table(0, 0)) and gpu_dp.equality_scores(table(5, -1000))
    assert not gpu_dp.equality_scores(table(-3, -1))  # M < X
    assert not gpu_dp.equality_scores(table(2, 1))  # X > 0
    assert not gpu_dp.equality_scores(table(5, -1020))  # M - X > 1024
    assert not gpu_dp.equality_scores(scoring.substitution(dna_cfg("local", n_mismatch=True)))
    assert not gpu_dp.equality_scores(scoring.substitution(prot_cfg("local")))


@pytest.mark.parametrize("mode", MODES)
def test_h_range_bounds_every_cell(mode):
    """gpu_dp.h_range (what fits16 proves int16 safety from) against every H of Gotoh's DP, written out here
    in full, on random and adversarial pairs and scorings; global's lower bound reached exactly by 35 A
    against 3 C (three mismatches and one gap of 32); and cpu_dp.reach (parasail's lanes) against every H, V
    and Z."""
    from gpualign import scoring
    from gpualign.engines import cpu_dp
    from gpualign.engines import gpu_dp

    rng = np.random.default_rng(26)
    pairs = [("".join(rng.choice(list("ACGT"), rng.integers(1, 40))), "".join(rng.choice(list("ACGT"), rng.integers(1, 40))))
             for _ in range(40)] + [("A" * 30, "C" * 30), ("A" * 35, "C" * 3), ("G", "T" * 38), ("ACGT" * 8, "ACGT" * 8)]
    for match, mism, o, e in ((2, 3, 5, 2), (1, 4, 0, 1), (0, 1, 3, 3), (5, 1, 10, 1)):
        cfg = AlignConfig(metric="affine", penalties=Penalties(mism, o, e), scoring=Scoring(mode=mode, match=match))
        sub = scoring.substitution(cfg)
        idx = {c: i for i, c in enumerate(sub.letters)}
        a = sub.array()
        for q, t in pairs:
            m, n = len(q), len(t)
            H = np.zeros((m + 1, n + 1), np.int64)
            V = np.full((m + 1, n + 1), -10 ** 9, np.int64)
            Z = np.full((m + 1, n + 1), -10 ** 9, np.int64)
            if mode != "local":
                H[1:, 0] = -(o + e * np.arange(1, m + 1))
                if mode == "global":
                    H[0, 1:] = -(o + e * np.arange(1, n + 1))
            for i in range(1, m + 1):
                for j in range(1, n + 1):
                    V[i, j] = max(V[i - 1, j] - e, H[i - 1, j] - o - e)
                    Z[i, j] = max(Z[i, j - 1] - e, H[i, j - 1] - o - e)
                    H[i, j] = max(H[i - 1, j - 1] + a[idx[t[j - 1]], idx[q[i - 1]]], V[i, j], Z[i, j],
                                  0 if mode == "local" else -10 ** 9)
            lo, hi = gpu_dp.h_range(gpu_dp.MODES[mode], np.array([m]), np.array([n]), sub, o, e)
            assert lo[0] <= H.min() and H.max() <= hi[0], (q, t, match, mism, o, e)
            real = np.concatenate([H.ravel(), V[V > -10 ** 8], Z[Z > -10 ** 8]])
            assert np.abs(real).max() <= cpu_dp.reach(m, n, int(np.abs(a).max()), (o + e, e), mode), (q, t, mode)
            if (q, t, mode, match, mism, o, e) == ("A" * 35, "C" * 3, "global", 2, 3, 5, 2):
                assert H.min() == lo[0] == -78


@pytest.mark.gpu
def test_gpu_concurrent_threads():
    """Two threads aligning batches at once through one gpu-dp engine, each on its own CUDA stream (as
    stages.stream does with `concurrent`), short pairs (dp_fill) and long ones (dp_long), CIGARs and
    scores only: the same scores, CIGARs and coordinates as one batch at a time, and as cpu-dp's scores."""
    from concurrent.futures import ThreadPoolExecutor

    from gpualign.engines import gpu_dp

    gpu, cpu = gpu_dp.GpuDpEngine(), CpuDpEngine(2)
    assert gpu.concurrent >= 2
    sets = [random_pairs(30 + i, "ACGT", 400, 2500 if i % 2 else 300) for i in range(6)]
    batches = [PairBatch.from_sequences([q.encode() for q in qs], [t.encode() for t in ts]) for qs, ts in sets]
    try:
        for cfg in (dna_cfg("local"), dna_cfg("global").with_(distance_only=True)):
            one = [gpu.align(b, cfg) for b in batches]
            for (qs, ts), a in zip(sets, one):
                assert a.score.tolist() == align(cpu, qs, ts, cfg).score.tolist()
            with ThreadPoolExecutor(2) as pool:
                for _ in range(2):
                    both = list(pool.map(lambda b: gpu.align(b, cfg), batches))
                    for a, b in zip(one, both):
                        assert b.score.tolist() == a.score.tolist()
                        assert C.to_text(b.cigar, b.cigar_off, b.cigar_len) == C.to_text(a.cigar, a.cigar_off,
                                                                                         a.cigar_len)
                        assert (b.q_start.tolist(), b.t_start.tolist(), b.t_end.tolist()) == (
                            a.q_start.tolist(), a.t_start.tolist(), a.t_end.tolist())
    finally:
        cpu.close()


@pytest.mark.gpu
def test_cli_gpu_general_scoring(tmp_path):
    """`pairs --device gpu` with a matrix: the gpu-dp engine runs, and writes the scores cpu-dp writes."""
    rng = np.random.default_rng(4)
    qs = ["".join(rng.choice(list(AA), rng.integers(50, 300))) for _ in range(200)]
    ts = [mutate(rng, q, AA, 0.2) for q in qs]
    fasta(tmp_path / "a.fa", qs)
    fasta(tmp_path / "b.fa", ts)
    outs = []
    for dev in ("gpu", "cpu"):
        out, summary = tmp_path / f"{dev}.tsv", tmp_path / f"{dev}.summary"
        rc, _, err = run([str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), "-o", str(out), "-f", "tsv", "-q",
                          "--device", dev, "--mode", "local", "--matrix", "BLOSUM62", "-O", "11", "-E", "1",
                          "--summary", str(summary)])
        assert rc == 0, err
        assert f"route:{dev}-dp\t200" in summary.read_text()
        outs.append([line.split("\t")[2] for line in out.read_text().splitlines()[1:]])
    assert outs[0] == outs[1] and len(outs[0]) == 200


def test_gpu_engine_limits():
    """gpu-dp (asked without a device: accepts() needs none) takes pairs within its cell limit (with
    CIGARs) whose scores int32 holds with room; it leaves the rest, and every non-general job, to the
    other engines; pairs beyond a thread's room go to its warp-per-pair kernel."""
    from gpualign.engines import gpu_dp

    e = gpu_dp.GpuDpEngine()
    batch = PairBatch.from_sequences([b"ACGT" * 50, b"A" * 3000, b"A" * 40_000, b"A" * 8, b"A"],
                                     [b"ACGT" * 50, b"A" * 3000, b"A" * 30_000, b"A" * 3_000_000, b"A"])
    # 40,000 x 30,000 > 2^30 cells; 8 x 3M fills whole tiles of 512 rows: 512 x 3M > 2^30 too
    assert e.accepts(batch, dna_cfg("local")).tolist() == [True, True, False, False, True]
    assert e.accepts(batch, dna_cfg("local", distance_only=True)).all()  # no directions: no cell limit
    assert gpu_dp.is_long(batch.q_len.astype(np.int64), batch.t_len.astype(np.int64)).tolist() == [
        False, True, True, True, False]
    huge = AlignConfig(metric="affine", penalties=Penalties(3, 700_000, 2), scoring=Scoring(mode="local", match=2))
    assert e.accepts(batch, huge).tolist() == [False, False, False, False, True]  # 400 * 700,005 >= 2^28
    assert not e.accepts(batch, AlignConfig(metric="affine")).any()  # WFA's model: the wavefront engines


def test_long_cell_limit_by_kernel(monkeypatch):
    """With CIGARs the cell limit counts a long pair's directions in the layout of the kernel it would run
    on: dp_long16's (tiles of 1,024 rows, 504 more columns) only where it goes there (fits16, not local)."""
    from gpualign.engines import gpu_dp

    e = gpu_dp.GpuDpEngine()
    batch = PairBatch.from_sequences([b"ACGT" * 256 + b"A"], [b"ACGT" * 150])  # 1,025 x 600
    ql, tl = batch.q_len.astype(np.int64), batch.t_len.astype(np.int64)
    assert gpu_dp.long_words(ql, tl)[0] * 16 == 1_016_832 and gpu_dp.long_words(ql, tl, False)[0] * 16 == 2_260_992
    monkeypatch.setattr(gpu_dp, "LONG_MAX_CELLS", 1_500_000)
    assert e.accepts(batch, dna_cfg("global")).tolist() == [False]  # dp_long16's layout
    assert e.accepts(batch, dna_cfg("local")).tolist() == [True]  # local CIGARs: dp_long
    assert e.accepts(batch, dna_cfg("global", match=60)).tolist() == [True]  # 60 x 600 > int16: dp_long
    monkeypatch.setattr(gpu_dp, "INT16", False)
    assert e.accepts(batch, dna_cfg("global")).tolist() == [True]


def test_launches_fit_their_limit():
    """gpu_dp.launches: consecutive ranges of warps covering all of them, each holding at most `limit`
    direction bytes (a warp over the limit alone) and as many warps as fit."""
    from gpualign.engines import gpu_dp

    rng = np.random.default_rng(5)
    for _ in range(2000):
        words = rng.integers(0, 50, int(rng.integers(0, 40)))
        limit = int(rng.integers(1, 600))
        out = gpu_dp.launches(words, limit)
        assert [a for a, _ in out] == [0, *(b for _, b in out[:-1])][:len(out)]
        assert (out[-1][1] if out else 0) == len(words)
        for a, b in out:
            size = int(words[a:b].sum()) * 8
            assert b > a and (size <= limit or b == a + 1)
            if b < len(words):
                assert size + int(words[b]) * 8 > limit  # the next warp would not fit


@pytest.mark.parametrize("kind", GPU_OR_EMU)
def test_device_plan(kind):
    """GpuDpEngine._plan (dp_keys, arrays.argsort on the keys' bits, dp_warps; on the device and emulated): the
    group's pairs by query length, then target length (descending where LONGEST_FIRST), ties in batch order,
    padded to whole warps with -1; per warp its longest target and its longest query's stripes of ROWS
    rows, against a loop over the warps; a group of some of the batch's pairs (a subset, in any order)
    and the whole batch (None)."""
    from gpualign.engines import gpu_dp

    e = gpu_engine(kind)
    rng = np.random.default_rng(6)
    with e._stream():
        import cupy

        for _ in range(200):
            n, top = int(rng.integers(1, 150)), int(rng.choice([5, 400, 70_000]))
            ql, tl = rng.integers(1, top, n), rng.integers(1, top, n)
            if rng.random() < 0.3:  # a longest length of a power of two (the keys' bits: its bit_length)
                ql[0], tl[-1] = 1 << int(rng.integers(0, 17)), 1 << int(rng.integers(0, 17))
            group = None if rng.random() < 0.3 else rng.permutation(n)[:int(rng.integers(1, n + 1))]
            meta = cupy.asarray(np.stack([np.zeros(n), ql, np.zeros(n), tl]).astype(np.int32))
            d_slots, maxn, stripes = e._plan(group, n, meta, int(ql.max()), int(tl.max()))
            pairs = np.arange(n) if group is None else group
            sign = -1 if gpu_dp.LONGEST_FIRST else 1  # (the longest first: descending, ties in batch order)
            want = sorted(pairs.tolist(), key=lambda p: (sign * ql[p], sign * tl[p], pairs.tolist().index(p)))
            slots = cupy.asnumpy(d_slots)
            assert slots.tolist() == want + [-1] * (-len(want) % 32)
            for w in range(len(slots) // 32):
                ps = [p for p in slots[w * 32:(w + 1) * 32] if p >= 0]
                assert (maxn[w], stripes[w]) == (max(tl[ps]), -(-max(ql[ps]) // gpu_dp.ROWS))


@pytest.mark.parametrize("mode", MODES)
def test_fits16_all_is_sound(mode):
    """gpu_dp.fits16_all (every pair proved at once from the lengths' maxima) never holds where fits16 fails
    for some pair, and holds for bench_dp's short sets (DNA 150 x ~300, +2 -3 -(5 + 2L); protein ~350 aa,
    BLOSUM62 11/1)."""
    from gpualign import scoring
    from gpualign.engines import gpu_dp

    rng = np.random.default_rng(8)
    m = gpu_dp.MODES[mode]
    for cfg in (dna_cfg(mode), dna_cfg(mode, match=40), prot_cfg(mode), dna_cfg(mode).with_(penalties=Penalties(700, 2, 1))):
        sub, p = scoring.substitution(cfg), cfg.effective_penalties
        for _ in range(300):
            n, top = int(rng.integers(1, 60)), int(rng.choice([50, 800, 5000, 40_000]))
            ql, tl = rng.integers(1, top, n), rng.integers(1, top, n)
            if gpu_dp.fits16_all(m, ql, tl, sub, p.gap_open, p.gap_extend):
                assert gpu_dp.fits16(m, ql, tl, sub, p.gap_open, p.gap_extend).all()
    for cfg, q, t in ((dna_cfg(mode), 150, 320), (prot_cfg(mode), 380, 380)):
        p = cfg.effective_penalties
        assert gpu_dp.fits16_all(m, np.array([q]), np.array([t]), scoring.substitution(cfg), p.gap_open, p.gap_extend)


def test_team_size():
    """dp_long's warps per pair: teams of 4 while a launch has at most TEAM_PAIRS_PER_SM pairs per SM, one
    warp each beyond."""
    from gpualign.engines import gpu_dp

    top = gpu_dp.TEAM_PAIRS_PER_SM * 132
    assert [gpu_dp.team_size(n, 132) for n in (1, 100, top, top + 1, 1000, 10 ** 6)] == [4, 4, 4, 1, 1, 1]


def test_default_batch_bases():
    """Batches of 2^26 bases for general scoring's scores only (gpu-dp's per-batch work) and for the affine
    metric (the affine engine's per-batch work), else 2^25; general scoring keeps its rule whatever the
    metric it was given (a match bonus chooses affine)."""
    from gpualign.config import default_batch_bases

    assert default_batch_bases(Scoring(match=2), True) == 1 << 26
    assert default_batch_bases(Scoring(match=2), False) == default_batch_bases(Scoring(), True) == 1 << 25
    assert default_batch_bases(Scoring(match=2), False, "affine") == 1 << 25
    assert default_batch_bases(Scoring(match=2), True, "affine") == 1 << 26
    assert default_batch_bases(Scoring(), False, "affine") == default_batch_bases(Scoring(), True, "affine") == 1 << 26
    assert default_batch_bases(Scoring(), False, "edit") == 1 << 25


def test_api_and_routing():
    cfg = dna_cfg("local")
    res = gpualign.align_pairs(["GGACGTAA"], ["CCACGTCC"], cfg)
    assert res.engine == ["cpu-dp"] and res.score.tolist() == [8] and res.cigar == ["4="]
    assert gpualign.align_pairs(["ACGT"], ["ACGA"]).engine == ["cpu-wfa"]  # penalties: unchanged
    with pytest.raises(InputError, match="protein residue 'E'"):
        gpualign.align_pairs(["MKVE"], ["MKVE"], dna_cfg("global"))
    with pytest.raises(ConfigError):
        AlignConfig(metric="affine", scoring=Scoring(match=2, matrix="BLOSUM62")).validate()
    with pytest.raises(ConfigError):
        AlignConfig(scoring=Scoring(mode="semi")).validate()


# ---- CLI ----

def run(args):
    p = run_cli("pairs", *args, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def fasta(path, seqs):
    path.write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(seqs)))
    return str(path)


def test_cli_outputs(tmp_path):
    q = fasta(tmp_path / "q.fa", ["ACGT", "GGACGTAA", "AAAA"])
    t = fasta(tmp_path / "t.fa", ["TTTTACGTTTTT", "CCACGTCC", "CCCC"])
    opts = ["--mode", "local", "--match", "2", "-x", "3", "-O", "5", "-E", "2", "-q"]
    rc, out, err = run([q, t, *opts, "-f", "tsv"])
    assert rc == 0, err
    lines = [x.split("\t") for x in out.splitlines()]
    assert lines[0][:8] == ["query", "target", "score", "query_start", "query_end", "target_start",
                            "target_end", "cigar"]
    assert lines[1][2:8] == ["8", "0", "4", "4", "8", "4="]
    assert lines[3][2:8] == ["0", "0", "0", "0", "0", "*"]  # the empty local alignment
    rc, out, err = run([q, t, *opts, "-f", "sam"])
    recs = [x.split("\t") for x in out.splitlines() if not x.startswith("@")]
    assert recs[0][3] == "5" and recs[0][5] == "4=" and "AS:i:8" in recs[0]
    assert recs[1][3] == "3" and recs[1][5] == "2S4=2S"
    assert recs[2][1] == "4" and recs[2][-1] == "zr:Z:empty_alignment"  # unmapped: score 0
    rc, out, err = run([q, t, *opts])  # PAF: the empty alignment left out
    rows = [x.split("\t") for x in out.splitlines()]
    assert len(rows) == 2 and rows[1][2:4] == ["2", "6"] and rows[1][7:9] == ["2", "6"] and "AS:i:8" in rows[1]


@pytest.mark.parametrize("seqs,opts,needle", [
    (["MKVLE"], ["--match", "2"], "record 1 (r0): protein residue 'L' with DNA scoring"),
    (["MKVJ"], ["--alphabet", "protein"], "record 1 (r0): character 'J' is not in the alphabet of BLOSUM62"),
    (["ACGT"], ["--matrix", "NOPE"], "--matrix NOPE"),
    (["ACGT"], ["--match", "-1"], "--match must be >= 0"),
    # scores beyond SCORE_MAX: parasail's 16-bit table wrapped 32768 to -32768 unflagged (score 0, exit 0), and
    # numbers past int64 were tracebacks from pywfa
    (["ACGT"], ["--match", "32768", "--mode", "local"], "--match must be >= 0 and <= 10000"),
    (["ACGT"], ["--match", "1", "-x", "65540"], "--mismatch must be <= 10000"),
    (["ACGT"], ["--match", "99999999999999999999"], "--match must be >= 0 and <= 10000"),
    (["ACGT"], ["--metric", "affine", "-O", "99999999999999999999"], "--gap-open must be <= 10000"),
    (["ACGT"], ["--metric", "affine", "-E", "1073741824"], "--gap-extend must be <= 10000"),
    (["ACGT"], ["--mode", "semi"], "--mode must be one of"),
    (["ACGT"], ["--match", "2", "--metric", "edit"], "use --metric affine"),
    (["ACGT"], ["--alphabet", "protein", "--unknown", "J"], "--unknown J"),
    (["ACGT"], ["--mode", "local"], "--mode local needs scores above 0"),
    (["ACGT"], ["--mode", "local", "--match", "0", "-x", "4"], "--mode local needs scores above 0"),
    (["MKV"], ["--alphabet", "protein", "--match", "5"], "--match and --alphabet protein (scored by BLOSUM62)"),
    # -x with a matrix was ignored without a word (exit 0): the matrix holds the mismatch scores
    (["MKV"], ["--alphabet", "protein", "-x", "10000"], "-x and --alphabet protein (scored by a matrix) exclude"),
    (["ACGT"], ["--matrix", "BLOSUM62", "-x", "5"], "-x and --matrix exclude each other"),
    (["ACGT"], ["-m", "affine", "--unknown", "N"], "--unknown applies to general scoring"),  # (was ignored)
    (["ACGT"], ["--unknown", "N"], "--unknown applies to general scoring"),
    # matrix files Biopython reads with scores of 0 where entries are missing (exit 0), or with a traceback
    (["AC"], ["--matrix", "FILE:   A C\nA 1 -1\nC -1\n"], "FILE: line 3: 1 scores after its letter, for 2 letters"),
    (["AC"], ["--matrix", "FILE:   A C G\nA 1 -1 0\nC -1 1 0\n"], "FILE: 2 rows of scores for 3 letters"),
    (["AC"], ["--matrix", "FILE:"], "FILE: no letters (an empty file)"),
    # Biopython stopped on these with an assertion (a traceback), or read rows past the letters' count as nothing
    (["AC"], ["--matrix", "FILE:  A C\nA 1 -1\n# a note\nC -1 1\n"], "FILE: line 3: the row of 'C' expected here"),
    (["AC"], ["--matrix", "FILE:  A C\nC 1 -1\nA -1 1\n"], "FILE: line 2: the row of 'A' expected here"),
    (["AC"], ["--matrix", "FILE:  A C\nA 1 -1\n\nC -1 1\n"], "FILE: line 3: the row of 'C' expected here"),
    (["AC"], ["--matrix", "FILE:  A C\nA 1 -1\nC -1 1\nG 1 1\n"], "FILE: line 4: more rows than letters"),
    # a form feed is no line end to Biopython's reader (row C inside row A's line: C scored 0)
    (["AC"], ["--matrix", "FILE:  A C\nA 1 -1\x0cC -1 1\n"], "FILE: line 2: 5 scores after its letter, for 2 letters"),
    (["AC"], ["--matrix", "DIR"], "DIR: a directory, not a matrix file"),
    # a pipe (<(...)): Biopython read it without the layout check, then the next read found it drained
    (["AC"], ["--matrix", "FIFO"], "FIFO: not a regular file"),
])
def test_cli_bad_input(tmp_path, seqs, opts, needle):
    q = fasta(tmp_path / "q.fa", seqs)
    if opts[-1].startswith("FILE:"):
        (tmp_path / "m.txt").write_text(opts[-1][5:])
        opts, needle = opts[:-1] + [str(tmp_path / "m.txt")], needle.replace("FILE", str(tmp_path / "m.txt"))
    elif opts[-1] == "FIFO":
        os.mkfifo(tmp_path / "m.fifo")
        opts, needle = opts[:-1] + [str(tmp_path / "m.fifo")], needle.replace("FIFO", str(tmp_path / "m.fifo"))
    elif opts[-1] == "DIR":
        opts, needle = opts[:-1] + [str(tmp_path)], needle.replace("DIR", str(tmp_path))
    rc, out, err = run([q, q, *opts, "-q"])
    assert rc != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], err


def test_matrix_named_as_a_relative_directory(tmp_path, monkeypatch):
    """--matrix naming a directory by a relative name that is no Biopython matrix says it is a directory (it
    said only 'neither a file nor a matrix Biopython knows')."""
    q = fasta(tmp_path / "q.fa", ["AC"])
    (tmp_path / "mats").mkdir()
    monkeypatch.chdir(tmp_path)
    rc, out, err = run([q, q, "--matrix", "mats", "-q"])
    lines = err.strip().splitlines()
    assert rc != 0 and out == "" and len(lines) == 1, err
    assert "--matrix mats: a directory, not a matrix file, nor a matrix Biopython knows (" in lines[0], err


def test_matrix_files_biopython_ships_and_a_directory_named_like_one(tmp_path, monkeypatch):
    """Every matrix file Biopython ships passes the layout check (comment lines, NCBI headers, '*'), and a
    directory named BLOSUM62 where the command runs leaves --alphabet protein's BLOSUM62 (Biopython's) as it was;
    comment and blank lines around a matrix are taken where Biopython takes them."""
    import glob

    from gpualign.scoring import _check_layout

    files = glob.glob(os.path.join(os.path.dirname(substitution_matrices.__file__), "data", "*"))
    assert len(files) > 20
    for f in files:
        _check_layout(f)
    (tmp_path / "BLOSUM62").mkdir()
    (tmp_path / "m.txt").write_text("# made here\n#\n  A C\nA 2 -1\nC -1 2\n\n# a note after (refused before)\n")
    monkeypatch.chdir(tmp_path)
    q = fasta(tmp_path / "q.fa", ["MKVLAC"])
    rc, out, err = run([q, q, "--alphabet", "protein", "-q", "-f", "tsv"])
    assert rc == 0 and out.splitlines()[1].split("\t")[2] == "31", err  # (M 5, K 5, V 4, L 4, A 4, C 9)
    a = fasta(tmp_path / "a.fa", ["ACCA"])
    rc, out, err = run([a, a, "--matrix", "m.txt", "-q", "-f", "tsv"])
    assert rc == 0 and out.splitlines()[1].split("\t")[2] == "8", err


@pytest.mark.parametrize("gap", [0, 3])
def test_check_batch_names_the_first_bad_letter(gap):
    """check_batch on a batch whose sequences lie end to end (the readers') and on one with bytes between
    them (gathered): the same record and letter; the bytes between are not checked."""
    from gpualign.scoring import check_batch, substitution

    q, t = [b"ACGT", b"GGA", b"TTT"], [b"ACG", b"CA9", b"A8A"]
    seq, off = bytearray(), []
    for s in q + t:
        off.append(len(seq))
        seq += s + b"#" * gap
    lens = np.array([len(s) for s in q + t], np.int64)
    offs = np.array(off, np.int64)
    batch = PairBatch(np.frombuffer(bytes(seq), np.uint8), offs[:3], lens[:3], offs[3:], lens[3:],
                      np.arange(3, dtype=np.int64), ["a", "b", "c"], ["x", "y", "z"])
    cfg = dna_cfg("local")
    check_batch(replace_seq(batch, b"T", b"9", b"8"), substitution(cfg), cfg)  # all letters good
    with pytest.raises(InputError, match=r"^t.fa: record 2 \(y\): character '9' is not in the alphabet"):
        check_batch(batch, substitution(cfg), cfg, "q.fa", "t.fa")


def replace_seq(batch, new, *old):
    """batch with each letter of old replaced by new in its buffer."""
    import dataclasses

    seq = batch.seq.tobytes()
    for o in old:
        seq = seq.replace(o, new)
    return dataclasses.replace(batch, seq=np.frombuffer(seq, np.uint8))


def test_cli_unknown_maps(tmp_path):
    q = fasta(tmp_path / "q.fa", ["MKVJ"])
    rc, out, err = run([q, q, "--alphabet", "protein", "--unknown", "X", "-O", "11", "-E", "1", "-q", "-f", "tsv"])
    assert rc == 0, err
    m = substitution_matrices.load("BLOSUM62")
    assert out.splitlines()[1].split("\t")[2] == str(int(sum(m[c, c] for c in "MKVX")))


def test_matrix_from_file(tmp_path, engine):
    path = tmp_path / "m.txt"
    path.write_text("   A  C  G  T\nA  5 -4 -4 -4\nC -4  5 -4 -4\nG -4 -4  5 -4\nT -4 -4 -4  5\n")
    cfg = AlignConfig(metric="affine", penalties=DNA, scoring=Scoring(matrix=str(path)), device="cpu")
    res = align(engine, ["ACGTT"], ["ACGAT"], cfg)
    assert int(res.score[0]) == 4 * 5 - 4
    assert os.path.isfile(path)


def test_matrix_scores_beyond_the_limit(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text("   A  C  G  T\nA  40000 -4 -4 -4\nC -4  5 -4 -4\nG -4 -4  5 -4\nT -4 -4 -4  5\n")
    q = fasta(tmp_path / "q.fa", ["ACGT"])
    rc, out, err = run([q, q, "--matrix", str(path), "-q"])
    assert rc == 2 and out == "" and "scores must lie within -10000..10000" in err and "Traceback" not in err


def test_traceback_limit_fails_the_pair(monkeypatch):
    import gpualign.engines.cpu_dp as dp

    monkeypatch.setattr(dp, "DP_TRACE_CELLS", 100)  # read where the pairs align: inline here (one process)
    res = align(CpuDpEngine(1), ["A" * 20, "ACGT"], ["A" * 20, "ACGT"], dna_cfg("global"))
    assert res.status.tolist() == [2, OK] and "cells exceed" in res.reason[0]
    assert int(res.score[1]) == 8


def test_cli_bam_and_semi_global_paf(tmp_path):
    import pysam

    q = fasta(tmp_path / "q.fa", ["GGACGTAA", "ACGT"])
    t = fasta(tmp_path / "t.fa", ["CCACGTCC", "TTTTACGTTTTT"])
    bam = str(tmp_path / "out.bam")
    rc, _, err = run([q, t, "--mode", "local", "--match", "2", "-q", "-o", bam])
    assert rc == 0, err
    with pysam.AlignmentFile(bam) as fh:
        recs = list(fh)
    assert [(r.reference_start, r.cigarstring, r.get_tag("AS")) for r in recs] == [(2, "2S4=2S", 8), (4, "4=", 8)]
    rc, out, err = run([q, t, "--mode", "semi-global", "--match", "2", "-x", "3", "-O", "5", "-E", "2", "-q"])
    assert rc == 0, err
    row = out.splitlines()[1].split("\t")
    assert row[2:4] == ["0", "4"] and row[7:9] == ["4", "8"] and "AS:i:8" in row and "cg:Z:4=" in row


def test_semi_global_all_insertion_inside_the_target(tmp_path):
    """A semi-global alignment that consumes no target base (every query base an insertion) stands inside the
    target: SAM POS at most LN (parasail places it after the last base: POS LN + 1), PAF's target start at
    most its length - 1, the score the same."""
    import pysam

    q = fasta(tmp_path / "q.fa", ["AAAA", "AAA"])
    t = fasta(tmp_path / "t.fa", ["C", "CCCCGGGG"])
    args = [q, t, "--mode", "semi-global", "--match", "1", "-x", "100", "-O", "6", "-E", "2", "-q"]
    rc, out, err = run(args + ["-f", "sam"])
    assert rc == 0, err
    recs = [line.split("\t") for line in out.splitlines() if not line.startswith("@")]
    assert [(r[5], r[-1]) for r in recs] == [("4I", "AS:i:-14"), ("3I", "AS:i:-12")]
    assert recs[0][3] == "1" and 1 <= int(recs[1][3]) <= 8  # (at most LN; where is the engine's choice)
    rc, out, err = run(args + ["-f", "paf"])
    assert rc == 0, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert rows[0][6:9] == ["1", "0", "0"] and rows[1][6] == "8" and rows[1][7] == rows[1][8]
    assert 0 <= int(rows[1][7]) <= 7 and int(rows[1][7]) + 1 == int(recs[1][3])
    bam = str(tmp_path / "o.bam")
    rc, _, err = run(args + ["-o", bam])
    assert rc == 0, err
    with pysam.AlignmentFile(bam) as fh:
        assert all(r.reference_start < fh.get_reference_length(r.reference_name) for r in fh)
