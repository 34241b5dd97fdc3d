"""The search's text reader: a plain or bgzip file read in ranges by worker processes gives the same records and
errors as the file read here as a stream, and both give back the records a plain parser finds, cut at every size
of range and read block (headers, line ends, '>' and bad bytes on the borders), in chunks of the layout the
engines read."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import struct
import zlib
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import gpualign.search.text as T
import gpualign.search.text_ranges as R
import gpualign.search.text_scan as S
from gpualign import interrupt
from gpualign.errors import InputError
from gpualign.io import ranged
from gpualign.io.bgzf import EOF_MEMBER
from gpualign.search import alphabet as A


@pytest.fixture(scope="module", params=["default", "arrays"])
def pool(request):
    """Worker processes that scan a range with array operations where it has MANY headers, or wherever it has one
    (forked with text_scan.MANY = 1)."""
    many = S.MANY
    S.MANY = 1 if request.param == "arrays" else many
    try:
        p = ProcessPoolExecutor(2, mp_context=mp.get_context("fork"))
        p.submit(int).result()  # (forked now: the workers keep this MANY)
    finally:
        S.MANY = many
    with p:
        yield p


def shm_blocks() -> set:
    prefix = interrupt.shm_name().rsplit("_", 1)[0]
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)}


def read(path, pool, chunk=50, context=7, unique=True, ranges=False):
    """(records' codes rebuilt from the chunks, names, lengths) or the InputError's text. Each chunk is given
    back (release) once checked, as the search does. unique: SAM/BAM's name rules (the reader's default).
    ranges: the file must have been read in ranges (by the pool)."""
    reader = T.TextReader(str(path), chunk, context, 16, pool, 2, unique=unique)
    chunks, ranged = [], []
    try:
        for ch in reader:
            ranged.append(ch.slot >= 0)
            chunks.append((ch.codes.copy(), ch))
            reader.release(ch)
    except InputError as e:
        assert reader._slots is not None or not ranges
        return str(e)
    assert reader._slots is not None or not ranges
    if reader._slots is not None and not reader._slots.short:
        assert all(ranged)  # (ranges: each chunk in the slot its worker wrote, unless shared memory ran short)
    closed = set()
    seqs: dict = {}
    for c, (codes, ch) in enumerate(chunks):
        ch.codes = codes
        ends = ch.buf + ch.context + ch.length
        assert (ch.buf % T.ALIGN == 0).all() and ch.buf[0] >= reader.gap  # aligned, free rows before each
        assert (ch.buf[1:] >= ends[:-1] + reader.gap).all()
        pad = np.ones(len(ch.codes), bool)
        for a, e in zip(ch.buf, ends):
            pad[a:e] = False
        assert (ch.codes[pad] == A.PAD).all() and len(ch.codes) - ends[-1] >= reader.gap
        if reader._slots is None:  # (ranges: a chunk per range)
            assert len(ch.codes) <= reader.capacity and (c == len(chunks) - 1 or len(ch.codes) >= chunk)
        for i in range(ch.n):
            rec, ctx, n = int(ch.record[i]), int(ch.context[i]), int(ch.length[i])
            assert rec not in closed  # a record's pieces end with its last one
            if ch.last[i]:
                closed.add(rec)
            got = seqs.setdefault(rec, b"")
            assert int(ch.rec_start[i]) + ctx == len(got)  # pieces follow each other
            piece = ch.piece(i).tobytes()
            assert len(piece) == ctx + n
            assert piece[:ctx] == got[len(got) - ctx:]  # the context repeats the bases before
            seqs[rec] = got + piece[ctx:]
    assert closed == set(range(len(reader.records.names)))  # every record closed
    return [seqs.get(r, b"") for r in range(len(reader.records.names))], reader.records.names, \
        reader.records.lengths


def bgzip(path, member: int):
    """path's bytes written beside it as BGZF (path + '.bgz', returned) in members of `member` bytes each (a
    short one last), bgzip's end member after them: small members put member borders everywhere."""
    data, out = path.read_bytes(), []
    for a in range(0, len(data), member):
        part = data[a:a + member]
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        body = c.compress(part) + c.flush()
        out.append(b"\x1f\x8b\x08\x04\0\0\0\0\0\xff\x06\0BC\x02\0" + struct.pack("<H", len(body) + 25) + body
                   + struct.pack("<II", zlib.crc32(part), len(part)))
    bgz = path.with_name(path.name + ".bgz")
    bgz.write_bytes(b"".join(out) + EOF_MEMBER)
    return bgz


def random_fasta(rng: random.Random, records: int = 0) -> tuple[bytes, list, list]:
    """A FASTA file of varied shape (records: 1 to 6 unless given), its record names and sequences (as codes)."""
    eol = rng.choice([b"\n", b"\r\n"])
    out, names, seqs = [rng.choice([b"", b"\n", b"\n\n"])], [], []
    for r in range(records or rng.randint(1, 6)):
        name = f"r{r}" + rng.choice(["", "_" + "x" * rng.randint(1, 40)])
        desc = rng.choice(["", " some description " * rng.randint(1, 4)])
        seq = bytes(rng.choice(b"ACGTNacgtnRYKM") for _ in range(rng.choice([0, 1, rng.randint(2, 400)])))
        width = rng.choice([1, 7, 60, 1000])
        lines = [seq[i:i + width] for i in range(0, len(seq), width)]
        out.append(b">" + (name + desc).encode() + eol + b"".join(x + eol for x in lines))
        if rng.random() < 0.2:
            out.append(eol)  # a blank line between records
        names.append(name)
        seqs.append(A.to_codes(seq))
    data = b"".join(out)
    if rng.random() < 0.3:
        data = data.rstrip(b"\r\n")  # no line end at the end of the file
    return data, names, seqs


@pytest.mark.parametrize("seed", range(40))
def test_ranges_equal_stream_and_records(tmp_path, pool, monkeypatch, seed):
    rng = random.Random(seed)
    data, names, seqs = random_fasta(rng)
    path = tmp_path / "t.fa"
    path.write_bytes(data)
    monkeypatch.setattr(S, "BLOCK", rng.choice([5, 16, 1 << 24]))
    for many in (1, S.MANY):  # (the stream's blocks with array operations wherever they have a header, or not)
        monkeypatch.setattr(S, "MANY", many)
        stream = read(path, None)
        assert stream[0] == seqs and stream[1] == names and stream[2] == [len(s) for s in seqs]
    for size in (3, 11, 64, max(3, len(data) // 2)):
        monkeypatch.setattr(R, "RANGE", size)
        assert read(path, pool) == stream, size
        # bgzip, members of 1 byte to more than the file: its ranges inflated by the workers, the same records
        bgz = bgzip(path, rng.choice([1, 5, 64, 1 << 16]))
        assert read(bgz, pool, ranges=len(data) >= 2 * min(size, max(50, 4 * T.ALIGN))) == stream, size


@pytest.mark.parametrize("data,message", [
    (b">a\nACGT\nAC-GT\n>b\nAC\n", "record 1: '-' at base 7 is not a DNA/IUPAC letter"),
    (b">a\nACGT\n>b\nACGTACGTACGTACGT\nAC GT\n", "record 2: byte 0x20 at base 19 is not a DNA/IUPAC letter"),
    (b">a\nACGTACGTACGTACGTACGTACGT\nACG\x01T\n", "record 1: byte 0x01 at base 28 is not a DNA/IUPAC letter"),
    (b">a\nACGTACGTACGT>CGTAC\nACGT\n", "record 1: '>' inside a sequence line"),
    (b">a\nACGTACGT\nAC-GTACGTACGT>x\nACGT\n", "record 1: '-' at base 11 is not"),  # the first error in the file
    (b">a\nACGTACGTACGTACGTACGT\nACGTAC\n>a x\nACGT\n", "record name 'a' appears twice"),
    (b"ACGT\n>a\nACGTACGTACGTACGTACGT\n", "text before the first '>' header"),
    (b"  >a\nACGTACGTACGTACGTACGT\n", "text before the first '>' header"),
    (b"\n \t\r\n>a\nACGTACGTACGTACGTACGT\n", "text before the first '>' header"),  # (a line of white space, as
    # io's readers refuse it)
    (b"\n\n  \n\n\n\n\n\n\n\n\n\n\n\n\n", "no FASTA records (empty input)"),
    (b">\nACGTACGTACGTACGTACGTACGT\n", "record 1: empty record name"),
    (b">a\nACGT\n>b\xff x\nACGTACGTACGTACGTACGTACGT\n", "record 2: the record's name is not UTF-8 text"),
])
def test_errors_the_same_both_ways(tmp_path, pool, monkeypatch, data, message):
    path = tmp_path / "bad.fa"
    path.write_bytes(data)
    for block, many in ((4, S.MANY), (1 << 24, S.MANY), (4, 1), (1 << 24, 1)):
        monkeypatch.setattr(S, "BLOCK", block)
        monkeypatch.setattr(S, "MANY", many)
        assert message in read(path, None)
    before = shm_blocks()
    for size in (2, 5, 9, 1 << 23):
        monkeypatch.setattr(R, "RANGE", size)
        assert message in read(path, pool)
        assert message in read(bgzip(path, 3), pool)
    assert shm_blocks() == before  # the ranges in flight when the error came were freed


@pytest.mark.parametrize("seed", range(6))
def test_many_records(tmp_path, pool, monkeypatch, seed):
    """Hundreds of records, stream blocks and ranges of tens of them or all (scanned with array operations), and
    one of them made wrong: the same records or error as the stream's Items."""
    rng = random.Random(seed)
    data, names, seqs = random_fasta(rng, 400)
    path = tmp_path / "t.fa"
    path.write_bytes(data)
    many = S.MANY
    monkeypatch.setattr(S, "MANY", 1 << 40)  # (the stream's Items, a stretch at a time)
    items = {c: read(path, None, chunk=c, context=20) for c in (300, 4000)}
    stream = items[4000]
    assert stream[0] == seqs and stream[1] == names
    for block, at_once in ((1000, 1), (1 << 24, many)):  # the stream's blocks with array operations (tens of
        monkeypatch.setattr(S, "BLOCK", block)  # records each, or all 400 in one)
        monkeypatch.setattr(S, "MANY", at_once)
        for c in (300, 4000):  # (chunks of a few records, records longer than chunk // 4 among them, or many)
            assert read(path, None, chunk=c, context=20) == items[c], (block, c)
    monkeypatch.setattr(S, "MANY", many)
    bgz = bgzip(path, 1000)
    for size in (997, 1 << 14, len(data)):
        monkeypatch.setattr(R, "RANGE", size)
        assert read(path, pool, chunk=4000, context=20) == stream, size
        assert read(bgz, pool, chunk=4000, context=20, ranges=size < len(data) // 2) == stream, size
    at = data.index(b">r", len(data) // 2 + rng.randint(0, len(data) // 3))
    for wrong in (b">" + names[1].encode() + b"\n", b">\n", b"AC-G\n", b"ACG>T\n", b">r\xe9\n", b">=r\n",
                  b">q\rAC\n"):  # a name again, none, a bad byte, '>' inside, a name not UTF-8, one SAM's reference
        # names cannot start so, a CR inside a header line
        bad = tmp_path / "bad.fa"
        bad.write_bytes(data[:at] + wrong + data[at:])
        monkeypatch.setattr(S, "MANY", 1 << 40)
        message = read(bad, None, chunk=4000, context=20)  # (the Items')
        assert isinstance(message, str)
        monkeypatch.setattr(S, "MANY", many)
        assert read(bad, None, chunk=4000, context=20) == message  # (one block: array operations)
        monkeypatch.setattr(R, "RANGE", 1 << 14)
        assert read(bad, pool, chunk=4000, context=20) == message


def test_many_names_as_stream(tmp_path, pool, monkeypatch):
    """Record names of a range read with array operations: each header's first word, ended by ASCII white space
    (tabs, a leading space, CR; other Unicode spaces and separators are part of the name, as htslib's faidx and
    io's readers have it) and after it bytes that are not UTF-8, as the stream finds them."""
    heads = [b" lead%d desc", b"tab%d\tdesc", b"fs%d\x1cdesc", b"nb%d\xc2\xa0desc", b"raw%d x\xff", b"crlf%d\r",
             b"ok%d", b"nel%d\xc2\x85x"]
    data = b"".join(b">" + heads[i % len(heads)].replace(b"%d", str(i).encode()) + b"\nACGT\n" for i in range(200))
    path = tmp_path / "t.fa"
    path.write_bytes(data)
    stream = read(path, None, unique=False)  # (names SAM/BAM cannot hold: refused below)
    assert stream[1][:8] == ["lead0", "tab1", "fs2\x1cdesc", "nb3\xa0desc", "raw4", "crlf5", "ok6", "nel7\x85x"]
    assert len(set(stream[1])) == 200
    monkeypatch.setattr(R, "RANGE", 1 << 12)
    assert read(path, pool, unique=False) == stream
    assert "record 3: record name 'fs2\\x1cdesc' holds '\\x1c'" in read(path, None)  # (SAM/BAM's rule)
    assert "record 3: record name 'fs2\\x1cdesc' holds '\\x1c'" in read(path, pool)


def test_long_lines_and_headers_across_ranges(tmp_path, pool, monkeypatch):
    """An unwrapped record far longer than a range, a header longer than several ranges, no final line end."""
    rng = random.Random(5)
    seq = bytes(rng.choice(b"ACGT") for _ in range(5000))
    data = b">one " + b"d" * 300 + b"\n" + seq + b"\n>two\n" + seq[:777] + b"\n>" + b"h" * 250
    path = tmp_path / "t.fa"
    path.write_bytes(data)
    want = [A.to_codes(seq), A.to_codes(seq[:777]), b""]
    stream = read(path, None, chunk=1000, context=30)
    assert stream[0] == want and stream[1] == ["one", "two", "h" * 250]
    bgz = bgzip(path, 50)  # (a range's line start searched back over many members)
    for size in (17, 100, 999):
        monkeypatch.setattr(R, "RANGE", size)
        assert read(path, pool, chunk=1000, context=30) == stream
        assert read(bgz, pool, chunk=1000, context=30, ranges=True) == stream


@pytest.mark.parametrize("damage", ["data", "crc", "size"])
def test_damaged_bgzip_is_an_error_both_ways(tmp_path, pool, monkeypatch, damage):
    """A bgzip text with a member that does not inflate (its deflate data, CRC-32 or size changed): one error
    naming the file, a record and the damage, read in ranges (the workers inflate it) or as a stream; no
    shared-memory block left."""
    rng = random.Random(3)
    data, names, seqs = random_fasta(rng, 30)
    path = tmp_path / "t.fa"
    path.write_bytes(data)
    raw = bytearray(bgzip(path, 200).read_bytes())
    at = raw.index(b"BC\x02\x00", len(raw) // 2) - 12  # a member in the file's middle
    end = at + int.from_bytes(raw[at + 16:at + 18], "little") + 1
    raw[{"data": at + 20, "crc": end - 8, "size": end - 4}[damage]] ^= 0x55
    bad = tmp_path / "bad.fa.bgz"
    bad.write_bytes(bytes(raw))
    before = shm_blocks()
    monkeypatch.setattr(ranged, "PROBE", 100)  # (the lines' probe before the damage: the ranges meet it)
    for size in (64, 1 << 12):
        monkeypatch.setattr(R, "RANGE", size)
        got = read(bad, pool, ranges=True)
        assert isinstance(got, str) and got.startswith(f"{bad}: record ") and "corrupt or truncated input" in got, got
    got = read(bad, None)
    assert isinstance(got, str) and got.startswith(f"{bad}: record ") and "corrupt or truncated input" in got, got
    assert shm_blocks() == before


def test_a_bgzip_text_of_long_lines_is_one_stream(tmp_path, pool, monkeypatch):
    """A bgzip text whose first lines are longer than LONGEST_LINE (an unwrapped sequence) is read as one stream:
    finding each range's line start would inflate the whole line member by member in this process. Lines
    within it: in ranges. The same records either way."""
    rng = random.Random(9)
    seq = bytes(rng.choice(b"ACGT") for _ in range(3000))
    path = tmp_path / "t.fa"
    path.write_bytes(b">one\n" + seq + b"\n>two\n" + seq[:900] + b"\n")
    bgz = bgzip(path, 200)
    monkeypatch.setattr(R, "RANGE", 500)
    want = read(path, None, chunk=1000, context=30)
    for longest, ranges in ((1000, False), (4000, True)):
        monkeypatch.setattr(ranged, "LONGEST_LINE", longest)
        reader = T.TextReader(str(bgz), 1000, 30, 16, pool, 2)
        for ch in reader:
            reader.release(ch)
        assert (reader._slots is not None) == ranges
        assert read(bgz, pool, chunk=1000, context=30, ranges=ranges) == want


@pytest.mark.parametrize("bsize", [0, 1, 2, 17])
def test_a_bgzip_header_too_short_for_a_member(tmp_path, pool, monkeypatch, bsize):
    """A member header whose BSIZE leaves no room for its own header and trailer (its deflate data intact): the
    members' walk read its ISIZE at a negative offset (struct.error, a traceback). The file is not BGZF: read as
    a gzip stream, whose members' BSIZE no inflater reads, it gives the plain file's records."""
    rng = random.Random(4)
    data, names, seqs = random_fasta(rng, 20)
    path = tmp_path / "t.fa"
    path.write_bytes(data)
    raw = bytearray(bgzip(path, 100).read_bytes())
    raw[16:18] = bsize.to_bytes(2, "little")
    bad = tmp_path / "bad.fa.bgz"
    bad.write_bytes(bytes(raw))
    monkeypatch.setattr(R, "RANGE", 64)
    want = read(path, None)
    assert want[1] == names
    for p in (pool, None):
        assert read(bad, p) == want


def test_short_shared_memory(tmp_path, pool, monkeypatch):
    """Shared memory too short for every slot: fewer ranges in flight, or (under two slots) the stream; the
    same chunks either way, and no block left."""
    from gpualign import shm

    rng = random.Random(9)
    data, _, _ = random_fasta(rng)
    path = tmp_path / "t.fa"
    path.write_bytes(data * 3)
    monkeypatch.setattr(R, "RANGE", 50)
    want, made = read(path, None), shm.mapped
    for room in (0, 1, 2, 3):
        calls = []

        def mapped(name, size=0, room=room):
            calls.append(name)
            if size and len(calls) > room:
                raise OSError(28, "No space left on device")
            return made(name, size)

        monkeypatch.setattr(shm, "mapped", mapped)
        before = shm_blocks()
        assert read(path, pool) == want, room
        assert shm_blocks() == before


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_failing_run_leaves_no_block_nor_thread(tmp_path, monkeypatch, device):
    """A run that fails mid-text (here: while the hits of the second chunk are collected) frees the reader's
    slots and stops its reading and search threads before it returns (auto: the engine found in a thread)."""
    import threading

    from gpualign.config import SearchConfig
    from gpualign.search import hits
    from gpualign.search.run import run_search

    rng = random.Random(4)
    seq = "".join(rng.choice("ACGT") for _ in range(60_000))
    (tmp_path / "t.fa").write_text(">r\n" + "\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)) + "\n")
    (tmp_path / "p.fa").write_text(">p\n" + seq[1000:1023] + "\n")
    monkeypatch.setattr(R, "RANGE", 4096)
    calls, add = [], hits.Collector.add

    def failing(self, chunk, cands, quota=None):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return add(self, chunk, cands, quota)

    monkeypatch.setattr(hits.Collector, "add", failing)
    threads, before = threading.active_count(), shm_blocks()
    with pytest.raises(OSError, match="No space"):
        run_search(str(tmp_path / "p.fa"), str(tmp_path / "t.fa"), str(tmp_path / "o.tsv"), None,
                   SearchConfig(k=1, device=device, threads=2, chunk_bases=5000), "x")
    assert len(calls) == 2 and shm_blocks() == before and threading.active_count() == threads
    assert not os.path.exists(tmp_path / "o.tsv")


def test_short_records_split_ranges(tmp_path, pool, monkeypatch):
    """Ranges of records so short that their pieces and PAD outgrow a slot are read as halves, in order."""
    rng = random.Random(11)
    data = b"".join(b">s%d\n%s\n" % (i, bytes(rng.choice(b"ACGT") for _ in range(rng.randint(0, 3))))
                    for i in range(3000))
    path = tmp_path / "t.fa"
    path.write_bytes(data)
    stream = read(path, None, chunk=1 << 20)
    monkeypatch.setattr(R, "RANGE", 4096)
    chunks = []
    reader = T.TextReader(str(path), 1 << 20, 7, 16, pool, 2)
    for ch in reader:
        chunks.append(ch.n)
        reader.release(ch)
    assert len(chunks) > -(-len(data) // 4096)  # (more chunks than ranges: halves)
    assert read(path, pool, chunk=1 << 20) == stream


def test_context_after_a_long_header(tmp_path, pool, monkeypatch):
    """A range that starts a few bases into a record whose header line is longer than the worker's first look
    back: its context is the record's bases, not the header's end (the review's case)."""
    path = tmp_path / "t.fa"
    path.write_bytes(b">r " + b"x" * 300 + b"\nACGTACGT\n>s " + b"ACGT" * 200 + b"\nGGCCA\nTT\n")
    stream = read(path, None, chunk=1 << 20)
    for size in (102, 306, 307, 310, 811, 815):
        monkeypatch.setattr(R, "RANGE", size)
        assert read(path, pool, chunk=1 << 20) == stream, size


def test_copied_chunks_not_kept(tmp_path, pool, monkeypatch):
    """With one slot (shared memory short), every chunk is a copy: given back, it is dropped, not kept."""
    from gpualign import shm

    rng = random.Random(3)
    path = tmp_path / "t.fa"
    path.write_bytes(b">r\n" + bytes(rng.choice(b"ACGT") for _ in range(20_000)) + b"\n")
    monkeypatch.setattr(R, "RANGE", 1024)
    made = shm.mapped

    def one_slot(name, size=0):
        if size and name.endswith("_1"):
            raise OSError(28, "No space left on device")
        return made(name, size)

    monkeypatch.setattr(shm, "mapped", one_slot)
    reader = T.TextReader(str(path), 1 << 20, 7, 16, pool, 2)
    n = 0
    for ch in reader:
        assert ch.slot == -1
        n += 1
        reader.release(ch)
    assert n > 10 and not reader._free


def test_engine_failure_after_first_chunk(tmp_path, monkeypatch):
    """The engine's thread fails (--device gpu without one) while the first chunk is read: the error comes out,
    the reader's slots and ranges in flight are freed, no thread is left, no output written."""
    import threading

    from gpualign.config import SearchConfig
    from gpualign.errors import DeviceError
    from gpualign.search import run

    rng = random.Random(6)
    seq = "".join(rng.choice("ACGT") for _ in range(60_000))
    (tmp_path / "t.fa").write_text(">r\n" + "\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)) + "\n")
    (tmp_path / "p.fa").write_text(">p\n" + seq[1000:1023] + "\n")
    monkeypatch.setattr(R, "RANGE", 4096)

    def no_gpu(cfg, notice):
        raise DeviceError("--device gpu: no usable GPU (test)")

    monkeypatch.setattr(run, "engine_class", no_gpu)
    threads, before = threading.active_count(), shm_blocks()
    with pytest.raises(DeviceError, match="no usable GPU"):
        run.run_search(str(tmp_path / "p.fa"), str(tmp_path / "t.fa"), str(tmp_path / "o.tsv"), None,
                       SearchConfig(k=1, device="gpu", threads=2, chunk_bases=5000), "x")
    assert shm_blocks() == before and threading.active_count() == threads
    assert not os.path.exists(tmp_path / "o.tsv")


def test_stop_before_the_slots(tmp_path, pool, monkeypatch):
    """A reader stopped before its slots are made: they are made stopped."""
    rng = random.Random(3)
    path = tmp_path / "t.fa"
    path.write_bytes(random_fasta(rng, 50)[0])
    monkeypatch.setattr(R, "RANGE", 256)
    reader = T.TextReader(str(path), 256, 7, 16, pool, 2)
    reader.stop()
    chunks = iter(reader)
    next(chunks)
    assert reader._slots.stopped.is_set()
    chunks.close()


def test_stop_ends_a_wait_for_a_slot():
    """A reading thread waiting for a slot (all held by consumers that have stopped) ends once the reader is
    stopped, with an error, instead of waiting for ever."""
    import threading

    from gpualign.errors import GpualignError

    slots = R.Slots(4096, 1)
    try:
        assert slots.get(wait=False) == 0 and slots.get(wait=False) is None
        out = []

        def wait():
            try:
                out.append(slots.get(wait=True))
            except GpualignError as e:
                out.append(e)

        th = threading.Thread(target=wait)
        th.start()
        th.join(0.3)
        assert th.is_alive() and not out  # (waiting: the one slot is held)
        slots.stopped.set()
        th.join(2)
        assert not th.is_alive() and isinstance(out[0], GpualignError)
    finally:
        slots.close()
