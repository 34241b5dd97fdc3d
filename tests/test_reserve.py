"""Blocks taken ahead of an output file's writes on ext4 (output/reserve.py): the file's bytes whole, the
blocks past its end given back at commit, nothing taken where it cannot help (BAM written by htslib, other
file systems) or where fallocate refuses (then written as before, errors as before)."""

import os
import tempfile

import pysam
import pytest

from gpualign.errors import WriteError
from gpualign.output import reserve
from gpualign.output.sink import Sink
from gpualign.stages import Output
from simulate import simulate, write_fasta


def _ext4(path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        return reserve.on_ext4(fd)
    finally:
        os.close(fd)


needs_ext4 = pytest.mark.skipif(not _ext4(tempfile.gettempdir()), reason="the temporary directory is not on ext4")


def _allocated(path) -> int:
    return os.stat(path).st_blocks * 512


SLACK = 256 << 10  # allocated beyond the size with nothing taken ahead: the last block, extent index blocks


@needs_ext4
@pytest.mark.parametrize("gz", [False, True])
def test_output_replaced_whole_blocks_given_back(tmp_path, gz):
    """A file written through Output over an existing one: blocks taken ahead while it is written (more
    allocated than written), none past its end once committed, its bytes the ones written."""
    path = tmp_path / ("out.txt.gz" if gz else "out.txt")
    path.write_bytes(b"an earlier run's output\n")
    out = Output(str(path), binary_via_path=False)
    sink = out.sink.sink if gz else out.sink
    assert sink.reserve is not None
    data = os.urandom(3 << 20)
    out.target.write(data)
    out.target.flush()
    written = os.fstat(sink.fd).st_size
    assert written >= len(data) or gz
    assert _allocated(out.tmp) >= reserve.FIRST > written
    out.commit()
    if gz:
        import gzip
        assert gzip.decompress(path.read_bytes()) == data
    else:
        assert path.read_bytes() == data
    assert _allocated(path) < path.stat().st_size + SLACK


@needs_ext4
def test_blocks_follow_a_long_file(tmp_path, monkeypatch):
    """Steps ahead grow with the file and cover every write; the end given back at close."""
    monkeypatch.setattr(reserve, "FIRST", 1 << 20)
    path = tmp_path / "long.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    sink = Sink(fd, str(path), own=True, reserve=reserve.Reserve.ahead_of(fd))
    chunks = [os.urandom(n) for n in (10, (1 << 20) + 3, 5 << 20, 100, 2 << 20)]
    for c in chunks:
        sink.write(c)
        sink.flush()
        assert sink.reserve.taken >= sink.written == os.fstat(fd).st_size
    sink.close()
    assert path.read_bytes() == b"".join(chunks)
    assert _allocated(path) < path.stat().st_size + SLACK


@needs_ext4
def test_no_more_ahead_than_a_quarter_of_the_free_space(tmp_path, monkeypatch):
    """On a nearly full file system the blocks ahead stay within a quarter of the free space, so other files
    still fit; the writes are covered all the same."""
    import collections

    free = 8 << 20
    vfs = collections.namedtuple("vfs", "f_bavail f_frsize")
    monkeypatch.setattr(os, "fstatvfs", lambda fd: vfs(free // 4096, 4096))
    path = tmp_path / "out.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    sink = Sink(fd, str(path), own=True, reserve=reserve.Reserve.ahead_of(fd))
    for _ in range(3):
        sink.write(os.urandom(1 << 20))
        sink.flush()
        assert sink.written <= sink.reserve.taken <= sink.written + free // 4
    sink.close()
    assert path.stat().st_size == 3 << 20


class _Refusing:
    """A libc whose fallocate refuses (a full disk, or a file system without it)."""

    def __init__(self, libc):
        self.fstatfs, self.calls = libc.fstatfs, 0

    def fallocate(self, *args):
        self.calls += 1
        return -1


@needs_ext4
def test_refused_fallocate_writes_as_before(tmp_path, monkeypatch):
    refusing = _Refusing(reserve._LIBC)
    monkeypatch.setattr(reserve, "_LIBC", refusing)
    path = tmp_path / "out.txt"
    out = Output(str(path), binary_via_path=False)
    data = os.urandom(3 << 20)
    out.target.write(data)
    out.target.write(data)
    out.commit()
    assert path.read_bytes() == data + data
    assert refusing.calls == 1  # asked once, then no more


def test_nothing_taken_for_bam_or_streams(tmp_path):
    """BAM is written by htslib through the file's name: a sink that gave back 'past the end' of what it
    wrote itself would cut it. Streams are written in place."""
    out = Output(str(tmp_path / "x.bam"), binary_via_path=True)
    assert out.sink.reserve is None
    header = {"HD": {"VN": "1.6"}, "SQ": [{"SN": "t", "LN": 100}]}
    with pysam.AlignmentFile(out.target, "wb", header=header) as bam:
        for i in range(2000):
            a = pysam.AlignedSegment(bam.header)
            a.query_name, a.query_sequence, a.flag = f"r{i}", "ACGT" * 10, 4
            bam.write(a)
    out.commit()
    assert sum(1 for _ in pysam.AlignmentFile(str(tmp_path / "x.bam"), "rb", check_sq=False)) == 2000
    out = Output("/dev/null", binary_via_path=False)
    assert out.sink.reserve is None
    out.commit()


def test_other_file_systems_take_nothing():
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    with tempfile.NamedTemporaryFile(dir="/dev/shm") as fh:
        assert not reserve.on_ext4(fh.fileno())
        assert reserve.Reserve.ahead_of(fh.fileno()) is None


def test_full_device_still_refused():
    """A write that fails fails as before (the sink on /dev/full takes nothing ahead: not a file)."""
    fd = os.open("/dev/full", os.O_WRONLY)
    sink = Sink(fd, "/dev/full", own=True, reserve=reserve.Reserve.ahead_of(fd))
    with pytest.raises(WriteError, match="No space"):
        sink.write(b"x" * (2 << 20))
    sink.release()


@needs_ext4
def test_command_output_replaced(tmp_path):
    """pairs writing over its own earlier output: the same bytes as the first run, no blocks left past
    the end."""
    import subprocess
    import sys

    a, b = simulate(300, 150, 0.05, seed=4)
    write_fasta(str(tmp_path / "a.fa"), a, "q")
    write_fasta(str(tmp_path / "b.fa"), b, "t")
    out = tmp_path / "x.paf"
    runs = []
    for _ in range(2):
        subprocess.run([sys.executable, "-m", "gpualign", "pairs", str(tmp_path / "a.fa"), str(tmp_path / "b.fa"),
                        "-o", str(out), "--device", "cpu", "-q"], check=True)
        runs.append(out.read_bytes())
        assert _allocated(out) < out.stat().st_size + SLACK
    assert runs[0] == runs[1] and runs[0].count(b"\n") == 300
