"""`gpualign paf`'s sequences laid out on the device from the files' raw bytes (io/paf_device.py, kernels/fastx.cu's
fasta_windows) against the host path (io/paf.fetch in the reader processes): the same output bytes, and the same
error or skipped candidates where an input is faulty. On the CPU the kernel runs emulated (tests/emu) and the
engine is the CPU's; the GPU test runs the whole command on the device against --host-parse."""

from __future__ import annotations

import random

import emu
import pytest

from gpualign import devices, realign, realign_readers
from gpualign.config import AlignConfig
from gpualign.errors import InputError
from gpualign.io import paf_device
from gpualign.io.paf import revcomp

NO_CXX = pytest.mark.skipif(not emu.available(), reason="no g++ to compile the kernels for the CPU")


def _lines(seq: str, width: int, eol: str) -> str:
    if not width:
        return seq + eol
    return "".join(seq[i:i + width] + eol for i in range(0, len(seq), width)) or ""


def _inputs(d, seed: int, width_t: int = 60, width_q: int = 0, eol: str = "\n", fastq: bool = False,
            n_reads: int = 40):
    """A two-record target (line width width_t; lower case and IUPAC runs), reads of it on both strands (lines of
    width_q; FASTQ if asked), each with one to three candidates: whole and partial query ranges, windows at the
    targets' ends, an empty range. Returns the paths."""
    rng = random.Random(seed)
    targets = {}
    for name, n in (("chr1", 5000), ("chr2 desc", 3001)):
        s = [rng.choice("ACGT") for _ in range(n)]
        for _ in range(6):
            a = rng.randrange(n - 40)
            s[a:a + 30] = [c.lower() for c in s[a:a + 30]]
        for _ in range(4):
            s[rng.randrange(n)] = rng.choice("NRYKMSWBDHVn")
        targets[name.split()[0]] = (name, "".join(s))
    with open(d / "t.fa", "w", newline="") as fh:
        for name, seq in targets.values():
            fh.write(f">{name}{eol}" + _lines(seq, width_t, eol))
    reads, paf = [], []
    for i in range(n_reads):
        tname = rng.choice(list(targets))
        tseq = targets[tname][1]
        L = rng.randint(0, 900)
        s = rng.choice([0, len(tseq) - L, rng.randrange(len(tseq) - L + 1)])
        q = list(tseq[s:s + L])
        for _ in range(L // 25):
            if q:
                q[rng.randrange(len(q))] = rng.choice("ACGTacgt")
        q = "".join(q)
        strand = rng.choice("+-")
        if strand == "-":
            q = revcomp(q.encode()).decode()
        lead = "".join(rng.choice("ACGT") for _ in range(rng.randint(0, 20)))
        full = lead + q
        reads.append((f"r{i}", full))
        for _ in range(rng.randint(1, 3)):
            qs, qe = (len(lead), len(full)) if rng.random() < 0.6 else sorted(rng.randint(0, len(full)) for _ in "ab")
            ts, te = sorted(min(len(tseq), max(0, x + rng.randint(-10, 10))) for x in (s, s + L))
            paf.append(f"r{i}\t{len(full)}\t{qs}\t{qe}\t{strand}\t{tname}\t{len(tseq)}\t{ts}\t{te}\t0\t{te - ts}\t60\n")
    with open(d / ("q.fq" if fastq else "q.fa"), "w", newline="") as fh:
        for name, seq in reads:
            if fastq:
                fh.write(f"@{name}{eol}{seq}{eol}+{eol}{'I' * len(seq)}{eol}")
            else:
                fh.write(f">{name}{eol}" + _lines(seq, width_q, eol))
    (d / "c.paf").write_text("".join(paf))
    return str(d / "c.paf"), str(d / ("q.fq" if fastq else "q.fa")), str(d / "t.fa")


@pytest.fixture
def emulated(monkeypatch):
    """The device path on the CPU: fasta_windows emulated, CuPy on numpy, the engine the CPU's; gathered counts the
    chunks the device laid out and refused counts those it sent back to the host."""
    monkeypatch.setattr(paf_device, "load_module", emu.load_module)
    monkeypatch.setattr(devices, "batches_on_gpu", lambda cfg, cluster: cfg.device_parse)
    monkeypatch.setattr(realign_readers, "RAW_AFTER", 0)  # every chunk laid out on the device
    counts = {"gathered": 0, "refused": 0}
    real = paf_device.WindowGather.gather

    def gather(self, *a):
        out = real(self, *a)
        counts["refused" if out is None else "gathered"] += 1
        return out

    monkeypatch.setattr(paf_device.WindowGather, "gather", gather)
    with emu.cupy_on_numpy():
        yield counts


def _run(paths, out, device_parse: bool, **kw):
    cfg = AlignConfig(device="cpu", threads=2, batch_pairs=11, device_parse=device_parse)
    try:
        notes = []
        summary = realign.run_paf(*paths, str(out), None, cfg, "test", readers=2, on_notice=notes.append, **kw)
        return (out.read_bytes(), (summary.pairs, summary.failed, summary.skipped),
                [n for n in notes if n.startswith("skipped")])
    except InputError as e:
        return None, str(e), None


@NO_CXX
@pytest.mark.parametrize("layout", [dict(), dict(width_q=70), dict(eol="\r\n", width_q=33), dict(fastq=True),
                                    dict(width_t=0), dict(width_t=1)])
@pytest.mark.parametrize("mode", ["ends-free", "global"])
def test_same_paf_as_the_host(tmp_path, emulated, layout, mode):
    paths = _inputs(tmp_path, 3, **layout)
    want = _run(paths, tmp_path / "host.paf", False, mode=mode)
    got = _run(paths, tmp_path / "dev.paf", True, mode=mode)
    assert got == want and want[0]
    assert emulated["gathered"] > 2 and not emulated["refused"]


@NO_CXX
def test_first_chunks_fetched_on_the_host(tmp_path, emulated, monkeypatch):
    """The first RAW_AFTER chunks go the host's way (ready while the engines start), the rest to the device: the
    same bytes."""
    monkeypatch.setattr(realign_readers, "RAW_AFTER", 2)
    paths = _inputs(tmp_path, 4)
    want = _run(paths, tmp_path / "host.paf", False)
    got = _run(paths, tmp_path / "dev.paf", True)
    assert got == want and want[0]
    n_lines = len(open(paths[0]).readlines())
    chunks = -(-n_lines // 11)  # (batch_pairs 11 bounds the chunks: 256 lines at least)
    assert emulated["gathered"] >= 1 and emulated["gathered"] <= max(1, chunks - 2)


def _spoil(path, record: int, at: int, byte: bytes, keep_time: bool = False):
    """Byte `at` of the sequence of record `record` (counting its line ends) set to byte; keep_time: the file's
    time kept (an index made before it still taken as fresh)."""
    import os

    st = os.stat(path)
    data = bytearray(open(path, "rb").read())
    heads = [i for i, c in enumerate(data) if c == ord(">") and (i == 0 or data[i - 1] == 10)]
    start = data.index(b"\n", heads[record]) + 1
    data[start + at] = byte[0]
    open(path, "wb").write(bytes(data))
    if keep_time:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _faulty_inputs(tmp_path, where: str):
    """_inputs with one fault (where: "none" for none): a byte a sequence cannot hold in a query record outside a
    candidate's range (the host checks the whole record) or in a target window, or a line end where the target's
    .fai does not place it (an index older than an edit)."""
    import pysam

    paths = _inputs(tmp_path, 8, width_t=60)
    lines = open(paths[0]).read().splitlines()
    k, f = next((k, x.split("\t")) for k, x in enumerate(lines) if int(x.split("\t")[1]) > 10
                and x.split("\t")[5] == "chr1" and int(x.split("\t")[8]) - int(x.split("\t")[7]) > 200)
    ts = int(f[7])
    if where == "query outside its range":
        f[2], f[3] = str(int(f[1]) // 2), f[1]  # the range from the middle on: the bad byte before it
        lines[k] = "\t".join(f)
        open(paths[0], "w").write("\n".join(lines) + "\n")
        _spoil(paths[1], int(f[0][1:]), 0, b"*")
    elif where == "target window":
        pos = ts + 150
        _spoil(paths[2], 0, pos // 60 * 61 + pos % 60, b"5")
    elif where == "stale index":
        pysam.faidx(paths[2])
        _spoil(paths[2], 0, (ts // 60 + 1) * 61 - 1, b"A", keep_time=True)  # the line end after ts's line
    return paths


@NO_CXX
@pytest.mark.parametrize("where", ["query outside its range", "target window", "stale index"])
@pytest.mark.parametrize("skip_bad", [False, True])
def test_faults_named_as_the_host_names_them(tmp_path, emulated, where, skip_bad):
    """_faulty_inputs' faults: the device refuses the chunk, the host fetches it again and names the same error, or
    skips the same candidates, as the host path does. A stale index is found before (the record's line ends
    checked against its row when its rows are first asked for), on both paths alike."""
    paths = _faulty_inputs(tmp_path, where)
    want = _run(paths, tmp_path / "host.paf", False, skip_bad=skip_bad)
    got = _run(paths, tmp_path / "dev.paf", True, skip_bad=skip_bad)
    assert got == want
    assert emulated["refused"] >= (where != "stale index")
    if where == "stale index" and not skip_bad:
        assert "t.fa: record 'chr1' does not match its .fai index" in want[1]
    assert (want[0] is None) != skip_bad


@NO_CXX
@pytest.mark.parametrize("skip_bad", [False, True])
def test_fastq_quality_lines_checked_as_the_host_checks_them(tmp_path, emulated, skip_bad):
    """A multi-line FASTQ whose quality lines no longer lie where its .fai (older) says, its sequence untouched:
    the host's fetch reads the quality and names the record (or skips it); so does the device path (it asks for
    the quality of a record of several lines, and the chunk goes to the host)."""
    import os

    import pysam

    t = "ACGTACGTAC" * 20
    (tmp_path / "t.fa").write_text(">chr1\n" + "".join(t[i:i + 60] + "\n" for i in range(0, len(t), 60)))
    q = tmp_path / "q.fq"
    q.write_text("".join(f"@r{i}\n{t[i:i + 8]}\n{t[i + 8:i + 12]}\n+\nIIIIIIII\nIIII\n" for i in range(30)))
    pysam.faidx(str(q))
    st = os.stat(q)
    q.write_text(q.read_text().replace(f"@r5\n{t[5:13]}\n{t[13:17]}\n+\nIIIIIIII\nIIII\n",
                                       f"@r5\n{t[5:13]}\n{t[13:17]}\n+\nIIII\nIII\nIIII\n"))
    os.utime(q, ns=(st.st_atime_ns, st.st_mtime_ns))
    (tmp_path / "c.paf").write_text("".join(f"r{i}\t12\t0\t12\t+\tchr1\t{len(t)}\t{i}\t{i + 12}\t12\t12\t60\n"
                                            for i in range(30)))
    paths = tuple(str(tmp_path / x) for x in ("c.paf", "q.fq", "t.fa"))
    want = _run(paths, tmp_path / "host.paf", False, skip_bad=skip_bad)
    got = _run(paths, tmp_path / "dev.paf", True, skip_bad=skip_bad)
    assert got == want and (want[0] is None) != skip_bad


@NO_CXX
def test_long_reads_of_short_candidates_go_the_hosts_way(tmp_path, emulated, monkeypatch):
    """Candidates of a few hundred bases on reads of 100 kbp (contigs): the device path would read every whole
    read (its letters are checked) for a few of its bases, so such chunks are fetched on the host: bounded
    buffers, the same bytes (SLACK made smaller than a read: a chunk of one read's candidates too)."""
    monkeypatch.setattr(paf_device, "SLACK", 1 << 14)
    rng = random.Random(9)
    t = "".join(rng.choice("ACGT") for _ in range(120_000))
    (tmp_path / "t.fa").write_text(">chr1\n" + "".join(t[i:i + 80] + "\n" for i in range(0, len(t), 80)))
    (tmp_path / "q.fa").write_text("".join(f">c{i}\n{t[i * 1000:i * 1000 + 100_000]}\n" for i in range(12)))
    (tmp_path / "c.paf").write_text("".join(
        f"c{i}\t100000\t{k * 300}\t{k * 300 + 200}\t+\tchr1\t120000\t{i * 1000 + k * 300}\t"
        f"{i * 1000 + k * 300 + 200}\t200\t200\t60\n" for i in range(12) for k in range(4)))
    paths = tuple(str(tmp_path / x) for x in ("c.paf", "q.fa", "t.fa"))
    want = _run(paths, tmp_path / "host.paf", False)
    got = _run(paths, tmp_path / "dev.paf", True)
    assert got == want and want[0]
    assert emulated["gathered"] == emulated["refused"] == 0


@NO_CXX
def test_batches_held_behind_a_waiting_read_keep_no_sequences(tmp_path, emulated, monkeypatch):
    """A read whose second candidate is the PAF's last line holds every batch after its first one until the end
    (one primary per read): those batches keep neither their device bytes nor any copy of them (GPU memory held
    without bound; here, where the CPU engine fetched them, the host copy), and the output is the host path's."""
    from gpualign import realign_primary

    paths = _inputs(tmp_path, 6, n_reads=120)
    firsts = {}
    for line in open(paths[0]).read().splitlines(True):  # one candidate a read, then read 0's again
        firsts.setdefault(line.split("\t")[0], line)
    open(paths[0], "w").write("".join([*firsts.values(), firsts["r0"]]))
    seen = []
    submit = realign_primary.Primaries.submit

    def watched(self, batch, res, done):
        submit(self, batch, res, done)
        seen.extend(e[0].device is None and e[0].seq_size == 0 for e in self.held)

    monkeypatch.setattr(realign_primary.Primaries, "submit", watched)
    want = _run(paths, tmp_path / "host.paf", False)
    got = _run(paths, tmp_path / "dev.paf", True)
    assert got == want and want[0]
    assert emulated["gathered"] > 2 and len(seen) > 10 and all(seen)


def test_merged_ranges_hold_each_range():
    """Ranges of a file merged (overlapping, nested, adjacent, a gap under GAP, far apart, empty), each found whole
    at its place in the merged ranges laid end to end, in file order, no byte read twice."""
    import numpy as np

    rng = np.random.default_rng(2)
    data = rng.integers(0, 256, 1 << 20).astype(np.uint8)
    for _ in range(50):
        k = int(rng.integers(1, 40))
        offs = rng.integers(0, len(data) - 5000, k)
        offs = np.sort(offs) if rng.random() < 0.5 else offs
        sizes = rng.integers(0, 5000, k)
        places, ranges = paf_device.merged(offs, sizes)
        joined = np.concatenate([data[a:a + n] for a, n in ranges])
        for o, n, p in zip(offs, sizes, places):
            assert np.array_equal(joined[p:p + n], data[o:o + n])
        starts = [a for a, _ in ranges]
        assert starts == sorted(starts)
        assert all(a + n + paf_device.GAP < b for (a, n), (b, _) in zip(ranges, ranges[1:]))
        places, ranges = paf_device.merged(offs, sizes, 0)  # (no gap read)
        assert sum(n for _, n in ranges) <= int(sizes.sum())
    assert paf_device.merged(np.zeros(0, np.int64), np.zeros(0, np.int64))[1] == []


@NO_CXX
def test_after_a_refused_chunk_the_readers_fetch_on_the_host(tmp_path, emulated):
    """Reads with a byte no sequence holds in every chunk, --skip-bad: once the device refuses a chunk, the chunks
    not yet sent go the host's way in the reader processes (not each refused and fetched again on the parent's
    one thread); the same output and skips as the host path."""
    paths = _inputs(tmp_path, 12, n_reads=200)
    data = open(paths[1]).read().split(">")
    for i in range(1, len(data), 7):  # every seventh read: a digit after its name's line
        head, seq = data[i].split("\n", 1)
        data[i] = head + "\n" + "7" + seq[1:]
    open(paths[1], "w").write(">".join(data))
    want = _run(paths, tmp_path / "host.paf", False, skip_bad=True)
    got = _run(paths, tmp_path / "dev.paf", True, skip_bad=True)
    assert got == want and want[0] and want[1][2] > 5 and want[1][1] == 0  # (skipped, not failed)
    assert 1 <= emulated["refused"] <= 5  # (those sent before the first was refused: workers + 2, and the next)


@NO_CXX
def test_no_room_on_the_device_goes_the_hosts_way(tmp_path, emulated, monkeypatch):
    """The device out of memory while a chunk is laid out: the chunk, and the ones after it, are fetched on the
    host (no traceback), the same bytes."""
    import cupy

    class OutOfMemoryError(Exception):
        """(is_out_of_memory knows CuPy's by its name)"""

    paths = _inputs(tmp_path, 13, n_reads=80)
    want = _run(paths, tmp_path / "host.paf", False)
    empty = cupy.empty
    calls = []

    def short(n, *a, **k):
        calls.append(n)
        if len(calls) > 6:
            raise OutOfMemoryError("out of memory allocating 1,024 bytes")
        return empty(n, *a, **k)

    monkeypatch.setattr(cupy, "empty", short)
    got = _run(paths, tmp_path / "dev.paf", True)
    assert got == want and want[0]
    assert len(calls) > 6 and emulated["refused"] >= 1


def test_line_ends_placed():
    assert paf_device.line_ends_placed(10, 0, 10, 11) and paf_device.line_ends_placed(0, 5, 0, 0)
    assert paf_device.line_ends_placed(30, 3, 10, 12) and not paf_device.line_ends_placed(30, 3, 10, 13)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", [dict(), dict(width_q=70, eol="\r\n"), dict(fastq=True)])
def test_whole_run_on_the_gpu_writes_the_host_parse_bytes(tmp_path, layout):
    """On the GPU: run_paf with the sequences laid out there (reader processes) against the host path, the same
    bytes."""
    paths = _inputs(tmp_path, 5, n_reads=400, **layout)
    outs = []
    for device_parse in (True, False):
        out = tmp_path / f"o{device_parse}.paf"
        cfg = AlignConfig(device="gpu", threads=4, batch_pairs=64, device_parse=device_parse)
        summary = realign.run_paf(*paths, str(out), None, cfg, "test", readers=2)
        assert summary.pairs > 400
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and len(outs[0].splitlines()) > 400


@pytest.mark.parametrize("layout", [dict(), dict(width_q=70), dict(eol="\r\n", width_q=33), dict(fastq=True),
                                    dict(width_t=0), dict(width_t=1)])
@pytest.mark.parametrize("mode", ["ends-free", "global"])
@pytest.mark.parametrize("keep_full", [False, True], ids=["paf", "sam"])
def test_host_chunks_laid_out_in_bulk_as_fetch_lays_them(tmp_path, layout, mode, keep_full):
    """A reader process's chunk made in bulk (realign_readers._laid_out: the records' slices, one case fold, the
    parts cut) holds the bytes, lengths, window starts and free ends io.paf.fetch's items give, one candidate at a
    time, and for SAM/BAM (keep_full) the whole queries and their qualities."""
    import numpy as np

    from gpualign.io import paf as P
    from gpualign.io import paf_bulk

    paths = _inputs(tmp_path, 5, **layout)
    queries, targets = P.Queries(paths[1]), P.Targets(paths[2])
    realign_readers._init(paths[1], paths[2], mode, 100, False, keep_full, (queries, targets))
    cands = paf_bulk.parse(open(paths[0]).read().splitlines(True), 1)
    items = list(P.fetch(cands, queries, targets, mode, 100, None, keep_full))
    got = realign_readers._laid_out(cands, keep_full)
    assert got is not None
    fetched, parts = got
    assert b"".join(parts) == b"".join([it[1] for it in items] + [it[2] for it in items])
    want = P.Fetched.of(items)
    for k in ("q_len", "t_len", "win_start", "free"):
        assert np.array_equal(getattr(fetched, k), getattr(want, k)), k
    assert fetched.cands.qname == want.cands.qname
    assert fetched.full_query == want.full_query and fetched.full_qual == want.full_qual
    assert any(x is not None for x in fetched.full_query) == keep_full
    assert any(x is not None for x in fetched.full_qual) == (keep_full and layout.get("fastq", False))


@pytest.mark.parametrize("where", ["query outside its range", "target window", "stale index", "none"])
@pytest.mark.parametrize("skip_bad", [False, True])
@pytest.mark.parametrize("fmt", ["paf", "sam"])
def test_host_chunks_in_bulk_fault_as_fetch(tmp_path, monkeypatch, where, skip_bad, fmt):
    """Whole runs on the host path with chunks laid out in bulk against the same without (fetch's per-candidate
    path): the same PAF, error or skipped candidates, on _faulty_inputs too (the bulk path refuses the chunk and
    fetch names the fault)."""
    paths = _faulty_inputs(tmp_path, where)
    got = _run(paths, tmp_path / f"bulk.{fmt}", False, skip_bad=skip_bad)
    monkeypatch.setattr(realign_readers, "_laid_out", lambda cands, keep_full=False: None)
    want = _run(paths, tmp_path / f"fetch.{fmt}", False, skip_bad=skip_bad)
    assert got == want
    assert (want[0] is None) == (where != "none" and not skip_bad)
