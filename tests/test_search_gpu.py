"""gpualign search on the GPU: the same bytes as the CPU engine (sassy-rs), on a real bacterial genome
with a few hundred guides and on simulated sets with every option; hits checked against Sellers' DP in
test_search.py (its `device` fixture). The simulated sets also run with kernels/myers_search.cu compiled
for the CPU (`emu`, tests/emu): CI checks the kernel's hits without a GPU."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

import emu
from gpualign.config import SearchConfig
from gpualign.search.run import run_search
from search_oracle import contigs, edlib_check, judge, mutate, random_dna, read_tsv, revcomp, write_fasta

NO_CXX = pytest.mark.skipif(not emu.available(), reason="no g++")
KINDS = [pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("emu", marks=NO_CXX)]
SLOW_EMU = [KINDS[0], pytest.param("emu", marks=[NO_CXX, pytest.mark.slow])]  # 15-25 s a test emulated


@pytest.fixture(params=KINDS)
def kind(request, monkeypatch):
    """`--device gpu` on the device (gpu), or with the kernel compiled for the CPU (emu: CuPy and the
    kernel loader replaced by tests/emu's, the GPU reported present)."""
    if request.param == "gpu":
        yield "gpu"
        return
    from gpualign.gpu import kernels
    from gpualign.search import gpu, gpu_align

    monkeypatch.setattr(kernels, "gpu_status", lambda: (True, ""))
    monkeypatch.setattr(gpu, "load_module", emu.load_module)
    monkeypatch.setattr(gpu_align, "load_module", emu.load_module)
    with emu.cupy_on_numpy():
        yield "emu"


def both(tmp_path, pfa, tfa, out_ext="tsv", **kw):
    outs = []
    for device in ("gpu", "cpu"):
        out = os.path.join(tmp_path, f"{device}.{out_ext}")
        run_search(pfa, tfa, out, None, SearchConfig(device=device, **kw), "gpualign search (test)")
        outs.append(open(out, "rb").read())
    assert outs[0] == outs[1]
    return outs[0]


@pytest.mark.gpu
def test_real_genome_guides(tmp_path, real_data):
    with gzip.open(os.path.join(real_data, "bact_Ecoli_K12_W3110_NC_007779.fa.gz"), "rt") as fh:
        genome = "".join(line.strip() for line in fh if not line.startswith(">"))
    rng = np.random.default_rng(1)
    guides = {}
    for i in range(300):
        if i % 3 == 0:
            guides[f"rand{i}"] = random_dna(rng, 23)
        else:
            a = int(rng.integers(0, len(genome) - 30))
            guides[f"g{i}"] = mutate(rng, genome[a:a + 23], int(rng.integers(0, 4)))
    pfa = os.path.join(tmp_path, "g.fa")
    write_fasta(pfa, guides)
    tfa = os.path.join(real_data, "bact_Ecoli_K12_W3110_NC_007779.fa.gz")
    for k, all_ends in ((3, False), (4, True)):
        data = both(tmp_path, pfa, tfa, k=k, all_ends=all_ends)
        assert data.count(b"\n") > 200
    both(tmp_path, pfa, tfa, out_ext="sam", k=3)


def test_edlib_real_genome_contigs(tmp_path, real_data, kind):
    """E. coli (whole on the GPU, its first 300 kbp emulated) cut into records of any length, guides drawn from
    it with up to 3 edits and random ones, k = 3, --all-ends: every hit's alignment checked, the best ends of
    every pattern-strand in every record against edlib's infix search, and the same bytes as the CPU engine."""
    with gzip.open(os.path.join(real_data, "bact_Ecoli_K12_W3110_NC_007779.fa.gz"), "rt") as fh:
        genome = "".join(line.strip() for line in fh if not line.startswith(">")).upper()
    if kind == "emu":
        genome = genome[:300_000]
    rng = np.random.default_rng(7)
    records = contigs(rng, genome, 500 if kind == "gpu" else 60)
    guides = {}
    for i in range(90 if kind == "gpu" else 30):
        a = int(rng.integers(0, len(genome) - 30))
        guides[f"g{i}"] = mutate(rng, genome[a:a + 23], int(rng.integers(0, 4))) if i % 3 else random_dna(rng, 23)
    pfa, tfa = os.path.join(tmp_path, "g.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, guides)
    write_fasta(tfa, records)
    both(tmp_path, pfa, tfa, k=3, all_ends=True)
    rows = read_tsv(os.path.join(tmp_path, "gpu.tsv"))
    judge(rows, guides, records, 3, "default")
    pairs = edlib_check(rows, guides, records, 3)
    assert pairs >= (40 if kind == "gpu" else 10)


@pytest.mark.parametrize("rule", ["default", "n_mismatch", "iupac"])
@pytest.mark.parametrize("kind", SLOW_EMU, indirect=True)
def test_options_same_bytes(tmp_path, rule, kind):
    rng = np.random.default_rng(4)
    records = {f"c{i}": random_dna(rng, int(rng.integers(1000, 200_000)), "ACGTN" if i == 2 else "ACGT")
               for i in range(5)}
    pats = {f"p{i}": mutate(rng, records[f"c{i % 5}"][i * 7:i * 7 + m], 3)
            for i, m in enumerate([12, 23, 31, 33, 64, 65, 100, 150, 257, 600, 1000])}
    pfa, tfa = os.path.join(tmp_path, "p.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, pats)
    write_fasta(tfa, records)
    for chunk in (0, 50_000):
        for strand in ("both", "-"):
            both(tmp_path, pfa, tfa, k=6, rule=rule, chunk_bases=chunk, strand=strand, max_hits=50)


@pytest.mark.parametrize("n_pats,strand,k,force", [(1, "+", 2, False), (3, "both", 3, False), (129, "+", 3, False),
                                                   (7, "-", 6, True)])
def test_one_word_patterns_several_per_thread(tmp_path, monkeypatch, n_pats, strand, k, force, kind):
    """Patterns of up to 32 nt run several per thread (kernels/myers_search.cu, P = 2, 4 or 8): the same
    bytes with 1, 2, 4 and 8 per thread and as the CPU engine, with pattern-strand counts that leave a thread's last
    patterns empty, a single one, and k >= m (--force: every end position of the short patterns is a hit)."""
    from gpualign.search import gpu

    rng = np.random.default_rng(n_pats)
    records = {f"r{i}": random_dna(rng, int(rng.integers(3_000, 40_000)), "ACGTN" if i == 1 else "ACGT")
               for i in range(3)}
    lengths = rng.integers(4 if force else 12, 33, n_pats)
    pats = {}
    for i, m in enumerate(lengths.tolist()):
        rec = records[f"r{i % 3}"]
        a = int(rng.integers(0, len(rec) - m))
        pats[f"p{i}"] = mutate(rng, rec[a:a + m], int(rng.integers(0, 3))) if i % 4 != 3 else random_dna(rng, m)
    pfa, tfa = os.path.join(tmp_path, "p.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, pats)
    write_fasta(tfa, records)
    kw = dict(k=k, strand=strand, force=force)
    monkeypatch.setattr(gpu, "SEEDS", False)  # (the scan's patterns per thread: test_seed_filter has the filter)
    want = both(tmp_path, pfa, tfa, **kw)
    assert want.count(b"\n") > 1  # hits beyond the header
    for per in (1, 2, 4, 8):
        monkeypatch.setattr(gpu, "PER_THREAD", per)
        assert both(tmp_path, pfa, tfa, **kw) == want, per


@pytest.mark.parametrize("rule", ["default", "n_mismatch", "iupac"])
def test_hit_aligner_same_as_host(rule, kind):
    """The hits' alignments on the GPU (kernels/search_align.cu) against hits.py's on the host, the same
    numbers: planted and random windows, PAD before a record's start (first > 0, up to the whole window),
    N and IUPAC codes, one-base patterns, k = 0, long patterns, batches of one and of many."""
    from gpualign.search import alphabet as A
    from gpualign.search import hits as H
    from gpualign.search.gpu_align import GpuHitAligner

    rng = np.random.default_rng(7)
    table = A.match_table(rule)
    aligner = GpuHitAligner(table)
    for n, m, k in [(300, 23, 4), (1, 23, 4), (50, 1, 0), (100, 5, 2), (40, 150, 15), (64, 32, 0), (8, 600, 40)]:
        L = m + k
        pattern = rng.integers(0, 15 if rule == "iupac" else 5, (n, m)).astype(np.uint8)
        window = rng.integers(0, 5, (n, L)).astype(np.uint8)
        for i in range(0, n, 2):  # planted: the pattern (its IUPAC codes as a base they stand for), a few edits
            window[i, L - m:] = np.where(pattern[i] < 4, pattern[i], rng.integers(0, 4, m))
            window[i, rng.integers(0, L, 1 + k // 2)] = rng.integers(0, 4, 1 + k // 2)
        first = rng.integers(0, L + 1, n)
        first[::3] = 0
        window[np.arange(L)[None, :] < first[:, None]] = A.PAD
        job = (pattern, window, first, table)
        want, got = H.align_job(job), aligner(job)
        for a, b in zip(want[:5], got[:5]):
            np.testing.assert_array_equal(a, b)
        assert sorted(want[5]) == sorted(got[5])
        for op in want[5]:
            np.testing.assert_array_equal(want[5][op], got[5][op])


class OutOfMemoryError(Exception):
    """Stands in for cupy.cuda.memory.OutOfMemoryError (matched by name)."""


def test_hit_aligner_out_of_memory(monkeypatch, kind):
    """The hits' aligner out of device memory: the host's traceback instead, the same numbers; other
    errors are raised."""
    from gpualign.search import alphabet as A
    from gpualign.search import hits as H
    from gpualign.search.gpu_align import GpuHitAligner

    rng = np.random.default_rng(3)
    table = A.match_table("default")
    job = (rng.integers(0, 4, (20, 23)).astype(np.uint8), rng.integers(0, 4, (20, 27)).astype(np.uint8),
           np.zeros(20, np.int64), table)
    aligner = GpuHitAligner(table)

    def no_room(*a, **kw):
        raise OutOfMemoryError("out of memory allocating 1234 bytes")

    monkeypatch.setattr(aligner, "kernel", no_room)
    want, got = H.align_job(job), aligner(job)
    for a, b in zip(want[:5], got[:5]):
        np.testing.assert_array_equal(a, b)

    def broken(*a, **kw):
        raise ValueError("not a memory error")

    monkeypatch.setattr(aligner, "kernel", broken)
    with pytest.raises(ValueError):
        aligner(job)


def test_slots_sent_without_a_copy(tmp_path, monkeypatch, kind):
    """A plain text read by worker processes: each chunk goes up from its shared-memory slot, page-locked the
    first time the slot comes and not copied on the host; the same bytes as the CPU engine; every slot
    unlocked when the engine closes."""
    from gpualign.search import gpu

    rng = np.random.default_rng(7)
    genome = random_dna(rng, 300_000)
    pfa, tfa = os.path.join(tmp_path, "p.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, {f"g{i}": mutate(rng, genome[a:a + 23], i % 3)
                      for i, a in enumerate(rng.integers(0, len(genome) - 23, 20).tolist())})
    write_fasta(tfa, {f"chr{i}": genome[i * 60_000:(i + 1) * 60_000] for i in range(5)})
    locks, copies, left = [], [], []
    lock, close, copy = gpu.GpuSearchEngine._lock, gpu.GpuSearchEngine.close, gpu.copy_host

    def locking(self, codes):
        locks.append((lock(self, codes), len(self.locked)))
        return locks[-1][0]

    def closing(self):
        close(self)
        left.append(len(self.locked))

    monkeypatch.setattr(gpu.GpuSearchEngine, "_lock", locking)
    monkeypatch.setattr(gpu.GpuSearchEngine, "close", closing)
    monkeypatch.setattr(gpu, "copy_host", lambda *a: copies.append(1) or copy(*a))
    assert both(tmp_path, pfa, tfa, k=3, chunk_bases=8_000, threads=4).count(b"\n") >= 20
    assert len(locks) > 30 and all(ok for ok, _ in locks) and copies == [] and left == [0]
    assert max(n for _, n in locks) < len(locks) / 2  # (slots used again: each locked once)


def test_search_out_of_memory(tmp_path, monkeypatch, kind):
    """The search engine out of device memory for a chunk: once, the chunk is submitted again after the
    memory pool is freed (the same bytes as the CPU engine); always, one clear DeviceError."""
    from gpualign.errors import DeviceError
    from gpualign.search import gpu

    rng = np.random.default_rng(13)
    records = {f"r{i}": random_dna(rng, 5_000, "ACGT") for i in range(2)}
    pats = {f"p{i}": mutate(rng, records["r0"][200 * i:200 * i + 20], 2) for i in range(4)}
    pfa, tfa = os.path.join(tmp_path, "p.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, pats)
    write_fasta(tfa, records)
    real, failures = gpu.GpuSearchEngine._submit, []

    def flaky(self, chunk):
        if len(failures) < failures_wanted:
            failures.append(1)
            raise OutOfMemoryError("out of memory allocating 1234 bytes")
        return real(self, chunk)

    monkeypatch.setattr(gpu.GpuSearchEngine, "_submit", flaky)
    failures_wanted = 1
    assert both(tmp_path, pfa, tfa, k=2, chunk_bases=3_000).count(b"\n") > 4 and failures == [1]
    failures_wanted = 10 ** 6
    with pytest.raises(DeviceError, match="out of GPU memory"):
        run_search(pfa, tfa, os.path.join(tmp_path, "x.tsv"), None, SearchConfig(k=2, device="gpu"), "test")
    assert not os.path.exists(os.path.join(tmp_path, "x.tsv"))


def test_more_candidates_than_room(tmp_path, monkeypatch, kind):
    """A launch that finds more end positions than its buffer holds runs again with a larger one (while the
    next chunk's launch is in flight), and so the output is the CPU engine's bytes."""
    from gpualign.search import gpu

    monkeypatch.setattr(gpu, "FIRST_CAP", 4)
    counts = _spied(monkeypatch, ["submit", "_launch"])
    rng = np.random.default_rng(11)
    records = {f"r{i}": random_dna(rng, 30_000, "ACGT") for i in range(2)}
    pats = {f"p{i}": records["r0"][100 * i:100 * i + 14] for i in range(6)}
    pfa, tfa = os.path.join(tmp_path, "p.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, pats)
    write_fasta(tfa, records)
    out = both(tmp_path, pfa, tfa, k=4, all_ends=True, chunk_bases=8_000)
    assert out.count(b"\n") > 100
    assert counts["_launch"] > counts["submit"] > 1  # (one width: a launch per chunk, and the launches again)


def test_hit_batches_in_order(tmp_path, monkeypatch, kind):
    """Hits of one pattern length aligned in several batches (a small hits.TRACE_BYTES), by the GPU engine's
    aligner and by the host's, in small chunks (runs go on over chunk borders): the same bytes."""
    from gpualign.search import hits

    monkeypatch.setattr(hits, "TRACE_BYTES", 8_000)  # 23 nt, k = 3: 6 hits a batch; 12 nt: 19
    rng = np.random.default_rng(12)
    records = {f"r{i}": random_dna(rng, 20_000, "ACGT") for i in range(2)}
    pats = {f"p{i}": mutate(rng, records[f"r{i % 2}"][300 * i:300 * i + 23], 2) for i in range(12)}
    pats["poly"] = "A" * 12
    pfa, tfa = os.path.join(tmp_path, "p.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, pats)
    write_fasta(tfa, records)
    for all_ends in (False, True):
        out = both(tmp_path, pfa, tfa, k=3, all_ends=all_ends, chunk_bases=600)  # (runs over chunk borders)
        assert out.count(b"\n") > 25


def _spied(monkeypatch, names):
    """Calls of GpuSearchEngine's methods `names`, counted."""
    from gpualign.search import gpu

    counts = dict.fromkeys(names, 0)
    for name in names:
        real = getattr(gpu.GpuSearchEngine, name)

        def spy(self, *a, _real=real, _name=name, **kw):
            counts[_name] += 1
            return _real(self, *a, **kw)

        monkeypatch.setattr(gpu.GpuSearchEngine, name, spy)
    return counts


def _dense(monkeypatch) -> list:
    """The seed filter's dense form wherever the filter applies; the forms planned since, listed (True: dense)."""
    from gpualign.search import seeds

    monkeypatch.setattr(seeds, "MAX_PER_BASE", 0.0)
    monkeypatch.setattr(seeds, "DENSE_SHARE", 1e9)
    monkeypatch.setattr(seeds, "DENSE_MOST", 1e9)
    planned, plan = [], seeds.plan

    def spy(*args):
        p = plan(*args)
        planned.append(p is not None and p.dense)
        return p

    monkeypatch.setattr(seeds, "plan", spy)
    return planned


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("k,strand,all_ends", [(0, "both", False), (1, "+", True), (2, "both", False),
                                               (3, "-", True), (3, "both", False)])
def test_seed_filter(tmp_path, monkeypatch, k, strand, all_ends, dense, kind):
    """The seed filter (search/seeds.py), sparse and dense, against the scan and the CPU engine, the same bytes:
    records shorter than a piece and than a pattern, N runs, lowercase, occurrences planted at records' first
    and last bases and across chunk borders, poly-A and tandem-repeat patterns in runs of the same (more
    candidates than the first buffer holds), patterns of 8 to 32 nt."""
    from gpualign.search import gpu

    rng = np.random.default_rng(100 + k)
    records = {f"r{i}": random_dna(rng, n, "ACGTN" if i == 1 else "ACGT")
               for i, n in enumerate([9_000, 25_000, 3, 17, 12_000])}
    records["r1"] = records["r1"][:5_000] + "N" * 300 + records["r1"][5_300:]
    records["r3"] = records["r3"].lower()
    records["r4"] = records["r4"][:4_000] + "A" * 3_000 + "AC" * 1_500 + records["r4"][7_000:]
    pats = {}
    for i, m in enumerate(rng.integers(max(8, 4 * (k + 1)), 33, 24).tolist()):  # (pieces of 4 or more)
        rec = records[["r0", "r4", "r4"][i % 3]]  # (not r1's N: a pattern of other letters than A/C/G/T is scanned)
        a = [0, len(rec) - m, int(rng.integers(0, len(rec) - m))][i % 3]  # first, last, anywhere
        p = mutate(rng, rec[a:a + m], int(rng.integers(0, k + 1))) if i % 5 != 4 else random_dna(rng, m)
        pats[f"p{i}"] = revcomp(p) if i % 2 else p  # (found on strand '-')
    pats["polyA"], pats["ac"], pats["tg"] = "A" * 20, "AC" * 11, "GT" * 11
    pfa, tfa = os.path.join(tmp_path, "p.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, pats)
    write_fasta(tfa, records)
    kw = dict(k=k, strand=strand, all_ends=all_ends, force=True)
    monkeypatch.setattr(gpu, "SEEDS", False)
    scan = both(tmp_path, pfa, tfa, **kw)
    monkeypatch.setattr(gpu, "SEEDS", True)
    planned = _dense(monkeypatch) if dense else []
    counts = _spied(monkeypatch, ["submit", "_launch_seeds"])
    for chunk in (0, 4_000):  # (chunk borders: seeds within a piece's context, runs carried on)
        assert both(tmp_path, pfa, tfa, chunk_bases=chunk, **kw) == scan, chunk
    assert counts["_launch_seeds"] >= counts["submit"] > 2
    assert not dense or planned == [True, True]
    assert scan.count(b"\n") > 20


def test_seed_filter_room_and_fallback(tmp_path, monkeypatch, kind):
    """More seed candidates than a chunk's first buffer holds: the filter runs again with room for them; more
    than MAX_SEED_CANDS, or more ends (counted once per window) than MAX_CANDS: the chunk is scanned instead
    (the dense form: the latter). All give the scan's bytes."""
    from gpualign.search import gpu

    rng = np.random.default_rng(21)
    records = {"r0": random_dna(rng, 6_000, "ACGT") + "A" * 2_000, "r1": random_dna(rng, 3_000, "ACGT")}
    pats = {"polyA": "A" * 16, "x": records["r1"][100:124], "y": mutate(rng, records["r0"][50:74], 2)}
    pfa, tfa = os.path.join(tmp_path, "p.fa"), os.path.join(tmp_path, "t.fa")
    write_fasta(pfa, pats)
    write_fasta(tfa, records)
    kw = dict(k=3, all_ends=True, chunk_bases=3_000)
    monkeypatch.setattr(gpu, "SEEDS", False)
    want = both(tmp_path, pfa, tfa, **kw)
    assert want.count(b"\n") > 1_000
    monkeypatch.setattr(gpu, "SEEDS", True)
    counts = _spied(monkeypatch, ["submit", "_launch_seeds", "_launch"])
    assert both(tmp_path, pfa, tfa, **kw) == want
    assert counts["_launch_seeds"] > counts["submit"]  # (the poly-A run's chunk: launched again)
    monkeypatch.setattr(gpu, "MAX_SEED_CANDS", 2_000)
    counts.update(dict.fromkeys(counts, 0))
    assert both(tmp_path, pfa, tfa, **kw) == want
    assert counts["_launch"] > counts["_launch_seeds"] > 0  # (scans after seed launches)
    # the poly-A run's ends, once per window reaching them, past MAX_CANDS where the scan's are not: scanned too
    monkeypatch.setattr(gpu, "MAX_SEED_CANDS", 1 << 28)
    monkeypatch.setattr(gpu, "MAX_CANDS", 3_000)
    monkeypatch.setattr(gpu, "FIRST_CAP", 64)
    counts.update(dict.fromkeys(counts, 0))
    assert both(tmp_path, pfa, tfa, **kw) == want
    assert counts["_launch"] > counts["_launch_seeds"] > 0
    monkeypatch.setattr(gpu, "MAX_SEED_CANDS", 1)  # (more expected than half of it: scanned from the start)
    counts.update(dict.fromkeys(counts, 0))
    assert both(tmp_path, pfa, tfa, **kw) == want
    assert counts["_launch_seeds"] == 0 < counts["_launch"]
    # the dense form: no candidates to count (MAX_SEED_CANDS does not bind it), the same fallback on its ends
    planned = _dense(monkeypatch)
    counts.update(dict.fromkeys(counts, 0))
    assert both(tmp_path, pfa, tfa, **kw) == want
    assert planned == [True] and counts["_launch"] > counts["_launch_seeds"] > 0
    monkeypatch.setattr(gpu, "MAX_CANDS", 1 << 28)  # (room for them: launched again with more, not scanned)
    counts.update(dict.fromkeys(counts, 0))
    assert both(tmp_path, pfa, tfa, **kw) == want
    assert counts["_launch"] == counts["_launch_seeds"] > counts["submit"]


def test_seed_filter_at_piece_edges(monkeypatch, kind):
    """The seeds farthest from a reported end: k insertions, one in each piece but the first, ending at the
    piece's first reported base (the seed `back` bases before it); k substitutions, one in each piece but the
    last, ending at the piece's last base (the seed q bases before its end). The filter finds what the scan
    finds, on a chunk made here."""
    from gpualign.search import gpu, seeds
    from gpualign.search import patterns as PT
    from gpualign.search.text import Chunk

    rng = np.random.default_rng(5)
    k, m = 2, 15  # (three pieces of 5: the last seed q bases before the piece's end)
    pat = rng.integers(0, 4, m).astype(np.uint8)
    cut = [(i * m) // (k + 1) for i in range(k + 2)]  # (pieces as seeds.plan cuts them)
    other = lambda a: min({0, 1, 2, 3} - {int(pat[a + 1]), int(pat[a + 2])})  # noqa: E731 (an insertion that cannot
    early = np.concatenate([pat[:cut[1]]] + [np.insert(pat[a:b], 2, other(a))  # slide to the piece's border)
                                             for a, b in zip(cut[1:], cut[2:])])
    late = pat.copy()
    late[cut[:k]] = 3 - late[cut[:k]]
    fillers = [rng.integers(0, 4, m).astype(np.uint8) for _ in range(3)]
    pats = PT.Patterns([f"p{i}" for i in range(4)], [pat] + fillers, np.arange(4, dtype=np.int32), np.zeros(4, bool))
    gap, context, n = 64, 60, 3_000
    codes = np.full(gap + n + 64, 15, np.uint8)
    codes[gap:gap + n] = rng.integers(0, 4, n)
    rep = gap + context
    codes[rep - len(early) + 1:rep + 1] = early  # ends at the first reported base
    codes[gap + n - m:gap + n] = late  # ends at the piece's last base
    one = lambda v: np.array([v], np.int64)  # noqa: E731
    chunk = Chunk(codes, one(gap), one(0), one(1_000), one(context), one(n - context), np.array([True]))
    assert seeds.plan(pats.codes, k, "default").q == m // (k + 1)
    found = []
    for on in (False, True, "dense"):
        monkeypatch.setattr(gpu, "SEEDS", bool(on))
        if on == "dense":
            _dense(monkeypatch)
        eng = gpu.GpuSearchEngine(pats, k, "default")
        assert (1 in eng.seeds) == bool(on) and (on != "dense" or eng.seeds[1].plan.dense)
        c = eng.search(chunk)
        found.append(sorted(zip(c.ps.tolist(), c.pos.tolist(), c.d.tolist())))
    assert found[0] == found[1] == found[2]
    ends = {pos for ps, pos, _ in found[1] if ps == 0}
    assert {1_000 + context, 1_000 + n - 1} <= ends
