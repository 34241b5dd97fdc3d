"""The general path of the FASTA/FASTQ reader: any layout the fast path (fastx_fast.py) does not take
(sequences over several lines, CRLF line ends, blank lines, stdin, damaged input), parsed strictly.

Rules: a file is FASTA or FASTQ, decided by its first record; records of the other kind are an error.
A record's name is its header's first word (after '>' or '@'). FASTA sequence lines hold letters (and
the `symbols` the caller allows); blank lines are skipped. A FASTQ record is '@name', sequence lines,
a '+' line (anything after '+' but trailing white space must be the record's name or its whole header),
then quality lines ('!'..'~') holding exactly as many characters as the sequence. A CR is allowed only before a line's
'\\n'. Errors name the file, the record and the line.

Sequence lines are checked and joined a whole block at a time (bytes.translate, find, count), so a
multi-megabase record costs a few passes over its bytes; the Python work is per record, not per line
(but per quality line of a FASTQ record whose quality spans several).
"""

from __future__ import annotations

import gzip
import io
from typing import Iterator

import numpy as np

from .. import pack
from ..errors import InputError, RecordError
from . import fasta_block, fastx_fast
from .bgzf import EOF_MEMBER, HEAD
from .bgzf import member as bgzf_member
from .fastx_fast import READ_ERRORS, open_gz

BLOCK = 1 << 23  # bytes read at a time
# a file of CR-only line ends read as one header line holding every record: its first record, empty
CR_IN_HEADER = "a carriage return (CR) inside the header line (line ends of CR alone, as classic Mac OS wrote them, are not read: convert them to LF)"
COUNT_BY_NUMPY = 1 << 16  # line ends of a piece this long or longer counted by numpy (twice bytes.count's pace)
MANY = 64  # FASTA records buffered from which they are parsed at once (fasta_many), not one at a time
_CRLF = b"\r\n"

COMPRESSIONS = ((b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"))


def unsupported_compression(head: bytes) -> str | None:
    """The name of the compression head starts with, when gpualign cannot read it (gzip/bgzip it can)."""
    for magic, kind in COMPRESSIONS:
        if head.startswith(magic):
            return kind
    return None


def compression_error(name: str, kind: str) -> InputError:
    return InputError(f"{name}: {kind}-compressed input is not supported (decompress it, or recompress with bgzip)")


BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark, which some Windows editors put first


def not_fastx(name: str, head: bytes) -> InputError:
    """The error for input whose first non-blank bytes (head) start no FASTA/FASTQ record."""
    if head.startswith(BOM):
        return InputError(f"{name}: not FASTA or FASTQ: the file starts with a UTF-8 byte-order mark (BOM; remove "
                          "it, e.g. sed '1s/^\\xEF\\xBB\\xBF//')")
    return InputError(f"{name}: not FASTA or FASTQ (first character {head[:1].decode('latin-1')!r}, expected '>' "
                      "or '@')")


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were read already (stdin or a pipe, sniffed for gzip; a file the device
    reader read part of); owns: fh closed with it. bgzf_end: the stream is bgzip, and its end is an EOFError
    (one of READ_ERRORS) unless its last bytes are bgzip's end member (bgzf.cut_short's check, for a stream)."""

    def __init__(self, head, fh, owns: bool = False, bgzf_end: bool = False):
        self.head, self.fh, self.owns = memoryview(head).cast("B"), fh, owns
        self.tail = b"" if bgzf_end else None  # the last bytes read, to check at the end

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if len(self.head):
            n = min(len(b), len(self.head))
            b[:n], self.head = self.head[:n], self.head[n:]
            data = b[:n]
        else:
            data = self.fh.read(len(b))
            b[:len(data)] = data
        if self.tail is not None:
            if not len(data) and self.tail != EOF_MEMBER:
                raise EOFError("a bgzip stream without its end-of-file block: cut short?")
            self.tail = (self.tail + bytes(data[-len(EOF_MEMBER):]))[-len(EOF_MEMBER):]
        return len(data)

    def close(self) -> None:
        if self.owns and not self.closed:
            self.fh.close()
        super().close()


def open_stream(raw, name: str):
    """A stream read once (stdin, a pipe) as a binary stream, inflated when it is gzip: raw, a binary
    file object, with its first bytes looked at and given back."""
    head = b""
    while len(head) < HEAD:  # (enough to tell bgzip: its first member's header)
        more = raw.read(HEAD - len(head))
        if not more:
            break
        head += more
    kind = unsupported_compression(head)
    if kind:
        raise compression_error(name, kind)
    fh = prefixed(head, raw, bgzf_end=bgzf_member(head) > 0)
    return gzip.GzipFile(fileobj=fh, mode="rb") if head[:2] == b"\x1f\x8b" else fh


def prefixed(head, fh, owns: bool = False, bgzf_end: bool = False):
    """A binary stream of head (bytes-like), then the rest of fh (a stream read once, whose first bytes were
    taken); owns: closing it closes fh; bgzf_end: a bgzip stream, checked to end with bgzip's end member."""
    return io.BufferedReader(_Prefixed(head, fh, owns, bgzf_end), BLOCK)


def open_path(path: str):
    """A file as a binary stream, inflated when it is gzip or bgzip."""
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    return open_gz(path) if gz else open(path, "rb")


class _Input:
    """The input as whole lines: buf[pos:] holds what is not taken yet, `line` is the number of the line
    starting at pos. Offsets passed in and out are relative to pos."""

    def __init__(self, fh, name: str, record: list):
        self.fh, self.name, self.record = fh, name, record  # record[0]: the record being read (errors)
        self.buf, self.pos, self.line, self.eof = b"", 0, 1, False

    def fill(self) -> bool:
        """Read one more block; False at the end of the input."""
        if self.eof:
            return False
        try:
            block = self.fh.read(BLOCK)
        except READ_ERRORS as e:
            raise RecordError(self.name, self.record[0], f"corrupt or truncated input in this record or a later one "
                              f"({e})", self.line) from None
        if not block:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + block
        self.pos = 0
        return True

    def find(self, what: bytes, start: int = 0) -> int:
        """Offset of what from start (reading on as needed), or -1 at the end of the input."""
        while True:
            i = self.buf.find(what, self.pos + start)
            if i >= 0:
                return i - self.pos
            start = max(start, len(self.buf) - self.pos - len(what) + 1)
            if not self.fill():
                return -1

    def peek(self) -> bytes:
        """The next byte (b"" at the end of the input)."""
        if self.pos >= len(self.buf) and not self.fill():
            return b""
        return self.buf[self.pos:self.pos + 1]

    def take_line(self) -> bytes:
        """The next line without its line end (CR LF or LF)."""
        end = self.find(b"\n")
        if end < 0:
            end = len(self.buf) - self.pos
        line = self.buf[self.pos:self.pos + end]
        self.pos += end + 1
        self.line += 1
        return line[:-1] if line.endswith(b"\r") else line

    def take(self, n: int) -> bytes:
        """The next n bytes, counting their lines."""
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        big = n >= COUNT_BY_NUMPY
        self.line += int(np.count_nonzero(np.frombuffer(data, np.uint8) == 10)) if big else data.count(b"\n")
        return data

    def header_buffered(self) -> int:
        """Offset of the first line end followed by '>' in the bytes buffered (reading nothing), or -1. Found
        by its '>' (a one-byte search: memchr, some 15x the two-byte search on sequence lines)."""
        buf, i = self.buf, self.pos
        while (i := buf.find(b">", i + 1)) >= 0:
            if buf[i - 1] == 10:
                return i - 1 - self.pos
        return -1

    def lines_buffered(self) -> int:
        """Bytes buffered up to and including the last line end (0 if none)."""
        i = self.buf.rfind(b"\n", self.pos)
        return i + 1 - self.pos if i >= 0 else 0

    def skip_blank(self) -> None:
        """Skip empty lines (a lone CR too)."""
        while True:
            c = self.peek()
            if c == b"\n" or (c == b"\r" and self.find(b"\n") == 1):
                self.take_line()
            elif c == b"\r" and self.find(b"\n") < 0 and len(self.buf) - self.pos == 1:  # (a lone CR, the end)
                self.take_line()
            else:
                return


def _bad_at(data: bytes, allowed: np.ndarray) -> int:
    """Index of data's first byte not allowed (bool[256]), or -1."""
    bad = ~allowed[np.frombuffer(data, np.uint8)]
    return int(np.argmax(bad)) if bad.any() else -1


def _table(chars: bytes) -> np.ndarray:
    t = np.zeros(256, bool)
    t[list(chars)] = True
    return t


class _Parser:
    """Records of one input, from its current position (after `records` records)."""

    def __init__(self, inp: _Input, symbols: bytes, records: int):
        self.inp, self.name = inp, inp.name
        self.n = records  # records read
        self.ok_table = _table(pack.LETTERS + symbols + _CRLF)  # the bytes of sequence lines
        self.keep = bytes(c if self.ok_table[c] else 0 for c in range(256))
        self.scan_table = fasta_block.table(bytes(c if self.ok_table[c] else fasta_block.BAD for c in range(256)))
        self.symbols = symbols
        self.header_line = 0
        self.one_by_one = 0  # records to read one at a time before fasta_many tries again (it failed on them)

    def error(self, detail: str, line: int) -> RecordError:
        """The error of the record being read."""
        return RecordError(self.name, self.n + 1, detail, line)

    def _name(self, header: bytes, line: int) -> str:
        if b"\r" in header:  # (its line end's CR is gone)
            raise self.error(CR_IN_HEADER, line)
        words = header[1:].split(None, 1)
        if not words:  # (a record no output could name: SAM's QNAME and @SQ, PAF's columns 1 and 6)
            raise self.error(f"empty record name (a name must follow {header[:1].decode('latin-1')!r})", line)
        try:
            return words[0].decode("utf-8")
        except UnicodeDecodeError:
            raise self.error("the record's name is not UTF-8 text", line) from None

    def _sequence(self, data: bytes, line: int, fastq: bool, within: bool = False, lone_cr: list | None = None):
        """data: whole sequence lines starting at `line`, or a part of them (within: data starts inside a line,
        the rest of whose first part was read before), checked; their letters (a byte not allowed made 0,
        line ends dropped). A byte not allowed is refused before a lone CR; lone_cr (a list):
        a lone CR's refusal is put there (_refuse's arguments, the first only), not raised, so that a byte
        not allowed in the rest of the lines is refused first, as in whole lines."""
        out = data.translate(self.keep)  # (then the line ends dropped: a translate that deletes runs ~25% slower)
        if b"\n" in out:
            out = out.replace(b"\n", b"")
        if b"\r" in out:
            out = out.replace(b"\r", b"")
        if out.find(0) >= 0:
            at = _bad_at(data, self.ok_table)
            self._refuse(data, at, line + data.count(b"\n", 0, at), fastq, within)
        if b"\r" in data and data.count(b"\r") != data.count(_CRLF):
            at = next(i for i in range(len(data)) if data[i] == 13 and data[i + 1:i + 2] != b"\n")
            refusal = (data, at, line + data.count(b"\n", 0, at), fastq, within)
            if lone_cr is None:
                self._refuse(*refusal)
            if not lone_cr:
                lone_cr.append(refusal)
        return out

    def _refuse(self, data: bytes, at: int, line: int, fastq: bool, within: bool = False):
        ch = data[at]
        first = (at == 0 and not within) or (at > 0 and data[at - 1] == 10)
        if first and ch in b"@>" and fastq:
            raise self.error(f"no '+' line after the sequence (line {line} starts another record: a truncated "
                             "FASTQ record, or FASTA and FASTQ records mixed)", self.header_line)
        if first and ch in b"@+" and not fastq:
            raise self.error(f"a line starts with {chr(ch)!r} inside a FASTA record (FASTA and FASTQ records "
                             "mixed?)", line)
        shown = repr(chr(ch)) if 32 <= ch < 127 else f"byte 0x{ch:02x}"
        allowed = "letters" + "".join(f", {chr(c)!r}" for c in self.symbols)
        raise self.error(f"invalid sequence character {shown} (code {ch}); sequences hold {allowed} only", line)

    def fasta(self) -> tuple[str, bytes]:
        inp = self.inp
        name = self._name(inp.take_line(), inp.line - 1)
        pieces, lone_cr = [], []
        mid_line = False  # the last piece ended inside a line (a '>' next is in that line, not a header)
        # the whole lines buffered up to the next header are checked at once; a line longer than the bytes
        # buffered (unwrapped FASTA), in parts: the part buffered, less a CR that may start its line end
        while (c := inp.peek()) != b"" and (mid_line or c != b">"):
            end = inp.header_buffered()
            n = end + 1 if end >= 0 else inp.lines_buffered()
            within = mid_line
            if n == 0:
                n = len(inp.buf) - inp.pos
                if inp.buf.endswith(b"\r") and not inp.eof:
                    if n == 1:
                        inp.fill()
                        continue
                    n -= 1
            at = inp.line
            piece = inp.take(n)
            mid_line = not piece.endswith(b"\n")
            pieces.append(self._sequence(piece, at, False, within, lone_cr if mid_line or lone_cr else None))
            if lone_cr and not mid_line:  # (a lone CR in a line read in parts: refused once the line has ended)
                self._refuse(*lone_cr[0])
        if lone_cr:
            self._refuse(*lone_cr[0])
        return name, pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def fasta_many(self) -> tuple[list, list] | None:
        """The whole FASTA records buffered from pos (not the last one, which may go on in the next block,
        unless the input has ended), parsed at once with array operations; None when there are fewer than
        MANY, or anything to look at closer (then they are read one at a time, which finds
        the error and its line)."""
        if self.one_by_one > 0:  # (trying again at every record of a block that failed: quadratic)
            self.one_by_one -= 1
            return None
        inp = self.inp
        buf, pos = inp.buf, inp.pos
        end = len(buf) if inp.eof else buf.rfind(b"\n>", pos) + 1  # (the last header buffered)
        if end <= pos or buf.count(b"\n>", pos, end) < MANY:
            return None
        self.one_by_one = buf.count(b"\n>", pos, end)  # (until the block passes the checks below)
        data = buf[pos:end]
        if b"\r" in data:  # CRLF line ends read as LF (a lone CR: looked at closer)
            if data.count(b"\r") != data.count(_CRLF):
                return None
            data = data.replace(_CRLF, b"\n")
        if not data.endswith(b"\n"):
            data += b"\n"
        block = fasta_block.scan(data, 0, self.scan_table)
        if block is None:
            return None
        try:
            names = fastx_fast.names_of([data[a:b] for a, b in zip(block.starts.tolist(), block.ends.tolist())])
        except (IndexError, UnicodeDecodeError):
            return None
        self.one_by_one = 0
        seq = block.codes.tobytes()
        at = np.concatenate([[0], np.cumsum(block.counts)]).tolist()
        seqs = [seq[a:b] for a, b in zip(at[:-1], at[1:])]
        inp.pos = end
        inp.line += data.count(b"\n")
        return names, seqs

    def fastq(self) -> tuple[str, bytes, str]:
        inp = self.inp
        line = self.header_line = inp.line  # record-level errors name the header's line
        header = inp.take_line()
        name = self._name(header, line)
        if inp.peek() == b"+":
            seq = b""
        else:
            end = inp.find(b"\n+")
            at = inp.line
            if end < 0:  # no '+' line: the rest is checked (a header in it is the better error)
                self._sequence(inp.buf[inp.pos:], at, True)
                raise self.error("no '+' line after the sequence (the input ends: a truncated FASTQ record?)",
                                 line)
            seq = self._sequence(inp.take(end + 1), at, True)
        if inp.peek() != b"+":  # (the input ends)
            raise self.error("no '+' line after the sequence (the input ends: a truncated FASTQ record?)", line)
        at = inp.line
        plus = inp.take_line()[1:].rstrip()  # (white space after the name, or alone: as htslib and Biopython)
        if plus and plus != header[1:].rstrip() and plus != name.encode("utf-8"):
            raise self.error(f"the '+' line names {plus.decode('utf-8', 'replace')!r}, not this record "
                             f"({name!r})", at)
        want, parts, got = len(seq), [], 0
        while got < want:
            if inp.peek() == b"":
                raise self.error(f"quality length {got} != sequence length {want} (the input ends before the quality "
                                 "is complete)", line)
            at, q = inp.line, inp.take_line()
            if parts and got + len(q) > want:  # (a short quality runs into the next record)
                raise self.error(f"quality length {got} != sequence length {want}", line)
            if q.translate(None, pack.QUALITY):
                raise self.error("invalid quality character (quality characters are '!' to '~')", at)
            parts.append(q)
            got += len(q)
        if got != want:
            raise self.error(f"quality length {got} != sequence length {want}", line)
        return name, seq, b"".join(parts).decode("ascii")

    def records(self, chunk: int) -> Iterator[tuple[list, list, list]]:
        inp = self.inp
        inp.skip_blank()
        first = inp.peek()
        if first == b"":
            return
        if first not in (b">", b"@"):
            raise not_fastx(self.name, first + (inp.buf[inp.pos + 1:inp.pos + 3] if first == b"\xef" else b""))
        fastq = first == b"@"
        names, seqs, quals = [], [], []
        empty_before = False  # (the record before had no sequence: its sequence line missing, most likely)
        while True:
            self.inp.record[0] = self.n + 1
            c = inp.peek()
            if c == b"":
                break
            if fastq:
                if c != b"@":
                    if c == b">":
                        raise self.error("a FASTA record in a FASTQ file", inp.line)
                    why = (f"record {self.n} read with an empty sequence: its sequence line missing? or a quality "
                           "longer than its sequence?") if empty_before else "a quality longer than its sequence?"
                    raise self.error(f"expected an '@' header line ({why})", inp.line)
                name, seq, qual = self.fastq()
                empty_before = not seq
                inp.skip_blank()
            else:
                if c != b">":  # (only at the start of a part: sequence lines run up to the next '>')
                    raise self.error("expected a '>' header line", inp.line)
                many = self.fasta_many()
                if many is not None:
                    names += many[0]
                    seqs += many[1]
                    quals += [None] * len(many[0])
                    self.n += len(many[0])
                    while len(names) >= chunk:
                        yield names[:chunk], seqs[:chunk], quals[:chunk]
                        names, seqs, quals = names[chunk:], seqs[chunk:], quals[chunk:]
                    continue
                name, seq = self.fasta()
                qual = None
            names.append(name)
            seqs.append(seq)
            quals.append(qual)
            self.n += 1
            if len(names) >= chunk:
                yield names, seqs, quals
                names, seqs, quals = [], [], []
        if names:
            yield names, seqs, quals


def strict_chunks(fh, chunk: int, name: str, symbols: bytes = b"", records: int = 0,
                  line: int = 1) -> Iterator[tuple[list, list, list]]:
    """(names, sequences (bytes, as written), qualities (str) or None) lists of up to chunk records from
    the binary stream fh, which starts at a record (or blank lines before one) after `records` records
    and `line` - 1 lines; name: the input named in errors."""
    inp = _Input(fh, name, [records + 1])
    inp.line = line
    parser = _Parser(inp, symbols, records)
    yield from parser.records(chunk)
    if parser.n == 0:
        raise InputError(f"{name}: no FASTA/FASTQ records (empty input)")
