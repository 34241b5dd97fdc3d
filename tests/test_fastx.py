"""The reader's fast path (strict 2-line FASTA / 4-line FASTQ) against htslib on random layouts,
including block boundaries and a layout change in mid-file (htslib takes over from that record)."""

import gzip

import pysam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpualign.io import fastx

rec = st.tuples(st.from_regex(r"[A-Za-z0-9_.|]{1,12}", fullmatch=True),
                st.one_of(st.just(""), st.from_regex(r"[ \t][a-z =]{0,10}", fullmatch=True)),
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
    with pysam.FastxFile(path) as fh:
        return [(r.name, r.sequence or "", r.quality or None) for r in fh]


def via_ours(path):
    out = []
    for names, seqs, quals in fastx.record_chunks(path, chunk=7):
        # an empty FASTQ quality is '' here and None in htslib: both are written as '*'
        out += [(n, s.decode() if isinstance(s, bytes) else s, q or None) for n, s, q in zip(names, seqs, quals)]
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rec, min_size=1, max_size=40), st.booleans(), st.sampled_from([0, 0, 7, 60]), st.booleans(),
       st.booleans(), st.booleans(), st.sampled_from([16, 64, 1 << 23]))
def test_same_records_as_htslib(tmp_path, monkeypatch, recs, fq, wrap, crlf, final_newline, gz, block):
    monkeypatch.setattr(fastx, "_BLOCK", block)
    data = render(recs, fq, wrap, crlf, final_newline)
    path = tmp_path / ("r.fq" if fq else "r.fa")
    if gz:
        path = path.with_suffix(path.suffix + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    try:
        want = via_htslib(str(path))
    except (ValueError, OSError):  # htslib rejects it (e.g. an empty last FASTQ quality without newline)
        with pytest.raises(fastx.InputError):
            via_ours(str(path))
        return
    assert via_ours(str(path)) == want


def test_layout_change_mid_file(tmp_path, monkeypatch):
    monkeypatch.setattr(fastx, "_BLOCK", 256)
    recs = [(f"r{i}", "", "ACGT" * (i % 9 + 1)) for i in range(200)]
    data = render(recs[:120], False, 0, False, True) + render(recs[120:], False, 5, False, True)
    path = tmp_path / "mixed.fa"
    path.write_bytes(data)
    got = via_ours(str(path))
    assert got == via_htslib(str(path)) and len(got) == 200


def test_bad_quality_found_by_either_path(tmp_path, monkeypatch):
    monkeypatch.setattr(fastx, "_BLOCK", 64)
    body = "".join(f"@r{i}\nACGT\n+\nIIII\n" for i in range(30)) + "@bad\nACGT\n+\nIII\n"
    path = tmp_path / "q.fq"
    path.write_text(body)
    with pytest.raises(fastx.InputError, match="record 31: quality length"):
        via_ours(str(path))
