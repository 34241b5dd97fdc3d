"""io/bgzf.py: a whole bgzip file inflated by rapidgzip gives the file's bytes (against the plain file it was
made from, pysam/htslib's bgzip), in any read sizes; damage raises the inflater's errors (zlib.error) after a
prefix of the bytes, on every read after; a file without bgzip's end member (a cut one) goes to open_gz."""

from __future__ import annotations

import gzip
import random
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from gpualign.io import bgzf
from gpualign.io.fastx_fast import READ_ERRORS


def _text(n: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    return b"".join(b"@r%d\n%s\n+\n%s\n" % (i, bytes(rng.choice(b"ACGT") for _ in range(rng.randint(0, 300))),
                                           b"I" * 5) for i in range(n))


def _bgzip(tmp_path, text: bytes, name: str = "a") -> str:
    import pysam

    plain = tmp_path / name
    plain.write_bytes(text)
    pysam.tabix_compress(str(plain), str(plain) + ".gz", force=True)
    return str(plain) + ".gz"


def _starts_bgzf(path: str) -> bool:
    """Whether path's first gzip member is a BGZF one (its header: gzip magic, FEXTRA, XLEN 6, 'BC')."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    return head[:4] == b"\x1f\x8b\x08\x04" and head[10:16] == b"\x06\x00BC\x02\x00"


def _read_all(fh, rng=None) -> bytes:
    out = bytearray()
    while True:
        buf = bytearray(rng.choice([1, 7, 4096, 65536, 1 << 20]) if rng else 1 << 20)
        n = fh.readinto(buf)
        if not n:
            return bytes(out)
        out += buf[:n]


@pytest.mark.parametrize("n", [0, 1, 3000, 40000])
def test_same_bytes_in_any_read_sizes(tmp_path, n):
    text = _text(n)
    path = _bgzip(tmp_path, text)
    assert _starts_bgzf(path) and bgzf.whole_bgzf(path)
    with bgzf.ParallelInflated(path, threads=3) as fh:
        assert _read_all(fh, random.Random(n)) == text
    with bgzf.open_inflated(path) as fh:
        assert isinstance(fh, bgzf.ParallelInflated) and fh.read() == text


def test_plain_gzip_is_not_bgzf(tmp_path):
    text = _text(500)
    path = tmp_path / "g.gz"
    path.write_bytes(gzip.compress(text))
    assert not _starts_bgzf(str(path))
    with bgzf.open_inflated(str(path)) as fh:
        assert not isinstance(fh, bgzf.ParallelInflated) and _read_all(fh) == text


def _members(data: bytes) -> list:
    """(offset, size) of each BGZF member, from the BSIZE field of its header."""
    at, out = 0, []
    while at < len(data):
        assert data[at:at + 4] == b"\x1f\x8b\x08\x04" and data[at + 12:at + 14] == b"BC"
        size = struct.unpack_from("<H", data, at + 16)[0] + 1
        out.append((at, size))
        at += size
    return out


def test_a_plain_member_inside_is_read_as_gzip(tmp_path, capfd):
    """A gzip member that is not BGZF between bgzip's members: still gzip, read whole by ISA-L's stream
    (rapidgzip printed lines of its own on stderr for it)."""
    text = _text(20000)
    path = _bgzip(tmp_path, text)
    data = Path(path).read_bytes()
    at = _members(data)[len(_members(data)) // 2][0]
    extra = b"@x\nACGT\n+\nIIII\n"
    Path(path).write_bytes(data[:at] + gzip.compress(extra) + data[at:])
    assert _starts_bgzf(path) and not bgzf.whole_bgzf(path)
    with bgzf.open_inflated(path) as fh:
        assert not isinstance(fh, bgzf.ParallelInflated)
        assert fh.read() == gzip.decompress(Path(path).read_bytes())
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("damage", ["flip", "crc", "size", "cut", "cut header", "junk between"])
def test_damage_raises_after_a_prefix(tmp_path, capfd, damage):
    """A prefix of the file's own bytes, then the inflater's error, and again on the next read: never an end;
    nothing on stderr. A file whose member headers do not chain to bgzip's end member (cut, junk between
    members) is read by open_gz."""
    text = _text(20000)
    path = _bgzip(tmp_path, text)
    data = bytearray(Path(path).read_bytes())
    members = _members(bytes(data))
    at, size = members[len(members) // 2]
    if damage == "flip":
        data[at + 18 + 5] ^= 0xFF
    elif damage == "crc":
        data[at + size - 8] ^= 0x01
    elif damage == "size":
        data[at + size - 4] ^= 0x01
    elif damage == "cut":
        data = data[:at + size // 2]
    elif damage == "cut header":
        data = data[:at + 7]
    else:
        data = data[:at] + b"not gzip" + data[at:]
    Path(path).write_bytes(bytes(data))
    fh = bgzf.open_inflated(path)
    assert isinstance(fh, bgzf.ParallelInflated) == (damage in ("flip", "crc", "size"))
    got = bytearray()
    with pytest.raises(READ_ERRORS):
        while True:
            buf = bytearray(10000)
            n = fh.readinto(buf)
            got += buf[:n]
            assert n
    assert text.startswith(bytes(got)) and len(got) < len(text)
    with pytest.raises(READ_ERRORS):
        fh.readinto(bytearray(10))
    fh.close()
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("end", ["exit", "raise"])
def test_left_open_at_exit_does_not_abort(tmp_path, end):
    """A ParallelInflated still open when the interpreter ends is closed first (rapidgzip's threads abort
    the process if they see it end)."""
    import subprocess
    import sys

    path = _bgzip(tmp_path, _text(3000))
    last = "raise SystemExit(3)" if end == "exit" else "raise ValueError('x')"
    code = f"from gpualign.io import bgzf\nfh = bgzf.open_inflated({path!r})\nfh.read(10)\n{last}\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == (3 if end == "exit" else 1) and "terminate" not in r.stderr


def test_closed_while_another_thread_reads(tmp_path):
    """close() from another thread waits for the read under way; later reads raise zlib.error (rapidgzip
    crashed or hung when closed mid-read)."""
    import threading

    path = _bgzip(tmp_path, _text(40000))
    for _ in range(6):
        fh = bgzf.ParallelInflated(path, threads=2)
        seen: list = []

        def read():
            try:
                while fh.readinto(bytearray(1 << 16)):
                    pass
                seen.append("end")
            except READ_ERRORS:
                seen.append("error")

        reader = threading.Thread(target=read)
        reader.start()
        fh.close()
        reader.join(timeout=30)
        assert not reader.is_alive() and seen in (["end"], ["error"])
        with pytest.raises(READ_ERRORS):
            fh.readinto(bytearray(10))


def test_cut_at_a_member_end_is_cut_short(tmp_path):
    """bgzip's file cut at a member's end inflates without an error, short: cut_short finds it (its end member
    is missing); a whole bgzip file, plain gzip and text are not cut short."""
    text = _text(20000)
    path = _bgzip(tmp_path, text)
    data = Path(path).read_bytes()
    members = _members(data)
    assert len(members) > 3 and data[members[-1][0]:] == bgzf.EOF_MEMBER
    assert not bgzf.cut_short(path)
    at = members[len(members) // 2][0]
    cut = tmp_path / "cut.fq.gz"
    cut.write_bytes(data[:at])
    short = gzip.decompress(cut.read_bytes())  # (inflates without an error, short)
    assert text.startswith(short) and len(short) < len(text)
    assert bgzf.cut_short(str(cut))
    (tmp_path / "plain.gz").write_bytes(gzip.compress(text))
    (tmp_path / "text.fq").write_bytes(text)
    (tmp_path / "tiny.gz").write_bytes(data[:20])
    assert not bgzf.cut_short(str(tmp_path / "plain.gz")) and not bgzf.cut_short(str(tmp_path / "text.fq"))
    assert bgzf.cut_short(str(tmp_path / "tiny.gz"))


def test_commands_refuse_a_bgzip_file_cut_short(tmp_path):
    """A bgzip FASTA cut at a member's end, given by its path (every command's inputs pass fastx.sniff) or on
    stdin (fastx_strict.open_stream checks its end): one line naming it, exit 1, no output."""
    import subprocess
    import sys

    rng = random.Random(3)
    seq = bytes(rng.choice(b"ACGT") for _ in range(300000))
    path = _bgzip(tmp_path, b">chr x\n" + seq + b"\n", "g.fa")
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:_members(data)[2][0]])
    (tmp_path / "p.fa").write_bytes(b">p\n" + seq[1000:1023] + b"\n")
    (tmp_path / "q.fa").write_bytes(b">q\n" + seq[:500] + b"\n")
    (tmp_path / "c.paf").write_text("q\t500\t0\t500\t+\tchr\t300000\t0\t500\t500\t500\t60\n")
    for args in (["search", "p.fa", "g.fa.gz", "-k", "1"], ["genome", "q.fa", "g.fa.gz", "--distance-only"],
                 ["pairs", "q.fa", "g.fa.gz"], ["paf", "c.paf", "q.fa", "g.fa.gz"]):
        p = subprocess.run([sys.executable, "-m", "gpualign", *args, "-o", "o.tsv" if args[0] != "paf" else "o.paf",
                            "--device", "cpu", "-q"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert p.returncode == 1 and p.stderr.count("\n") == 1, (args, p.stderr)
        assert "g.fa.gz: bgzip file without its end-of-file block" in p.stderr, (args, p.stderr)
        assert not (tmp_path / "o.tsv").exists() and not (tmp_path / "o.paf").exists()
    for args in (["search", "p.fa", "-", "-k", "1"], ["pairs", "-", "q.fa"], ["genome", "-", "q.fa"]):  # (stdin: its
        # end checked as it comes)
        with open(path, "rb") as cut:
            p = subprocess.run([sys.executable, "-m", "gpualign", *args, "-o", "o.tsv", "--device", "cpu", "-q"],
                               stdin=cut, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert p.returncode == 1 and p.stderr.count("\n") == 1, (args, p.stderr)
        assert p.stderr.startswith("error: stdin: ") and "without its end-of-file block" in p.stderr, p.stderr
        assert not (tmp_path / "o.tsv").exists()


@pytest.mark.parametrize("damage", ["flip", "crc", "size"])
def test_damaged_bgzip_fasta_in_ranges(tmp_path, monkeypatch, damage):
    """A bgzip FASTA whose member in the middle does not inflate, read in ranges by two processes (pairs' reader,
    io/fastx_parts.py): an InputError naming the file and a record at or before the damage (the first record of
    its range), as the one stream names it (the first record of the block it read). The same file undamaged:
    the plain file's records."""
    from gpualign.errors import InputError
    from gpualign.io import fastx_parts, pair_reader, ranged

    rng = random.Random(5)
    recs = [bytes(rng.choice(b"ACGT") for _ in range(rng.randint(50, 400))) for _ in range(3000)]
    text = b"".join(b">r%d x\n%s\n" % (i, s) for i, s in enumerate(recs))
    path = _bgzip(tmp_path, text, "a.fa")
    (tmp_path / "b.fa").write_bytes(text)
    monkeypatch.setattr(fastx_parts, "RANGE_BYTES", 100_000)
    monkeypatch.setattr(ranged, "CUT_READ", 1024)  # (the cuts read no byte of the damaged member: its range does)

    def pairs(workers):
        return [(bt.q_names, bt.t_names, bt.seq.tobytes()) for bt in
                pair_reader.read_pairs(path, str(tmp_path / "b.fa"), 100_000, 97, 0, workers=workers)]

    assert pairs(2) == pairs(1) and len(pairs(2)) > 5
    inflated = bgzf.members(path)[1]
    with ranged.open_at(path) as src:
        cuts = ranged.record_cuts(src, fastx_parts.RANGE_BYTES)
    mid = int(np.searchsorted(inflated, (cuts[3] + cuts[4]) // 2, "right")) - 1  # a member no cut reads from
    assert not any(inflated[mid] <= c - 1 + r < inflated[mid + 1] for c in cuts[1:-1] for r in (0, 1023))
    data = bytearray(Path(path).read_bytes())
    at, size = _members(bytes(data))[mid]
    if damage == "flip":
        data[at + 18 + 5] ^= 0xFF
    elif damage == "crc":
        data[at + size - 8] ^= 0x01
    else:
        data[at + size - 4] ^= 0x01
    Path(path).write_bytes(bytes(data))
    damaged = text[:int(inflated[mid + 1])].count(b">")  # (the records up to the damaged member's end)
    for workers in (1, 2):
        with pytest.raises(InputError, match=r"a\.fa\.gz: record (\d+) \(line \d+\): corrupt or truncated input "
                                              r"in this record or a later one") as e:
            pairs(workers)
        record, line = (int(x) for x in re.search(r"record (\d+) \(line (\d+)\)", str(e.value)).groups())
        assert 1 <= record <= damaged and line == 2 * record - 1, (workers, str(e.value))
    assert record > 1  # (in ranges: the first record of the damaged member's range, in the whole file)


def test_reads_by_offset_go_on_past_a_short_read(tmp_path, monkeypatch):
    """io.ranged reads what was asked where os.pread returns less (Linux: about 2 GiB at most a call; here 7
    bytes), from a plain file and from a bgzip file's compressed bytes; at the file's end, what is there."""
    import os

    from gpualign.io import ranged

    text = _text(300)
    path = _bgzip(tmp_path, text)
    real = os.pread
    for p in (str(tmp_path / "a"), path):
        with ranged.open_at(p) as src, monkeypatch.context() as m:
            m.setattr(os, "pread", lambda fd, n, at: real(fd, min(n, 7), at))
            assert src.size == len(text)
            assert src.pread(len(text), 0) == text and src.pread(5000, 1234) == text[1234:6234]
            assert src.pread(100, len(text) - 10) == text[-10:] and src.pread(10, len(text)) == b""
