"""A damaged gzip or bgzip input (io/damage.py): the error names the record and line where the data stops, found
here independently (zlib's partial output, bgzip's member walk), whatever reader met it: `pairs`' readers, and
`search`'s and `genome`'s."""

import gzip
import struct
import zlib

import numpy as np
import pytest

from cli_helper import run_cli

READERS = [["--device", "cpu", "-t", "1"], ["--device", "cpu", "-t", "2"], ["--device", "cpu", "--host-parse"]]
ALL = [pytest.param(a, id=i) for a, i in zip(READERS, ("t1", "t2", "host-parse"))] + [
    pytest.param(["--device", "gpu"], id="gpu", marks=pytest.mark.gpu)]


def fastq(n: int, seed: int = 5) -> bytes:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        s = "".join(rng.choice(list("ACGT"), int(rng.integers(40, 200))))
        out.append(f"@r{i} some comment\n{s}\n+\n{'I' * len(s)}\n")
    return "".join(out).encode()


def stop_place(got: bytes, fastq: bool) -> tuple[int, int, str]:
    """(record, line, words) of where inflated bytes `got` (all a damaged file gives) stop: the line they end
    (at its end) or the line holding the first byte not given, and its record."""
    at_end = got.endswith(b"\n")
    line = got.count(b"\n") + (not at_end)
    text = got.lstrip(b"\n")
    skipped = len(got) - len(text)  # (blank lines before the first record)
    record = (line - 1 - skipped) // 4 + 1 if fastq else text.count(b"\n>") + 1
    return record, line, "its data stops at the end of this line" if at_end else "its data stops in this record"


def error_of(tmp_path, q: bytes, t: bytes, args) -> str:
    (tmp_path / "q.fq.gz").write_bytes(q)
    (tmp_path / "t.fq").write_bytes(t)
    p = run_cli("pairs", str(tmp_path / "q.fq.gz"), str(tmp_path / "t.fq"), "-q", "-o", str(tmp_path / "x.paf"),
                *args)
    err = p.stderr.decode()
    assert p.returncode == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize("args", ALL)
def test_a_cut_gzip_names_the_record_where_its_data_stops(tmp_path, args):
    text = fastq(3000)
    whole = gzip.compress(text, 6)
    for cut in (len(whole) // 3, 2 * len(whole) // 3):
        got = zlib.decompressobj(31).decompress(whole[:cut])  # all that the cut file's bytes give
        assert 0 < len(got) < len(text) and text.startswith(got)
        record, line, words = stop_place(got, fastq=True)
        err = error_of(tmp_path, whole[:cut], text, args)
        assert err == (f"error: {tmp_path / 'q.fq.gz'}: record {record} (line {line}): corrupt or truncated "
                       f"input: {words} (the compressed data ends early: a truncated file?)")


@pytest.mark.parametrize("args", ALL)
def test_a_bgzip_member_that_fails_its_check_is_named_by_its_first_record(tmp_path, args):
    import pysam

    text = fastq(3000, seed=6)
    (tmp_path / "plain.fq").write_bytes(text)
    pysam.tabix_compress(str(tmp_path / "plain.fq"), str(tmp_path / "b.gz"), force=True)
    data = bytearray((tmp_path / "b.gz").read_bytes())
    starts, at = [], 0  # each member's offset and its first inflated byte
    inflated = 0
    while at < len(data):
        size = struct.unpack_from("<H", data, at + 16)[0] + 1
        starts.append((at, size, inflated))
        inflated += struct.unpack_from("<I", data, at + size - 4)[0]
        at += size
    assert len(starts) > 4
    at, size, first = starts[3]
    data[at + size - 8] ^= 0xFF  # the fourth member's CRC-32: its data inflates, its check fails
    line = text[:first].count(b"\n") + 1
    record = (line - 1) // 4 + 1
    err = error_of(tmp_path, bytes(data), text, args)
    assert err.startswith(f"error: {tmp_path / 'q.fq.gz'}: record {record} (line {line}): corrupt input: the gzip "
                          "member starting in this record fails its check: the damage is in it (")


def test_a_whole_gzip_file_that_fails_its_check_and_another_layout_name_its_member(tmp_path):
    text = fastq(500, seed=7)
    data = bytearray(gzip.compress(text, 6))
    data[-8] ^= 0xFF  # its one member's CRC-32
    err = error_of(tmp_path, bytes(data), text, READERS[0])
    assert ": record 1 (line 1): corrupt input: the gzip member starting in this record fails its check" in err
    # FASTQ over several lines is not counted: the member (here the file's one) that holds the damage
    text = fastq(3000, seed=7)  # (more than sniff's first 64 KiB inflated)
    wrapped = text.replace(b"\nIIII", b"\nII\nII", 1)  # one quality line wrapped
    cut = gzip.compress(wrapped, 6)
    err = error_of(tmp_path, cut[:len(cut) // 2], text, READERS[0])
    assert err.endswith(": record 1 (line 1): corrupt or truncated input in the gzip member starting in this record "
                        "(the compressed data ends early: a truncated file?)")


def test_a_cut_fasta_counts_its_records_by_their_headers(tmp_path):
    rng = np.random.default_rng(8)
    records = []
    for i in range(2000):
        s = "".join(rng.choice(list("ACGT"), int(rng.integers(50, 300))))
        records.append(f">s{i}\n" + "\n".join(s[j:j + 60] for j in range(0, len(s), 60)) + "\n")
    text = "".join(records).encode()
    whole = gzip.compress(text, 6)
    cut = whole[:len(whole) // 2]
    got = zlib.decompressobj(31).decompress(cut)
    record, line, words = stop_place(got, fastq=False)
    (tmp_path / "q.fa.gz").write_bytes(cut)
    (tmp_path / "t.fa").write_bytes(text)
    p = run_cli("pairs", str(tmp_path / "q.fa.gz"), str(tmp_path / "t.fa"), "-q", "-o", str(tmp_path / "x.paf"),
                "--device", "cpu")
    assert p.returncode == 1
    assert f": record {record} (line {line}): corrupt or truncated input: {words} (" in p.stderr.decode()


@pytest.mark.parametrize("command", ["search", "genome"])
def test_search_and_genome_name_the_record_too(tmp_path, command):
    rng = np.random.default_rng(9)
    text = b"".join(b">c%d\n" % i + rng.choice(list(b"ACGT"), 3000).astype(np.uint8).tobytes() + b"\n"
                    for i in range(400))
    whole = gzip.compress(text, 6)
    cut = whole[:len(whole) * 3 // 5]
    got = zlib.decompressobj(31).decompress(cut)
    record, line, words = stop_place(got, fastq=False)
    (tmp_path / "g.fa.gz").write_bytes(cut)
    (tmp_path / "p.fa").write_bytes(b">p\nACGTACGTACGTAC\n")
    first = ["p.fa", "-k", "1"] if command == "search" else ["g.fa.gz"]
    p = run_cli(command, *first[:1], "g.fa.gz", *first[1:], "-o", "out.tsv", "--device", "cpu", "-q", cwd=tmp_path)
    err = p.stderr.decode()
    assert p.returncode == 1 and len(err.splitlines()) == 1, err
    assert err.strip().endswith(f"g.fa.gz: record {record} (line {line}): corrupt or truncated input: {words} (the "
                                "compressed data ends early: a truncated file?)")


def test_data_that_does_not_inflate_mid_file_blank_lines_first_and_bytes_after_the_data(tmp_path):
    """A deflate block that cannot be read, far into a 1 MiB piece (zlib gives nothing of a call that fails:
    the place is found again in small steps); a FASTQ whose first lines are blank; bytes after the last
    member that are not gzip."""
    text = b"\n\n" + fastq(3000, seed=10)  # (the readers skip blank lines before the first record)
    for at in (300_001, 512_345):
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        head = c.compress(text[:at]) + c.flush(zlib.Z_FULL_FLUSH)
        rest = c.compress(text[at:]) + c.flush()
        bad = head + bytes([rest[0] | 0x06]) + rest[1:]  # the next block's type 3: reserved, an error
        got = text[:at]
        record, line, words = stop_place(got, fastq=True)
        err = error_of(tmp_path, bad, text.lstrip(b"\n"), READERS[0])
        assert err.endswith(f": record {record} (line {line}): corrupt or truncated input: {words} (Error -3 while "
                            "decompressing data: invalid block type)"), err
    whole = gzip.compress(text, 6) + b"not gzip at all, and long enough to be read as a header"
    err = error_of(tmp_path, whole, text.lstrip(b"\n"), READERS[0])
    lines = text.count(b"\n")
    assert f": record 3000 (line {lines}): corrupt input after this record: bytes that are not gzip follow" in err, err


def test_a_member_that_starts_a_record_is_named_by_that_record(tmp_path):
    """Members cut at record boundaries (a gzip file of several members): the second member's check fails, the
    record and line named are its first, not the line before it."""
    text = fastq(3000, seed=11)
    cut = [0] + [i + 1 for i, b in enumerate(text) if b == 10][3999::4000]  # after records 1,000 and 2,000
    parts = [text[a:b] for a, b in zip(cut, cut[1:] + [len(text)])]
    members = [bytearray(gzip.compress(p, 6)) for p in parts]
    members[1][-8] ^= 0xFF  # its CRC-32
    err = error_of(tmp_path, b"".join(members), text, READERS[0])
    assert ": record 1001 (line 4001): corrupt input: the gzip member starting in this record fails its check" in err, err
