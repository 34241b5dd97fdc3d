"""`gpualign genome` without --distance-only: the Hirschberg split logic against a full DP, whole
alignments re-scored by the independent CIGAR check (cost = edlib distance), the CLI's formats (BAM's
long CIGARs in CG:B:I), and the GPU splitter (device, and its kernels on the CPU: tests/emu)."""

import gzip
import struct
import time

import edlib
import emu
import numpy as np
import pysam
import pytest

from cli_helper import run_cli
from gpualign import cigar as C
from gpualign import hirschberg as H
from gpualign.config import AlignConfig, Penalties
from gpualign.engines import select_engines
from gpualign.genome_path import leaf_aligner
from test_genome import mutate, rand, run, write_fa

EDIT = Penalties(mismatch=1, gap_open=0, gap_extend=1)


def full_dp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """D[i][j] for every prefix pair (the oracle: O(n m) memory, small inputs only)."""
    n, m = len(a), len(b)
    d = np.zeros((n + 1, m + 1), np.int64)
    d[:, 0] = np.arange(n + 1)
    d[0, :] = np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (a[i - 1] != b[j - 1]))
    return d


def codes(s: bytes) -> np.ndarray:
    return np.frombuffer(s, np.uint8)


SMALL = {
    "random": (rand(60, 1), rand(50, 2)),
    "close": (rand(80, 3), mutate(rand(80, 3), 0.1, 4)),
    "repeats": (b"ACACACACACACACAC" * 4, b"ACACACAC" * 7 + b"GG"),
    "poly_a": (b"A" * 40, b"A" * 25),
    "query_longer": (rand(90, 5), rand(30, 6)),
    "one_base": (b"G", rand(40, 7)),
    "identical": (rand(64, 8), rand(64, 8)),
}


@pytest.mark.parametrize("case", sorted(SMALL))
@pytest.mark.parametrize("tie", ["first", "last", "random"])
def test_dp_split_cell_is_on_an_optimal_path(case, tie):
    """The split cell (i, j) lies on an optimal path (forward + backward DP through it = d), d1 is its
    forward distance, whichever of the tied rows is picked."""
    q, t = (codes(s) for s in SMALL[case])
    fwd = full_dp(q, t)
    bwd = full_dp(q[::-1], t[::-1])[::-1, ::-1]  # bwd[i][j]: q[i:] vs t[j:]
    d = int(fwd[-1, -1])
    rng = np.random.default_rng(0)
    pick = {"first": None, "last": lambda c: c[-1], "random": lambda c: rng.choice(c)}[tie]
    i, j, d1 = H.dp_split(q, t, H.Pieces.one(len(q), len(t), d), pick)
    i, j, d1 = int(i[0]), int(j[0]), int(d1[0])
    assert fwd[i, j] + bwd[i, j] == d
    assert d1 == fwd[i, j]
    longer = max(len(q), len(t))
    assert (j == len(t) // 2) if len(t) >= len(q) else (i == len(q) // 2), longer


def test_dp_split_sub_pieces_and_wrong_distance():
    q, t = codes(rand(70, 11)), codes(mutate(rand(70, 11), 0.2, 12))
    fwd = full_dp(q, t)
    p = H.Pieces(*(np.array(v, np.int64) for v in ([5, 30], [30, 70], [4, 31], [31, len(t)],
                                                   [int(full_dp(q[5:30], t[4:31])[-1, -1]),
                                                    int(full_dp(q[30:], t[31:])[-1, -1])])))
    i, j, d1 = H.dp_split(q, t, p)
    for k in range(2):
        sub = full_dp(q[p.qa[k]:p.qb[k]], t[p.ta[k]:p.tb[k]])
        bwd = full_dp(q[p.qa[k]:p.qb[k]][::-1], t[p.ta[k]:p.tb[k]][::-1])[::-1, ::-1]
        a, b = i[k] - p.qa[k], j[k] - p.ta[k]
        assert sub[a, b] + bwd[a, b] == p.d[k] and d1[k] == sub[a, b]
    with pytest.raises(RuntimeError, match="piece distance"):
        H.dp_split(q, t, H.Pieces.one(len(q), len(t), int(fwd[-1, -1]) + 1))


def test_split_level_keeps_order_and_cover():
    p = H.Pieces(*(np.array(v, np.int64) for v in ([0, 10, 20], [10, 20, 30], [0, 12, 25], [12, 25, 33],
                                                   [5, 6, 7])))
    which = np.array([True, False, True])
    out = H.split_level(p, np.array([4, 27]), np.array([6, 29]), np.array([2, 3]), which)
    assert out.qa.tolist() == [0, 4, 10, 20, 27] and out.qb.tolist() == [4, 10, 20, 27, 30]
    assert out.ta.tolist() == [0, 6, 12, 25, 29] and out.tb.tolist() == [6, 12, 25, 29, 33]
    assert out.d.tolist() == [2, 3, 6, 3, 4]


def test_merge_ops_and_trivial():
    ops = np.array([3 << 4 | C.EQ, 2 << 4 | C.EQ, 1 << 4 | C.X, 1 << 4 | C.I, 4 << 4 | C.I, 2 << 4 | C.EQ], np.uint32)
    assert C.to_text(C.pack_runs(ops & 15, ops >> 4), np.array([0]), np.array([4]))[0] == "5=1X5I2="


def test_merge_runs_cuts_ops_longer_than_a_packed_op_holds():
    op = np.array([C.EQ, C.EQ, C.X], np.uint32)
    ops = C.pack_runs(op, np.array([C.MAX_OP, 5, 2], np.int64))
    assert [(int(v & 15), int(v >> 4)) for v in ops] == [(C.EQ, C.MAX_OP), (C.EQ, 5), (C.X, 2)]
    ops = C.pack_runs(np.array([C.D], np.uint32), np.array([3 * C.MAX_OP + 1], np.int64))
    assert [int(v >> 4) for v in ops] == [C.MAX_OP] * 3 + [1]


def _runs_reference(op, length):
    """pack_runs by a plain loop: zero lengths dropped, equal neighbours merged, as (op, length) pairs."""
    out = []
    for o, n in zip(op.tolist(), length.tolist()):
        if n == 0:
            continue
        if out and out[-1][0] == o:
            out[-1][1] += n
        else:
            out.append([o, n])
    return [tuple(r) for r in out]


@pytest.mark.parametrize("seed", range(6))
def test_pack_runs_merged_and_op_sums_against_a_loop(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(0, 400))
    codes_ = np.array([C.EQ, C.X, C.I, C.D], np.uint32)
    op = rng.choice(codes_[: int(rng.integers(1, 5))], size).astype(np.uint32)  # (one code: everything merges)
    length = rng.integers(0, 4 if seed % 2 else 1_000, size).astype(np.int64)
    want = _runs_reference(op, length)
    ops = C.pack_runs(op, length)
    assert [(int(v & 15), int(v >> 4)) for v in ops] == want
    packed = (length.astype(np.uint32) << 4) | op
    assert [(int(v & 15), int(v >> 4)) for v in C.merged(packed)] == want
    sums = C.op_sums(packed)
    for code in codes_:
        assert sums[code] == int(length[op == code].sum())
    assert C.consumed(packed) == (int(length[np.isin(op, [C.EQ, C.X, C.I])].sum()),
                                  int(length[np.isin(op, [C.EQ, C.X, C.D])].sum()))
    assert H.edits(packed) == int(length[op != C.EQ].sum())
    one = C.op_totals(packed, np.zeros(1, np.int64), np.array([size], np.int64))  # (one pair: op_sums' way)
    two = C.op_totals(np.concatenate([packed, packed[:7]]), np.array([0, size], np.int64),
                      np.array([size, min(7, size)], np.int64))  # (pair keys' way)
    assert all(one[k].tolist() == two[k][:1].tolist() for k in ("matches", "mismatches", "ins", "dels"))


@pytest.mark.parametrize("seed", range(8))
def test_merged_few_merges_against_a_loop(seed):
    """merged where few ops merge (the summed-in-place way): groups of 2 to 5 equal ops, at the start and the
    end too, lengths that sum past what one packed op holds (then the runs' way), against the plain loop."""
    rng = np.random.default_rng(100 + seed)
    size = int(rng.integers(2, 3_000))
    op = np.resize(np.array([C.EQ, C.X, C.EQ, C.I, C.EQ, C.D], np.uint32), size)
    for at in rng.integers(0, size, int(rng.integers(0, size // 20 + 2))):
        op[at:at + int(rng.integers(2, 6))] = op[at]
    if seed % 3 == 0:
        op[:3] = op[0]
        op[-3:] = op[-1]
    big = seed == 7
    length = rng.integers(1, C.MAX_OP if big else 10_000, size).astype(np.int64)
    want = _runs_reference(op, length)
    got = C.merged((length.astype(np.uint32) << 4) | op)
    if big:  # (a sum past MAX_OP is cut into several ops by pack_runs)
        assert got.tobytes() == C.pack_runs(op, length).tobytes()
    else:
        assert [(int(v & 15), int(v >> 4)) for v in got] == want


@pytest.mark.parametrize("case", ["big_deletion", "big_insertion", "identical", "one_empty"])
def test_align_path_stitches_long_easy_ops_the_same(case, cpu_chain, monkeypatch):
    """An easy piece's op too long to pack as it is (MAX_OP lowered: the runs' way, pack_runs cutting none
    here) stitches the CIGAR the packed way does, byte for byte."""
    monkeypatch.setattr(H, "LEAF_SHORT", 300)
    monkeypatch.setattr(H, "LEAF_LONG", 1_000)
    monkeypatch.setattr(H, "LEAF_EDITS", 20)
    q, t = PATHS[case]()
    d = edlib.align(q, t, task="distance")["editDistance"]
    run = lambda: H.align_path(codes(q), codes(t), H.Pieces.one(len(q), len(t), d), H.dp_split,  # noqa: E731
                               leaf_aligner(*cpu_chain)).tobytes()
    packed = run()
    monkeypatch.setattr(H, "MAX_OP", 1)
    placed = []  # the runs' way places the leaves' ops by segment_index (the packed way does not)
    real = H.segment_index
    monkeypatch.setattr(H, "segment_index", lambda *a: placed.append(a) or real(*a))
    assert run() == packed
    assert placed or case in ("identical", "one_empty")  # (no leaves there: one easy piece)
    ops = np.frombuffer(packed, np.uint32)
    C.check_cigar(q, t, ops)
    assert C.score_cigar(ops, EDIT) == d


def test_align_path_trivial_pieces():
    """Empty sides, distance 0 and empty pieces need no engine; neighbours' equal ops merge."""
    q, t = codes(b"ACGTTTAC"), codes(b"ACGGGTTTAC")
    p = H.Pieces(*(np.array(v, np.int64) for v in ([0, 3, 3, 3, 8], [3, 3, 3, 8, 8], [0, 3, 5, 5, 10],
                                                   [3, 5, 5, 10, 10], [0, 2, 0, 0, 0])))
    ops = H.align_path(q, t, p, None, None)
    assert C.to_text(ops, np.array([0]), np.array([len(ops)]))[0] == "3=2D5="


PATHS = {
    "10pct": lambda: (rand(6_000, 21), mutate(rand(6_000, 21), 0.10, 22)),
    "unrelated": lambda: (rand(3_000, 23), rand(2_500, 24)),
    "big_deletion": lambda: (rand(5_000, 25)[:1_000] + rand(5_000, 25)[4_000:], rand(5_000, 25)),
    "big_insertion": lambda: (rand(5_000, 26), rand(5_000, 26)[:2_000] + rand(5_000, 26)[4_500:]),
    "identical": lambda: (rand(4_000, 27), rand(4_000, 27)),
    "one_empty": lambda: (b"", rand(3_000, 28)),
    "tandem_repeats": lambda: (b"ACGTTG" * 700, b"ACGTTG" * 650 + b"ACGATG" * 40),
    "n_runs": lambda: (rand(3_000, 29)[:1_000] + b"N" * 800 + rand(3_000, 29)[1_800:],
                       mutate(rand(3_000, 29), 0.05, 30)),
}


@pytest.fixture(scope="module")
def cpu_chain():
    cfg = AlignConfig(device="cpu", threads=2)
    chain, _ = select_engines(cfg)
    yield chain, cfg
    for e in chain:
        e.close()


@pytest.mark.parametrize("case", sorted(PATHS))
def test_align_path_cpu_splitter(case, cpu_chain, monkeypatch):
    """The whole driver (plain DP splits, leaves by the CPU engine): CIGAR valid, cost = edlib distance."""
    monkeypatch.setattr(H, "LEAF_SHORT", 300)
    monkeypatch.setattr(H, "LEAF_LONG", 1_000)
    monkeypatch.setattr(H, "LEAF_EDITS", 20)
    q, t = PATHS[case]()
    d = edlib.align(q, t, task="distance")["editDistance"]
    levels = []
    ops = H.align_path(codes(q), codes(t), H.Pieces.one(len(q), len(t), d), H.dp_split,
                       leaf_aligner(*cpu_chain), levels.append)
    C.check_cigar(q, t, ops)
    assert C.score_cigar(ops, EDIT) == d
    if max(len(q), len(t)) > 1_000 and min(len(q), len(t)) > 0 and d > 0:
        assert len(levels) >= 3  # split more than once


class _DpSplitter:
    """hirschberg.dp_split with the cells count a spread splitter sums (here: the pieces it split)."""

    def __init__(self, q, t):
        self.cells = 0

    def __call__(self, q, t, p):
        self.cells += len(p)
        return H.dp_split(q, t, p)


@pytest.mark.parametrize("case", ["10pct", "big_deletion", "unrelated", "tandem_repeats"])
@pytest.mark.parametrize("devices", [2, 3])
def test_spread_path_is_the_one_device_path(case, devices, cpu_chain, monkeypatch):
    """A pair's levels and leaves divided among devices (emulated: threads with no device) give the CIGAR of
    the undivided run, byte for byte, valid and of the edlib distance."""
    from gpualign.genome_path import Spread, spread_leaves, spread_splitter

    monkeypatch.setattr(H, "LEAF_SHORT", 300)
    monkeypatch.setattr(H, "LEAF_LONG", 1_000)
    monkeypatch.setattr(H, "LEAF_EDITS", 20)
    q, t = PATHS[case]()
    d = edlib.align(q, t, task="distance")["editDistance"]
    chain, cfg = cpu_chain
    count = _DpSplitter(q, t)
    one = H.align_path(codes(q), codes(t), H.Pieces.one(len(q), len(t), d), count, leaf_aligner(chain, cfg))
    spread = Spread([None] * devices)
    try:
        split = spread_splitter(codes(q), codes(t), spread, make=_DpSplitter)
        ops = H.align_path(codes(q), codes(t), H.Pieces.one(len(q), len(t), d), split,
                           spread_leaves([chain] * devices, cfg, spread))
    finally:
        spread.close()
    assert ops.tobytes() == one.tobytes()
    C.check_cigar(q, t, ops)
    assert C.score_cigar(ops, EDIT) == d
    assert split.cells() == count.cells > 0  # every piece split once, by one of the devices


def test_spread_divides_in_order():
    from gpualign.genome_path import Spread

    spread = Spread([None] * 3)
    try:
        for cost in (np.ones(10), np.array([5.0]), np.array([1.0, 100.0, 1.0]), np.arange(1, 50.0)):
            parts = spread.divide(cost)
            assert len(parts) == 3
            got = np.concatenate([p for p in parts if p is not None])
            assert (got == np.arange(len(cost))).all()
        assert [len(p) for p in spread.divide(np.ones(9))] == [3, 3, 3]
        seen = spread.run(lambda k, part: (k, part), ["a", None, "c"])
        assert seen == [(0, "a"), None, (2, "c")]
        with pytest.raises(ZeroDivisionError):
            spread.run(lambda k, part: 1 // (k - 1), [1, 1, 1])
        ended = []

        def slow_then_fail(k, part):  # device 1 fails at once; device 2's part ends before run() raises
            if k == 1:
                raise ValueError("part 1")
            time.sleep(0.05)
            ended.append(k)

        with pytest.raises(ValueError, match="part 1"):
            spread.run(slow_then_fail, [1, 1, 1])
        assert sorted(ended) == [0, 2]
        from gpualign.devices import DeviceLost
        from gpualign.genome_path import PeerLost

        def lost(k, part):
            if k == 2:
                raise DeviceLost("gone")

        with pytest.raises(PeerLost) as got:
            spread.run(lost, [1, 1, 1])
        assert got.value.index == 1 and isinstance(got.value.error, DeviceLost)
    finally:
        spread.close()


def test_align_path_refuses_a_wrong_leaf(cpu_chain):
    q, t = codes(rand(500, 31)), codes(mutate(rand(500, 31), 0.1, 32))
    d = edlib.align(q.tobytes(), t.tobytes(), task="distance")["editDistance"]
    with pytest.raises(RuntimeError, match="its distance is"):
        H.align_path(q, t, H.Pieces.one(len(q), len(t), d + 1), H.dp_split, leaf_aligner(*cpu_chain))


@pytest.mark.parametrize("rate", [0.01, 0.08])
def test_anchored_pieces_cpu(rate, cpu_chain):
    """The anchored bound's path (long_bound with the CPU engine) as pieces: when the bound equals the
    distance, their costs are exact, they cover both strings in order, and aligning them gives an
    optimal CIGAR."""
    from gpualign import long_bound
    from gpualign.genome_path import anchored_pieces
    from simulate import simulate

    q, t = simulate(1, 200_000, rate, seed=5)
    q, t = q[0], t[0]
    d = edlib.align(q, t, task="distance")["editDistance"]
    chain, cfg = cpu_chain
    b = long_bound.upper_bound(codes(q), codes(t), chain, AlignConfig(distance_only=True, device="cpu", threads=2))
    assert b["bound"] == d  # uniform edits: the anchor chain is optimal (else the command splits instead)
    p = anchored_pieces(len(q), len(t), b["path"])
    assert int(p.d.sum()) == d and len(p) == 2 * b["anchors"] + 1
    assert (p.qa[1:] == p.qb[:-1]).all() and (p.ta[1:] == p.tb[:-1]).all()
    assert p.qa[0] == 0 == p.ta[0] and p.qb[-1] == len(q) and p.tb[-1] == len(t)
    ops = H.align_path(codes(q), codes(t), p, H.dp_split, leaf_aligner(chain, cfg))
    C.check_cigar(q, t, ops)
    assert C.score_cigar(ops, EDIT) == d


@pytest.mark.parametrize("order", ["path", "reversed", "overlapping"])
def test_leaf_batch_holds_each_pieces_bases(order):
    """_leaf_batch's pairs are the pieces' own bases whatever their order (out of path order: gathered)."""
    from gpualign.genome_path import _leaf_batch

    q, t = codes(rand(3_000, 41)), codes(rand(2_800, 42))
    qa, ta = np.array([0, 500, 1_200, 2_000], np.int64), np.array([10, 480, 1_100, 1_900], np.int64)
    ln = np.array([400, 600, 700, 900], np.int64)
    if order == "reversed":
        qa, ta = qa[::-1].copy(), ta[::-1].copy()
    if order == "overlapping":
        qa[2] = 300
    p = H.Pieces(qa, qa + ln, ta, ta + ln - 5, np.ones(4, np.int64))
    b = _leaf_batch(q, t, p)
    for k in range(4):
        assert b.query(k) == q[qa[k]:qa[k] + ln[k]].tobytes() and b.target(k) == t[ta[k]:ta[k] + ln[k] - 5].tobytes()
    assert (len(b.seq) > int(ln.sum() * 2 - 20)) == (order == "path")  # (stretches: the bases between too)


@pytest.mark.parametrize("case", ["anchored", "10pct", "big_deletion", "n_runs"])
def test_leaves_sent_as_stretches_or_gathered(case, cpu_chain, monkeypatch):
    """The leaves' batch as the stretches of q and t they lie in, or each leaf's bases gathered (genome_path's
    SPAN_SHARE either way): the same CIGAR, byte for byte, valid and of the edlib distance; at the default
    share the anchored route's gaps go as stretches."""
    from gpualign import genome_path, long_bound
    from gpualign.genome_path import anchored_pieces
    from simulate import simulate

    chain, cfg = cpu_chain
    if case == "anchored":
        q, t = simulate(1, 60_000, 0.05, seed=7)
        q, t = q[0], t[0]
        b = long_bound.upper_bound(codes(q), codes(t), chain, AlignConfig(distance_only=True, device="cpu",
                                                                          threads=2))
        pieces = anchored_pieces(len(q), len(t), b["path"])
        d = int(pieces.d.sum())
    else:
        monkeypatch.setattr(H, "LEAF_SHORT", 300)
        monkeypatch.setattr(H, "LEAF_LONG", 1_000)
        monkeypatch.setattr(H, "LEAF_EDITS", 20)
        q, t = PATHS[case]()
        d = edlib.align(q, t, task="distance")["editDistance"]
        pieces = H.Pieces.one(len(q), len(t), d)
    made = []  # (bases of the leaves, of the stretches they lie in, of the batch's buffer)
    real = genome_path._leaf_batch

    def leaf_batch(q, t, p):
        b = real(q, t, p)
        made.append((int((p.qb - p.qa).sum() + (p.tb - p.ta).sum()), int(p.qb[-1] - p.qa[0] + p.tb[-1] - p.ta[0]),
                     len(b.seq)))
        return b

    monkeypatch.setattr(genome_path, "_leaf_batch", leaf_batch)
    out, default = {}, genome_path.SPAN_SHARE
    for share in (0.0, 2.0, default):  # every batch as stretches; every one gathered; the default
        monkeypatch.setattr(genome_path, "SPAN_SHARE", share)
        made.clear()
        out[share] = H.align_path(codes(q), codes(t), pieces, H.dp_split, leaf_aligner(chain, cfg)).tobytes()
        assert made and all(size == (span if share == 0.0 else bases) for bases, span, size in made
                            if share != default)
        if case == "anchored" and share == default:
            assert all(size == span > bases for bases, span, size in made)  # (the anchors between the gaps)
    assert out[0.0] == out[2.0] == out[default]
    ops = np.frombuffer(out[0.0], np.uint32)
    C.check_cigar(q, t, ops)
    assert C.score_cigar(ops, EDIT) == d == edlib.align(q, t, task="distance")["editDistance"]


def _bam_first_record_cigar(path: str) -> tuple[int, list]:
    """(n_cigar_op, ops) of the first record, read from the BAM bytes (independent of htslib's decoding)."""
    raw = gzip.open(path).read()
    assert raw[:4] == b"BAM\1"
    at = 8 + struct.unpack_from("<i", raw, 4)[0]
    n_ref = struct.unpack_from("<i", raw, at)[0]
    at += 4
    for _ in range(n_ref):
        at += 4 + struct.unpack_from("<i", raw, at)[0] + 4
    l_name, _, _, n_cigar = struct.unpack_from("<BBHH", raw, at + 12)
    cig = struct.unpack_from(f"<{n_cigar}I", raw, at + 36 + l_name)
    return n_cigar, [(v & 15, v >> 4) for v in cig]


@pytest.mark.slow
def test_cli_cpu_formats(tmp_path, monkeypatch):
    """PAF, SAM, BAM and TSV from the CPU path: CIGARs valid and at the edlib distance; a CIGAR of more
    than 65,535 operations sits in BAM's CG:B:I tag behind the placeholder qlenS tlenN, and comes back whole.
    Aligned once: the CLI writes PAF, then run_genome writes SAM, BAM and TSV with the same alignments
    (compute_pair answering with the PAF's), so that only the writer changes."""
    from gpualign import genome

    big_q = rand(600_000, 41)
    big_t = mutate(big_q, 0.10, 42)
    pairs = [(big_q, big_t), (rand(20_000, 43), mutate(rand(20_000, 43), 0.02, 44).lower()),
             (rand(3_000, 45)[:1_000] + b"N" * 500 + rand(3_000, 45)[1_500:],
              mutate(rand(3_000, 45)[:1_000] + b"N" * 500 + rand(3_000, 45)[1_500:], 0.03, 46))]
    a = write_fa(tmp_path / "a.fa", [(f"q{i}", q) for i, (q, _) in enumerate(pairs)])
    b = write_fa(tmp_path / "b.fa", [(f"t{i}", t) for i, (_, t) in enumerate(pairs)])
    want = [edlib.align(q.upper(), t.upper(), task="distance")["editDistance"] for q, t in pairs]
    outs = {"paf": tmp_path / "o.paf"}
    rc, _, err = run([a, b, "--device", "cpu", "--metric", "edit", "-o", str(outs["paf"])])
    assert rc == 0, err
    assert "CIGAR operations" in err and "expected to take " in err and "cpu-trivial" not in err
    paf = [x.split("\t") for x in outs["paf"].read_text().splitlines()]
    assert len(paf) == len(pairs)
    aligned = {}
    for row, (q, t), d in zip(paf, pairs, want):
        ops = C.from_text(next(f for f in row if f.startswith("cg:Z:"))[5:])
        C.check_cigar(q.upper(), t.upper(), ops)
        assert C.score_cigar(ops, EDIT) == d and f"NM:i:{d}" in row
        assert row[2:4] == ["0", str(len(q))] and row[7:9] == ["0", str(len(t))]
        aligned[row[0], row[5]] = d, ops
    n_big = len(C.from_text(paf[0][-1][5:]))
    assert n_big > 65_535

    monkeypatch.setattr(genome, "compute_pair", lambda qn, tn, *args, **kw: (*aligned[qn, tn], None, "cpu-long",
                                                                             "cpu-long", 0.0))
    for fmt in ("sam", "bam", "tsv"):
        outs[fmt], notices = tmp_path / f"o.{fmt}", []
        genome.run_genome(a, b, str(outs[fmt]), AlignConfig(device="cpu"), on_notice=notices.append)
        assert sum("CIGAR operations" in n for n in notices) == len(pairs), notices
    sam = [r for r in pysam.AlignmentFile(str(outs["sam"]))]
    bam = [r for r in pysam.AlignmentFile(str(outs["bam"]))]
    assert len(sam) == len(bam) == len(pairs)
    for s, bm, row in zip(sam, bam, paf):
        assert s.cigarstring == bm.cigarstring == row[-1][5:].replace("cg:Z:", "")
        assert s.reference_start == 0 and s.get_tag("NM") == int(row[12][5:])
    n_cigar, placeholder = _bam_first_record_cigar(str(outs["bam"]))
    assert n_cigar == 2 and placeholder == [(C.S, len(pairs[0][0])), (C.N, len(pairs[0][1]))]
    tsv = [x.split("\t") for x in outs["tsv"].read_text().splitlines()]
    assert tsv[0][:7] == ["query", "target", "query_len", "target_len", "score", "edit_distance", "cigar"]
    assert [int(r[4]) for r in tsv[1:]] == want and [r[6] for r in tsv[1:]] == [r[-1][5:] for r in paf]
    # --n-mismatch: the N run no longer matches; stdout is PAF
    rc, out, err = run([a, b, "--device", "cpu", "--n-mismatch", "--query-record", "q2", "--target-record", "t2",
                        "-q"])
    assert rc == 0 and err == ""
    row = out.split("\t")
    q, t = pairs[2]
    ops = C.from_text(row[-1].strip()[5:])
    C.check_cigar(q, t, ops, n_mismatch=True)
    from oracles import edit
    assert C.score_cigar(ops, EDIT) == edit(q, t, n_mismatch=True) > want[2]


def test_cli_sam_needs_a_target_file(tmp_path):
    a = write_fa(tmp_path / "a.fa", [("x", rand(100, 1))])
    p = run_cli("genome", a, "-", "--device", "cpu", "-f", "sam", stdin=b">x\nACGT\n", timeout=120)
    assert p.returncode == 2 and b"give the target as a file" in p.stderr


# ---- GPU (device machine) --------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(SMALL))
def test_gpu_splitter_equals_dp(case):
    """BpSplitter on many pieces at once: every cell on an optimal path of its piece, d1 its forward distance."""
    from gpualign.engines.gpu_long import BpSplitter

    q, t = (codes(s) for s in SMALL[case])
    rng = np.random.default_rng(1)
    qa, qb, ta, tb, d = [], [], [], [], []
    for _ in range(40):
        a0, a1 = sorted(rng.integers(0, len(q) + 1, 2))
        b0, b1 = sorted(rng.integers(0, len(t) + 1, 2))
        if max(a1 - a0, b1 - b0) < 2 or min(a1 - a0, b1 - b0) < 1:
            continue
        qa.append(a0), qb.append(a1), ta.append(b0), tb.append(b1)
        d.append(int(full_dp(q[a0:a1], t[b0:b1])[-1, -1]))
    p = H.Pieces(*(np.array(v, np.int64) for v in (qa, qb, ta, tb, d)))
    i, j, d1 = BpSplitter(q, t)(q, t, p)
    for k in range(len(p)):
        a, b = q[qa[k]:qb[k]], t[ta[k]:tb[k]]
        fwd, bwd = full_dp(a, b), full_dp(a[::-1], b[::-1])[::-1, ::-1]
        x, y = i[k] - qa[k], j[k] - ta[k]
        assert fwd[x, y] + bwd[x, y] == d[k] and d1[k] == fwd[x, y], k


GPU_OR_EMU = [pytest.param("gpu", marks=pytest.mark.gpu),
              pytest.param("emu", marks=pytest.mark.skipif(not emu.available(), reason="no g++"))]


def _gpu_or_emu(request, monkeypatch, module, value):
    """value on the device (gpu), or with module's kernels compiled for the CPU and its host code on numpy
    arrays (tests/emu: emu, CI)."""
    if request.param == "gpu":
        yield value
        return
    monkeypatch.setattr(module, "load_module", emu.load_module)
    with emu.cupy_on_numpy():
        yield value


@pytest.fixture(params=GPU_OR_EMU)
def bp_splitter(request, monkeypatch):
    """engines/gpu_long.BpSplitter (its kernels bp_piece_codes, bp_long_jobs, bp_split_min) on the device or
    emulated."""
    from gpualign.engines import gpu_long

    yield from _gpu_or_emu(request, monkeypatch, gpu_long, gpu_long.BpSplitter)


@pytest.mark.parametrize("warps,ring_max", [(None, None), (1, None), (2, None), (None, 1)])
def test_gpu_splitter_many_strips(bp_splitter, warps, ring_max):
    """A level of pieces several strips tall (1,024 rows a strip), both orientations, close and distant,
    with an N run (a symbol that matches nothing): the cells dp_split picks (the same middle, the same
    first tied row). warps: fewer warps launched than strips, so that rings are reused (a half's ring
    holds min(its strips, warps launched) + 1 slots: with one warp, halves of 3 or more strips; with
    two, of 4). ring_max: the level's rings capped (genome_path.SPLIT_RINGS' way), here to one warp's."""
    BpSplitter = bp_splitter
    q = codes(rand(9000, 21)[:4000] + b"N" * 300 + rand(9000, 21)[4300:])
    t = codes(mutate(rand(9000, 21), 0.15, 22) + rand(3000, 23))
    cut = [(0, 2500, 0, 2700), (2500, 5200, 2700, 4600), (5200, 9000, 4600, 9100), (0, 3000, 9100, 12000)]
    qa, qb, ta, tb = (np.array(v, np.int64) for v in zip(*cut))
    d = np.array([H.last_column(q[a:b], t[c:e])[-1] for a, b, c, e in cut], np.int64)
    p = H.Pieces(qa, qb, ta, tb, d)
    sp = BpSplitter(q, t)
    if warps is not None:
        sp.warps = warps
    sp.ring_max = ring_max
    got = sp(q, t, p)
    for g, w in zip(got, H.dp_split(q, t, p)):
        assert np.array_equal(np.asarray(g, np.int64), w)


@pytest.fixture(params=GPU_OR_EMU)
def long_text(request, monkeypatch):
    """text_device.long_cigar_text (lines.cu's kernels) on the device or emulated."""
    from gpualign import text_device

    yield from _gpu_or_emu(request, monkeypatch, text_device, text_device.long_cigar_text)


@pytest.mark.parametrize("size", [0, 1, 255, 256, 257, 20_000])
def test_long_cigar_text_is_the_hosts(size, long_text):
    """One long CIGAR's text and counts made on the device (runs of ops, a thread each) equal the writers' host
    text and totals byte for byte: lengths of 1 to 9 digits, every op the path writes."""
    rng = np.random.default_rng(size)
    op = rng.choice(np.array([C.EQ, C.X, C.I, C.D], np.uint32), size)
    length = 10 ** rng.integers(0, 9, size) + rng.integers(0, 10, size)
    ops = C.pack_runs(op, length)
    (text, start, length_), stats = long_text(ops)
    one = (np.zeros(1, np.int64), np.array([len(ops)], np.int64))
    want, wstart, wlen = C.to_text_buffer(ops, *one)
    assert text.tobytes() == want[int(wstart[0]):int(wstart[0] + wlen[0])].tobytes()
    assert start.tolist() == [0] and length_.tolist() == [len(text)]
    tot = C.op_totals(ops, *one)
    assert stats.tolist() == [[int(tot["matches"][0]), int(tot["mismatches"][0]), int(tot["ins"][0]),
                               int(tot["dels"][0]), int(C.gap_opens(ops, *one)[0])]]


@pytest.mark.parametrize("fmt", ["paf", "sam", "tsv"])
def test_genome_path_text_made_on_the_device_is_the_hosts(fmt, long_text, cpu_chain, tmp_path, monkeypatch):
    """genome's path records with the CIGAR's text and counts from the device (long_cigar_text, every CIGAR
    taken as long) write the bytes the host's text gives, in each format."""
    from gpualign import text_device
    from gpualign.genome import _path_records, _path_writer
    from gpualign.stages import Output

    monkeypatch.setattr(H, "LEAF_SHORT", 300)
    q, t = PATHS["10pct"]()
    d = edlib.align(q, t, task="distance")["editDistance"]
    ops = H.align_path(codes(q), codes(t), H.Pieces.one(len(q), len(t), d), H.dp_split, leaf_aligner(*cpu_chain))
    record = [("q1", "t1", codes(q), codes(t), d, ops, "gpu-long", None)]
    monkeypatch.setattr(text_device, "LONG_CIGAR_MIN", 1)
    out = {}
    for device in (False, True):
        path = str(tmp_path / f"x{device}.{fmt}")
        output = Output(path, binary_via_path=False)
        writer = _path_writer(fmt, output, {"t1": len(t)} if fmt == "sam" else {}, "gpualign genome")
        batch, res = _path_records(record, 0, device)
        assert (res.cigar_text is not None) == device
        writer.write(batch, res)
        writer.close()
        output.commit()
        with open(path, "rb") as fh:
            out[device] = fh.read()
    assert out[True] == out[False] and len(out[True]) > 1_000


@pytest.mark.gpu
@pytest.mark.parametrize("n,rate,oracle", [(5_000_000, 0.01, "edlib"), (5_000_000, 0.10, "wavefront"),
                                          (300_000, 0.30, "edlib"), (200_000, 0.50, "edlib")])
def test_gpu_path_large(n, rate, oracle):
    """Cost = the distance: edlib's, or (5 Mbp at 10%, minutes for edlib) the wavefront kernel's, which
    test_genome checks against edlib and the unpruned kernel."""
    from gpualign.engines import gpu_long
    from gpualign.genome_path import gpu_path

    q = rand(n, n)
    t = mutate(q, rate, n + 1)
    if oracle == "edlib":
        want = edlib.align(q, t, task="distance")["editDistance"]
    else:
        want = gpu_long.distance(codes(q), codes(t))["distance"]
    from gpualign.genome_pair import gpu_bound, kernel_options

    a, b = codes(q), codes(t)
    plan = kernel_options(a, b)
    bound = gpu_bound(a, b, AlignConfig(), detail=True) if plan.anchored else None
    anchored = bound is not None and bound["bound"] == want  # (uniform edits: up to 10% at least)
    assert anchored or rate > 0.10
    for bnd, how in ((bound, "anchors" if anchored else "split"), (None, "split")):
        d, ops, stats = gpu_path(a, b, AlignConfig(), plan, bnd)
        assert d == want and stats["how"] == how
        C.check_cigar(q, t, ops)
        assert C.score_cigar(ops, EDIT) == want
        assert stats["levels"] >= 1


@pytest.mark.gpu
def test_gpu_path_levels_rings_capped_same_bytes(monkeypatch):
    """The levels' rings capped (genome_path.SPLIT_RINGS: fewer warps per level launch) or not: the same
    distance and CIGAR, byte for byte, cost = edlib's distance."""
    from gpualign import genome_path
    from gpualign.genome_pair import kernel_options
    from gpualign.genome_path import gpu_path

    q = rand(1_000_000, 91)
    t = mutate(q, 0.20, 92)
    a, b = codes(q), codes(t)
    from gpualign.engines import gpu_long

    cfg = AlignConfig(device="gpu")
    shape = gpu_long.BpSplitter._launch_shape
    got, warps = {}, {}
    for cap in (None, 1 << 20):  # 1 MiB: the warps halved down to a few
        monkeypatch.setattr(genome_path, "SPLIT_RINGS", cap)
        launched = []
        monkeypatch.setattr(gpu_long.BpSplitter, "_launch_shape",
                            lambda self, *a: launched.append(shape(self, *a)) or launched[-1])
        d, ops, stats = gpu_path(a, b, cfg, kernel_options(a, b), None)
        assert stats["how"] == "split" and stats["levels"] > 3
        got[cap], warps[cap] = (d, ops.tobytes()), max(bl * th // 32 for bl, th, _ in launched)
    assert got[None] == got[1 << 20]
    assert warps[1 << 20] < warps[None]  # (the cap bit)
    d, ops = got[None][0], np.frombuffer(got[None][1], np.uint32)
    assert d == edlib.align(q, t, task="distance")["editDistance"]
    C.check_cigar(q, t, ops)
    assert C.score_cigar(ops, EDIT) == d


@pytest.mark.gpu
@pytest.mark.parametrize("n,rate", [(2_000_000, 0.05), (300_000, 0.30)])
def test_gpu_path_spread_over_devices(n, rate):
    """One pair shared by two devices (device 0 twice, each half and share from a thread of its own): the
    distance, first split and CIGAR of the one-device run, byte for byte; cost = edlib's distance."""
    from gpualign.genome_pair import kernel_options
    from gpualign.genome_path import close_chain, gpu_path, leaf_chain

    q = rand(n, n + 7)
    t = mutate(q, rate, n + 8)
    a, b = codes(q), codes(t)
    plan = kernel_options(a, b)
    assert plan.kernel == "bp"
    chains = [leaf_chain(AlignConfig()) for _ in range(2)]
    try:
        d, ops, stats = gpu_path(a, b, AlignConfig(), plan, None, chain=chains[0])
        d2, ops2, stats2 = gpu_path(a, b, AlignConfig(), plan, None, chain=chains[0], spread=[(0, chains[1])])
    finally:
        for c in chains:
            close_chain(c)
    assert d == d2 == edlib.align(q, t, task="distance")["editDistance"]
    assert ops.tobytes() == ops2.tobytes() and stats["levels"] == stats2["levels"]
    assert stats["cells"] == stats2["cells"]
    C.check_cigar(q, t, ops2)
    assert C.score_cigar(ops2, EDIT) == d


@pytest.mark.gpu
def test_gpu_cli_real_ecoli(tmp_path, real_data):
    """The real E. coli pair (rearranged: d about 2.39 M): PAF and BAM from the GPU path."""
    import os

    a = os.path.join(real_data, "bact_Ecoli_K12_W3110_NC_007779.fa.gz")
    b = os.path.join(real_data, "bact_Ecoli_EC590_NZ_CP016182.fa.gz")
    o = tmp_path / "e.paf"
    rc, _, err = run([a, b, "--device", "gpu", "-o", str(o)])
    assert rc == 0, err
    row = o.read_text().split("\t")
    q = next(pysam.FastxFile(a)).sequence.upper().encode()
    t = next(pysam.FastxFile(b)).sequence.upper().encode()
    ops = C.from_text(row[-1].strip()[5:])
    C.check_cigar(q, t, ops)
    assert C.score_cigar(ops, EDIT) == int(row[12][5:]) == 2_392_979  # the distance (docs/benchmarks.md)
    rc, _, err = run([a, b, "--device", "gpu", "-o", str(tmp_path / "e.bam")])
    assert rc == 0, err
    r = next(iter(pysam.AlignmentFile(str(tmp_path / "e.bam"))))
    assert r.cigarstring == row[-1].strip()[5:]


def test_cli_named_records_sam_header(tmp_path):
    """With --target-record, SAM's @SQ holds that record alone (from the same first pass as every target)."""
    a = write_fa(tmp_path / "a.fa", [("x", rand(2_000, 51)), ("y", rand(1_500, 52))])
    b = write_fa(tmp_path / "b.fa", [("u", rand(2_000, 51)), ("v", mutate(rand(1_500, 52), 0.05, 53))])
    o = tmp_path / "o.sam"
    rc, _, err = run([a, b, "--device", "cpu", "--query-record", "y", "--target-record", "v", "-o", str(o), "-q"])
    assert rc == 0, err
    sq = [line for line in o.read_text().splitlines() if line.startswith("@SQ")]
    assert sq == ["@SQ\tSN:v\tLN:%d" % len(mutate(rand(1_500, 52), 0.05, 53))]
    r = next(iter(pysam.AlignmentFile(str(o))))
    assert r.query_name == "y" and r.reference_name == "v" and r.get_tag("NM") == edlib.align(
        rand(1_500, 52), mutate(rand(1_500, 52), 0.05, 53), task="distance")["editDistance"]


@pytest.mark.parametrize("distance_only", [False, True])
def test_small_pairs_batched(tmp_path, monkeypatch, distance_only):
    """With a GPU, runs of record pairs no longer than BATCHED_MAX go to the batched engines together
    (here the CPU chain stands in for the GPU's, and the longer pairs' compute_pair runs on the CPU):
    output in input order, each distance edlib's under --n-mismatch, each CIGAR valid at it; batches cut
    at cfg.batch_pairs and at a long pair; one chain for the run, closed at its end."""
    from oracles import edit

    from gpualign import genome, genome_path

    monkeypatch.setattr(genome, "BATCHED_MAX", 700)
    monkeypatch.setattr(genome, "use_gpu", lambda device: True)
    made, sizes = [], []
    cpu_chain = select_engines(AlignConfig(metric="edit", device="cpu", threads=1))[0]
    monkeypatch.setattr(genome_path, "leaf_chain", lambda cfg: made.append(1) or cpu_chain)
    closed = []
    monkeypatch.setattr(genome_path, "close_chain", lambda chain: closed.append(list(chain)))
    real_compute, real_batched = genome.compute_pair, genome._batched
    monkeypatch.setattr(genome, "compute_pair", lambda qn, tn, q, t, cfg, gpu, *a: real_compute(
        qn, tn, q, t, cfg, False, *a[:3], None, None))
    monkeypatch.setattr(genome, "_batched", lambda group, *a: sizes.append(len(group)) or real_batched(group, *a))
    lengths = [600, 0, 300, 2_000, 700, 650, 701, 50, 500, 400]
    pairs = []
    for i, n in enumerate(lengths):
        q = rand(n, 60 + i)
        q = q[:n // 3] + b"N" * (n // 10) + q[n // 3 + n // 10:]
        pairs.append((q, mutate(q, 0.08, 80 + i).lower()))
    a = write_fa(tmp_path / "a.fa", [(f"q{i}", q) for i, (q, _) in enumerate(pairs)])
    b = write_fa(tmp_path / "b.fa", [(f"t{i}", t) for i, (_, t) in enumerate(pairs)])
    out = tmp_path / ("o.tsv" if distance_only else "o.paf")
    cfg = AlignConfig(device="gpu", n_mismatch=True, distance_only=distance_only, batch_pairs=2, threads=1)
    res = genome.run_genome(a, b, str(out), cfg)
    want = [edit(q, t, n_mismatch=True) for q, t in pairs]
    assert [r.distance for r in res] == want and [r.query for r in res] == [f"q{i}" for i in range(len(pairs))]
    small = [max(len(q), len(t)) <= 700 for q, t in pairs]
    batched = "gpu-long:batched" if distance_only else "gpu-long:path:batched"
    assert [r.engine == batched for r in res] == small
    assert sizes == [2, 1, 2, 2, 1] and made == [1] and len(closed) == 1
    rows = [x.split("\t") for x in out.read_text().splitlines()]
    if distance_only:
        assert [int(r[4]) for r in rows[1:]] == want
        return
    assert [r[0] for r in rows] == [f"q{i}" for i in range(len(pairs))]
    for row, (q, t), d in zip(rows, pairs, want):
        ops = C.from_text(next((f[5:] for f in row if f.startswith("cg:Z:")), ""))  # none: both empty
        C.check_cigar(q.upper(), t.upper(), ops, n_mismatch=True)
        assert C.score_cigar(ops, EDIT) == d and f"NM:i:{d}" in row


@pytest.mark.gpu
def test_gpu_small_pairs_batched(tmp_path):
    """On the GPU: short record pairs around a long one (20 kbp, by the Hirschberg path) in one run, PAF
    and --distance-only; every distance edlib's, every CIGAR valid at it, in input order."""
    from gpualign import genome

    lengths = [800, 150, 20_000, 8_192, 3_000, 0, 1_000]
    pairs = [(rand(n, 90 + i), mutate(rand(n, 90 + i), 0.05 + 0.03 * (i % 3), 100 + i)) for i, n in enumerate(lengths)]
    a = write_fa(tmp_path / "a.fa", [(f"q{i}", q) for i, (q, _) in enumerate(pairs)])
    b = write_fa(tmp_path / "b.fa", [(f"t{i}", t) for i, (_, t) in enumerate(pairs)])
    want = [edlib.align(q, t, task="distance")["editDistance"] for q, t in pairs]
    for distance_only in (False, True):
        out = tmp_path / f"o{int(distance_only)}.{'tsv' if distance_only else 'paf'}"
        res = genome.run_genome(a, b, str(out), AlignConfig(device="gpu", distance_only=distance_only))
        assert [r.distance for r in res] == want
        assert [r.engine.endswith("batched") for r in res] == [max(len(q), len(t)) <= 8192 for q, t in pairs]
        rows = [x.split("\t") for x in out.read_text().splitlines()]
        if distance_only:
            assert [int(r[4]) for r in rows[1:]] == want
            continue
        assert [r[0] for r in rows] == [f"q{i}" for i in range(len(pairs))]
        for row, (q, t), d in zip(rows, pairs, want):
            ops = C.from_text(next((f[5:] for f in row if f.startswith("cg:Z:")), ""))
            C.check_cigar(q, t, ops)
            assert C.score_cigar(ops, EDIT) == d
