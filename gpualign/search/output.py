"""Search hits as TSV, SAM/BAM, PAF or BED6, formatted in bulk (text.py). Each record's hits come sorted
(start, end, pattern, strand); records in text order. SAM/BAM need every record in the header, so their
lines are spooled and written after it at close()."""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from .. import __version__, interrupt
from .. import cigar as C
from ..errors import WriteError
from ..output.sam import SamToBam
from ..output.sink import format_from_name
from ..text import Strings, join_lines
from . import alphabet as A

FORMATS = ("tsv", "sam", "bam", "paf", "bed")
BED_SCORE_MAX = 1000  # BED's score column holds 0-1000 (UCSC's rule; bedToBigBed refuses more): edits above it as 1000
_EXT = {".tsv": "tsv", ".txt": "tsv", ".sam": "sam", ".bam": "bam", ".paf": "paf", ".bed": "bed"}
TSV_HEADER = ("pattern\tstrand\trecord\tstart\tend\tedits\tcigar\tpattern_length\tmismatches\tinsertions\t"
              "deletions\tmatched\n")


def infer_format(fmt: str | None, out: str) -> str:
    """-f's format, else the output name's (stdout and devices: TSV)."""
    return format_from_name(fmt, out, FORMATS, _EXT, "tsv")


def _latin1(names: list) -> tuple:
    """Strings' (buffer, start, length) of names given as latin-1 text (one byte per character: the
    record names' own bytes)."""
    buf = np.frombuffer("".join(names).encode("latin-1"), np.uint8)
    length = np.array([len(x) for x in names], np.int64)
    start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    return buf, start, length


class HitWriter:
    """write() per batch of complete records, then close() (or abort())."""

    def __init__(self, fmt: str, target, pats, command_line: str):
        self.fmt, self.target, self.pats, self.cl = fmt, target, pats, command_line
        self.names = Strings.of(pats.names)
        seqs = [c.tobytes().translate(A.TO_LETTER).decode() for c in pats.codes]
        self.seq = Strings.of(seqs)
        # SAM's QUAL: FASTQ's qualities, as the pattern-strand's SEQ has them (reversed on '-'); '*' for FASTA
        self.qual = None if pats.quals is None else Strings.of([q or "*" for q in pats.quals])
        self.primary_done = np.zeros(len(pats.names), bool)
        self.records: list = []
        self.spool = None
        if fmt in ("sam", "bam"):
            where = None if not isinstance(target, str) or target == "-" else os.path.dirname(os.path.abspath(target))
            self.spool = tempfile.NamedTemporaryFile(prefix=".gpualign-", suffix=".sam", dir=where)
            interrupt.track(self.spool.name)  # (closing it removes it, and a signal's handler if it cannot)
            self.stream = self.spool
        else:
            self.stream = target
            if fmt == "tsv":
                self.stream.write(TSV_HEADER.encode())

    def write(self, done: tuple) -> None:
        """The hits of complete records: (their indices, names, lengths, their Hits), in text order."""
        recs, rec_names, rec_lengths, h = done
        if self.spool is not None:  # (SAM/BAM: every record in the header)
            self.records += zip(rec_names, rec_lengths)
        if not h.n:
            return
        n, pats = h.n, self.pats
        which = np.searchsorted(recs, h.record)  # (the hits' records among recs)
        used, at = np.unique(which, return_inverse=True)
        names = [rec_names[i].encode("utf-8").decode("latin-1") for i in used.tolist()]
        rname = Strings(*_latin1(names)).take(at.reshape(-1))
        rec_len = np.array(rec_lengths, np.int64)[which]
        pat = pats.pattern[h.ps]
        minus = pats.minus[h.ps]
        name = self.names.take(pat)
        strand = Strings.of(["+", "-"]).take(minus.astype(np.int64))
        buf, start, length = C.to_text_buffer(h.cigar, h.cig_off, h.cig_len)
        cig = Strings(buf, start, length)
        span = h.end - h.start
        if self.fmt == "tsv":
            matched = Strings(np.frombuffer(h.matched.tobytes().translate(A.TO_LETTER), np.uint8), h.mat_off, span)
            fields = [name, strand, rname, h.start, h.end, h.d, cig, pats.lengths[h.ps], h.mismatches, h.ins,
                      h.dels, matched]
        elif self.fmt == "bed":
            fields = [rname, h.start, h.end, name, np.minimum(h.d, BED_SCORE_MAX), strand]
        elif self.fmt == "paf":
            eq = span - h.mismatches - h.dels
            m = pats.lengths[h.ps]
            fields = [name, m, b"0", m, strand, rname, rec_len, h.start, h.end, eq, eq + h.mismatches
                      + h.ins + h.dels, b"255", (b"NM:i:", h.d), (b"AS:i:", -h.d), (b"cg:Z:", cig)]
        else:
            first = np.zeros(n, bool)  # the first hit of each pattern is its primary line, the rest secondary
            uniq, at = np.unique(pat, return_index=True)
            fresh = ~self.primary_done[uniq]
            first[at[fresh]] = True
            self.primary_done[uniq] = True
            flag = np.where(minus, 16, 0) + np.where(first, 0, 256)
            fields = [name, flag, rname, h.start + 1, b"255", cig, b"*", b"0", b"0", self.seq.take(h.ps),
                      b"*" if self.qual is None else self.qual.take(h.ps), (b"NM:i:", h.d), (b"AS:i:", -h.d)]
        try:
            self.stream.write(join_lines(fields, n))
        except OSError as e:  # (the spool's: the sinks raise WriteError themselves)
            if self.spool is None:
                raise
            raise self._spool_error(e) from None

    def _spool_error(self, err: OSError) -> WriteError:
        """SAM/BAM's records, kept in a temporary file until the @SQ lines are known, could not be written."""
        return WriteError(f"{os.path.dirname(self.spool.name)} (a temporary file of the SAM records)", err)

    def _header(self) -> bytes:
        names = [(nm.encode("utf-8").decode("latin-1"), ln) for nm, ln in self.records]
        lines = ["@HD\tVN:1.6\tSO:coordinate"]  # records in @SQ order, each by start
        lines += [f"@SQ\tSN:{nm}\tLN:{ln}" for nm, ln in names if ln > 0]
        cl = self.cl.replace("\t", " ").replace("\n", " ")
        lines.append(f"@PG\tID:gpualign\tPN:gpualign\tVN:{__version__}\tCL:{cl}")
        return ("\n".join(lines) + "\n").encode("latin-1", "replace")

    def close(self) -> None:
        if self.spool is None:
            return
        try:
            self.spool.flush()
        except OSError as e:
            raise self._spool_error(e) from None
        self.spool.seek(0)
        if self.fmt == "sam":
            self.target.write(self._header())
            shutil.copyfileobj(self.spool, self.target, 1 << 20)
            self.spool.close()
            return
        bam = SamToBam(self.target, self._header())  # htslib converts header + lines in one pass
        try:
            shutil.copyfileobj(self.spool, bam, 1 << 20)
        except BaseException:
            bam.abort()
            raise
        finally:
            self.spool.close()
        bam.close()

    def abort(self) -> None:
        if self.spool is not None:
            self.spool.close()
