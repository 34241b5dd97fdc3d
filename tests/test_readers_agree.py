"""The two FASTA stacks side by side (issue 48's house: one input layer for every command, checked byte for
byte against both): io/ (fastx.records: pairs, paf, genome) and search's text reader (search/text.py). On
every input both take they give the same names and the same letters; where their rules differ today, the
table below says how, so that the one layer replacing them keeps each command's rule on purpose."""

import gzip
import multiprocessing as mp
import random
from concurrent.futures import ProcessPoolExecutor

import pytest
from test_search_text import random_fasta, read

import gpualign.search.text_ranges as R
from gpualign.errors import InputError
from gpualign.io import fastx, fastx_parts
from gpualign.search import alphabet as A
from gpualign.search import text as T


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as p:
        yield p


def _io(path, fast: bool = True):
    """(names, sequences as search's codes) from io's record reader, or its error's text."""
    try:
        recs = list(fastx.records(str(path), fast=fast))
    except InputError as e:
        return str(e)
    return [A.to_codes(s) for _, s, _ in recs], [n for n, _, _ in recs]


def _io_ranges(path, monkeypatch, ranges: int):
    """(names, codes) from io's reader in ranges (fastx_parts: 2 processes, ranges of `ranges` bytes), or its
    error's text."""
    monkeypatch.setattr(fastx_parts, "RANGE_BYTES", ranges)
    names, seqs = [], []
    chunks = fastx_parts.Chunks(str(path), 0, 2)
    try:
        for nm, buf, lens, _ in chunks:
            names += list(nm)
            at = 0
            for n in lens.tolist():
                seqs.append(A.to_codes(bytes(buf[at:at + n])))
                at += n
    except InputError as e:
        return str(e)
    finally:
        chunks.close()
    return seqs, names


def _search(path, pool=None, unique: bool = True, chunk: int = 50):
    """(names, codes) from search's text reader (in chunks, or in ranges by the pool's processes), or its
    error's text."""
    if not unique:
        reader = T.TextReader(str(path), chunk, 7, 16, pool, 2, unique=False)
        try:
            chunks = [(ch.codes.copy(), ch) for ch in reader]
        except InputError as e:
            return str(e)
        seqs: dict = {}
        for codes, ch in chunks:
            for i in range(ch.n):
                a = int(ch.buf[i] + ch.context[i])
                seqs[int(ch.record[i])] = seqs.get(int(ch.record[i]), b"") + codes[a:a + int(ch.length[i])].tobytes()
        names = reader.records.names
        return [seqs.get(r, b"") for r in range(len(names))], names
    got = read(path, pool, chunk)
    return got if isinstance(got, str) else (got[0], got[1])


@pytest.mark.parametrize("seed", range(30))
def test_the_same_records_from_both(tmp_path, pool, monkeypatch, seed):
    """Random FASTA both take (IUPAC letters either case, LF or CRLF, lines of 1 to 1,000, blank lines
    between and inside records, descriptions, empty records, no final line end), plain and gzip: the same
    names and letters."""
    rng = random.Random(seed)
    data, names, seqs = random_fasta(rng, rng.choice([0, 0, 30]))
    data = data[data.index(b">"):]  # (blank lines before the first record: the table below)
    _both(tmp_path, data, (seqs, names), pool, monkeypatch, rng.choice([11, 64, 1 << 20]))


def _both(tmp_path, data: bytes, want: tuple, pool, monkeypatch, ranges: int, chunk: int = 50) -> None:
    """Both readers give want from data written plain, gzip and bgzip, whole and in ranges (io's in ranges of
    the plain and the bgzip file too, as the gzip file's one stream in a child process)."""
    import pysam

    plain, packed, blocked = tmp_path / "t.fa", tmp_path / "t.fa.gz", tmp_path / "b.fa.gz"
    plain.write_bytes(data)
    packed.write_bytes(gzip.compress(data))
    pysam.tabix_compress(str(plain), str(blocked), force=True)
    monkeypatch.setattr(R, "RANGE", ranges)
    for path in (plain, packed, blocked):
        assert _io(path) == want and _io(path, fast=False) == want, path
        assert _io_ranges(path, monkeypatch, max(ranges, 64)) == want, path
        assert _search(path, chunk=chunk) == want, path
    assert _search(plain, pool, chunk=chunk) == want
    assert _search(blocked, pool, chunk=chunk) == want


def test_long_records_from_both(tmp_path, pool, monkeypatch):
    """Records of 1 bp to 2 Mbp in lines of 60 and 80 (and one line), CRLF in one: the same from both."""
    rng = random.Random(7)
    names, seqs, out = [], [], []
    for i, (n, width, eol) in enumerate([(1, 60, b"\n"), (2_000_000, 60, b"\n"), (300_001, 80, b"\r\n"),
                                         (70_000, 10 ** 9, b"\n"), (0, 60, b"\n")]):
        seq = bytes(rng.choice(b"ACGTacgtN") for _ in range(n))
        out.append(f">c{i} len={n}".encode() + eol + b"".join(seq[j:j + width] + eol for j in range(0, n, width)))
        names.append(f"c{i}")
        seqs.append(A.to_codes(seq))
    _both(tmp_path, b"".join(out), (seqs, names), pool, monkeypatch, 1 << 20, chunk=1 << 20)


@pytest.mark.parametrize("data,io_reads,search_reads", [
    # the letters: io takes any letter (pairs, paf, genome: a mismatch like any other); search takes the
    # IUPAC codes only (its 4-bit codes)
    (b">a\nACXT\n", True, False),
    (b">a\nACeT\n", True, False),
    # a name twice: io takes it (pairs: names need not differ; SAM's @SQ checks lengths, io/targets.py);
    # search refuses it by default (its SAM/BAM name each record once), takes it with unique=False
    (b">a\nAC\n>a\nAC\n", True, False),
    (b">a\nAC\n>a\nACG\n", True, False),
    # FASTQ: io reads it, search's text is FASTA only
    (b"@a\nACGT\n+\nIIII\n", True, False),
    # blank lines before the first record: both skip empty ones and refuse one of spaces (a file of white space
    # alone is empty)
    (b"\n\n>a\nAC\n", True, True),
    (b"\r\n\n>a\nAC\n", True, True),
    (b"  \n>a\nAC\n", False, False),
    (b"\n\t\n\n>a\nAC\n", False, False),
    (b"\r\r\n>a\nAC\n", False, False),  # (a line holding a CR)
    (b"\n\r\r\n>a\nAC\n", False, False),
    (b"\n  \n\t\n", False, False),
    # the same rule in both (a name that is not UTF-8: refused; bytes that are not UTF-8 after it: kept)
    (b">a\xff\nAC\n", False, False),
    (b">a x\xff\nAC\n", True, True),
    # a name ends at ASCII white space only (htslib's faidx too): other separators and Unicode spaces are in it;
    # search's SAM/BAM rule (unique names, as here) refuses a name that is not printable ASCII, io's readers
    # leave that to the SAM writer (output/sam.check_qnames, check_rnames)
    (b">a\x1cb c\nAC\n", True, False),
    (">a\u00a0b\u2003c d\nAC\n".encode(), True, False),
    # the same rule in both
    (b">a\rACGT\r>b\rGG\r", False, False),  # CR-only line ends: one header line, record b lost (exit 0)
    (b">a x\ry\r\nAC\r\n", False, False),
    (b">a\nAC-T\n", False, False),
    (b">a\nAC\rGT\n", False, False),  # a CR that ends no line (search dropped it: ACGT, exit 0)
    (b">a\nAC\r\r\nGT\n", False, False),
    (b">a\nACGT\r", False, False),  # (a CR ending the file)
    (b">a\nAC T\n", False, False),
    (b">a\nAC\xc3\xa9\n", False, False),
    (b">\nACGT\n", False, False),
    (b"junk\n>a\nAC\n", False, False),
    (b"", False, False),
    (b"> a\tb\nACGT\n>b\n\n>c\r\nAC\r\n\r\nGT", True, True),
    (">é x\nAC\n".encode(), True, False),
])
def test_where_the_rules_differ(tmp_path, data, io_reads, search_reads):
    path = tmp_path / "t.fa"
    path.write_bytes(data)
    io, search = _io(path), _search(path)
    assert isinstance(io, tuple) == io_reads, io
    assert isinstance(search, tuple) == search_reads, search
    if io_reads and search_reads:
        assert io == search
    if io_reads and not search_reads and data.startswith(b">") and b"X" not in data and b"e" not in data:
        assert _search(path, unique=False) == io  # (names twice or not printable: with unique=False search
        # reads them as io does)
    for err in (x for x in (io, search) if isinstance(x, str)):
        assert err.startswith(str(path))  # one line naming the file (the wording differs between the two)


@pytest.mark.parametrize("block", [1000, 1001, 1 << 24])
def test_a_cr_line_across_a_block_end(tmp_path, monkeypatch, block):
    """A line holding a CR before the first record ('\\r\\r\\n') is refused where search's blocks cut it after
    both CRs or after the LF (a block ending in '\\r\\r' dropped both: the line read as empty). A cut between
    the two CRs (block 999 here) still reads it: each block sees one CR that may be a CRLF's."""
    import gpualign.search.text_scan as TS

    path = tmp_path / "t.fa"
    path.write_bytes(b"\n" * 998 + b"\r\r\n>a\nAC\n")
    monkeypatch.setattr(TS, "BLOCK", block)
    assert isinstance(_io(path), str) and isinstance(_search(path), str)


@pytest.mark.parametrize("where", ["inside", "before CRLF", "a cut after it"])
@pytest.mark.parametrize("chunk", [50, 1 << 20])
def test_a_lone_cr_in_many_records(tmp_path, pool, monkeypatch, where, chunk):
    """A CR that ends no line in record 70 of 300 (search reads a block of 64 records or more with array
    operations, whose table drops every CR; and, with a pool and chunk 50, in ranges): refused by both, naming
    the record; without it, both read the same. 'a cut after it': search's read block, and with the pool a range,
    ends right after the CR (each saw a CR that may be a CR LF's, and read it as one)."""
    import gpualign.search.text_scan as TS

    recs = [b">r%d\nACGTACGTAC\nGGTTAACC\n" % i for i in range(300)]
    good = b"".join(recs)
    want = ([A.to_codes(b"ACGTACGTACGGTTAACC")] * 300, [f"r{i}" for i in range(300)])
    bad = {"inside": b">r69\nACGTA\rCGTAC\nGGTTAACC\n", "before CRLF": b">r69\nACGTACGTAC\r\r\nGGTTAACC\n",
           "a cut after it": b">r69\nACGTACGTAC\rGGTTAACC\n"}
    path = tmp_path / "t.fa"
    data = b"".join(recs[:69]) + bad[where] + b"".join(recs[70:])
    path.write_bytes(data)
    cut = data.index(b"\r") + 1
    if where == "a cut after it":
        monkeypatch.setattr(TS, "BLOCK", cut)
        chunk = cut if chunk == 50 else chunk  # (ranges of `chunk` bytes)
    for got in (_io(path), _search(path, chunk=chunk), _search(path, pool, chunk=chunk)):
        assert isinstance(got, str) and "record 70" in got, got
    path.write_bytes(good)
    assert _io(path) == want and _search(path, chunk=chunk) == want and _search(path, pool, chunk=chunk) == want


@pytest.mark.parametrize("many", [False, True])
def test_a_cr_ending_the_file_in_ranges(tmp_path, pool, many):
    """A CR as the file's last byte (no LF after it) ends no line: io and search's stream refuse it, and so do
    search's ranges, where the last range ends with it (a worker read a range's last CR as a CR LF's, its LF in
    the range after, and the file had none), naming the last record; with many records a range is read with
    array operations. Without the CR, all read the same."""
    recs, lines = (300, 1) if many else (3, 60)  # (3 records of 60 lines: ranges without array operations)
    good = b"".join(b">r%d\n" % i + b"ACGTACGTAC\nGGTTAACC\n" * lines for i in range(recs))
    path = tmp_path / "t.fa"
    want = ([A.to_codes(b"ACGTACGTACGGTTAACC" * lines)] * recs, [f"r{i}" for i in range(recs)])
    chunk = len(good) // 3
    for data, ok in ((good, True), (good[:-1] + b"\r", False), (good + b"\r", False)):
        path.write_bytes(data)
        for got in (_io(path), _search(path, chunk=chunk), _search(path, pool, chunk=chunk)):
            if ok:
                assert got == want
            else:
                assert isinstance(got, str) and f"record {recs}" in got, got
