"""`gpualign genome`: the CPU path end to end against edlib (CI), and the GPU kernel (device)."""

import edlib
import numpy as np
import pytest

from cli_helper import run_cli
from gpualign.config import AlignConfig
from gpualign.engines import cpu_long
from gpualign.genome_pair import gpu_bound
from oracles import edit


def mutate(seq: bytes, rate: float, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    a = np.frombuffer(seq, np.uint8).copy()
    k = int(len(a) * rate)
    pos = np.sort(rng.integers(0, max(1, len(a)), k))
    kind = rng.integers(0, 3, k)
    out, last = [], 0
    for p, t in zip(pos.tolist(), kind.tolist()):
        out.append(a[last:p])
        if t == 0:
            out.append(np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, 1)])
            last = p + 1
        elif t == 1:
            out.append(np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, 1)])
            last = p
        else:
            last = p + 1
    out.append(a[last:])
    return np.concatenate(out).tobytes() if out else b""


def rand(n: int, seed: int) -> bytes:
    return np.frombuffer(b"ACGT", np.uint8)[np.random.default_rng(seed).integers(0, 4, n)].tobytes()


CASES = {
    "identical": lambda: (rand(50_000, 1), rand(50_000, 1)),
    "1pct": lambda: (rand(100_000, 2), mutate(rand(100_000, 2), 0.01, 3)),
    "10pct": lambda: (rand(60_000, 4), mutate(rand(60_000, 4), 0.10, 5)),
    "unequal": lambda: (rand(80_000, 6), mutate(rand(80_000, 6), 0.02, 7)[:50_000]),
    "n_runs_lower": lambda: (rand(30_000, 8)[:10_000] + b"N" * 5_000 + rand(30_000, 8)[15_000:],
                             mutate(rand(30_000, 8), 0.03, 9).lower()),
    "one_empty": lambda: (b"", rand(1_000, 10)),
    "unrelated": lambda: (rand(20_000, 11), rand(20_000, 12)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("method", ["wfa", "edlib", "auto"])
def test_cpu_distance(case, method):
    q, t = CASES[case]()
    q, t = q.upper(), t.upper()
    assert cpu_long.distance(q, t, method)[0] == edit(q, t)


def test_cpu_plan_notice_figures():
    """cpu_long.plan, the CPU route's notice: an empty side is 'trivial' (the notice named edlib, which never ran);
    edlib's expected time is bounded by the whole matrix's (1 kbp against 1 Mbp said about 4 minutes, for a pair
    edlib aligns in under a second)."""
    big = rand(1_000_000, 13)
    assert cpu_long.plan(b"", big[:1000]) == ("trivial", 1.0, 0.0)
    assert cpu_long.plan(b"", b"") == ("trivial", 0.0, 0.0)
    method, rate, seconds = cpu_long.plan(rand(1_000, 14), big)
    assert method == "edlib" and rate > 0.9 and seconds <= 1_000 * len(big) / cpu_long.EDLIB_ND_PER_S < 0.5


def write_fa(path, recs):
    with open(path, "wb") as fh:
        for name, s in recs:
            fh.write(b">%s soft-masked\n" % name.encode())
            for i in range(0, len(s), 60):
                fh.write(s[i:i + 60] + b"\n")
    return str(path)


def run(args):
    p = run_cli("genome", *args)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_cli_cpu_end_to_end(tmp_path):
    pairs = [CASES[c]() for c in ("1pct", "unequal", "n_runs_lower")]
    a = write_fa(tmp_path / "a.fa", [(f"chrA{i}", q) for i, (q, _) in enumerate(pairs)])
    b = write_fa(tmp_path / "b.fa", [(f"chrB{i}", t) for i, (_, t) in enumerate(pairs)])
    rc, out, err = run([a, b, "--distance-only", "--device", "cpu"])
    assert rc == 0, err
    assert "warning" in err
    lines = [x.split("\t") for x in out.splitlines()]
    assert lines[0][:6] == ["query", "target", "query_len", "target_len", "distance", "identity"]
    for row, (q, t) in zip(lines[1:], pairs):
        d = edlib.align(q.upper(), t.upper(), task="distance")["editDistance"]
        assert int(row[4]) == d and int(row[2]) == len(q) and int(row[3]) == len(t)
        assert abs(float(row[5]) - (1 - d / max(len(q), len(t)))) < 1e-6
    # one named pair, written to a file
    o = tmp_path / "d.tsv"
    rc, _, err = run([a, b, "--distance-only", "--device", "cpu", "--query-record", "chrA1", "--target-record",
                      "chrB1", "-o", str(o), "-q"])
    assert rc == 0 and err == ""
    row = o.read_text().splitlines()[1].split("\t")
    assert row[:2] == ["chrA1", "chrB1"] and int(row[4]) == edit(pairs[1][0], pairs[1][1])
    # --n-mismatch: the N run of pair 2 no longer matches anything
    rc, out, _ = run([a, b, "--distance-only", "--device", "cpu", "--n-mismatch", "--query-record", "chrA2",
                      "--target-record", "chrB2", "-q"])
    assert int(out.splitlines()[1].split("\t")[4]) == edit(pairs[2][0], pairs[2][1], n_mismatch=True)


def test_cli_errors(tmp_path):
    a = write_fa(tmp_path / "a.fa", [("x", rand(100, 1)), ("y", rand(100, 2))])
    b = write_fa(tmp_path / "b.fa", [("x", rand(100, 1))])
    rc, _, err = run([a, b, "--device", "cpu", "--format", "bed"])
    assert rc == 2 and "--format must be one of" in err
    rc, _, err = run([a, b, "--device", "cpu", "-o", str(tmp_path / "o.xyz")])
    assert rc == 2 and "cannot tell the format" in err
    rc, _, err = run([a, b, "--distance-only", "--format", "paf"])
    assert rc == 2 and "writes TSV only" in err
    rc, _, err = run([a, b, "--distance-only", "--device", "cpu", "-o", str(tmp_path / "o.tsv")])
    assert rc == 1 and "a.fa has more records" in err and not (tmp_path / "o.tsv").exists()
    rc, _, err = run([a, b, "--distance-only", "--device", "cpu", "--query-record", "zz"])
    assert rc == 1 and "no record named 'zz'" in err
    rc, _, err = run([str(tmp_path / "missing.fa"), b, "--distance-only"])
    assert rc == 1 and "no such file" in err and "Traceback" not in err
    rc, _, err = run([a, b, "--metric", "affine"])
    assert rc == 2 and "--metric edit only" in err and len(err.strip().splitlines()) == 1


# ---- GPU (device machine) --------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_equals_edlib_and_plain(case):
    """Tiled (pruned and not, odd bands and tile widths, bytes and 2-bit codes) == one-step kernel (plain
    and pruned) == edlib."""
    from gpualign.engines import gpu_long

    q, t = (np.frombuffer(x.upper(), np.uint8) for x in CASES[case]())
    want = edit(q.tobytes(), t.tobytes())
    plain = gpu_long.distance(q, t, prune=False, kernel="step")
    step = gpu_long.distance(q, t, prune=True, kernel="step")
    assert plain["distance"] == step["distance"] == want
    assert step["cells"] <= plain["cells"]
    acgt = set(q.tobytes() + t.tobytes()) <= set(b"ACGT")
    for band, tile_min, warp, bits in ((64, 128, False, 8), (64, 128, True, 8), (64, 128, False, None),
                                       (64, 128, True, None), (1, 1, True, None), (7, 16, False, 8),
                                       (200, 3, True, None), (7, 16, True, None)):
        tiled = gpu_long.distance(q, t, band=band, tile_min=tile_min, warp_extend=warp, bits=bits)
        assert tiled["distance"] == want, (band, tile_min, warp, bits)
        assert tiled["bits"] == (bits or (2 if acgt else 8))
        # the pruned band never holds more diagonals than the plain one; the last round may run past d
        assert tiled["cells"] <= plain["cells"] + band * (2 * (want + band) + 1), (band, tile_min)
    assert gpu_long.distance(q, t, prune=False, band=5, tile_min=8)["distance"] == want
    # seeded with an upper bound: the tightest valid one (the distance itself), one above, the anchored one
    bound = gpu_bound(q, t, AlignConfig(distance_only=True))
    assert want <= bound <= max(len(q), len(t))
    for upper in (want, want + 1, bound):
        assert gpu_long.distance(q, t, upper=upper, band=7, tile_min=16)["distance"] == want, upper


def _bp_edges():
    """Lengths around the kernel's 32-row lanes and 1024-row strips, far apart lengths (band clipped by
    both ends), symbols in one string only, IUPAC and lower case."""
    out = {}
    for n in (1, 31, 32, 33, 1023, 1024, 1025, 2048, 3001):
        out[f"len{n}"] = (rand(n, n), mutate(rand(n, n), 0.08, n + 1))
    out["long_vs_short"] = (rand(9000, 40), rand(9000, 40)[2000:2300])
    out["short_vs_long"] = (rand(9000, 41)[100:400], mutate(rand(9000, 41), 0.05, 42))
    out["iupac"] = (rand(5000, 43).replace(b"A", b"R", 300), mutate(rand(5000, 43), 0.1, 44).replace(b"C", b"Y", 50))
    out["disjoint_symbols"] = (b"A" * 3000, b"C" * 2500 + b"A" * 700)
    return out


BP_EDGES = _bp_edges()


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES) + sorted(BP_EDGES))
def test_gpu_bp_equals_edlib(case):
    """Banded bit-parallel kernel == edlib: the full band, bands of exactly the distance and one more,
    guessed bands too narrow (the host must widen them), 1, 2 and 3 warps (strips reuse ring slots), in
    one piece and as two halves met in the middle (on one device, and as on two)."""
    from gpualign.engines import gpu_long

    qb, tb = (CASES[case]() if case in CASES else BP_EDGES[case])
    q, t = (np.frombuffer(x.upper() if case in CASES else x, np.uint8) for x in (qb, tb))
    want = edit(q.tobytes(), t.tobytes())
    floor = abs(len(q) - len(t))
    for guess in (None, want, want + 1, max(floor, want - 1), floor):
        for warps in (None, 1, 2, 3):
            for split, other in ((False, None), (True, None), (True, 0)):  # other: the backward half on device
                # 0 from a context of its own, its column copied back (how two devices run it)
                r = gpu_long.bp_distance(q, t, guess=guess, warps=warps, split=split, other=other)
                assert r["distance"] == want, (guess, warps, split, other)
                assert r["split"] == (split and len(t) >= 2 and len(q) > 0)
                if guess is not None and guess < want:
                    assert r["passes"] >= 2
    assert gpu_long.bp_distance(q, t, upper=want, guess=floor)["distance"] == want  # widened up to the bound


@pytest.mark.gpu
@pytest.mark.parametrize("n,rate,split", [(400_000, 0.12, False), (400_000, 0.12, True), (250_000, 0.45, False)])
@pytest.mark.parametrize("deal", [False, True])
def test_gpu_bp_pruned_band(n, rate, split, deal, monkeypatch):
    """The kernel's pruning on the device, where rings wrap and thousands of strips run at once: the distance as
    edlib's in a band of exactly the distance, with fewer cells computed than the band holds (the kernel's own
    count), and a bound under the distance never answered below it; strips taken from the ticket or dealt."""
    from gpualign.engines import gpu_long

    monkeypatch.setattr(gpu_long, "BP_DEAL", deal)
    if deal:  # (the driver tells the kernel's residency, else nothing would be dealt)
        kern = gpu_long.load_module("bp_long.cu", ("bp_long", "bp_split_min"), gpu_long.BP_DEFINES)
        assert gpu_long._resident_warps(kern.get_function("bp_long"), 4) >= gpu_long.BP_WARPS_PER_BLOCK
    q = rand(n, 91)
    t = mutate(q, rate, 92)
    want = edit(q, t)
    a, b = np.frombuffer(q, np.uint8), np.frombuffer(t, np.uint8)
    r = gpu_long.bp_distance(a, b, upper=want, split=split)
    klo, khi = gpu_long.band(len(a), len(b), want)
    assert r["distance"] == want and r["passes"] == 1
    assert 0 < r["cells"] < len(a) * (khi - klo + 1) * 0.95
    low = gpu_long.bp_distance(a, b, upper=want - want // 4, guess=want - want // 4, split=split)
    assert low["distance"] >= want


def test_dealt_runs_one_at_a_time_per_device():
    """gpu_long.dealing: a second holder of a device waits for the first (a dealt launch assumes the SMs), holders
    of other devices do not, and two holders of the same two devices named in either order both finish."""
    import threading

    from gpualign.engines import gpu_long

    events = []
    first_in = threading.Event()
    release = threading.Event()

    def hold(devices, tag, wait=None):
        with gpu_long.dealing(devices):
            events.append(f"{tag} in")
            if wait is not None:
                first_in.set()
                wait.wait(5)
            events.append(f"{tag} out")

    a = threading.Thread(target=hold, args=([7], "a", release))
    a.start()
    assert first_in.wait(5)
    b = threading.Thread(target=hold, args=([7], "b"))
    c = threading.Thread(target=hold, args=([8], "c"))
    b.start()
    c.start()
    c.join(5)
    assert "c out" in events and "b in" not in events  # another device: at once; the same one: after a
    release.set()
    a.join(5)
    b.join(5)
    assert events.index("b in") > events.index("a out")
    crossed = [threading.Thread(target=lambda d=d: [hold(d, "x") for _ in range(200)]) for d in ([7, 8], [8, 7])]
    for t in crossed:
        t.start()
    for t in crossed:
        t.join(10)
    assert not any(t.is_alive() for t in crossed) and events.count("x out") == 400


def test_dealing_left_to_tickets_under_mps(tmp_path, monkeypatch):
    """An MPS daemon's pipe (its clients share the SMs): gpu_long deals no strips."""
    from gpualign.engines import gpu_long

    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert not gpu_long._mps()
    (tmp_path / "control").touch()
    assert gpu_long._mps()


def test_bp_ring_sizes():
    """bp_long's rings (kernels/bp_long.cu, Slots): either a whole strip's words (31), or a power of two of
    at least 128 words with ring * warps >= 4 * words (no strip waits forever, writers seldom wait),
    smaller than a whole strip; G3's halves (48 Mbp at 8.4%, 1,320 warps each) take 2,048 words a strip
    in flight instead of 235,000."""
    from gpualign.engines import gpu_long

    for words in (1, 64, 127, 128, 1000, 1025, 5000, 70_000, 235_000, 3_000_000):
        for warps in (1, 2, 3, 5, 64, 1320, 2640):
            shift = gpu_long._ring_shift(words, warps)
            need = max(gpu_long.BP_RING_MIN, -(-4 * words // warps)) + 128
            if shift == 31:  # a ring of a whole strip (words + 3, the slot's spare words) is no larger
                assert words + 3 <= 2 * need, (words, warps)
                continue
            ring = 1 << shift
            assert 128 <= ring and ring * warps >= 4 * words and ring < words + 3, (words, warps, shift)
            assert need <= ring < 2 * need
    assert 1 << gpu_long._ring_shift(235_000, 1320) == 2048


def _tightest_ring(words, warps):
    """The smallest ring the kernel allows (>= 128 words, ring * warps >= words): writers wait often."""
    shift = 7
    while (1 << shift) * warps < words:
        shift += 1
    return shift if (1 << shift) + 1 < words + 4 else 31


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES) + ["len3001", "long_vs_short", "short_vs_long", "disjoint_symbols"])
@pytest.mark.parametrize("deal", [False, True])
def test_gpu_bp_tight_rings(case, deal, monkeypatch):
    """The bit-parallel kernel with the smallest rings it allows (strips wrap their rings many times and
    wait for their readers) == edlib: in one piece and as two halves, with as many warps as the band
    needs, and with 3, 4 and 7 (rings of a whole strip or close to it), 32 (rings of 128 words); strips taken
    from the ticket or dealt to the warps."""
    from gpualign.engines import gpu_long

    monkeypatch.setattr(gpu_long, "_ring_shift", _tightest_ring)
    monkeypatch.setattr(gpu_long, "BP_DEAL", deal)
    qb, tb = (CASES[case]() if case in CASES else BP_EDGES[case])
    q, t = (np.frombuffer(x.upper() if case in CASES else x, np.uint8) for x in (qb, tb))
    want = edit(q.tobytes(), t.tobytes())
    for warps in (None, 3, 4, 7, 32):
        for split in (False, True):
            for guess in (None, want):
                assert gpu_long.bp_distance(q, t, guess=guess, warps=warps, split=split)["distance"] == want, \
                    (warps, split, guess)


@pytest.mark.gpu
@pytest.mark.parametrize("rate", [0.01, 0.10])
def test_gpu_bound_gaps_in_place_or_gathered(rate, monkeypatch):
    """The anchored bound's gaps sent to the GPU aligner in place in the two strings (offsets into them) or
    gathered: the same bound, gaps aligned and path, at or above edlib's distance."""
    from gpualign import long_bound

    q = rand(400_000, 31)
    t = mutate(q, rate, 32)
    a, b = np.frombuffer(q, np.uint8), np.frombuffer(t, np.uint8)
    got = []
    for share in (0.0, 2.0):
        monkeypatch.setattr(long_bound, "GATHER_BELOW", share)
        got.append(gpu_bound(a, b, AlignConfig(distance_only=True), detail=True))
    assert got[0]["bound"] == got[1]["bound"] >= edlib.align(q, t, task="distance")["editDistance"]
    assert got[0]["aligned"] == got[1]["aligned"] > 100
    assert all(np.array_equal(x, y) for x, y in zip(got[0]["path"], got[1]["path"]))


@pytest.mark.gpu
@pytest.mark.parametrize("n,rate", [(2_000_000, 0.01), (500_000, 0.10), (200_000, 0.30), (100_000, 0.50)])
def test_gpu_large(n, rate):
    from gpualign.engines import gpu_long

    q = rand(n, n)
    t = mutate(q, rate, n + 1)
    want = edlib.align(q, t, task="distance")["editDistance"]
    a, b = np.frombuffer(q, np.uint8), np.frombuffer(t, np.uint8)
    assert gpu_long.distance(a, b)["distance"] == want
    assert gpu_long.distance(a, b, warp_extend=True)["distance"] == want
    assert gpu_long.distance(a, b, bits=8)["distance"] == want
    assert gpu_long.distance(a, b, warp_extend=True, bits=8)["distance"] == want
    bound = gpu_bound(a, b, AlignConfig(distance_only=True))
    assert bound >= want
    assert gpu_long.distance(a, b, upper=bound)["distance"] == want
    assert gpu_long.distance(a, b, kernel="step")["distance"] == want
    assert gpu_long.bp_distance(a, b)["distance"] == want
    assert gpu_long.bp_distance(a, b, upper=bound)["distance"] == want
    assert gpu_long.bp_distance(a, b, upper=bound, split=False)["distance"] == want
    assert gpu_long.bp_distance(a, b, upper=want, warps=5)["distance"] == want
    assert gpu_long.bp_distance(a, b, guess=want // 3)["distance"] == want
    r = gpu_long.bp_distance(a, b, upper=bound, warps=64)
    assert r["distance"] == want and r["cut"][2] == edit(q[:r["cut"][0]], t[:r["cut"][1]])  # the split's left part
    assert cpu_long.distance(q, t, "wfa")[0] == want if n <= 500_000 else True


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,bound", [("wfa", True), ("bp", True), ("bp", False)])
def test_gpu_run_genome_n_mismatch_rule(tmp_path, monkeypatch, kernel, bound):
    """`gpualign genome --n-mismatch` on the GPU (run_genome) with each kernel forced: the wavefront
    kernel with the anchored bound, the bit-parallel one with it and with a far too narrow guessed band
    (widened until it holds the result)."""
    from gpualign import genome, genome_pair

    q = rand(400_000, 31)[:150_000] + b"N" * 20_000 + rand(400_000, 31)[170_000:]
    t = mutate(rand(400_000, 31), 0.12, 32)
    (tmp_path / "a.fa").write_bytes(b">a\n" + q + b"\n")
    (tmp_path / "b.fa").write_bytes(b">b\n" + t + b"\n")
    qa, ta = genome_pair.apply_rule(np.frombuffer(q, np.uint8), np.frombuffer(t, np.uint8), True)
    want = edlib.align(qa.tobytes(), ta.tobytes(), task="distance")["editDistance"]
    assert want <= gpu_bound(qa, ta, AlignConfig(distance_only=True))
    monkeypatch.setattr(genome_pair, "BOUND_MIN_D", 1 if bound else 1 << 40)
    monkeypatch.setattr(genome_pair, "BP_SLACK", 0.01)
    monkeypatch.setattr(genome_pair, "WFA_CELLS_PER_S" if kernel == "bp" else "BP_STEP_S",
                        1e-3 if kernel == "bp" else 1.0)
    bounded = []
    monkeypatch.setattr(genome_pair, "gpu_bound", lambda *a: bounded.append(gpu_bound(*a)) or bounded[-1])
    cfg = AlignConfig(distance_only=True, n_mismatch=True, device="gpu")
    res = genome.run_genome(str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), str(tmp_path / "o.tsv"), cfg)
    assert bool(bounded) == bound and res[0].distance == want and res[0].engine == f"gpu-long:{kernel}"
    assert (tmp_path / "o.tsv").read_text().splitlines()[1].split("\t")[4] == str(want)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["wfa", "bp"])
def test_gpu_progress_reports(kernel):
    """The progress callback (the CLI's display) while each kernel runs: sane, growing values."""
    from gpualign.engines import gpu_long

    q = rand(2_000_000, 77)
    t = mutate(q, 0.10, 78)
    a, b = np.frombuffer(q, np.uint8), np.frombuffer(t, np.uint8)
    want = edlib.align(q, t, task="distance")["editDistance"]
    seen = []
    run = gpu_long.bp_distance if kernel == "bp" else gpu_long.distance
    assert run(a, b, progress=seen.append, poll=0.0)["distance"] == want
    assert seen and all(p["kernel"] == kernel for p in seen)
    assert [p["elapsed"] for p in seen] == sorted(p["elapsed"] for p in seen)
    for p in seen:
        if kernel == "bp":
            assert 0 <= p["strips_taken"] <= p["strips"] and p["band"] > 0 and p["halves"] in (1, 2)
        else:
            # (a round of BAND steps may run past d before the end is seen)
            assert 0 <= p["score"] <= want + gpu_long.BAND and want <= p["bound"] and p["target_len"] == len(b)


@pytest.mark.parametrize("n,d,split", [(5_000_000, 470_000, True), (48_000_000, 3_900_000, False),
                                       (4_646_332, 3_000_000, False), (60_000, 6_000, False)])
def test_bit_parallel_distance_split_only_where_it_pays(n, d, split):
    """genome_pair.bp_split: two halves met in the middle for narrow bands (bench_genome's G2: 5 Mbp at 10%), one
    pass for wide ones, whose pruning cuts more (G3: 48 Mbp at 8.4%; the E. coli pair, band from the estimate),
    none under gpu_long.BP_SPLIT_MIN."""
    from gpualign.genome_pair import bp_split

    assert bp_split(n, n, d) == split
