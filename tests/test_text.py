"""text.py: bulk-built lines equal Python's own formatting."""

import numpy as np
import pytest

from gpualign.text import Strings, join_lines


def test_join_lines_equals_python_formatting():
    rng = np.random.default_rng(3)
    n = 500
    ints = rng.integers(-10**12, 10**12, n) // (10 ** rng.integers(0, 12, n))
    ints[:5] = [0, -1, 9, 10, -10]
    small = rng.integers(0, 1000, n)
    names = ["".join(rng.choice(list("ab_:.|x0"), int(k))) for k in rng.integers(0, 12, n)]
    names[0] = ""
    got = join_lines([Strings.of(names), ints, b"+", (b"AS:i:", -small), (b"cg:Z:", Strings.of(names[::-1])),
                      small], n)
    want = "".join(f"{a}\t{b}\t+\tAS:i:{-c}\tcg:Z:{d}\t{c}\n"
                   for a, b, c, d in zip(names, ints.tolist(), small.tolist(), names[::-1]))
    assert got == want.encode()


def test_strings_take_and_errors():
    s = Strings.of(["x", "yy", "", "zzz"])
    assert join_lines([s.take(np.array([3, 0, 2]))], 3) == b"zzz\nx\n\n"
    assert join_lines([b"a", b"b"], 0) == b""
    with pytest.raises(ValueError):
        Strings.of(["a\nb"])


def test_string_columns_stored_apart_or_in_a_row():
    """Rows stored one after another (copied from one slice: indexed, or masked when they fill most of
    the output) and rows stored anywhere (indexed copy), empty rows included, give the same lines."""
    rng = np.random.default_rng(5)
    items = ["".join(rng.choice(list("=XID0123456789"), int(k))) for k in rng.integers(0, 30, 400)]
    items[:3] = ["", "", "1="]
    items[-1] = ""
    row = Strings.of(items)
    assert np.array_equal(row.start[1:], row.start[:-1] + row.length[:-1])  # stored in a row
    order = rng.permutation(len(items))
    for rows in (np.arange(len(items)), order, np.sort(order[:200])):  # in a row, shuffled, a subset
        got = join_lines([b"x", (b"cg:Z:", row.take(rows)), b"y"], len(rows))
        assert got == "".join(f"x\tcg:Z:{items[i]}\ty\n" for i in rows).encode()
    assert join_lines([row], len(items)) == "".join(f"{t}\n" for t in items).encode()  # masked
    pad = b"p" * 60  # the rows a small share of the output: indexed, from one slice
    assert join_lines([pad, row], len(items)) == "".join(f"{pad.decode()}\t{t}\n" for t in items).encode()


def test_names_read_as_the_strings_they_hold():
    """records.Names (the reader's form of record names): indexing, slices, take, concatenation of
    pieces laid out apart, pickling, non-ASCII names, and Strings/join_lines reading it in bulk."""
    import pickle

    from gpualign.records import Names, PairBatch

    rng = np.random.default_rng(5)
    items = ["".join(rng.choice(list("ab_:.|x0"), int(k))) for k in rng.integers(1, 12, 300)]
    items[7] = "réad_é"
    names = Names.of(items)
    assert list(names) == items and names == items and len(names) == 300
    assert names[7] == "réad_é" and list(names[10:20]) == items[10:20]
    idx = rng.permutation(300)[:120]
    picked = names.take(idx)
    assert list(picked) == [items[i] for i in idx]
    pieces = [picked, names[:50], items[250:], Names.of([])]
    joined = Names.concat(pieces)
    assert list(joined) == [items[i] for i in idx] + items[:50] + items[250:]
    assert list(pickle.loads(pickle.dumps(joined))) == list(joined)
    s = Strings.of(joined)
    assert [s.buf[a:a + n].tobytes().decode() for a, n in zip(s.start, s.length)] == list(joined)
    got = join_lines([Strings.of(names.take(idx)), idx], len(idx))
    assert got == "".join(f"{items[i]}\t{i}\n" for i in idx).encode()
    batch = PairBatch.from_sequences([b"AC"] * 300, [b"AG"] * 300)
    batch.q_names = names
    assert list(batch.take(idx[:5]).q_names) == [items[i] for i in idx[:5]]


def _random_fields(rng, n):
    """Fields of every kind: string columns stored in a row, stored apart and taken from a longer buffer,
    empty strings, integers of every width and sign, prefixes, constants; the last an often empty string."""
    words = ["".join(rng.choice(list("ACGT=XID0123456789_:."), int(k))) for k in rng.integers(0, 40, n)]
    in_row = Strings.of(words)
    big = Strings.of(words * 3).take(rng.permutation(3 * n)[:n])  # rows apart in a buffer 3x their size
    ints = rng.integers(-10**15, 10**15, n) // (10 ** rng.integers(0, 15, n))
    ints[:6] = [0, -1, 9, 10, -10, np.iinfo(np.int64).max][:n]
    last = Strings.of([w if rng.random() < 0.7 else "" for w in words[::-1]])
    return [in_row, ints, b"+", (b"AS:i:", -ints), big, b"255", (b"NM:i:", rng.integers(0, 300, n)),
            (b"cg:Z:", last)]


@pytest.mark.parametrize("drop", [False, True])
def test_device_lines_emulated(drop):
    """text_device.DeviceLines (kernels/lines.cu run on the CPU) writes join_lines' bytes."""
    import emu

    from gpualign import text_device

    if not emu.available():
        pytest.skip("no g++ to compile the kernels for the CPU")
    rng = np.random.default_rng(11)
    with pytest.MonkeyPatch.context() as mp, emu.cupy_on_numpy():
        mp.setattr(text_device, "load_module", emu.load_module)
        lines = text_device.DeviceLines()
        for n in (0, 1, 7, 300):
            fields = _random_fields(rng, n)
            want = join_lines(fields, n, drop_empty_last=drop)
            assert bytes(lines(fields, n, drop_empty_last=drop)) == want
            assert bytes(lines(fields[1:2], n, sep=b"")) == join_lines(fields[1:2], n, sep=b"")
        for fields, n, sep, want in _drop_cases():
            assert bytes(lines(fields, n, sep=sep, drop_empty_last=True)) == want
        # an empty row whose start lies before the buffer (nothing read for it)
        odd = Strings(np.frombuffer(b"abdef", np.uint8), np.array([0, -1, 2]), np.array([2, 0, 3]))
        assert bytes(lines([odd], 3)) == join_lines([odd], 3) == b"ab\n\ndef\n"
        extreme = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, -7])
        assert bytes(lines([extreme], 3)) == join_lines([extreme], 3)


def _drop_cases():
    """(fields, n, sep, want) of drop_empty_last: the field, its prefix and the separator before it go row by
    row, whatever bytes the other rows hold."""
    return [([np.array([1, 2, 3]), (b"cg:Z:", Strings.of(["x", "", "zz"]))], 3, b"\t", b"1\tcg:Z:x\n2\n3\tcg:Z:zz\n"),
            ([(b"cg:Z:", Strings.of(["", "x"]))], 2, b"\t", b"\ncg:Z:x\n"),  # the only field: no separator
            ([np.array([1, 2]), (b"p", Strings.of(["x\tp", ""]))], 2, b"\t", b"1\tpx\tp\n2\n"),
            ([b"a", (b"<", Strings.of(["", "y"]))], 2, b"--", b"a\na--<y\n")]


def test_drop_empty_last_field():
    for fields, n, sep, want in _drop_cases():
        assert join_lines(fields, n, sep=sep, drop_empty_last=True) == want


def test_integers_of_every_int64():
    v = np.array([np.iinfo(np.int64).min, -1, 0, 9, 10, 10**18, np.iinfo(np.int64).max])
    assert join_lines([v, (b"x", v.astype(np.int32))], len(v)) == "".join(
        f"{a}\tx{b}\n" for a, b in zip(v.tolist(), v.astype(np.int32).tolist())).encode()


@pytest.mark.gpu
def test_device_lines_on_the_gpu():
    from gpualign import text_device

    rng = np.random.default_rng(12)
    lines = text_device.DeviceLines()
    for n in (1, 1000, 200_000):
        fields = _random_fields(rng, n)
        for drop in (False, True):
            assert bytes(lines(fields, n, drop_empty_last=drop)) == join_lines(fields, n, drop_empty_last=drop)


def test_device_paf_emulated():
    """text_device.DeviceLines.paf (kernels/lines.cu's paf_lengths and paf_write run on the CPU), from the
    columns the device reader and eWFA leave on the device, writes the host PafFormat's bytes: failed pairs
    left out, empty CIGARs without cg:Z, names of any length; and gives way where a column is missing."""
    import dataclasses

    import emu

    from gpualign import cigar as C
    from gpualign import text_device
    from gpualign.output.paf import PafFormat
    from gpualign.records import FAILED, OK, AlignBatch, Names, PairBatch, offsets_from_lengths

    if not emu.available():
        pytest.skip("no g++ to compile the kernels for the CPU")
    rng = np.random.default_rng(17)
    for n in (1, 5, 400):
        ql, tl = rng.integers(0, 10**7, n), rng.integers(0, 300, n)
        words = ["".join(rng.choice(list("ab_:.|x0/"), int(k))) for k in rng.integers(0, 30, 2 * n)]
        names = Names.of(words)
        q_names, t_names = names[:n], names[n:]
        batch = PairBatch(np.zeros(0, np.uint8), np.zeros(n, np.int64), ql, np.zeros(n, np.int64), tl,
                          np.arange(n), q_names, t_names, [None] * n)
        runs = rng.integers(0, 6, n)
        runs[0] = 0  # an empty CIGAR (two empty sequences)
        m = int(runs.sum())
        ops = (rng.integers(1, 10**6, m).astype(np.uint32) << 4) | rng.choice(np.array([1, 2, 7, 8], np.uint32), m)
        status = np.where(rng.random(n) < 0.2, FAILED, OK).astype(np.uint8)
        score = rng.integers(0, 10**6, n).astype(np.int32)
        score[::3] = 0
        res = AlignBatch(score, status, np.zeros(n, np.uint8), ops, offsets_from_lengths(runs), runs.astype(np.int64))
        tot = C.op_totals(res.cigar, res.cigar_off, res.cigar_len)
        res.cigar_stats = np.stack([tot["matches"], tot["mismatches"], tot["ins"], tot["dels"],
                                    np.zeros(n, np.int64)], axis=1)
        res.cigar_text = C.to_text_buffer(res.cigar, res.cigar_off, res.cigar_len)
        want = PafFormat().render(batch, res)
        with pytest.MonkeyPatch.context() as mp, emu.cupy_on_numpy():
            mp.setattr(text_device, "load_module", emu.load_module)
            fmt = PafFormat()
            fmt.lines = text_device.DeviceLines()
            assert fmt.lines.paf(batch, res) is None  # nothing on the device: the host's way
            buf, start, length = res.cigar_text
            res.device_cigar = {"text": buf, "start": start, "length": length, "stats": res.cigar_stats.ravel()}
            batch.device_cols = {"names": names.buf, "q_name": (q_names.start, q_names.length),
                                 "t_name": (t_names.start, t_names.length), "q_len": ql, "t_len": tl}
            got = fmt.lines.paf(batch, res)
            assert got is not None and (bytes(got[0]), got[1]) == (bytes(want[0]), want[1])
            rendered = fmt.render(batch, res)
            assert (bytes(rendered[0]), rendered[1]) == (bytes(want[0]), want[1])
            # the host's way where the device's columns do not say it all: ranges, no CIGARs, scoring
            for other in (dataclasses.replace(res, t_start=np.zeros(n, np.int64)),
                          dataclasses.replace(res, q_start=np.zeros(n, np.int64)),
                          dataclasses.replace(res, has_cigar=False)):
                assert other.device_cigar is None  # (replace leaves the device's columns out)
                other.device_cigar = res.device_cigar
                assert fmt.lines.paf(batch, other) is None
            scored = PafFormat(scored=True)
            scored.lines = fmt.lines
            mp.setattr(text_device.DeviceLines, "_paf", lambda *a: pytest.fail("scored lines from the device"))
            assert bytes(scored.render(batch, res)[0]) == bytes(PafFormat(scored=True).render(batch, res)[0])
            mp.undo()
            mp.setattr(text_device, "load_module", emu.load_module)
            whole = res.device_cigar
            res.device_cigar = dict(whole, length=whole["length"][:-1])
            with pytest.raises(ValueError):  # columns of another batch
                fmt.lines.paf(batch, res)
            res.device_cigar = whole
            res.status[:] = FAILED
            assert fmt.lines.paf(batch, res) == (b"", 0)


def test_device_sam_emulated():
    """text_device.DeviceLines.sam (kernels/lines.cu's sam_lengths and sam_write run on the CPU) writes the
    host SamFormat's bytes from the device's columns: SEQ with bytes SAM cannot hold as N, empty queries as
    *, qualities or *, empty CIGARs, unmapped pairs (failed, empty targets) with their zr:Z reasons; and
    gives way where a column is missing or the scoring is general; BamFormat refuses a letter BAM cannot
    hold before either way."""
    import dataclasses

    import emu

    from gpualign import cigar as C
    from gpualign import text_device
    from gpualign.errors import GpualignError
    from gpualign.output.sam import BamFormat, SamFormat
    from gpualign.records import FAILED, OK, AlignBatch, Names, PairBatch, offsets_from_lengths

    if not emu.available():
        pytest.skip("no g++ to compile the kernels for the CPU")
    rng = np.random.default_rng(23)
    for n, fastq in ((1, False), (7, True), (300, True), (300, False)):
        ql, tl = rng.integers(0, 40, n), rng.integers(1, 300, n)
        ql[0] = 0
        words = ["".join(rng.choice(list("ab_:.|x0/"), int(k))) for k in rng.integers(1, 30, 2 * n)]
        names = Names.of(words)
        q_names, t_names = names[:n], names[n:]
        letters = np.frombuffer(b"ACGTNacgtRY*-.=1", np.uint8)
        seq = rng.choice(letters, int(ql.sum() + tl.sum())).astype(np.uint8)
        q_off = offsets_from_lengths(ql)
        t_off = int(ql.sum()) + offsets_from_lengths(tl)
        qual_bytes = rng.integers(33, 75, int(ql.sum())).astype(np.uint8)
        quals = Names(qual_bytes, q_off, ql) if fastq else [None] * n
        batch = PairBatch(seq, q_off, ql, t_off, tl, np.arange(n), q_names, t_names, quals)
        runs = rng.integers(1, 6, n)
        m = int(runs.sum())
        ops = (rng.integers(1, 10**6, m).astype(np.uint32) << 4) | rng.choice(np.array([1, 2, 7, 8], np.uint32), m)
        score = rng.integers(0, 10**6, n).astype(np.int32)
        res = AlignBatch(score, np.full(n, OK, np.uint8), np.zeros(n, np.uint8), ops, offsets_from_lengths(runs),
                         runs.astype(np.int64))
        tot = C.op_totals(res.cigar, res.cigar_off, res.cigar_len)
        res.cigar_stats = np.stack([tot["matches"], tot["mismatches"], tot["ins"], tot["dels"],
                                    np.zeros(n, np.int64)], axis=1)
        res.cigar_text = C.to_text_buffer(res.cigar, res.cigar_off, res.cigar_len)
        want = SamFormat("edit").render(batch, res)
        with pytest.MonkeyPatch.context() as mp, emu.cupy_on_numpy():
            mp.setattr(text_device, "load_module", emu.load_module)
            lines = text_device.DeviceLines()
            fmt = SamFormat("edit")
            fmt.lines = lines
            assert lines.sam(batch, res) is None  # nothing on the device: the host's way
            buf, start, length = res.cigar_text
            res.device_cigar = {"text": buf, "start": start, "length": length, "stats": res.cigar_stats.ravel()}
            batch.device_cols = {"names": names.buf, "q_name": (q_names.start, q_names.length),
                                 "t_name": (t_names.start, t_names.length), "q_len": ql, "t_len": tl}
            assert lines.sam(batch, res) is None  # the queries not kept on the device
            batch.device_cols["q_seq"] = (seq, q_off)
            if fastq:
                assert lines.sam(batch, res) is None  # the qualities not on the device
                batch.device_cols["quals"] = (qual_bytes, q_off)
            got = lines.sam(batch, res)
            assert got is not None and (bytes(got[0]), got[1]) == (bytes(want[0]), want[1])
            assert bytes(fmt.render(batch, res)[0]) == bytes(want[0])
            # unmapped pairs (failed, with and without a reason; an empty target): the host's bytes too
            status = np.where(np.arange(n) % 3 == (n - 1) % 3, FAILED, OK).astype(np.uint8)
            failed = dataclasses.replace(res, status=status, reason={n - 1: "too\tmany edits"})
            failed.device_cigar = res.device_cigar
            t_len = batch.t_len.copy()
            batch.t_len[1::4] = 0
            batch.device_cols["t_len"] = batch.t_len
            want_unmapped = SamFormat("edit").render(batch, failed)
            got = lines.sam(batch, failed)
            assert got is not None and (bytes(got[0]), got[1]) == (bytes(want_unmapped[0]), want_unmapped[1])
            assert b"\t4\t*\t0\t0\t*\t*\t0\t0\t" in bytes(got[0]) and b"zr:Z:" in bytes(got[0])
            assert bytes(fmt.render(batch, failed)[0]) == bytes(want_unmapped[0])
            batch.t_len[:] = t_len
            batch.device_cols["t_len"] = batch.t_len
            # the host's way: general scoring, protein
            mp.setattr(text_device.DeviceLines, "_sam", lambda *a: pytest.fail("scored lines from the device"))
            for other in (SamFormat("affine", scored=True), SamFormat("edit", residues=True)):
                other.lines = lines
                host = SamFormat(other.metric, other.scored, other.residues)
                assert bytes(other.render(batch, res)[0]) == bytes(host.render(batch, res)[0])
            mp.undo()
            mp.setattr(text_device, "load_module", emu.load_module)
            bam = BamFormat("edit")
            bam.lines = lines
            from gpualign.output.sam import BAM_LETTERS

            if not set(bytes(seq[:int(ql.sum())])) <= set(BAM_LETTERS):
                with pytest.raises(GpualignError, match="cannot be written to BAM"):
                    bam.render(batch, res)
            ok = np.isin(seq, np.frombuffer(BAM_LETTERS, np.uint8))
            clean = dataclasses.replace(batch, seq=np.where(ok, seq, ord("A")).astype(np.uint8))
            clean.device_cols = dict(batch.device_cols, q_seq=(clean.seq, q_off))
            got = bam.render(clean, res)
            assert bytes(got[0]) == bytes(SamFormat("edit").render(clean, res)[0])


def test_ints_or_writes_the_integers_or_the_text():
    """Strings.ints_or: an integer column (formatted where the lines are joined) when no row is masked,
    else the integers as text with the masked rows' text; the same lines either way as Python writes."""
    v = np.array([-5, 0, 17, 10**12, np.iinfo(np.int64).min])
    for mask in (np.zeros(len(v), bool), np.array([0, 1, 0, 1, 0], bool), np.ones(len(v), bool)):
        col = Strings.ints_or(v, mask, b"*")
        assert isinstance(col, np.ndarray) == (not mask.any())
        want = "".join(("*" if m else str(x)) + "\tx\n" for x, m in zip(v.tolist(), mask.tolist()))
        assert join_lines([col, b"x"], len(v)) == want.encode()
