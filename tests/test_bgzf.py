"""io/bgzf.py: BGZF members inflated side by side give the file's bytes (against the plain file it was made
from, pysam/htslib's bgzip), in any read sizes; damage, a cut, a member that is not BGZF raise the
inflater's errors after the bytes before them."""

from __future__ import annotations

import gzip
import random
import zlib
from pathlib import Path

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


def _read_all(fh, rng=None) -> bytes:
    out = bytearray()
    while True:
        buf = bytearray(rng.choice([1, 7, 4096, 65536, 1 << 20]) if rng else 1 << 20)
        n = fh.readinto(buf)
        if not n:
            return bytes(out)
        out += buf[:n]


@pytest.mark.parametrize("n", [0, 1, 3000, 40000])
def test_same_bytes_in_any_read_sizes(tmp_path, monkeypatch, n):
    monkeypatch.setattr(bgzf, "AHEAD", 40)  # many refills
    monkeypatch.setattr(bgzf, "READ_BYTES", 70000)  # members cut across reads
    text = _text(n)
    path = _bgzip(tmp_path, text)
    assert bgzf.is_bgzf(path)
    with bgzf.BgzfReader(path, threads=3) as fh:
        assert _read_all(fh, random.Random(n)) == text
    with bgzf.open_inflated(path) as fh:
        assert fh.read() == text


def test_plain_gzip_is_not_bgzf(tmp_path):
    text = _text(500)
    path = tmp_path / "g.gz"
    path.write_bytes(gzip.compress(text))
    assert not bgzf.is_bgzf(str(path))
    with bgzf.open_inflated(str(path)) as fh:
        assert _read_all(fh) == text


def _members(data: bytes) -> list:
    at, out = 0, []
    while at < len(data):
        size = bgzf._member_size(data, at)
        assert size
        out.append((at, size))
        at += size
    return out


@pytest.mark.parametrize("damage", ["flip", "cut", "cut header", "not bgzf", "crc"])
def test_damage_raises_after_the_bytes_before(tmp_path, damage):
    """Bytes before the damaged member (the file's own, in order), then the inflater's error."""
    text = _text(20000)
    path = _bgzip(tmp_path, text)
    data = bytearray(Path(path).read_bytes())
    members = _members(bytes(data))
    k = len(members) // 2
    at, size = members[k]
    if damage == "flip":
        data[at + bgzf.HEAD + 5] ^= 0xFF
    elif damage == "crc":
        data[at + size - bgzf.TAIL] ^= 0x01
    elif damage == "cut":
        data = data[:at + size // 2]
    elif damage == "cut header":
        data = data[:at + 7]
    else:
        data = data[:at] + gzip.compress(b"@x\nACGT\n+\nIIII\n") + data[at:]
    Path(path).write_bytes(bytes(data))
    before = sum(len(zlib.decompress(bytes(data[a:a + s]), wbits=31)) for a, s in members[:k])
    got = bytearray()
    fh = bgzf.BgzfReader(path, threads=2)
    with pytest.raises(READ_ERRORS):
        while True:
            buf = bytearray(10000)
            n = fh.readinto(buf)
            got += buf[:n]
            assert n
    # (the members inflated by the failing one's task, up to TASK_MEMBERS of 64 KiB, are not given)
    assert before - bgzf.TASK_MEMBERS * 65536 <= len(got) <= before and text.startswith(bytes(got))
    with pytest.raises(READ_ERRORS):  # and again on the next read: never an end after it
        fh.readinto(bytearray(10))
    fh.close()
