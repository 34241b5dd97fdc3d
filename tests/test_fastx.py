"""The reader's fast path (strict 2-line FASTA / 4-line FASTQ) and strict parser against htslib on random
layouts, including block boundaries and a layout change in mid-file (the strict parser takes over from that
record)."""

import gzip
import random

import pysam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpualign.io import fastx, fastx_fast, fastx_parts, fastx_strict, pair_reader
from gpualign.io import ranged
from gpualign.records import Names

rec = st.tuples(st.from_regex(r"[A-Za-z0-9_.|]{1,12}", fullmatch=True),
                st.one_of(st.just(""), st.from_regex(r"[ \t][a-z =>]{0,10}", fullmatch=True)),
                st.from_regex(r"[ACGTNacgtnRY]{0,90}", fullmatch=True))


def render(recs, fq, wrap, crlf, final_newline):
    out = []
    for name, desc, seq in recs:
        if fq:
            out += [f"@{name}{desc}", seq, "+", "I" * len(seq)]
        else:
            out.append(f">{name}{desc}")
            if wrap and seq:
                out += [seq[i:i + wrap] for i in range(0, len(seq), wrap)]
            else:
                out.append(seq)
    nl = "\r\n" if crlf else "\n"
    return (nl.join(out) + (nl if final_newline else "")).encode()


def via_htslib(path):
    # htslib keeps the CR of an empty CRLF sequence line as the sequence; the reader does not
    with pysam.FastxFile(path) as fh:
        return [(r.name, (r.sequence or "").replace("\r", ""), (r.quality or "").replace("\r", "") or None)
                for r in fh]


def via_ours(path):
    out = []
    for names, seqs, quals in fastx.record_chunks(path, chunk=7):
        # an empty FASTQ quality is '' here and None in htslib: both are written as '*'
        out += [(n, s.decode() if isinstance(s, bytes) else s, q or None) for n, s, q in zip(names, seqs, quals)]
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rec, min_size=1, max_size=40), st.booleans(), st.sampled_from([0, 0, 7, 60]), st.booleans(),
       st.booleans(), st.booleans(), st.sampled_from([16, 64, 1 << 23]), st.sampled_from([1, 3, 64]))
def test_same_records_as_htslib(tmp_path, monkeypatch, recs, fq, wrap, crlf, final_newline, gz, block, many):
    monkeypatch.setattr(fastx_fast, "_BLOCK", block)
    monkeypatch.setattr(fastx_strict, "MANY", many)  # (io.fasta_block's blocks from this many records)
    data = render(recs, fq, wrap, crlf, final_newline)
    path = tmp_path / ("r.fq" if fq else "r.fa")
    if gz:
        path = path.with_suffix(path.suffix + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    try:
        want = via_htslib(str(path))
    except (ValueError, OSError):  # htslib rejects it: an empty last FASTQ record without its (empty)
        # quality line, which the reader cannot tell from an empty quality line without a line end
        assert fq and not recs[-1][2] and not final_newline
        assert via_ours(str(path)) == [(n, s, "I" * len(s) or None) for n, _, s in recs]
        return
    assert via_ours(str(path)) == want


def test_layout_change_mid_file(tmp_path, monkeypatch):
    monkeypatch.setattr(fastx_fast, "_BLOCK", 256)
    recs = [(f"r{i}", "", "ACGT" * (i % 9 + 1)) for i in range(200)]
    data = render(recs[:120], False, 0, False, True) + render(recs[120:], False, 5, False, True)
    path = tmp_path / "mixed.fa"
    path.write_bytes(data)
    got = via_ours(str(path))
    assert got == via_htslib(str(path)) and len(got) == 200


def test_names_of_utf8_names_and_any_description():
    heads = [">r\u00e91 5\u2032-UTR".encode(), b">r2 caf\xe9", b">r3\tx", ">\u00e9".encode()]
    assert fastx_fast.names_of(heads) == ["r\u00e91", "r2", "r3", "\u00e9"]
    assert fastx_fast.names_of([">\u00e9a".encode(), b">b"]) == ["\u00e9a", "b"]  # (no whitespace: one split)
    with pytest.raises(UnicodeDecodeError):
        fastx_fast.names_of([b">r\xe9 x", b">b"])  # (the name itself is not UTF-8)
    with pytest.raises(IndexError):
        fastx_fast.names_of([b">a", b"> "])


@pytest.mark.parametrize("case", ["utf8 names", "latin-1 descriptions", "bad letter near the end"])
def test_blocks_read_in_bulk_whatever_the_headers(tmp_path, monkeypatch, case):
    """The strict reader reads non-ASCII names (UTF-8) and non-UTF-8 descriptions a block at a time, and a block
    that fails the bulk checks one record at a time, once (it tried the block again at every record: 10,000
    such records took 44 s): the records written, with the bulk scan run a few times, not per record."""
    n = 3000
    recs = [("r\u00e9%d" % i if case == "utf8 names" else "r%d" % i, "", "ACGT" * 6) for i in range(n)]
    data = render(recs, False, 0, False, True)
    if case == "latin-1 descriptions":
        data = data.replace(b"\nACGT", b" caf\xe9\nACGT")
    if case == "bad letter near the end":
        at = data.index(b">r%d\n" % (n - 10))
        data = data[:at + 10] + b"1" + data[at + 11:]
    path = tmp_path / "t.fa"
    path.write_bytes(data)
    monkeypatch.setattr(fastx_strict, "BLOCK", 1 << 14)  # (several blocks of many records)
    scans = []
    real = fastx_strict.fasta_block.scan
    monkeypatch.setattr(fastx_strict.fasta_block, "scan", lambda *a: scans.append(1) or real(*a))

    def strict():
        return [(nm, sq.decode(), q) for names, seqs, quals in fastx.record_chunks(str(path), chunk=7, fast=False)
                for nm, sq, q in zip(names, seqs, quals)]

    if case == "bad letter near the end":
        with pytest.raises(fastx_strict.RecordError, match=f"record {n - 9} "):
            strict()
    else:
        want = [(nm, sq, None) for nm, _, sq in recs]  # (htslib's reader decodes descriptions as UTF-8)
        assert strict() == want and via_ours(str(path)) == want
    assert 0 < len(scans) < n // 20, len(scans)


def test_bad_quality_found_by_either_path(tmp_path, monkeypatch):
    monkeypatch.setattr(fastx_fast, "_BLOCK", 64)
    body = "".join(f"@r{i}\nACGT\n+\nIIII\n" for i in range(30)) + "@bad\nACGT\n+\nIII\n"
    path = tmp_path / "q.fq"
    path.write_text(body)
    with pytest.raises(fastx.InputError, match=r"record 31 \(line 121\): quality length"):
        via_ours(str(path))


def _batches(a, b, min_bytes, **kw):
    out = []
    for batch in pair_reader.read_pairs(str(a), str(b), kw.get("bases", 5000), kw.get("pairs", 37), min_bytes):
        out.append((batch.q_names, batch.t_names, batch.q_quals, batch.seq.tobytes(), batch.q_len.tolist(),
                    batch.t_len.tolist(), batch.index.tolist()))
    return out


def test_batches_bounded_by_their_names_bytes(tmp_path):
    """A batch holds at most batch_bases bytes of names as well as bases: 2,000 pairs of 100 kB names made one
    batch of the whole file (3.9 GB for 400 MB of input, a memory audit). Same records, in order."""
    n, name = 40, "x" * 3000
    (tmp_path / "a.fa").write_text("".join(f">a{i}{name}\nACGT\n" for i in range(n)))
    (tmp_path / "b.fa").write_text("".join(f">b{i}{name}\nAC\n" for i in range(n)))
    got = list(pair_reader.read_pairs(str(tmp_path / "a.fa"), str(tmp_path / "b.fa"), 20_000, 1000))
    sizes = [bt.n for bt in got]
    assert sum(sizes) == n and len(got) > 1, sizes
    for bt in got:  # (a batch's last pair may pass the bound, as a pair of long sequences does)
        names = sum(len(x) for x in bt.q_names) + sum(len(x) for x in bt.t_names)
        assert names - len(bt.q_names[-1]) - len(bt.t_names[-1]) < 20_000, (bt.n, names)
    assert [x for bt in got for x in bt.q_names] == [f"a{i}{name}" for i in range(n)]
    assert [i for bt in got for i in bt.index.tolist()] == list(range(n))


@pytest.mark.parametrize("layout", ["fasta", "fastq.gz", "wrapped"])
def test_child_process_reader_matches(tmp_path, layout):
    """Big inputs parse in a child process: the same batches as parsing in-process, for the fast path
    and the htslib fallback (wrapped FASTA), plain and gzip."""
    recs = [(f"r{i}", " d", "ACGTN"[i % 5] * (i % 70) + "acgt") for i in range(500)]
    fq, wrap = layout.startswith("fastq"), (7 if layout == "wrapped" else 0)
    data = render(recs, fq, wrap, False, True)
    a = tmp_path / ("a.fq.gz" if fq else "a.fa")
    a.write_bytes(gzip.compress(data) if fq else data)
    b = tmp_path / "b.fa"
    b.write_bytes(render(recs[::-1], False, 0, False, True))
    assert _batches(a, b, 0) == _batches(a, b, 1 << 40)


@pytest.mark.parametrize("case", ["bad_char", "truncated_gz", "count"])
def test_child_process_reader_errors(tmp_path, case):
    """Errors found in a child process reach the parent as the same one-line InputError."""
    good = "".join(f">t{i}\nACGTACGT\n" for i in range(3000))
    b = tmp_path / "b.fa"
    b.write_text(good)
    if case == "bad_char":
        a = tmp_path / "a.fa"
        a.write_text(good.replace(">t2500\nACGTACGT", ">t2500\nACG TACGT"))
        match = r"a.fa: record 2501 \(line 5002\): invalid sequence character"
    elif case == "truncated_gz":
        a = tmp_path / "a.fa.gz"
        data = gzip.compress(good.encode())
        a.write_bytes(data[: len(data) // 2])
        match = "a.fa.gz: (record|corrupt or truncated)"
    else:
        a = tmp_path / "a.fa"
        a.write_text(good + ">extra\nA\n")
        match = "a.fa has more records than"
    said = []
    for min_bytes in (0, 1 << 40):
        with pytest.raises(fastx.InputError, match=match) as e:
            _batches(a, b, min_bytes)
        said.append(str(e.value))
    assert said[0] == said[1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rec, min_size=1, max_size=40), st.booleans(), st.sampled_from([0, 7]), st.booleans(), st.booleans())
def test_child_process_chunks_equal_in_process(tmp_path, recs, fq, wrap, crlf, gz):
    """Random layouts: the child process hands over exactly the chunks (or the error) parsed in-process."""
    data = render(recs, fq, wrap, crlf, True)
    path = tmp_path / ("r.fq.gz" if gz else "r.fq")
    path.write_bytes(gzip.compress(data) if gz else data)

    def collect(chunks):
        try:
            return [(n, bytes(b), ln.tolist(), q) for n, b, ln, q in chunks]
        except fastx.InputError as e:
            return str(e)

    child = fastx_parts.Chunks(str(path), 0)
    try:
        assert child.proc is not None
        assert collect(child) == collect(fastx.encoded_chunks(str(path)))
    finally:
        child.close()


def test_batches_use_the_reader_allocator(tmp_path):
    """Sequence buffers come from reader.alloc (pinned memory when a GPU engine runs): same batches."""
    import numpy as np

    recs = [(f"r{i}", "", "ACGT"[i % 4] * (i % 50 + 1)) for i in range(300)]
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_bytes(render(recs, False, 0, False, True))
    b.write_bytes(render(recs[::-1], False, 0, False, True))
    sizes = []

    def alloc(n, dtype):
        sizes.append(n)
        return np.full(n + 5, 255, dtype=dtype)[:n]  # a view of a bigger buffer, as pinned_empty gives

    reader = pair_reader.read_pairs(str(a), str(b), 1000, 64)
    reader.alloc = alloc
    got = [(bt.seq.tobytes(), bt.q_len.tolist()) for bt in reader]
    want = [(bt.seq.tobytes(), bt.q_len.tolist()) for bt in pair_reader.read_pairs(str(a), str(b), 1000, 64)]
    assert got == want and sum(sizes) == sum(len(s) for s, _ in want) and len(sizes) == len(want) > 1


@pytest.mark.parametrize("form", ["plain", "bgzip"])
def test_record_cuts_start_at_records(tmp_path, form):
    """ranged.record_cuts over a plain file and over a bgzip file's inflated bytes (records across members)."""
    from gpualign.io import ranged

    recs = [(f"r{i}", "", "ACGT" * (i % 9)) for i in range(400)]
    path = tmp_path / "a.fa"
    path.write_bytes(render(recs, False, 5, False, True))
    data = path.read_bytes()
    if form == "bgzip":
        pysam.tabix_compress(str(path), str(path) + ".gz", force=True)
        path = tmp_path / "a.fa.gz"
    with ranged.open_at(str(path)) as src:
        assert src.size == len(data)
        for every in (1, 50, 333, 4096, 1 << 30):
            cuts = ranged.record_cuts(src, every)
            assert cuts[0] == 0 and cuts[-1] == len(data) and cuts == sorted(set(cuts))
            assert all(data[c:c + 1] == b">" and data[c - 1:c] == b"\n" for c in cuts[1:-1])
            assert len(cuts) > 2 or every > len(data) // 2
            assert all(b - a >= every for a, b in zip(cuts[:-2], cuts[1:-1]))  # (the first mark past each want)


def test_record_cuts_find_a_record_far_past_the_want(tmp_path, monkeypatch):
    """A record start further on than record_cuts' first read (and across the end of a read): found. Records
    longer than its scan: cuts still at record starts, parts of `every` bytes at least, and the bytes read stay
    a bounded share of the file."""
    from gpualign.io import ranged

    monkeypatch.setattr(ranged, "CUT_READ", 16)
    for pad in range(40, 80):
        data = b">a\n" + b"A" * pad + b"\n>b\nC\n>c\nG\n"
        path = tmp_path / "a.fa"
        path.write_bytes(data)
        with ranged.open_at(str(path)) as src:
            assert ranged.record_cuts(src, 3) == [0, data.index(b">b"), data.index(b">c"), len(data)]
    monkeypatch.setattr(ranged, "CUT_SCAN", 200)
    monkeypatch.setattr(ranged, "CUT_READ_MOST", 64)
    rng = random.Random(4)
    data = b"".join(b">r%d\n%s\n" % (i, b"ACGT" * rng.choice([1, 10, 300, 2000])) for i in range(300))
    path.write_bytes(data)
    for every in (50, 500, 5000):
        src = ranged.open_at(str(path))
        read = []
        monkeypatch.setattr(src, "pread", lambda n, at, f=src.pread: read.append(len(f(n, at))) or f(n, at))
        cuts = ranged.record_cuts(src, every)
        src.close()
        assert cuts[0] == 0 and cuts[-1] == len(data) and len(cuts) > 3
        assert all(data[c:c + 1] == b">" and data[c - 1:c] == b"\n" for c in cuts[1:-1])
        assert all(b - a >= every for a, b in zip(cuts[:-2], cuts[1:-1]))
        assert sum(read) <= (len(data) // every + 1) * (200 + 64)


@pytest.mark.parametrize("layout", ["strict", "wrapped", "mixed", "crlf"])
def test_fasta_parts_parsed_by_several_processes(tmp_path, monkeypatch, layout):
    """Plain FASTA read in parts by 3 processes each (parts of ~2 kB here): the same batches as one
    parsing process, whether the parts are strict 2-line FASTA, wrapped (the strict parser per part) or
    both."""
    monkeypatch.setattr(fastx_parts, "RANGE_BYTES", 2048)
    recs = [(f"r{i}", " x" if i % 7 == 0 else "", "ACGTNacgt"[i % 9] * (i % 120))
            for i in range(700)]
    wrap = {"strict": 0, "wrapped": 13, "mixed": 0, "crlf": 0}[layout]
    data = render(recs, False, wrap, layout == "crlf", True)
    if layout == "mixed":  # one record in the middle wrapped: its part goes to the strict parser, the others not
        data = data.replace(b">r350\n" + b"ACGTNacgt"[350 % 9:350 % 9 + 1] * 110, b">r350\n" + b"A" * 50
                            + b"\n" + b"A" * 60)
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_bytes(data)
    b.write_bytes(render(recs[::-1], False, 0, False, True))
    one = _batches(a, b, 1 << 40, bases=20_000, pairs=97)
    many = [(bt.q_names, bt.t_names, bt.q_quals, bt.seq.tobytes(), bt.q_len.tolist(), bt.t_len.tolist(),
             bt.index.tolist()) for bt in pair_reader.read_pairs(str(a), str(b), 20_000, 97, 0, workers=3)]
    assert many == one and sum(len(x[0]) for x in one) == len(recs)


def _fastq_text(rng, n: int, wrap: int) -> bytes:
    """n FASTQ records, their qualities drawn from every quality character with '@' and '+' often first on a
    line; wrap > 0: sequences and qualities over lines of `wrap` (a quality line starting '@' then looks like a
    header to a cut that counts four lines a record)."""
    out = []
    for i in range(n):
        seq = "".join(rng.choice("ACGTN") for _ in range(rng.randint(0, 90)))
        qual = "".join(rng.choice("@+I#~!" if j % max(wrap, 1) == 0 else "IJK@+!") for j in range(len(seq)))
        cut = range(0, len(seq), wrap) if wrap and seq else [0]
        out += [f"@r{i} d{i}", *(seq[j:j + (wrap or len(seq))] for j in cut), "+" if i % 3 else f"+r{i} d{i}",
                *(qual[j:j + (wrap or len(qual))] for j in cut)]
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("layout", ["4-line", "multi-line", "bgzip", "error"])
def test_fastq_parts_parsed_by_several_processes(tmp_path, monkeypatch, layout):
    """FASTQ read in parts by 2 processes (parts of ~600 bytes): the batches one stream gives, qualities too.
    Multi-line records after 4-line ones fool the cuts (a quality line starting '@' two lines before one starting
    '+'): the part that fails hands the rest of the file to one stream, and the records are still the file's. An
    error is the stream's, numbered in the whole file."""
    from gpualign.io import fastx_parts

    monkeypatch.setattr(fastx_parts, "RANGE_BYTES", 600)
    monkeypatch.setattr(fastx_parts, "HEAD_BYTES", 3000)
    rng = random.Random(11)
    data = _fastq_text(rng, 400, 0)
    if layout == "multi-line":  # (after a start of 4-line records: parts are taken)
        data = data[:data.index(b"@r100 ")] + _fastq_text(rng, 300, 7).replace(b"@r", b"@m").replace(b"+r", b"+m")
    if layout == "error":
        at = data.index(b"@r300 ")
        at = data.index(b"\n", data.index(b"\n+", at) + 1)  # (r300's quality one character short)
        data = data[:at - 1] + data[at:]
    a, b = tmp_path / "a.fq", tmp_path / "b.fa"
    a.write_bytes(data)
    b.write_bytes(render([(f"t{i}", "", "ACGT"[i % 4] * (i % 50)) for i in range(400)], False, 0, False, True))
    if layout == "bgzip":
        pysam.tabix_compress(str(a), str(a) + ".gz", force=True)
        a = tmp_path / "a.fq.gz"
    streams = []
    monkeypatch.setattr(fastx_parts, "encoded_chunks", lambda *x, **kw: streams.append(kw.get("start")) or
                        fastx.encoded_chunks(*x, **kw))

    def batches(min_bytes, workers):
        try:
            return [(bt.q_names, bt.q_quals, bt.seq.tobytes(), bt.q_len.tolist(), bt.index.tolist())
                    for bt in pair_reader.read_pairs(str(a), str(b), 3000, 23, min_bytes, workers=workers)]
        except fastx.InputError as e:
            return str(e)

    one = batches(1 << 40, 1)
    streams.clear()
    many = batches(0, 2)
    assert many == one
    if layout == "error":
        assert "record 301 (line " in one
    else:
        assert sum(len(x[0]) for x in one) == 400
        assert all(isinstance(x[1], Names) for x in many) == (layout != "multi-line")  # (parts give Names)
    assert (not streams) == (layout in ("4-line", "bgzip")), streams  # (the fallback: multi-line and error only)


@pytest.mark.parametrize("fq", [False, True])
@pytest.mark.parametrize("names", ["plain", "described", "utf-8", "empty", "not utf-8"])
def test_packed_names_and_qualities_are_the_lists(tmp_path, fq, names):
    """record_chunks(packed=True) (the pair reader's): names and FASTQ qualities as Names, the same str as the
    lists give; the same error where a name is empty or not UTF-8."""
    recs = [(f"r{i}", " d x" if names == "described" and i % 3 else "", "ACGTN"[i % 5] * (i % 40)) for i in range(300)]
    if names == "utf-8":
        recs[7] = ("é\u2003b", "", "ACGT")
    data = render(recs, fq, 0, False, True)
    marker = b"@" if fq else b">"
    if names == "empty":
        data = data.replace(marker + b"r200\n", marker + b"\n")
    if names == "not utf-8":
        data = data.replace(marker + b"r200\n", marker + b"r\xff200\n")
    path = tmp_path / ("a.fq" if fq else "a.fa")
    path.write_bytes(data)

    def read(packed):
        try:
            return [(list(n), s, list(q)) for n, s, q in fastx.record_chunks(str(path), chunk=64, packed=packed)]
        except fastx.InputError as e:
            return str(e)

    assert read(True) == read(False)
    if names in ("empty", "not utf-8"):
        assert "record 201" in read(True)
    else:
        assert isinstance(next(fastx.record_chunks(str(path), packed=True))[0], Names)


@pytest.mark.parametrize("layout", ["wrapped", "wrapped late", "one record"])
def test_fastq_not_in_four_lines_is_one_stream(tmp_path, monkeypatch, layout):
    """A FASTQ whose records span more lines than four gives no cuts (one part would be the whole file): it is read
    as one stream, by a child process, bounded, from the start (its first MiB not 4-line), or where a part's cut
    found no record start near its end; the same records either way."""
    from gpualign.io import fastx_parts

    monkeypatch.setattr(fastx_parts, "RANGE_BYTES", 2000)
    monkeypatch.setattr(fastx_parts, "HEAD_BYTES", 1500)
    monkeypatch.setattr(ranged, "CUT_SCAN", 300)
    monkeypatch.setattr(ranged, "CUT_READ_MOST", 64)
    rng = random.Random(5)

    def records(k, wrap, prefix):
        out = []
        for i in range(k):
            seq = "".join(rng.choice("ACGT") for _ in range(rng.randint(1, 120)))
            qual = "".join(rng.choice("IJK#5") for _ in seq)
            out += [f"@{prefix}{i}", *(seq[j:j + wrap] for j in range(0, len(seq), wrap)), "+",
                    *(qual[j:j + wrap] for j in range(0, len(qual), wrap))]
        return ("\n".join(out) + "\n").encode()

    data = {"wrapped": records(400, 40, "w"), "wrapped late": records(200, 1000, "r") + records(300, 40, "w"),
            "one record": b"@r\n" + b"A" * 30000 + b"\n+\n" + b"I" * 30000 + b"\n"}[layout]
    n = {"wrapped": 400, "wrapped late": 500, "one record": 1}[layout]
    a, b = tmp_path / "a.fq", tmp_path / "b.fa"
    a.write_bytes(data)
    b.write_bytes(b"".join(b">t%d\nAC\n" % i for i in range(n)))
    assert fastx_parts._parts(str(a)) is None
    one = [(bt.q_names, bt.q_quals, bt.seq.tobytes())
           for bt in pair_reader.read_pairs(str(a), str(b), 3000, 23, 1 << 40)]
    many = [(bt.q_names, bt.q_quals, bt.seq.tobytes()) for bt in pair_reader.read_pairs(str(a), str(b), 3000, 23, 0,
                                                                                         workers=2)]
    assert many == one and sum(len(x[0]) for x in one) == n


@pytest.mark.parametrize("fq", [False, True])
def test_read_on_from_a_record_of_a_bgzip_file(tmp_path, monkeypatch, fq):
    """record_chunks from a record's offset (the device reader's and the FASTQ parts' fallback): a bgzip file is
    inflated from the member holding the offset, not from its start; the same records as the plain file."""
    rng = random.Random(2)
    recs = [(f"r{i}", "", "".join(rng.choice("ACGT") for _ in range(rng.randint(0, 300)))) for i in range(6000)]
    text = render(recs, fq, 0, False, True)
    plain = tmp_path / "s.fx"
    plain.write_bytes(text)
    pysam.tabix_compress(str(plain), str(plain) + ".gz", force=True)
    marker = b"@" if fq else b">"
    starts = [i for i in range(len(text)) if text[i:i + 1] == marker and (i == 0 or text[i - 1] == 10)]
    skipped, real = [], fastx._skip
    monkeypatch.setattr(fastx, "_skip", lambda fh, n, p: skipped.append(n) or real(fh, n, p))
    for n in (1, 999, 3000, 5999):
        want = [x for ch in fastx.record_chunks(str(plain), start=(starts[n], n, (4 if fq else 2) * n + 1))
                for x in zip(*ch)]
        got = [x for ch in fastx.record_chunks(str(plain) + ".gz", start=(starts[n], n, (4 if fq else 2) * n + 1))
               for x in zip(*ch)]
        assert got == want and len(got) == len(recs) - n
        assert skipped[-1] < 65536 <= starts[n] or starts[n] < 65536  # (from the member that holds it)
    walks = []
    monkeypatch.setattr(fastx, "members", lambda p, f=fastx.members: walks.append(p) or f(p))
    assert [x for ch in fastx.record_chunks(str(plain) + ".gz", fast=False) for x in zip(*ch)][0][0] == "r0"
    assert not walks  # (from the start, as genome reads: no index walked)


def test_fasta_parts_errors_name_the_record_in_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(fastx_parts, "RANGE_BYTES", 1000)
    good = "".join(f">t{i}\nACGTACGT\n" for i in range(3000))
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_text(good.replace(">t2500\nACGTACGT", ">t2500\nACG TACGT"))
    b.write_text(good)
    with pytest.raises(fastx.InputError, match=r"a.fa: record 2501 \(line 5002\): invalid sequence character ' '"):
        list(pair_reader.read_pairs(str(a), str(b), 5000, 37, 0, workers=2))
    a.write_text(good.replace(">t2900\nACGTACGT", ">t2900\nACGT\nACGT"))  # wrapped: the strict parser reads that part
    b.write_text(good.replace(">t2000\nACGTACGT", ">t2000\nACGTACGT\n+\nIIII"))  # looks like FASTQ
    said = []
    for min_bytes, workers in ((1 << 40, 1), (0, 2)):
        with pytest.raises(fastx.InputError, match=r"b.fa: record 2001 \(line 4003\): ") as e:
            list(pair_reader.read_pairs(str(a), str(b), 5000, 37, min_bytes, workers=workers))
        said.append(str(e.value))
    assert said[0] == said[1]


def test_corrupted_gzip_is_an_input_error(tmp_path):
    """Bytes damaged in the middle of a gzip file (not just cut short): the fast reader gives up and
    the strict parser names the file and the record, with whichever inflater reads the gzip."""
    good = "".join(f">t{i}\nACGTACGTTTGACA\n" for i in range(50000)).encode()
    data = bytearray(gzip.compress(good))
    for i in range(len(data) // 2, len(data) // 2 + 40):
        data[i] ^= 0x5A
    path = tmp_path / "bad.fa.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(fastx.InputError, match=r"bad\.fa\.gz: record \d+"):
        for _ in fastx.record_chunks(str(path)):
            pass


def test_a_child_error_that_does_not_pickle_still_reaches_the_parent(tmp_path, monkeypatch):
    """ISA-L's IsalError does not pickle (its module, 'igzip_lib', cannot be imported by name): raised in the
    child reader, it reached the parent as 'reader process ended unexpectedly (exit code 0)'. Its words come
    through as an InputError naming the file."""
    from isal import igzip_lib

    path = tmp_path / "a.fa"
    path.write_text(">a\nACGT\n")

    def broken(*a, **k):
        raise igzip_lib.IsalError("Invalid deflate block found")
        yield

    monkeypatch.setattr(fastx_parts, "encoded_chunks", broken)
    with pytest.raises(fastx.InputError, match=r"a\.fa: cannot read \(IsalError: Invalid deflate block found\)"):
        list(fastx_parts.Chunks(str(path), 0, 1))


def test_damage_met_again_going_back_to_the_fast_paths_stop_names_the_record(tmp_path, monkeypatch):
    """Where the fast path stops at damaged gzip data, the strict parser inflates the file again up to there; ISA-L's
    threaded inflater, reading ahead, may meet the damage before it has handed over those bytes. That error (an
    IsalError, which also does not pickle from a child reader) is the record's InputError, as the strict parser
    words damage."""
    from isal import igzip_lib

    recs = [(f"r{i}", "", "ACGT" * 30) for i in range(2000)]
    path = tmp_path / "a.fa.gz"
    path.write_bytes(gzip.compress(render(recs, False, 0, False, True).replace(b">r1500\n", b">r1500\nAC\n")))

    def skip(fh, n, plain):
        raise igzip_lib.IsalError("Invalid deflate block found")

    monkeypatch.setattr(fastx, "_skip", skip)
    monkeypatch.setattr(fastx_fast, "_BLOCK", 4096)  # (the fast path stops at the block holding record 1501)
    with pytest.raises(fastx.RecordError, match=r"a\.fa\.gz: record \d+ \(line \d+\): corrupt or truncated input "
                                                r"in this record or a later one \(Invalid deflate block found\)") as e:
        list(fastx.record_chunks(str(path)))
    assert 1 < e.value.record <= 1501 and e.value.line == 2 * e.value.record - 1


def test_a_record_error_the_pipe_refuses_once_is_sent_again_whole():
    """A child reader's RecordError whose send fails is sent again made from its fields: the parent still gets the
    record and line (CI once saw such an error arrive as the reader's 'ended unexpectedly')."""
    import multiprocessing as mp

    from gpualign.errors import RecordError

    a, b = mp.Pipe(duplex=False)

    class Refuses:
        sent = 0

        def send(self, x):
            Refuses.sent += 1
            if Refuses.sent == 1:
                raise RuntimeError("the first send fails")
            b.send(x)

    fastx_parts._send_error(Refuses(), "/x/a.fa", RecordError("a.fa", 7, "corrupt", 13))
    got = a.recv()[1]
    assert isinstance(got, RecordError)
    assert (got.record, got.line, str(got)) == (7, 13, "a.fa: record 7 (line 13): corrupt")
