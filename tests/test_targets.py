"""io/targets.py: SAM's @SQ names and lengths found in bulk equal the record reader's (fastx.target_lengths)
on every layout, across block edges, and the layouts it does not take go to the record reader."""

import gzip
import io
import random
import re

import numpy as np
import pytest

from gpualign.errors import InputError
from gpualign.io import fastx
from gpualign.io import targets as T
from gpualign.output.sam import header_text


def _records(rnd: random.Random, n: int, fastq: bool, dup: float = 0.0) -> str:
    out, seen = [], []
    plus_again = rnd.random() < 0.5  # FASTQ '+' lines all bare, or all the header again (SRA's)
    for i in range(n):
        if seen and rnd.random() < dup:
            name, seq = rnd.choice(seen)  # a name again, with its length
        else:
            name = "".join(rnd.choice("ab_.:|0123456789XYZ") for _ in range(rnd.randint(1, 20))) + str(i)
            seq = "".join(rnd.choice("ACGTNacgt") for _ in range(rnd.choice([0, 1, 5, 40, 151])))
            seen.append((name, seq))
        comment = rnd.choice(["", " c", "\tx y", " len=3\tz"])
        if fastq:
            plus = f"+{name}{comment}" if plus_again else "+"
            out.append(f"@{name}{comment}\n{seq}\n{plus}\n{'I' * len(seq)}\n")
        else:
            out.append(f">{name}{comment}\n{seq}\n")
    return "".join(out)


def _both(path: str):
    """(the record reader's items, scan's items, whether scan took the bulk way)."""
    want = list(fastx.target_lengths(path).items())
    got = T.scan(path)
    try:
        T._bulk(path)
        bulk = True
    except T._NotBulk:
        bulk = False
    return want, list(zip(got.names, got.lengths.tolist())), bulk


@pytest.mark.parametrize("block", [512, 4096, T.BLOCK])
@pytest.mark.parametrize("fastq", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_bulk_equals_the_record_reader(tmp_path, monkeypatch, block, fastq, seed):
    monkeypatch.setattr(T, "BLOCK", block)
    rnd = random.Random(seed)
    text = _records(rnd, 300, fastq, dup=0.2 if seed % 2 else 0.0)
    if seed == 3:
        text = text.rstrip("\n")  # no newline at the end
    path = tmp_path / ("t.fq.gz" if seed == 2 else "t.fq")
    path.write_bytes(gzip.compress(text.encode()) if seed == 2 else text.encode())
    want, got, bulk = _both(str(path))
    assert got == want and bulk
    assert header_text(T.scan(str(path)), "cmd") == header_text(dict(want), "cmd")


@pytest.mark.parametrize("text", [
    ">a\r\nAC\r\n",  # CR line ends
    ">a\nAC\nGT\n>b\nA\n",  # several sequence lines
    "> a\nAC\n",  # whitespace before the name
    ">a\x0bb\nAC\n",  # other whitespace
    ">a\x01b c\nAC\n",  # a control character in the name
    ">\xe9t\nAC\n".encode("latin-1").decode("latin-1"),
    "\n>a\nAC\n",  # a blank line first
    ">a\nAC\n\n>b\nA\n",  # a blank line between
    "@a\nAC\n+\nII\n@b\nA\n-\nI\n",  # not a '+' line
    ">a\n" + "A" * 300 + "\n",  # longer than a block
    # empty records back to back (no blank line): a header on a sequence line's place; bulk read ">b" as record
    # a's 2 bases (@SQ SN:a LN:2, exit 0) and took or refused names by lengths no record had
    ">a\n>b\n",
    ">a\n>bbbbbbbbbb\n>c\nACGT\n",
    ">a\n>c\n>c\nAA\n",  # (c with 0 and 2 bases: the reader's error)
    ">a\n>c\n>b\n\n>a\n\n",  # (all empty: a twice with 0 bases, taken)
])
def test_other_layouts_go_to_the_record_reader(tmp_path, monkeypatch, text):
    monkeypatch.setattr(T, "BLOCK", 128)
    path = tmp_path / "t.fa"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(T._NotBulk):
        T._bulk(str(path))
    try:
        want = list(fastx.target_lengths(str(path)).items())
    except InputError as e:
        with pytest.raises(InputError, match=re.escape(str(e))):
            T.scan(str(path))
        return
    got = T.scan(str(path))
    assert list(zip(got.names, got.lengths.tolist())) == want


def test_a_name_with_two_lengths(tmp_path):
    recs = [(f"t{i}", "A" * (1 + i)) for i in range(50)]
    recs.insert(40, ("t3", "AC"))
    recs.insert(45, ("t7", "A"))
    path = tmp_path / "t.fa"
    path.write_text("".join(f">{n}\n{s}\n" for n, s in recs))
    with pytest.raises(InputError) as old:
        fastx.target_lengths(str(path))
    with pytest.raises(InputError) as new:
        T._bulk(str(path))
    assert str(new.value) == str(old.value)
    assert "target name 't3' appears twice with different lengths (4 and 2)" in str(new.value)


@pytest.mark.parametrize("layout", ["2-line", "multi-line", "gzip", "fastq"])
@pytest.mark.parametrize("block", [128, 8 << 20])
def test_a_name_with_two_sequences(tmp_path, monkeypatch, layout, block):
    """Two records of one name and one length: taken as one @SQ when they hold one sequence (case aside), an
    error naming both records when they do not, in bulk and from the record reader alike (and across the
    bulk scan's blocks and the reader's chunks)."""
    monkeypatch.setattr(T, "BLOCK", block)
    monkeypatch.setattr(fastx, "CHUNK", 7)
    rnd = random.Random(5)
    recs = [(f"t{i}", "".join(rnd.choice("ACGT") for _ in range(30))) for i in range(40)]

    def write(records):
        if layout == "fastq":
            text = "".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for n, s in records)
        elif layout == "multi-line":
            text = "".join(f">{n} d\n{s[:13]}\n{s[13:]}\n" for n, s in records)
        else:
            text = "".join(f">{n}\n{s}\n" for n, s in records)
        path = tmp_path / ("t.fa.gz" if layout == "gzip" else "t.fa")
        path.write_bytes(gzip.compress(text.encode()) if layout == "gzip" else text.encode())
        return str(path)

    same = recs + [("t3", recs[3][1].lower()), ("t9", recs[9][1])] + recs[10:12]
    path = write(same)
    assert list(fastx.target_lengths(path).items()) == [(n, 30) for n, _ in recs]
    got = T.scan(path)
    assert list(zip(got.names, got.lengths.tolist())) == [(n, 30) for n, _ in recs]
    other = recs[9][1][:-1] + ("A" if recs[9][1][-1] != "A" else "C")
    path = write(same + [("t9", other)])
    want = (f"{path}: record 45: target name 't9' appears again with a different "
            "sequence (record 10 has the same name and length); SAM/BAM give a name one sequence (@SQ)")
    for scan in (fastx.target_lengths, T.scan):
        with pytest.raises(InputError) as e:
            scan(path)
        assert str(e.value).startswith(want), str(e.value)


def test_hash_collisions_are_checked(tmp_path, monkeypatch):
    """Names that share a hash but differ go to the record reader (all hashes forced equal here)."""
    monkeypatch.setattr(T, "_hashes", lambda names: np.zeros(len(names), dtype=np.uint64))
    path = tmp_path / "t.fa"
    path.write_text(">ab\nAC\n>ba\nACG\n>ab\nAC\n")
    with pytest.raises(T._NotBulk):
        T._bulk(str(path))
    got = T.scan(str(path))
    assert list(zip(got.names, got.lengths.tolist())) == [("ab", 2), ("ba", 3)]
    path.write_text(">ab\nAC\n>ab x\nAC\n")  # the same name again: kept once, no fallback
    got = T._bulk(str(path))
    assert list(zip(got.names, got.lengths.tolist())) == [("ab", 2)]


def test_hashes_tell_names_apart():
    rnd = random.Random(3)
    names = sorted({"".join(rnd.choice("ACGT") for _ in range(rnd.randint(1, 30))) for _ in range(20000)})
    names += ["G" * 3999 + "A", "G" * 3999 + "C", "GT" * 40]  # (longer than the others: passes over them alone)
    h = T._hashes(T.Names.of(names))
    assert len(np.unique(h)) == len(names)
    assert np.array_equal(T._hashes(T.Names.of(names)), h)
    same = T.Names.of(["x" + n for n in names])  # (other offsets, the same bytes after one)
    assert np.array_equal(T._hashes(T.Names(same.buf, same.start + 1, same.length - 1)), h)


def test_sam_header_written_first_when_its_targets_come():
    """SamWriter takes a Future of the targets (the scan runs beside the engines' start): the header goes
    out before the first lines, or at close for an empty output; a failed scan fails the write."""
    from concurrent.futures import Future

    from gpualign.output.sam import SamWriter

    fut, out = Future(), io.BytesIO()
    w = SamWriter(out, targets=fut, command_line="cmd", metric="edit")
    assert out.getvalue() == b""
    fut.set_result(T.TargetLengths.of({"t1": 5, "t2": 0}))
    w.stream.write(b"q\t0\tt1\n")
    w.close()
    assert out.getvalue() == header_text({"t1": 5}, "cmd") + b"q\t0\tt1\n"
    out = io.BytesIO()
    SamWriter(out, targets={"t1": 5}, command_line="cmd", metric="edit").close()
    assert out.getvalue() == header_text({"t1": 5}, "cmd")
    bad = Future()
    bad.set_exception(InputError("t.fa: target name 'a' appears twice with different lengths"))
    with pytest.raises(InputError, match="appears twice"):
        SamWriter(io.BytesIO(), targets=bad, command_line="cmd", metric="edit").close()


def _fail(msg: str):
    raise InputError(msg)


def _die():
    import os

    os._exit(3)


def _sleep():
    import time

    time.sleep(60)


def test_forked_hands_back_a_value_or_its_error():
    """workers.Forked: the child's value, its exception raised here (an InputError keeps its message; one
    that cannot go between the processes as a RuntimeError naming it), a child gone without a word named as
    such, and close() ends a child still running."""
    import os
    import time

    from gpualign.errors import GpualignError
    from gpualign.workers import Forked

    assert Forked(sum, [1, 2, 3]).result() == 6
    f = Forked(_fail, "t.fa: record 3: bad")
    with pytest.raises(InputError, match="t.fa: record 3: bad"):
        f.result()
    with pytest.raises(InputError):  # (again: the same)
        f.result()
    with pytest.raises(GpualignError, match="helper process ended unexpectedly .exit code 3"):
        Forked(_die).result()
    f, t0 = Forked(_sleep), time.monotonic()
    pid = f._proc.pid
    f.close()
    f.close()
    assert time.monotonic() - t0 < 5 and not os.path.exists(f"/proc/{pid}")  # (ended and reaped)
    for fn in (_odd, _unpicklable):  # an exception that cannot be rebuilt here, or not pickled there
        f = Forked(fn)
        for _ in range(2):
            with pytest.raises(RuntimeError, match="Odd: odd"):
                f.result()


class Odd(Exception):
    def __init__(self, a, b):
        super().__init__(a)
        self.b = b


def _odd():
    raise Odd("odd", 1)


def _unpicklable():
    err = Odd("odd", 1)
    err.fn = lambda: None
    raise err


def test_forked_hands_back_big_bytes_in_shared_memory():
    """A bytes value of Forked.SHM_BYTES or more comes back as an array mapped from a shared-memory block,
    which is gone from /dev/shm once taken, or once close() drops a value result() never took."""
    import glob
    import os

    from gpualign import interrupt
    from gpualign.workers import Forked

    mine = os.path.join("/dev/shm", f"{interrupt.SHM_PREFIX}{os.getpid()}_*")
    assert glob.glob(mine) == []
    big = bytes(range(256)) * (Forked.SHM_BYTES // 256 + 1)
    got = Forked(bytes, big).result()
    assert isinstance(got, np.ndarray) and got.tobytes() == big and glob.glob(mine) == []
    assert Forked(bytes, b"ab").result() == b"ab"
    f = Forked(bytes, big)
    f._proc.join()
    assert len(glob.glob(mine)) == 1  # (sent, not taken)
    f.close()
    assert glob.glob(mine) == []
    from gpualign import shm

    f = Forked(_sleep)
    shm.put([b"x"], f._block)  # (as if the child was ended between its block and its message)
    f.close()
    assert glob.glob(mine) == []


@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_big_target_files_scanned_in_a_child(tmp_path, monkeypatch, fmt):
    """pairs -f sam|bam: a target file of FORK_BYTES or more is scanned by a forked child (counted here), the
    same output as the scan in this process; a name with two lengths fails the run with its one line and no
    output file."""
    from gpualign import pipeline, workers
    from gpualign.config import AlignConfig

    rnd = random.Random(5)
    qs = "".join(f">q{i}\n{''.join(rnd.choice('ACGT') for _ in range(60))}\n" for i in range(300))
    ts = "".join(f">t{i % 250} c\n{'ACGT' * 15}\n" for i in range(300))  # (names again, same lengths)
    (tmp_path / "a.fa").write_text(qs)
    (tmp_path / "b.fa").write_text(ts)
    forked, mapped = [], []
    monkeypatch.setattr(workers.Forked, "SHM_BYTES", 1)  # (the @SQ lines back in shared memory)
    view = workers.shm.view
    monkeypatch.setattr(workers.shm, "view", lambda name, size: mapped.append(size) or view(name, size))
    real = workers.Forked.__init__
    monkeypatch.setattr(workers.Forked, "__init__", lambda self, fn, *a: forked.append(fn) or real(self, fn, *a))
    outs = []
    for limit in (1 << 40, 0):
        monkeypatch.setattr(T, "FORK_BYTES", limit)
        out = tmp_path / f"{limit}.{fmt}"
        pipeline.run_pairs(str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), str(out), None,
                           AlignConfig(device="cpu", threads=2), "cmd")
        outs.append(out.read_bytes())
    assert forked == [T._scan_then] and len(mapped) == 1 and mapped[0] > 250 * len("@SQ\tSN:t0\tLN:60\n")
    if fmt == "bam":
        import pysam

        outs = [b"".join(x for x in pysam.view(str(tmp_path / f"{limit}.bam"), "-h").encode().splitlines(True)
                         if not x.startswith(b"@PG")) for limit in (1 << 40, 0)]  # (samtools' @PG: the file)
    assert outs[0] == outs[1] and b"@SQ\tSN:t249\tLN:60\n" in outs[0]
    (tmp_path / "b.fa").write_text(ts[:ts.rindex(">")] + ">t3\nAC\n")  # (its last record's length changed)
    out = tmp_path / f"bad.{fmt}"
    with pytest.raises(InputError, match="target name 't3' appears twice with different lengths"):
        pipeline.run_pairs(str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), str(out), None,
                           AlignConfig(device="cpu", threads=2), "cmd")
    assert not out.exists()
