"""io/fastx_device.py (pairs parsed by kernels/fastx.cu) against pair_reader (the host parsers) on the same
files: the same pairs (names, sequences as the engines get them, qualities, indices), the same error for a
file the strict parser refuses, batches in pair_reader's layout. The kernels run on the CPU here (tests/emu);
the GPU test runs them on the device and the whole command against the host reader's output."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import emu
import numpy as np
import pytest

from gpualign.gpu.staging import meta_rows, raw_size
from gpualign.errors import GpualignError
from gpualign.io import fastx_device, fastx_strict, pair_reader
from gpualign.records import Names

NO_CXX = pytest.mark.skipif(not emu.available(), reason="no g++ to compile the kernels for the CPU")
LETTERS = "ACGTacgtNn"


def _seq(rng: random.Random, n: int, letters: str = LETTERS) -> str:
    return "".join(rng.choice(letters) for _ in range(n))


def _fasta(rng, n, lo=0, hi=200, name="r"):
    return [(f"{name}{i}", _seq(rng, rng.randint(lo, hi)), None) for i in range(n)]


def _write(path, records, fastq=False, plus_name=False, eol="\n", last_eol=True) -> str:
    lines = []
    for name, seq, qual in records:
        if fastq:
            q = qual if qual is not None else "".join(chr(33 + (i * 7) % 40) for i in range(len(seq)))
            lines += [f"@{name}", seq, f"+{name}" if plus_name else "+", q]
        else:
            lines += [f">{name}", seq]
    text = eol.join(lines) + (eol if last_eol else "")
    with open(path, "w", newline="") as fh:
        fh.write(text)
    return str(path)


def _pairs(batches) -> list:
    out = []
    for b in batches:
        for i in range(b.n):
            qual = b.q_quals[i] if b.q_quals else None
            out.append((b.q_names[i], b.t_names[i], b.query(i), b.target(i), qual, int(b.index[i])))
    return out


def _host(a, b, bases=1 << 25, pairs=1 << 18, symbols=b""):
    return pair_reader.read_pairs(a, b, bases, pairs, parallel_min_bytes=1 << 62, symbols=symbols)


def _device(a, b, bases=1 << 25, pairs=1 << 18, symbols=b""):
    return fastx_device.DevicePairReader(a, b, bases, pairs, symbols, quals=True)


def _outcome(make):
    try:
        return _pairs(make()), None
    except GpualignError as e:
        return None, str(e)


@pytest.fixture
def emulated(monkeypatch):
    from gpualign import text_device

    monkeypatch.setattr(fastx_device, "load_module", emu.load_module)
    monkeypatch.setattr(text_device, "load_module", emu.load_module)  # (PAF and TSV lines of a whole run)
    monkeypatch.setattr(fastx_device, "MIN_READ", 1 << 10)  # many regions, carries and re-reads
    with emu.cupy_on_numpy():
        yield


def _check(a, b, **kw):
    """The device reader's pairs (or error) are the host reader's; its batches have the host's layout."""
    want, want_err = _outcome(lambda: _host(a, b, **kw))
    got, got_err = _outcome(lambda: _device(a, b, **kw))
    assert got_err == want_err
    assert got == want
    if got_err is None:
        for batch in _device(a, b, **kw):
            assert batch.seq.tobytes() == b"".join([batch.query(i) for i in range(batch.n)] +
                                                  [batch.target(i) for i in range(batch.n)])
            if batch.device is not None:
                dev = batch.device.get()
                assert len(dev) == raw_size(len(batch.seq))
                assert dev[:len(batch.seq)].tobytes() == batch.seq.tobytes() and not dev[len(batch.seq):].any()
                # the engines' int32 rows made on the device, as gpu.staging makes them from the host's
                assert np.array_equal(batch.device_cols["rows"].get(), meta_rows(batch))
    return want


@NO_CXX
@pytest.mark.parametrize("fastq", [(False, False), (True, True), (True, False), (False, True)])
def test_same_pairs_as_host(tmp_path, emulated, fastq):
    rng = random.Random(1)
    qa, qb = fastq
    a = _write(tmp_path / "a", _fasta(rng, 300, name="q"), fastq=qa)
    b = _write(tmp_path / "b", _fasta(rng, 300, 0, 900, name="t x y"), fastq=qb, plus_name=True)
    got = _check(a, b, pairs=37)
    assert len(got) == 300
    assert all(bt.device is not None for bt in _device(a, b, pairs=37))  # none read on the host


@NO_CXX
def test_staging_takes_the_readers_rows(tmp_path, emulated):
    """A device batch's int32 rows go to the engines as the reader made them (not cast and sent again); the
    ends-free rows (six) are made from the host's columns as before; a host batch's from its columns."""
    from gpualign.config import AlignConfig
    from gpualign.gpu.staging import Staging

    rng = random.Random(5)
    a = _write(tmp_path / "a", _fasta(rng, 60, name="q"))
    b = _write(tmp_path / "b", _fasta(rng, 60, 0, 500, name="t"))
    batches = list(_device(a, b, pairs=16))
    assert len(batches) > 2 and all(bt.device is not None for bt in batches)
    for bt in batches:
        rows, host = Staging._rows(bt, None)
        assert rows is bt.device_cols["rows"] and host is None
        assert np.array_equal(Staging().upload(bt, AlignConfig())[1], meta_rows(bt))
        rows, host = Staging._rows(bt, None, ends_free=True)
        assert host is not None and rows.shape == (6, bt.n) and np.array_equal(rows, meta_rows(bt, True))
    host_batch = next(iter(_host(a, b, pairs=16)))
    rows, host = Staging._rows(host_batch, None)
    assert host is not None and np.array_equal(rows, meta_rows(host_batch))


@NO_CXX
def test_host_copy_made_when_read(tmp_path, emulated, monkeypatch):
    """A device batch's sequences come to the host only when something there reads them (PairBatch.defer_seq):
    not before, the host reader's bytes then, once per batch, also for a thread that looked for them while
    another fetched them; a pickled batch (formatting processes, Dask workers) carries them; with host_seq (a
    run whose writer or options read every batch's bytes) they are fetched as the batch is made."""
    import pickle

    from gpualign.records import PairBatch

    fetched, copy = [], fastx_device.host_copy
    monkeypatch.setattr(fastx_device, "host_copy", lambda d_seq, total: (
        lambda fetch: lambda: fetched.append(total) or fetch())(copy(d_seq, total)))
    rng = random.Random(4)
    a = _write(tmp_path / "a", _fasta(rng, 50, name="q"))
    b = _write(tmp_path / "b", _fasta(rng, 50, name="t"))
    want = _pairs(_host(a, b, pairs=16))
    got = list(_device(a, b, pairs=16))
    assert len(got) > 2 and all(bt.device is not None and "seq" not in bt.__dict__ for bt in got)
    sizes = [bt.seq_size for bt in got]
    assert fetched == []  # (the sizes known without the bytes)
    first = got[0].seq
    assert got[0].seq is first and len(fetched) == 1 and "_seq_fetch" not in got[0].__dict__
    assert PairBatch.__getattr__(got[0], "seq") is first  # (a thread whose lookup came just before the fetch ended)
    sent = [pickle.loads(pickle.dumps(bt)) for bt in got[1:]]
    assert all("seq" in bt.__dict__ and bt.device is None and "_seq_fetch" not in bt.__dict__ for bt in sent)
    assert _pairs(got) == _pairs(got[:1] + sent) == want
    assert sizes == [len(bt.seq) for bt in got] and sorted(fetched) == sorted(sizes)  # once per batch
    reader = _device(a, b, pairs=16)
    reader.host_seq = True
    eager = list(reader)
    assert all("seq" in bt.__dict__ and bt.device is not None for bt in eager) and _pairs(eager) == want


@NO_CXX
def test_batches_bounded_by_bases(tmp_path, emulated):
    rng = random.Random(2)
    a = _write(tmp_path / "a", _fasta(rng, 200, 100, 3000))
    b = _write(tmp_path / "b", _fasta(rng, 200, 100, 3000))
    _check(a, b, bases=5000)
    assert max(bt.bases for bt in _device(a, b, bases=5000) if bt.n > 1) <= 5000 + 6000


@NO_CXX
def test_records_longer_than_a_read(tmp_path, emulated):
    rng = random.Random(3)
    a = _write(tmp_path / "a", _fasta(rng, 12, 3000, 9000), fastq=True)
    b = _write(tmp_path / "b", _fasta(rng, 12, 5000, 20000))
    _check(a, b, pairs=5)


def _broken(tmp_path, change, at=150, fastq=False, n=300):
    """a: records with `change` made to record `at`'s text; b: plain records."""
    rng = random.Random(at)
    recs = _fasta(rng, n, 1, 150)
    a_path = tmp_path / "a"
    _write(a_path, recs, fastq=fastq)
    text = a_path.read_bytes()
    marker = b"@" if fastq else b">"
    start = text.index(marker + f"r{at}\n".encode())
    a_path.write_bytes(change(text, start))
    b = _write(tmp_path / "b", _fasta(random.Random(9), n, 0, 150))
    return str(a_path), b


CHANGES = {
    "multi-line": lambda t, s: t[:t.index(b"\n", s) + 6] + b"\n" + t[t.index(b"\n", s) + 6:],
    "bad letter": lambda t, s: t[:t.index(b"\n", s) + 3] + b"1" + t[t.index(b"\n", s) + 4:],
    "crlf": lambda t, s: t[:s] + t[s:].replace(b"\n", b"\r\n"),
    "lone cr": lambda t, s: t[:t.index(b"\n", s)] + b"\r" + t[t.index(b"\n", s):],
    "blank line": lambda t, s: t[:s] + b"\n" + t[s:],
    "empty name": lambda t, s: t[:s + 1] + b" " + t[s + 1:],
    "no name": lambda t, s: t[:s + 1] + t[t.index(b"\n", s):],
    "not ascii": lambda t, s: t[:s + 2] + "é".encode() + t[s + 2:],
    "tab comment": lambda t, s: t[:t.index(b"\n", s)] + b"\tcomment x" + t[t.index(b"\n", s):],
    "no last newline": lambda t, s: t[:-1],
    "trailing blank": lambda t, s: t + b"\n\n",
    "cut": lambda t, s: t[:s + 9],
}


@NO_CXX
@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("at", [0, 150])
def test_fasta_layouts_and_errors(tmp_path, emulated, change, at):
    a, b = _broken(tmp_path, CHANGES[change], at)
    _check(a, b, pairs=16)
    if at and change not in ("no last newline", "trailing blank", "crlf", "cut"):
        on_device = 0  # the records before the change are read on the device
        try:
            for bt in _device(a, b, pairs=16):
                on_device += bt.n if bt.device is not None else 0
        except GpualignError:
            pass
        assert on_device >= at - 16


FASTQ_CHANGES = {
    "short quality": lambda t, s: _line(t, s, 3, lambda q: q[:-1]),
    "bad quality": lambda t, s: _line(t, s, 3, lambda q: q[:-1] + b" "),
    "plus names another": lambda t, s: _line(t, s, 2, lambda p: b"+zz"),
    "plus names it": lambda t, s: _line(t, s, 2, lambda p: b"+" + t[s + 1:t.index(b"\n", s)]),
    "plus doubled, next one empty": lambda t, s: _line(_line(t, s, 2, lambda p: b"++"), s, 6, lambda p: b""),
    "multi-line": lambda t, s: _line(t, s, 1, lambda q: q[:2] + b"\n" + q[2:]),
    "fasta record": lambda t, s: t[:s] + b">x\nACGT\n" + t[s:],
    "no last newline": lambda t, s: t[:-1],
}


def _line(text: bytes, start: int, k: int, fn) -> bytes:
    """text with line k (0: the header) of the record starting at start replaced by fn(line)."""
    at = start
    for _ in range(k):
        at = text.index(b"\n", at) + 1
    end = text.index(b"\n", at)
    return text[:at] + fn(text[at:end]) + text[end:]


@NO_CXX
@pytest.mark.parametrize("change", sorted(FASTQ_CHANGES))
def test_fastq_layouts_and_errors(tmp_path, emulated, change):
    a, b = _broken(tmp_path, FASTQ_CHANGES[change], 120, fastq=True)
    _check(a, b, pairs=16)


@NO_CXX
@pytest.mark.parametrize("na,nb", [(300, 299), (299, 300), (1, 0)])
def test_record_counts_differ(tmp_path, emulated, na, nb):
    rng = random.Random(4)
    a = _write(tmp_path / "a", _fasta(rng, na))
    b = _write(tmp_path / "b", _fasta(rng, nb)) if nb else _write(tmp_path / "b", [("x", "", None)])[:0] or a
    if nb == 0:
        (tmp_path / "b2").write_text(">only\nACGT\n>two\nAC\n")
        b = str(tmp_path / "b2")
    _check(a, b, pairs=64)


@NO_CXX
def test_symbols_of_general_scoring(tmp_path, emulated):
    rng = random.Random(5)
    a = _write(tmp_path / "a", [(f"p{i}", _seq(rng, 50, "ACDEFGHIKLMNPQRSTVWY*-"), None) for i in range(100)])
    b = _write(tmp_path / "b", [(f"s{i}", _seq(rng, 80, "ACDEFGHIKLMNPQRSTVWY*"), None) for i in range(100)])
    _check(a, b, symbols=b"*-")
    with pytest.raises(GpualignError, match="invalid sequence character"):
        _pairs(_device(a, b))


@NO_CXX
def test_alphabet_of_general_scoring_checked_by_the_kernels(tmp_path, emulated, monkeypatch):
    """General scoring's alphabet check (scoring.allowed_bytes) made as the device reader parses: a record
    holding a letter the table cannot score ends the device's batches, pair_reader reads on from it and
    scoring.check_batch names it, the host reader's run's message; a clean run checks nothing on the host and
    writes the host reader's bytes."""
    from gpualign import pipeline, scoring
    from gpualign.config import AlignConfig, Penalties, Scoring

    cfg = AlignConfig(metric="affine", penalties=Penalties(3, 5, 2), scoring=Scoring(mode="local", match=2),
                      device="cpu", threads=2, batch_pairs=32)
    allowed = scoring.allowed_bytes(cfg)
    assert allowed is not None and scoring.allowed_bytes(AlignConfig()) is None
    rng = random.Random(16)
    queries = _fasta(rng, 200, 1, 60, name="q")
    a = _write(tmp_path / "a", queries)
    records = _fasta(rng, 200, 1, 90, name="t")
    clean = _write(tmp_path / "clean", records)
    records[150] = ("t150", records[150][1][:3] + "E" + records[150][1][3:], None)
    bad = _write(tmp_path / "bad", records)
    queries[170] = ("q170", "E" + queries[170][1], None)  # a later pair's query too: the first pair is named
    bad_a = _write(tmp_path / "bad_a", queries)
    reader = lambda pa, pb, bases, pairs: fastx_device.DevicePairReader(pa, pb, bases, pairs, b"*-", False, allowed)
    got = list(reader(a, bad, 1 << 25, 32))
    parsed = [bt.device is not None for bt in got]
    assert _pairs(got) == _pairs(_host(a, bad, pairs=32, symbols=b"*-"))  # (the reader alone checks nothing)
    assert parsed[0] and not parsed[-1] and sum(bt.n for bt, p in zip(got, parsed) if p) == 150

    host_reader = pipeline._reader

    def run(b, device_read: bool, name: str, a=a):
        monkeypatch.setattr(pipeline, "_reader", host_reader if not device_read else
                            lambda pa, pb, c, cluster, quals: reader(pa, pb, c.batch_bases, c.batch_pairs))
        out = tmp_path / name
        try:
            pipeline.run_pairs(a, b, str(out), "tsv", cfg, "test")
        except GpualignError as e:
            return str(e)
        return out.read_bytes()

    want_err = run(bad, False, "host_bad.tsv")
    assert "record 151 (t150): protein residue 'E' with DNA scoring" in want_err
    assert run(bad, False, "host_bad2.tsv", bad_a) == run(bad, True, "dev_bad2.tsv", bad_a) == want_err
    want = run(clean, False, "host.tsv")
    checks = []
    check = scoring.check_batch
    monkeypatch.setattr(scoring, "check_batch", lambda batch, *a: checks.append(batch.n) or check(batch, *a))
    assert run(bad, True, "dev_bad.tsv") == want_err and checks and sum(checks) <= 50
    checks.clear()
    assert run(clean, True, "dev.tsv") == want and checks == []


def _compressed(path: str, kind: str, cut: int = 0) -> str:
    """path gzip-compressed (kind "gzip": one member; "bgzf": bgzip's blocks, by htslib) as path + ".gz",
    less its last `cut` bytes."""
    import gzip

    import pysam

    out = path + ".gz"
    if kind == "gzip":
        with open(path, "rb") as src, gzip.open(out, "wb") as dst:
            dst.write(src.read())
    else:
        pysam.tabix_compress(path, out, force=True)
    if cut:
        with open(out, "rb+") as fh:
            fh.truncate(os.path.getsize(out) - cut)
    return out


@NO_CXX
@pytest.mark.parametrize("kind", ["gzip", "bgzf"])
@pytest.mark.parametrize("fastq", [False, True])
def test_compressed_same_pairs_as_host(tmp_path, emulated, kind, fastq):
    """gzip and bgzip inputs inflated into the device reader's buffer (bgzf.open_inflated): the pairs of
    the host's parsers, none read on the host."""
    rng = random.Random(11)
    a = _compressed(_write(tmp_path / "a", _fasta(rng, 300, name="q"), fastq=fastq), kind)
    b = _compressed(_write(tmp_path / "b", _fasta(rng, 300, 0, 900, name="t x y"), fastq=fastq), kind)
    assert len(_check(a, b, pairs=37)) == 300
    assert all(bt.device is not None for bt in _device(a, b, pairs=37))
    plain = _write(tmp_path / "p", _fasta(rng, 300))  # one plain, one compressed
    _check(plain, a, pairs=50)


@NO_CXX
@pytest.mark.parametrize("change", ["multi-line", "bad letter", "crlf", "cut"])
def test_compressed_layouts_and_errors(tmp_path, emulated, monkeypatch, change):
    """A record the kernels refuse in a gzip file: the host's parsers read on from its offset in the
    inflated bytes, the same pairs or error as theirs: the gzip file's from the device reader's live stream
    (never inflated again up to there), the bgzip file's inflated again."""
    from gpualign.io import fastx

    a, b = _broken(tmp_path, CHANGES[change], 150)
    a, b = _compressed(a, "gzip"), _compressed(b, "bgzf")
    _check(a, b, pairs=16)
    opened = []

    def open_path(path):
        opened.append(path)
        return fastx_strict.open_path(path)

    monkeypatch.setattr(fastx, "open_path", open_path)
    _outcome(lambda: _device(a, b, pairs=16))
    assert a not in opened  # (b: unless a's error came first)


@NO_CXX
@pytest.mark.parametrize("cut", [5, 3000])
def test_gzip_damaged_after_a_refused_record(tmp_path, emulated, monkeypatch, cut):
    """A wrapped record at 150 (the kernels refuse it in the first MiB: the host reads on through the live
    stream), and the gzip file (~2.7 MB inflated) cut further on: the host's error, in the inflater's words,
    never a clean end."""
    from gpualign.io import fastx

    a, b = _broken(tmp_path, CHANGES["multi-line"], 150, n=30000)
    a = _compressed(a, "gzip", cut=cut)
    want, err = _outcome(lambda: _host(a, b, pairs=16))
    opened = []
    monkeypatch.setattr(fastx, "open_path", lambda path: opened.append(path) or fastx_strict.open_path(path))
    got, got_err = _outcome(lambda: _device(a, b, pairs=16))
    assert want is None and got is None and "corrupt or truncated" in err and a not in opened
    assert got_err.startswith(f"{a}: ") and got_err.split(": ")[-1] == err.split(": ")[-1]


@NO_CXX
def test_handed_stream_closed_when_the_other_file_fails_first(tmp_path, emulated, monkeypatch):
    """The gzip file's live stream is handed to the host's parsers; the other file's error comes first (its
    parser reads first): the stream is closed all the same."""
    from gpualign.io import fastx_strict as strict

    a, b = _broken(tmp_path, CHANGES["bad letter"], 150, n=30000)
    b = _compressed(_write(tmp_path / "b2", _fasta(random.Random(3), 30000, 0, 150)), "gzip")
    handed = []

    def prefixed(*args, **kw):
        handed.append(strict.prefixed(*args, **kw))
        return handed[-1]

    monkeypatch.setattr(fastx_device, "prefixed", prefixed)
    got, err = _outcome(lambda: _device(a, b, pairs=16))
    assert got is None and "record 151" in err
    assert handed and all(s.closed for s in handed)


class _StopsAt:
    """An inflater over path's bytes that gives the first `at` of them, then fails as a cut file does."""

    def __init__(self, path: str, at: int):
        with open(path.removesuffix(".gz"), "rb") as fh:  # (the file _compressed made it from)
            self.data, self.at = fh.read()[:at], 0

    def readinto(self, view) -> int:
        n = min(len(view), len(self.data) - self.at)
        if n == 0 and len(view):
            raise EOFError("Compressed file ended before the end-of-stream marker was reached")
        view[:n] = self.data[self.at:self.at + n]
        self.at += n
        return n

    def close(self) -> None:
        pass


@NO_CXX
@pytest.mark.parametrize("cut", [1, 9, 300, 2000])
@pytest.mark.parametrize("stop", [None, 1000 * 128])
def test_damaged_gzip_same_error_as_host(tmp_path, emulated, monkeypatch, cut, stop):
    """A gzip file cut short (in its trailer, in its data): the device reader stops where inflating
    stops, and the host's parsers read on from there and give their error, never a clean end. stop: the
    inflater fails right after a record's end (ISA-L's inflates ahead in blocks; here made to stop after
    1000 records of 128 bytes), where the other file ends too: both seem to end together. The record
    named is where the reading stopped (the host reader alone, reading 8 MB at a time, names its first)."""
    rng = random.Random(12)
    recs = [(f"r{i:06d}", _seq(rng, 119, "ACGT"), None) for i in range(3000)]
    a = _compressed(_write(tmp_path / "a", recs), "gzip", cut=cut)
    b = _write(tmp_path / "b", recs[:stop // 128] if stop else recs)
    if stop:
        monkeypatch.setattr(fastx_device, "open_inflated", lambda path: _StopsAt(path, stop))
    want, err = _outcome(lambda: _host(a, b, pairs=1 << 14))
    got, got_err = _outcome(lambda: _device(a, b, pairs=1 << 14))
    assert want is None and got is None
    for e in (err, got_err):
        assert e.startswith(f"{a}: ") and "corrupt or truncated" in e
    assert got_err.split(": ")[-1] == err.split(": ")[-1]  # the inflater's own words


@NO_CXX
@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_damaged_bgzf_same_error_as_host(tmp_path, emulated, damage):
    """A bgzip file damaged halfway (a flipped byte, a cut): the device reader takes the records it got before
    the damage (rapidgzip's chunk of up to 4 MiB with the flipped byte gives none; a cut file goes to open_gz,
    member by member), and the host's parsers read on from there and give their error."""
    rng = random.Random(15)
    recs = [(f"r{i:06d}", _seq(rng, 119, "ACGT"), None) for i in range(20000)]
    a = _compressed(_write(tmp_path / "a", recs), "bgzf")
    data = bytearray(Path(a).read_bytes())
    at = len(data) // 2
    at = data.index(b"BC\x02\x00", at) - 12  # a member's start (its header's BGZF subfield)
    if damage == "flip":
        data[at + 18 + 9] ^= 0xFF
    else:
        data = data[:at + 100]
    Path(a).write_bytes(bytes(data))
    b = _write(tmp_path / "b", recs)
    want, err = _outcome(lambda: _host(a, b, pairs=1 << 12))
    got, got_err = _outcome(lambda: _device(a, b, pairs=1 << 12))
    assert want is None and got is None and err is not None
    assert got_err.startswith(f"{a}: ") and got_err.split(": ")[-1] == err.split(": ")[-1]
    if damage == "cut":  # (a flipped byte: rapidgzip's chunk holding it, the whole file here, gives none)
        on_device = 0
        try:
            for bt in _device(a, b, pairs=1 << 12):
                on_device += bt.n if bt.device is not None else 0
        except GpualignError:
            pass
        assert on_device >= 2000


def test_inflate_failure_is_not_an_end(tmp_path, monkeypatch):
    """_File.inflate tells a file's end (eof: its records are all there) from bytes that stopped inflating
    (failed: the host's parsers read on from there and report it)."""
    rng = random.Random(13)
    path = _compressed(_write(tmp_path / "a", _fasta(rng, 300)), "gzip")
    size = os.path.getsize(str(tmp_path / "a"))
    buf = bytearray(size + 100)
    whole = fastx_device._File(path)
    assert whole.inflate(memoryview(buf)) == size and whole.eof and not whole.failed
    whole.close()
    monkeypatch.setattr(fastx_device, "open_inflated", lambda p: _StopsAt(p, 1000))
    cut = fastx_device._File(path)
    assert cut.inflate(memoryview(buf)) == 1000 and cut.failed and not cut.eof
    cut.close()


def test_usable(tmp_path):
    rng = random.Random(6)
    assert fastx_device.usable(_write(tmp_path / "a.fa", _fasta(rng, 10)))
    assert fastx_device.usable(_write(tmp_path / "a.fq", _fasta(rng, 10), fastq=True))
    wrapped = tmp_path / "w.fa"
    wrapped.write_text(">a\nACGT\nACGT\n>b\nAC\n")
    assert not fastx_device.usable(str(wrapped))
    assert not fastx_device.usable(_write(tmp_path / "crlf.fa", _fasta(rng, 10), eol="\r\n"))
    cr_only = tmp_path / "cr.fa"  # (no LF in its first MiB: one 'record' the GPU's parse would have taken)
    cr_only.write_bytes(b"".join(b">r%d\r%s\r" % (i, b"ACGT" * 100) for i in range(3000)))
    assert not fastx_device.usable(str(cr_only))
    assert fastx_device.usable(_compressed(_write(tmp_path / "g.fa", _fasta(rng, 10)), "gzip"))
    assert fastx_device.usable(_compressed(_write(tmp_path / "z.fq", _fasta(rng, 10), fastq=True), "bgzf"))
    assert not fastx_device.usable(_compressed(str(wrapped), "gzip"))
    cut = tmp_path / "cut.fa.gz"
    cut.write_bytes(Path(_compressed(_write(tmp_path / "c.fa", _fasta(rng, 10)), "gzip")).read_bytes()[:12])
    assert not fastx_device.usable(str(cut))
    assert not fastx_device.usable("-")


@pytest.mark.gpu
@pytest.mark.parametrize("fastq", [False, True])
def test_device_same_pairs_as_host(tmp_path, fastq):
    """On the GPU: random files, many batches, layouts that make it read on with the host parsers."""
    rng = random.Random(7)
    a = _write(tmp_path / "a", _fasta(rng, 5000, 0, 400), fastq=fastq)
    b = _write(tmp_path / "b", _fasta(rng, 5000, 0, 2000), fastq=fastq, plus_name=True)
    _check(a, b, pairs=700)
    for change in ("multi-line", "bad letter", "crlf", "no last newline", "cut"):
        os.makedirs(tmp_path / change, exist_ok=True)
        _check(*_broken(tmp_path / change, CHANGES[change], 4000, n=5000), pairs=512)


class OutOfMemoryError(Exception):
    """(is_out_of_memory knows CuPy's by its name)"""


@NO_CXX
def test_out_of_device_memory_reads_on_the_host(tmp_path, emulated, monkeypatch):
    rng = random.Random(8)
    a = _write(tmp_path / "a", _fasta(rng, 400))
    b = _write(tmp_path / "b", _fasta(rng, 400), fastq=True)
    want = _pairs(_host(a, b, pairs=50))
    real, calls = fastx_device.DevicePairReader._gather, []

    def gather(self, *args, **kw):
        calls.append(1)
        if len(calls) == 5:
            raise OutOfMemoryError("out of memory allocating 1,024 bytes")
        return real(self, *args, **kw)

    monkeypatch.setattr(fastx_device.DevicePairReader, "_gather", gather)
    batches = list(_device(a, b, pairs=50))
    assert _pairs(batches) == want
    assert batches[0].device is not None and batches[-1].device is None


def test_abort_before_the_first_batch_closes_the_files(tmp_path):
    a = _write(tmp_path / "a", _fasta(random.Random(9), 3))
    reader = _device(a, a)
    fds = [f.fd for f in reader.files]
    reader.abort()
    assert all(f.fd == -1 for f in reader.files)
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


@NO_CXX
def test_without_cupy_the_host_reads_it_all(tmp_path, emulated, monkeypatch):
    rng = random.Random(10)
    a = _write(tmp_path / "a", _fasta(rng, 100))
    b = _write(tmp_path / "b", _fasta(rng, 100), fastq=True)
    with monkeypatch.context() as m:  # (undone before `emulated` puts CuPy back: else its fake would stay)
        m.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
        batches = list(_device(a, b, pairs=30))
    assert _pairs(batches) == _pairs(_host(a, b, pairs=30))
    assert all(bt.device is None for bt in batches)


@NO_CXX
def test_reads_follow_the_batch_size(tmp_path, emulated, monkeypatch):
    """Long records and a small bases bound: each byte goes through the buffers about once (the read
    sizes follow the batches the bound lets through), not again with every batch."""
    rng = random.Random(11)
    a = _write(tmp_path / "a", _fasta(rng, 1500, 900, 1100))
    b = _write(tmp_path / "b", _fasta(rng, 1500, 900, 1100))
    through = []
    real = fastx_device.DevicePairReader._fill

    def fill(self):
        host, regions = real(self)
        through.append(sum(r.n for r in regions))
        return host, regions

    monkeypatch.setattr(fastx_device.DevicePairReader, "_fill", fill)
    _check(a, b, bases=20000)
    assert sum(through) < 2 * 1.5 * (os.path.getsize(a) + os.path.getsize(b))  # (_check reads them twice)


@NO_CXX
def test_fastq_qualities_in_sam_as_the_host_reads_them(tmp_path, emulated):
    from gpualign.output.sam import render
    from gpualign.records import AlignBatch

    rng = random.Random(12)
    recs = _fasta(rng, 200, 0, 80)
    a = _write(tmp_path / "a", recs, fastq=True)
    b = _write(tmp_path / "b", _fasta(rng, 200))
    got = [render(bt, AlignBatch.empty(bt.n, has_cigar=False), "edit") for bt in _device(a, b, pairs=64)]
    want = [render(bt, AlignBatch.empty(bt.n, has_cigar=False), "edit") for bt in _host(a, b, pairs=64)]
    assert b"".join(got) == b"".join(want)
    assert all(isinstance(bt.q_quals, Names) for bt in _device(a, b, pairs=64))


@NO_CXX
@pytest.mark.parametrize("kind", [None, "gzip", "bgzf"])
def test_abort_between_batches_releases_the_files(tmp_path, emulated, kind):
    rng = random.Random(13)
    a = _write(tmp_path / "a", _fasta(rng, 300))
    if kind:
        a = _compressed(a, kind)
    reader = _device(a, a, pairs=10)
    next(reader)
    fds = [f.fd for f in reader.files]
    inflated = [f.inflated for f in reader.files]
    reader.abort()
    for fd in fds:
        if fd >= 0:
            with pytest.raises(OSError):
                os.fstat(fd)
    assert all(f is None or f.closed for f in inflated) and (fds[0] >= 0) == (kind is None)
    assert list(reader) == []


@NO_CXX
@pytest.mark.parametrize("kind", [None, "gzip", "bgzf"])
def test_both_ends_taken_reads_nothing_again(tmp_path, emulated, monkeypatch, kind):
    """Both files taken to their ends on the device: pair_reader is not asked to read on (it would inflate a
    compressed file again to find its end)."""
    rng = random.Random(16)
    a = _write(tmp_path / "a", _fasta(rng, 300))
    b = _write(tmp_path / "b", _fasta(rng, 300), fastq=True)
    if kind:
        a, b = _compressed(a, kind), _compressed(b, kind)
    calls, real = [], pair_reader.read_on
    monkeypatch.setattr(pair_reader, "read_on", lambda *x, **k: calls.append(1) or real(*x, **k))
    assert len(_pairs(_device(a, b, pairs=37))) == 300 and not calls


@NO_CXX
@pytest.mark.parametrize("fmt", ["paf", "sam", "tsv"])
@pytest.mark.parametrize("kind", [None, "gzip"])
def test_whole_run_writes_what_the_host_reader_gives(tmp_path, emulated, monkeypatch, fmt, kind):
    """run_pairs with the device reader (kernels emulated) against the host reader, the same bytes: the
    batches through the CPU engine, the writer, and the lines formatted on the device (PAF, TSV: kernels
    emulated too) or by the formatting processes (SAM: pickled, names and qualities as Names); plain and
    gzip inputs."""
    from gpualign import pipeline
    from gpualign.config import AlignConfig

    rng = random.Random(14)
    a = _write(tmp_path / "a", _fasta(rng, 400, 0, 120), fastq=True)
    b = _write(tmp_path / "b", _fasta(rng, 400, 0, 150))
    if kind:
        a, b = _compressed(a, kind), _compressed(b, kind)
    cfg = AlignConfig(device="cpu", threads=2, batch_pairs=64)
    host_out, dev_out = tmp_path / f"host.{fmt}", tmp_path / f"dev.{fmt}"
    pipeline.run_pairs(a, b, str(host_out), None, cfg, "test")
    made = []

    def device_reader(path_a, path_b, cfg, cluster, quals):
        made.append(_device(path_a, path_b, cfg.batch_bases, cfg.batch_pairs))
        made[-1].quals = quals
        return made[-1]

    from gpualign import text_device

    joined = []
    on_device = text_device.DeviceLines._on_device
    monkeypatch.setattr(text_device.DeviceLines, "_on_device", lambda self, *a: joined.append(a[1]) or on_device(self, *a))
    monkeypatch.setattr(pipeline, "_reader", device_reader)
    pipeline.run_pairs(a, b, str(dev_out), None, cfg, "test")
    assert made and dev_out.read_bytes() == host_out.read_bytes()
    assert (sum(joined) == 400) == (fmt != "sam")  # every line joined on the (emulated) device but SAM's


@NO_CXX
def test_whole_run_with_cupy_unusable_writes_the_host_bytes(tmp_path, emulated, monkeypatch):
    """A CuPy that imports but cannot make a stream (a driver too old): the reader reads on the host and the
    PAF lines are joined by numpy here, the same bytes as the host reader's run (the run used to fail in the
    writer)."""
    import cupy

    from gpualign import pipeline
    from gpualign.config import AlignConfig

    rng = random.Random(15)
    a = _write(tmp_path / "a", _fasta(rng, 80, 0, 120), fastq=True)
    b = _write(tmp_path / "b", _fasta(rng, 80, 0, 150))
    cfg = AlignConfig(device="cpu", threads=2, batch_pairs=64)
    host_out, dev_out = tmp_path / "host.paf", tmp_path / "dev.paf"
    pipeline.run_pairs(a, b, str(host_out), None, cfg, "test")

    def broken(*a, **k):
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")

    monkeypatch.setattr(cupy.cuda, "Stream", broken)
    monkeypatch.setattr(pipeline, "_reader", lambda pa, pb, cfg, cluster, quals: _device(pa, pb, cfg.batch_bases,
                                                                                        cfg.batch_pairs))
    from gpualign import text_device

    monkeypatch.setattr(text_device.DeviceLines, "_on_device", lambda *a: pytest.fail("joined on the device"))
    pipeline.run_pairs(a, b, str(dev_out), None, cfg, "test")
    assert dev_out.read_bytes() == host_out.read_bytes()


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["paf", "tsv", "sam"])
def test_whole_run_on_the_gpu_writes_the_host_parse_bytes(tmp_path, fmt):
    """On the GPU: run_pairs with the inputs parsed and the lines joined there against --host-parse's run (host
    reader, formatting processes), the same bytes; pairs close and far (eWFA, and the engines after it, whose
    batches merge), empty sequences (PAF's line without cg:Z), several batches."""

    rng = random.Random(21)
    qs, ts = [], []
    for i in range(3000):
        q = _seq(rng, rng.choice([0, 1, 150, 150, 150, 400]))
        t = list(q)
        for _ in range(int(len(q) * rng.choice([0.0, 0.02, 0.1, 0.5]))):
            at = rng.randrange(len(t) + 1)
            op = rng.random()
            if op < 0.4 and at < len(t):
                t[at] = rng.choice("ACGT")
            elif op < 0.7:
                t.insert(at, rng.choice("ACGT"))
            elif at < len(t):
                del t[at]
        qs.append((f"q{i} some comment", q, None))
        ts.append((f"t{i}", "".join(t) if i % 97 else "", None))
    outs = _gpu_runs(tmp_path, qs, ts, fmt)
    assert outs[0] == outs[1] and len(outs[0]) > 0


def _gpu_runs(tmp_path, qs, ts, fmt: str, kind: str | None = None) -> list:
    """The output bytes of run_pairs on the GPU (batches of 512 pairs, FASTQ queries), the inputs parsed there
    and then by --host-parse's readers; kind: both inputs compressed so (_compressed)."""
    from gpualign import pipeline
    from gpualign.config import AlignConfig

    a = _write(tmp_path / "a.fq", qs, fastq=True)
    b = _write(tmp_path / "b.fa", ts)
    if kind:
        a, b = _compressed(a, kind), _compressed(b, kind)
    outs = []
    for device_parse in (True, False):
        out = tmp_path / f"{device_parse}.{fmt}"
        cfg = AlignConfig(device="gpu", threads=4, batch_pairs=512, device_parse=device_parse)
        pipeline.run_pairs(a, b, str(out), None, cfg, "test")
        outs.append(out.read_bytes())
    return outs


@pytest.mark.gpu
def test_unmapped_sam_lines_from_the_device_on_the_gpu(tmp_path, monkeypatch):
    """On the GPU, the SAM lines of batches holding unmapped pairs (empty targets: FLAG 4, zr:Z:empty_target)
    come from the device columns too (text_device.DeviceLines._sam, counted here), the bytes of --host-parse's
    run."""
    from gpualign import text_device

    rng = random.Random(24)
    qs, ts = [], []
    for i in range(2000):  # an empty target's query short enough for eWFA (a longer one goes to the CPU
        q = _seq(rng, 150, "ACGT")  # engine, and a batch merged from two engines has no device CIGARs)
        qs.append((f"q{i}", q[:20] if i % 7 == 3 else q, None))
        ts.append((f"t{i}", "" if i % 7 == 3 else q[:140] + _seq(rng, 10, "ACGT"), None))
    empty_seen = []
    real = text_device.DeviceLines._sam
    monkeypatch.setattr(text_device.DeviceLines, "_sam", lambda self, cols, cig, res, batch:
                        empty_seen.append(int((batch.t_len == 0).sum())) or real(self, cols, cig, res, batch))
    outs = _gpu_runs(tmp_path, qs, ts, "sam")
    assert outs[0] == outs[1]
    lines = [x for x in outs[0].splitlines() if not x.startswith(b"@")]
    assert len(lines) == 2000
    assert sum(x.endswith(b"\tzr:Z:empty_target") for x in lines) == sum(i % 7 == 3 for i in range(2000))
    assert sum(empty_seen) > 0  # batches with empty targets whose lines the device made


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["gzip", "bgzf"])
def test_compressed_inputs_read_on_the_gpu(tmp_path, monkeypatch, kind):
    """On the GPU, gzip and bgzip inputs inflated into the device reader: the bytes of --host-parse's run."""
    from gpualign import pipeline

    rng = random.Random(23)
    qs = [(f"q{i} c", _seq(rng, rng.choice([0, 150, 400]), "ACGT"), None) for i in range(2000)]
    ts = [(f"t{i}", q[:5] + "A" + q[6:] if len(q) > 6 else q, None) for i, (_, q, _) in enumerate(qs)]
    made, real = [], pipeline._reader
    monkeypatch.setattr(pipeline, "_reader", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    outs = _gpu_runs(tmp_path, qs, ts, "paf", kind)
    assert outs[0] == outs[1] and len(outs[0]) > 0
    assert [isinstance(r, fastx_device.DevicePairReader) for r in made] == [True, False]


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["paf", "sam", "bam"])
def test_lines_from_the_device_columns_on_the_gpu(tmp_path, monkeypatch, fmt):
    """On the GPU, close pairs that eWFA aligns whole in every batch: each batch's PAF or SAM lines (BAM's
    text) come from the columns the reader and the engine left on the device (text_device.DeviceLines.paf
    and .sam, counted here), the same records as --host-parse's run; names with comments, FASTQ queries (SAM's
    QUAL), several batches. The sequences never come back to the host but for BAM's letter check."""
    from gpualign import text_device

    rng = random.Random(22)
    qs, ts = [], []
    for i in range(3000):
        q = _seq(rng, rng.choice([100, 150, 151]), "ACGT")
        t = list(q)
        for _ in range(3):
            t[rng.randrange(len(t))] = rng.choice("ACGT")
        qs.append((f"q{i} a comment", q, None))
        ts.append((f"t{i}", "".join(t), None))
    fused = []
    name = "_paf" if fmt == "paf" else "_sam"
    real = getattr(text_device.DeviceLines, name)
    monkeypatch.setattr(text_device.DeviceLines, name, lambda self, cols, cig, res, batch: fused.append(res.n) or
                        real(self, cols, cig, res, batch))
    fetched, copy = [], fastx_device.host_copy
    monkeypatch.setattr(fastx_device, "host_copy", lambda d_seq, total: (
        lambda fetch: lambda: fetched.append(total) or fetch())(copy(d_seq, total)))
    outs = _gpu_runs(tmp_path, qs, ts, fmt)
    assert bool(fetched) == (fmt == "bam")
    if fmt == "bam":
        import pysam

        outs = [pysam.view(str(tmp_path / f"{parse}.bam")).encode() for parse in (True, False)]
    assert outs[0] == outs[1] and sum(not x.startswith(b"@") for x in outs[0].splitlines()) == 3000
    assert sum(fused) == 3000 and len(fused) > 1
