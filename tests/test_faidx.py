"""io.faidx: memory-mapped slices of an indexed FASTA, checked against pysam's faidx and the records."""

import numpy as np
import pysam
import pytest

from gpualign.errors import InputError
from gpualign.io.faidx import IndexedFasta

RNG = np.random.default_rng(11)
RECORDS = {"a": b"ACGTacgtNN" * 37 + b"A", "b": b"", "c": b"G", "d": RNG.choice(list(b"ACGT"), 5000).astype(np.uint8).tobytes()}


def write_fasta(path, width, newline=b"\n"):
    with open(path, "wb") as fh:
        for name, seq in RECORDS.items():
            fh.write(b">" + name.encode() + b" some description" + newline)
            for i in range(0, len(seq), width):
                fh.write(seq[i:i + width] + newline)


@pytest.mark.parametrize("width,newline", [(60, b"\n"), (7, b"\n"), (1, b"\n"), (10 ** 6, b"\n"), (50, b"\r\n")])
def test_slices_match_records_and_pysam(tmp_path, width, newline):
    path = str(tmp_path / "x.fa")
    write_fasta(path, width, newline)
    fa = IndexedFasta(path)
    ref = pysam.FastaFile(path)
    assert fa._mapped()  # the memory-mapped path, not pysam's
    assert fa.lengths == {k: len(v) for k, v in RECORDS.items()}  # (htslib leaves empty records out: put back)
    for name, seq in RECORDS.items():
        assert name in fa
        if not seq:
            assert fa.fetch(name) == fa.fetch(name, 0, 5) == b""
            continue
        assert fa.fetch(name) == seq
        for _ in range(60):
            a, b = sorted(RNG.integers(0, len(seq) + 1, 2).tolist())
            got = fa.fetch(name, a, b)
            assert got == seq[a:b] == ref.fetch(name, a, b).encode()
        assert fa.fetch(name, len(seq) - 3, len(seq) + 50) == seq[max(0, len(seq) - 3):]  # clamped
    assert "zz" not in fa
    fa.close()


def test_bgzip_goes_through_pysam(tmp_path):
    plain = str(tmp_path / "x.fa")
    write_fasta(plain, 60)
    pysam.tabix_compress(plain, plain + ".gz")
    fa = IndexedFasta(plain + ".gz")
    assert not fa._mapped()
    assert fa.fetch("d", 100, 4321) == RECORDS["d"][100:4321]
    assert fa.fetch("a") == RECORDS["a"]


def test_unindexable_is_an_input_error(tmp_path):
    path = tmp_path / "x.fa"
    path.write_bytes(b">a\nACGT\nAC\nACGT\n")  # uneven line lengths: faidx refuses
    with pytest.raises(InputError, match="cannot index"):
        IndexedFasta(str(path))


@pytest.mark.parametrize("data", [b">a x\ry\nACGT\n", b">b\nAC\n>a\rACGT\r"])
def test_a_cr_in_a_header_is_refused(tmp_path, data):
    """A CR inside a header line is refused, as the other commands' readers refuse it (the index built here
    read the header's first word and went on: paf took the file where pairs refuses it)."""
    path = tmp_path / "x.fa"
    path.write_bytes(data)
    with pytest.raises(InputError, match=r"x\.fa: record \d+ .*carriage return \(CR\) inside the header line"):
        IndexedFasta(str(path)).fetch("a")


def test_stale_index_is_rebuilt(tmp_path):
    """A .fai older than its FASTA (the file was rewritten) would point at the wrong bytes: rebuilt."""
    import os

    path = tmp_path / "x.fa"
    path.write_bytes(b">a\nAAAA\n>b\nCCCC\n")
    IndexedFasta(str(path)).close()
    path.write_bytes(b">a\nGGGGGGGG\n>b\nTTTTTTT\n")
    fai = os.stat(str(path) + ".fai")
    os.utime(path, (fai.st_atime + 5, fai.st_mtime + 5))
    fa = IndexedFasta(str(path))
    assert fa.lengths == {"a": 8, "b": 7} and fa.fetch("b", 1, 5) == b"TTTT"


REGULAR = {  # FASTA layouts build_fai indexes itself (its .fai must equal htslib's)
    "wrapped": b">a desc\nACGTACGT\nACG\n>b\tx\nA\n",
    "no final line end": b">a\nACGTAC\nAC",
    "last line full, no line end": b">a\nACG\nACG\n>b\nA",
    "one blank line closing a record": b">a\nACGT\n\n>b\nAC\n",
    "'>' inside sequence lines": b">a\nAC>G\nA>\n>b\nN\n",
}
IRREGULAR = {  # left to htslib: build_fai writes nothing
    "empty record": b">a\n>b\nACGT\n", "header at the end": b">a\nAC\n>b", "CRLF": b">a\r\nACGT\r\nAC\r\n",
    "empty first line": b">a\n\nACGT\n", "duplicate name": b">a\nAC\n>a\nGT\n", "no name": b">\nAC\n",
    "short line before the last": b">a\nACGT\nAC\nACGT\n", "long last line": b">a\nACG\nACGTT\n>b\nA\n",
    "two blank lines": b">a\nACGT\n\n\n>b\nA\n", "FASTQ": b"@a\nACGT\n+\nIIII\n",
    "a CR in a header line": b">a x\ry\nACGT\n", "a header ending in CR": b">a\r\nACGT\n",
}


def _pysam_fai(path):
    pysam.faidx(path)
    with open(path + ".fai") as fh:
        return fh.read()


@pytest.mark.parametrize("name", list(REGULAR))
def test_build_fai_equals_htslib(tmp_path, name):
    from gpualign.io.faidx import build_fai

    path = str(tmp_path / "x.fa")
    with open(path, "wb") as fh:
        fh.write(REGULAR[name])
    assert build_fai(path)
    with open(path + ".fai") as fh:
        ours = fh.read()
    assert ours == _pysam_fai(path)


@pytest.mark.parametrize("width", [1, 7, 60, 0])
def test_build_fai_random_layouts(tmp_path, width):
    """Many records of random lengths, wrapped at width (0: one line each), read through IndexedFasta (which
    builds the index with build_fai): the .fai equals htslib's and slices equal the records."""
    path = str(tmp_path / "x.fa")
    seqs = {f"r{i}": RNG.choice(list(b"ACGT"), int(RNG.integers(1, 3000))).astype(np.uint8).tobytes()
            for i in range(60)}
    with open(path, "wb") as fh:
        for name, seq in seqs.items():
            lines = [seq] if width == 0 else [seq[i:i + width] for i in range(0, len(seq), width)]
            fh.write(b">%s x\n" % name.encode() + b"".join(x + b"\n" for x in lines))
    fa = IndexedFasta(path)
    with open(path + ".fai") as fh:
        ours = fh.read()
    assert all(fa.fetch(n) == s for n, s in seqs.items())
    assert ours == _pysam_fai(path)


@pytest.mark.parametrize("name", list(IRREGULAR))
def test_build_fai_leaves_irregular_files_to_htslib(tmp_path, name):
    from gpualign.io.faidx import build_fai

    path = str(tmp_path / "x.fa")
    with open(path, "wb") as fh:
        fh.write(IRREGULAR[name])
    assert not build_fai(path)
    assert not (tmp_path / "x.fa.fai").exists()


def test_plain_index_is_read_in_bulk_without_htslib(tmp_path):
    """A plain file's .fai, as build_fai or samtools write it, is read at open in bulk (fai_table): no htslib
    handle (its open of a million reads' index took a second); the rows are those of the row-by-row reader."""
    from gpualign.io.faidx import FaiRows, _read_fai, fai_table

    path = str(tmp_path / "x.fa")
    write_fasta(path, 60)
    fa = IndexedFasta(path)
    assert fa._fa is None and fa._index is not None and fa._map is not None
    assert fa.lengths == {n: len(s) for n, s in RECORDS.items()}
    assert fa.fetch("d", 5, 70) == RECORDS["d"][5:70]
    names, c = fai_table(path + ".fai")
    rows = [x.split("\t") for x in open(path + ".fai").read().splitlines()]
    assert names == [r[0] for r in rows] and c[:, :4].tolist() == [[int(v) for v in r[1:5]] for r in rows]
    assert (c[:, 4] == -1).all()
    index = _read_fai(path + ".fai")
    assert isinstance(index, FaiRows) and list(index) == names
    assert [index[n] for n in names] == [(int(r[2]), max(int(r[3]), 1), max(int(r[4]), 1), -1) for r in rows]
    assert index.rows(names[::-1]).tolist() == [list(index[n][:3]) for n in names[::-1]]


@pytest.mark.parametrize("odd", ["plus", "crlf", "twice", "spaces", "named", "wide"])
def test_odd_index_rows_go_the_row_by_row_way(tmp_path, odd):
    """A .fai that fai_table does not take (a '+5', CRLF rows, a name twice, a column with a space, a name with
    one, a line end of 10^10 bytes) is read as it always was: through htslib, which opens it (the rows then come
    from the row-by-row reader) or refuses it (the file is then read into a copy): the same lengths and bases."""
    from gpualign.io.faidx import fai_table

    path = str(tmp_path / "x.fa")
    write_fasta(path, 60)
    IndexedFasta(path).close()
    rows = open(path + ".fai").read().splitlines()
    f = rows[0].split("\t")
    if odd == "plus":
        rows[0] = "\t".join(f[:2] + ["+" + f[2]] + f[3:])
    elif odd == "twice":
        rows.append(rows[0])
    elif odd == "spaces":
        rows[0] = "\t".join(f[:1] + [" " + f[1]] + f[2:])
    elif odd == "named":  # (htslib cuts the name at the space: the row is not read as this name's)
        rows[0] = "\t".join([f[0] + " desc"] + f[1:])
    elif odd == "wide":  # (a line end of 10^10 bytes: htslib refuses the row)
        rows[0] = "\t".join(f[:4] + ["10000000000"] + f[5:])
    eol = "\r\n" if odd == "crlf" else "\n"
    with open(path + ".fai", "w", newline="") as fh:
        fh.write(eol.join(rows) + eol)
    assert fai_table(path + ".fai") is None or odd == "twice"
    fold = bytes.upper if odd in ("named", "wide") else bytes  # (a copy holds its bases case-folded)
    if odd in ("named", "wide"):  # as before the bulk reader: the index refused, the file read into a copy
        from gpualign.io.random_access import open_indexed

        fa = open_indexed(path)
        assert fa.path != path
    else:
        fa = IndexedFasta(path)
        assert fa._fa is not None
    assert fa.lengths == {n: len(s) for n, s in RECORDS.items()}
    assert all(fa.fetch(n) == fold(s) for n, s in RECORDS.items())
@pytest.mark.parametrize("body", [b"ACGTACGTA\r\nCGGGTTTCCC\nAAAAATTTTT\n",  # 9 bases + CRLF, 10 + LF: 11 bytes each
                                  b"ACGTACGTAC\nGGGG\rGTTTC\nAAAAAT\n"])  # a CR inside a line
def test_line_ends_the_index_cannot_place(tmp_path, body):
    """htslib's (and samtools') index compares line lengths in bytes alone: a record mixing CRLF and LF lines of
    one byte length, or holding a CR inside a line, got an index whose slices came back shifted. The first fetch
    of such a record now raises, one line naming the file and the record, whoever made the index."""
    path = tmp_path / "x.fa"
    path.write_bytes(b">chr1 desc\n" + body + b">ok\nACGT\n")
    for made in ("here", "samtools"):
        if made == "samtools":
            (tmp_path / "x.fa.fai").unlink()
            pysam.faidx(str(path))
        fa = IndexedFasta(str(path))
        assert fa.fetch("ok") == b"ACGT"
        with pytest.raises(InputError, match=r"x\.fa: record 'chr1': its line ends mix CRLF and LF"):
            fa.fetch("chr1", 12, 16)
        fa.close()


@pytest.mark.parametrize("layout", ["lf", "crlf", "cr_inside", "past_end", "rewrapped", "rewrapped_rows_only"])
def test_line_ends_of_many_records_checked_at_once_as_one_by_one(tmp_path, layout, monkeypatch):
    """rows() of 1,500 new records checks their line ends at once where the file holds no CR (an LF row then
    needs only end inside the file, with its header's, first and last line ends where the row says): the same
    rows, and the same error, as the check a record at a time. rewrapped: the file written again with lines of 50
    bases, its .fai (lines of 60) left newer than it."""
    from gpualign.io import faidx

    rng = np.random.default_rng(4)
    recs = {f"r{i}": rng.choice(list(b"ACGT"), int(rng.integers(1, 200))).astype(np.uint8).tobytes()
            for i in range(1500)}
    eol = b"\r\n" if layout == "crlf" else b"\n"
    path = str(tmp_path / "x.fa")
    with open(path, "wb") as fh:
        for n, s in recs.items():
            body = s if layout != "cr_inside" or n != "r700" else s[:1] + b"\r" + s[2:]
            fh.write(b">" + n.encode() + eol + eol.join(body[i:i + 60] for i in range(0, len(body), 60)) + eol)
    IndexedFasta(path).close()
    if layout == "rewrapped_rows_only":  # (the check when the index opens left out: the rows' own checks find it)
        from gpualign.io import faidx as _faidx

        monkeypatch.setattr(_faidx, "unlisted_line", lambda *a: None)
        monkeypatch.setattr(_faidx, "misnamed_row", lambda *a: None)
    if layout.startswith("rewrapped"):
        import os

        with open(path, "wb") as fh:
            for n, s in recs.items():
                fh.write(b">" + n.encode() + eol + eol.join(s[i:i + 50] for i in range(0, len(s), 50)) + eol)
        st = os.stat(path)
        os.utime(path + ".fai", (st.st_atime + 5, st.st_mtime + 5))
    if layout == "past_end":  # the last record's row says its lines go on past the file's end
        rows = open(path + ".fai").read().splitlines()
        f = rows[-1].split("\t")
        rows[-1] = "\t".join([f[0], str(int(f[1]) + 500)] + f[2:])
        open(path + ".fai", "w").write("\n".join(rows) + "\n")
    outcomes = []
    for bulk in (faidx.BULK_CHECK, 10 ** 9):
        faidx.BULK_CHECK, saved = bulk, faidx.BULK_CHECK
        try:
            fa = None
            try:
                fa = IndexedFasta(path)
                outcomes.append(("rows", fa.rows(list(recs)).tolist(), sorted(fa._laid_out)))
            except InputError as e:
                outcomes.append(("error", str(e)))
            if fa is not None:
                fa.close()
        finally:
            faidx.BULK_CHECK = saved
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == ("error" if layout in ("cr_inside", "past_end", "rewrapped", "rewrapped_rows_only")
                              else "rows")
    if layout.startswith("rewrapped"):
        assert "does not match its .fai index (" in outcomes[0][1] and "x.fa.fai: made for another" in outcomes[0][1]


@pytest.mark.parametrize("width", [60, 1000])
def test_index_of_another_layout_newer_than_the_file(tmp_path, width):
    """A .fai left newer than its FASTA after the file was wrapped again (cp -p, touch): its rows put line ends
    where the file has bases, and a fetch came back with line ends inside (a caller then said a sequence held
    byte 0x0a). Now the fetch names the file, the record and the index, whoever made the index."""
    import os

    rng = np.random.default_rng(5)
    seqs = {f"s{i}": rng.choice(list(b"ACGT"), 700).astype(np.uint8).tobytes() for i in range(3)}
    path = str(tmp_path / "x.fa")

    def write(w):
        with open(path, "wb") as fh:
            for n, s in seqs.items():
                fh.write(b">" + n.encode() + b"\n" + b"\n".join(s[i:i + w] for i in range(0, len(s), w)) + b"\n")

    for made in ("here", "samtools"):
        write(80)
        if made == "samtools":
            os.unlink(path + ".fai")
            pysam.faidx(path)
        else:
            IndexedFasta(path).close()
        write(width)
        st = os.stat(path)
        os.utime(path + ".fai", (st.st_atime + 5, st.st_mtime + 5))
        with pytest.raises(InputError, match=r"x\.fa: (record 's[0-2]'|its line at byte \d+) does not match its "
                                             r"\.fai index \(.*x\.fa\.fai: made for"):
            IndexedFasta(path).fetch("s1", 0, 700)
        os.unlink(path + ".fai")
        fa = IndexedFasta(path)  # rebuilt: the bases as written
        assert fa.fetch("s1", 0, 700) == seqs["s1"]
        fa.close()


@pytest.mark.parametrize("kind", ["fasta", "fastq"])
def test_samtools_index_of_a_name_given_twice_is_refused(tmp_path, kind):
    """samtools' .fai of a file naming two records alike keeps the first (with a warning only): a slice by that
    name came from the first record while the run meant the second, exit 0. The index is now checked against
    the file when it opens (every line outside its rows a header): refused, naming it; without it, the index
    built by the run refuses the name twice. A record without bases, which samtools' index also leaves out, blank
    lines between records and quality lines starting with '@' or '+' stay fine."""
    import os

    rng = np.random.default_rng(6)
    seqs = [rng.choice(list("ACGT"), 130).astype("U1") for _ in range(4)]
    seqs = ["".join(x) for x in seqs]
    names = ["r0", "r1", "r2", "r1"]
    if kind == "fasta":
        text = "".join(f">{n} x\n{q[:60]}\n{q[60:120]}\n{q[120:]}\n" for n, q in zip(names, seqs))
        fine = f">e\n>r0\n{seqs[0][:60]}\n{seqs[0][60:120]}\n{seqs[0][120:]}\n\n>r1\n{seqs[1]}\n"
    else:
        text = "".join(f"@{n}\n{q}\n+\n{'I' * len(q)}\n" for n, q in zip(names, seqs))
        fine = f"@r0\n{seqs[0]}\n+\n{'@' * len(seqs[0])}\n@r1\n{seqs[1]}\n+\n{'+' * 130}\n"
    path = str(tmp_path / ("x.fa" if kind == "fasta" else "x.fq"))
    with open(path, "w") as fh:
        fh.write(fine)
    pysam.faidx(path)
    fa = IndexedFasta(path)  # (FASTA: samtools left out the record without bases, as it does)
    assert fa.fetch("r0") == seqs[0].encode() and fa.fetch("r1") == seqs[1].encode()
    fa.close()
    with open(path, "w") as fh:
        fh.write(text)
    os.unlink(path + ".fai")
    pysam.faidx(path)  # (htslib: "Ignoring duplicate sequence", the first r1 kept)
    with pytest.raises(InputError, match=r"its line at byte \d+ does not match its \.fai index .*name given twice"):
        IndexedFasta(path)
    os.unlink(path + ".fai")
    with pytest.raises((InputError, Exception), match="'r1' again"):
        from gpualign.io.random_access import open_indexed

        open_indexed(path).fetch("r1")


@pytest.mark.parametrize("seed", range(6))
def test_unlisted_line_finds_any_record_left_out(tmp_path, seed, monkeypatch):
    """faidx.unlisted_line on random FASTA/FASTQ files (widths, CRLF, descriptions, headers longer than GAP_BULK)
    indexed by samtools: nothing for the whole index; each record left out of its rows found (at its header's
    byte or before)."""
    import mmap

    from gpualign.io import faidx

    monkeypatch.setattr(faidx, "GAP_BULK", 64 if seed % 2 else faidx.GAP_BULK)
    rng = np.random.default_rng(seed)
    fastq, eol = seed % 3 == 2, b"\r\n" if seed % 3 == 1 else b"\n"
    parts = []
    for i in range(int(rng.integers(2, 30))):
        n = int(rng.integers(1, 300))
        q = rng.choice(list(b"ACGTN"), n).astype(np.uint8).tobytes()
        head = f"r{i}" + (" " + "d" * int(rng.integers(0, 150)) if rng.random() < 0.5 else "")
        if fastq:
            qual = rng.choice(list(b"@+I#5"), n).astype(np.uint8).tobytes()
            parts.append(b"@" + head.encode() + eol + q + eol + b"+" + eol + qual + eol)
        else:
            w = int(rng.integers(1, 80))
            parts.append(b">" + head.encode() + eol + eol.join(q[j:j + w] for j in range(0, n, w)) + eol)
    path = str(tmp_path / ("x.fq" if fastq else "x.fa"))
    with open(path, "wb") as fh:
        fh.write(b"".join(parts))
    pysam.faidx(path)
    c = faidx.fai_table(path + ".fai")[1]
    with open(path, "rb") as fh:
        m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    assert faidx.unlisted_line(m, c) is None
    for k in range(len(c)):
        at = faidx.unlisted_line(m, np.delete(c, k, axis=0))
        assert at is not None and at <= c[k, 1], (k, at, c[k])
    m.close()


@pytest.mark.parametrize("change", ["swapped", "renamed"])
def test_index_of_records_reordered_or_renamed_alike(tmp_path, change):
    """A .fai newer than its file after two records of one length swapped places, or a header renamed to a name
    of its length: every row still lands on bases, and a fetch by name gave the other record's (a review's
    find). Each row's bases must follow a header naming it: refused, naming the record."""
    import os

    rng = np.random.default_rng(9)
    seqs = {n: rng.choice(list("ACGT"), 150).astype("U1") for n in ("chrA", "chrB", "chrC")}
    seqs = {n: "".join(q) for n, q in seqs.items()}
    path = str(tmp_path / "x.fa")

    def write(order, rename=None):
        with open(path, "w") as fh:
            for n in order:
                fh.write(f">{rename if rename and n == 'chrB' else n} d\n{seqs[n][:80]}\n{seqs[n][80:]}\n")

    write(["chrA", "chrB", "chrC"])
    pysam.faidx(path)
    write(["chrB", "chrA", "chrC"] if change == "swapped" else ["chrA", "chrB", "chrC"],
          rename="chrZ" if change == "renamed" else None)
    st = os.stat(path)
    os.utime(path + ".fai", (st.st_atime + 5, st.st_mtime + 5))
    with pytest.raises(InputError, match=r"x\.fa: record 'chr[AB]' does not match its \.fai index"):
        IndexedFasta(path)
    os.unlink(path + ".fai")
    fa = IndexedFasta(path)
    assert all(fa.fetch(n) == seqs[n].encode() for n in ("chrA", "chrC"))
    fa.close()


def test_index_names_htslib_cuts_are_an_error_not_a_traceback(tmp_path):
    """A .fai whose names end with white space: htslib opens it and names the records without it; the rows
    then name no record as htslib does, which is said (one line naming the index), not a KeyError."""
    path = str(tmp_path / "x.fa")
    write_fasta(path, 60)
    IndexedFasta(path).close()
    rows = [x.split("\t") for x in open(path + ".fai").read().splitlines()]
    with open(path + ".fai", "w") as fh:
        fh.write("".join("\t".join([r[0] + " "] + r[1:]) + "\n" for r in rows))
    fa = IndexedFasta(path)
    assert fa._fa is not None and set(fa.lengths) == set(RECORDS)
    with pytest.raises(InputError, match=r"record 'a' is not named so in its \.fai index \(.*x\.fa\.fai\)"):
        fa.fetch("a", 0, 5)


@pytest.mark.parametrize("where", ["last", "first"])
def test_samtools_index_of_a_bare_header_is_no_traceback(tmp_path, where):
    """A record whose header is '>' alone, which samtools indexes under an empty name: the open-time check of
    that index (misnamed_row) had no bytes of the name to compare and failed with an IndexError; the index is
    taken and the other records read as they are."""
    path = str(tmp_path / "x.fa")
    recs = [">a\nACGTACGT\n", ">\nACGTTT\n"]
    with open(path, "w") as fh:
        fh.write("".join(recs if where == "last" else recs[::-1]))
    pysam.faidx(path)
    assert "" in [r.split("\t")[0] for r in open(path + ".fai").read().splitlines()]
    fa = IndexedFasta(path)
    assert fa.fetch("a") == b"ACGTACGT"
    fa.close()
