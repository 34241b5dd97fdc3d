"""Random access to an indexed FASTA (the .fai is built when missing: build_fai, else pysam; beside
the file when its directory takes it, else in a temporary directory: index_paths).

Plain (uncompressed) FASTA is read through a memory map and its .fai: a slice is one copy of the
lines it spans, without their line ends. This is much faster than `pysam.FastaFile.fetch` per
candidate. That call releases the interpreter lock, so each fetch waits to take it back from the
aligner and writer threads. bgzip-compressed FASTA goes through pysam.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import mmap
import os
import re
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import interrupt
from ..errors import InputError
from ..records import segment_index
from ..text import read_ints
from .fastx import display_name, gzipped, record_chunks, shown_as

BULK_CHECK = 1000  # records new to rows() from which their line ends are checked at once (_checked_in_bulk)
CHECK_BYTES = 1 << 24  # bytes of a record checked at once for its CRs (IndexedFasta._check_line_ends)
SCAN_CHUNK = 1 << 24  # bytes per thread task when looking for line ends (build_fai)
MAX_LINES = 1 << 24  # files with more lines are left to htslib (build_fai keeps ~32 bytes per line)
_SCRATCH: dict = {}  # this run's scratch directory (scratch_dir) and the count of names given in it
_MADE: dict = {}  # what scratch_dir() holds: (real path, size, mtime) -> (fai, gzi) of an input indexed there, ...


class Unindexable(InputError):
    """htslib's indexer refused a file (lines of varying width, blank lines, multi-line FASTQ: layouts the
    reader accepts; random_access then reads it into a copy)."""


def plain_gzip(path: str) -> bool:
    """Whether path is gzip but not BGZF (whose first block carries the extra field BC)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(14)
    except OSError:
        return False
    return head[:2] == b"\x1f\x8b" and not (len(head) == 14 and head[3] & 4 and head[12:14] == b"BC")


class IndexedFasta:
    """Names, lengths and slices (bytes, as stored) of an indexed FASTA, or of a FASTQ (and its
    qualities) when plain."""

    def __init__(self, path: str):
        import pysam

        if plain_gzip(path):  # said here: htslib would print `[E::fai_build_core] ...` lines first
            raise InputError(f"{display_name(path)}: cannot index for random access (compressed with gzip, "
                             "not bgzip)")
        bgzf = gzipped(path)
        # an index this run did not build (samtools', an old one; not a scratch copy's, nor one built in scratch)
        found = not bgzf and _fresh(path, path + ".fai") and scratch_get(identity(path)) is None
        fai, gzi = index_paths(path, bgzf)
        self.path, self._fai, self._gzi = path, fai, gzi if bgzf else None
        self._index = self._map = self._fa = None
        self._broken = None  # why the index cannot be taken (_mapped), said again at every fetch
        self._laid_out: set = set()  # records whose line ends were checked against the index
        self._no_cr = None  # whether the mapped file holds no CR (_without_cr)
        table = None if bgzf else fai_table(fai)
        index = None if table is None or not table[1][:, 0].any() else FaiRows(*table)
        if index is not None and len(index) == len(table[0]):  # a plain file's index as build_fai writes it, no
            # name twice: read here in bulk (htslib's open of a million reads' index, and a dict made of its rows,
            # took seconds)
            names, c = table
            self.lengths = dict(zip(names, c[:, 0].tolist()))
            self._plain = False
            self._index = index
            with open(path, "rb") as fh:
                self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            if found and fai == path + ".fai":
                self._listed(names, c)
            return
        try:
            self._fa = pysam.FastaFile(path, filepath_index=fai, filepath_index_compressed=gzi if bgzf else None)
        except (OSError, ValueError) as e:
            raise Unindexable(f"{display_name(path)}: cannot index for random access ({str(e).strip()})") from None
        self.lengths = dict(zip(self._fa.references, self._fa.lengths))
        # plain and not empty: mapped, at the first fetch (a process that only checks names and lengths does
        # not read the .fai into a dict)
        self._plain = not bgzf and any(self.lengths.values())

    def _listed(self, names: list, c: np.ndarray) -> None:
        """An InputError (the map closed) where the file has a line its index's rows (names, c: as fai_table's)
        leave out (unlisted_line): a record whose name came before, which htslib's index leaves out (a slice by that
        name would be the other record), or rows of another file or layout; the record before that line is checked
        first, for the error its fetch would give (line ends mixing CRLF and LF, as htslib's index misplaces). Else
        where a row's bases follow no header naming it (misnamed_row: records reordered or renamed since)."""
        at = unlisted_line(self._map, c)
        if at is None:
            k = misnamed_row(self._map, names, c)
            if k is None:
                return
            self._map.close()
            self._map = None
            raise self._mismatch(f"record {names[k]!r}")
        try:
            before = np.flatnonzero((c[:, 1] <= at) & (c[:, 0] > 0))
            if len(before):
                k = int(before[np.argmax(c[before, 1])])
                self._check_line_ends(names[k], *(int(x) for x in c[k, 1:4]), int(c[k, 0]))
            raise self._mismatch(f"its line at byte {at}")
        finally:
            self._map.close()
            self._map = None

    def _mismatch(self, what: str) -> InputError:
        """The error of a file whose .fai rows put bases where it has none (what: the place that says so)."""
        return InputError(f"{display_name(self.path)}: {what} does not match its .fai index "
                          f"({display_name(self._fai)}: made for another file or another layout of it, or listing "
                          "once a name given twice, as samtools does): remove the index (it is then rebuilt, and a "
                          "name twice refused) or rebuild it (samtools faidx)")

    def _mapped(self) -> bool:
        """Whether slices come from the memory map (opened now if not yet); an InputError, at every call, where the
        index cannot be taken."""
        if self._broken is not None:
            raise InputError(self._broken)
        if self._plain:
            self._plain = False
            self._index = _read_fai(self._fai)
            odd = next((n for n in self._index or () if "\0" in n), None)
            lost = None if self._index is None else next((n for n in self.lengths if n not in self._index), None)
            if odd is not None:  # (htslib cuts the name there: it and the .fai's rows disagree)
                self._broken = f"{display_name(self.path)}: record {odd!r}: a NUL byte in its name"
            elif lost is not None:  # (a .fai name with white space at its end, which htslib cut)
                self._broken = (f"{display_name(self.path)}: record {lost!r} is not named so in its .fai index "
                                f"({display_name(self._fai)}): rebuild the index (samtools faidx)")
            if self._broken is not None:
                self._index = None
                raise InputError(self._broken)
            if self._index is not None:
                with open(self.path, "rb") as fh:
                    self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        return self._map is not None

    def load(self) -> bool:
        """The index read and the file mapped now (a plain file), by a process about to fork workers that read
        through this object: they share them (forked() in each). False where the index cannot be taken (a name
        htslib cuts): that error comes with every fetch, as it would have."""
        try:
            self._mapped()
        except InputError:
            return False
        return True

    def forked(self) -> None:
        """In a process forked from the one that opened this: htslib's handle, whose file offset the processes
        would share, is let go (closed by its owner) and opened again here if a slice needs it (bgzip)."""
        self._fa = None

    def _htslib(self):
        if self._fa is None:
            import pysam

            self._fa = pysam.FastaFile(self.path, filepath_index=self._fai, filepath_index_compressed=self._gzi)
        return self._fa

    def __contains__(self, name: str) -> bool:
        return name in self.lengths

    def fetch(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        """Bases [start, end) of record name (end None: to the record's end), clamped to the record."""
        ln = self.lengths[name]
        end = ln if end is None else min(end, ln)
        start = max(0, min(start, end))
        if self._map is None and not self._mapped():
            return self._htslib().fetch(name, start, end).encode("ascii")
        offset, per_line, width, _ = self._index[name]
        if name not in self._laid_out:
            self._check_line_ends(name, offset, per_line, width, ln)
        return self._slice(name, offset, per_line, width, start, end)

    def rows(self, names: list) -> np.ndarray | None:
        """Each of names' .fai row (offset, bases a line, bytes a line), an int64 array n x 3, for a reader of the
        raw bytes (raw_bounds places their bases, as _raw_bounds does a fetch's); each record's line ends
        checked as fetch checks them (an InputError); None where slices do not come from the memory map (bgzip)."""
        if self._map is None and not self._mapped():
            return None
        index = self._index
        new = list(set(names).difference(self._laid_out))
        if len(new) >= BULK_CHECK and self._without_cr():
            new = self._checked_in_bulk(new)
        for name in new:
            offset, per_line, width, _ = index[name]
            self._check_line_ends(name, offset, per_line, width, self.lengths[name])
        return index.rows(names)

    def slices(self, rows: np.ndarray, start: np.ndarray, end: np.ndarray) -> list | None:
        """fetch's bytes (not case-folded) of many slices of records whose rows() came back: rows, and [start, end)
        inside each record; a few operations a slice. None where one does not match the index as _slice checks
        it (fetch then says which)."""
        a, b = raw_bounds(rows, start, end)
        n = end - start
        crosses = ((rows[:, 2] > rows[:, 1]) & (b - a > n)).tolist()
        crlf = (rows[:, 2] - rows[:, 1] == 2).tolist()
        mm, out = self._map, []
        for ai, bi, cross, cr, ni in zip(a.tolist(), b.tolist(), crosses, crlf, n.tolist()):
            raw = mm[ai:bi]
            if cross:  # (as _slice)
                raw = raw.replace(b"\n", b"")
                if cr:
                    raw = raw.replace(b"\r", b"")
                if len(raw) != ni:
                    return None
            out.append(raw)
        return out

    def _without_cr(self) -> bool:
        """Whether the mapped file holds no CR at all (looked for once: memchr over the map)."""
        if self._no_cr is None:
            self._no_cr = self._map.find(b"\r") < 0
        return self._no_cr

    def _checked_in_bulk(self, names: list) -> list:
        """_check_line_ends of many records of a file without a CR at once: an LF row's lines must end inside the
        file, with line ends where the row puts its header's, its first line's and one after its last base. The
        names left for _check_line_ends (CRLF rows and any wider line end, empty records, rows past the file's
        end, rows whose line ends are not where the file has them: it says which)."""
        offset, per_line, width = self._index.rows(names).T
        ln = np.fromiter(map(self.lengths.__getitem__, names), np.int64, len(names))
        lines = -(-ln // per_line)
        stop = offset + (lines - 1) * width + ln - (lines - 1) * per_line
        size = len(self._map)
        ok = (ln > 0) & (width - per_line <= 1) & (stop <= size)  # (LF rows; no wrap-around)
        # line ends where the rows put them (rows that have them): the header's before the first base, the first
        # line's, and one after the last base (or the file's end); a .fai made before the file was wrapped again
        # fails here
        ends = width > per_line
        at = np.stack([offset - 1, np.where(lines > 1, offset + per_line, offset - 1), stop])
        at[:, ~(ok & ends & (offset >= 1))] = 0
        at[2, stop >= size] = 0
        lf = np.frombuffer(self._map, np.uint8)[at.ravel()].reshape(at.shape) == 10  # (a copy: no view kept)
        laid = (offset >= 1) & lf[0] & lf[1] & (lf[2] | (stop >= size))
        ok = (ok & (laid | ~ends)).tolist()
        self._laid_out.update(itertools.compress(names, ok))
        return [name for name, k in zip(names, ok) if not k]

    def quality(self, name: str) -> str | None:
        """Record name's whole quality string: None for FASTA (or bgzip FASTQ, which htslib does not give)."""
        if self._map is None and not self._mapped():
            return None
        offset, per_line, width, qual = self._index[name]
        if qual < 0:
            return None
        return self._slice(name, qual, per_line, width, 0, self.lengths[name]).decode("latin-1")

    def _check_line_ends(self, name: str, offset: int, per_line: int, width: int, length: int) -> None:
        """Record name's CRs where its .fai row says (before each line end of a CRLF record, none in an LF one),
        checked once, at its first fetch: htslib's indexer (or samtools', whose .fai may be there already)
        compares line lengths in bytes alone, so a record mixing CRLF lines of n bases and LF lines of n + 1
        passes, and its bases come back shifted. An InputError if not (read in pieces: no copy of the record); also
        where the record's line ends are not where its row puts them (_rows_line_ends: an index of another layout)."""
        if length == 0:
            return
        lines = -(-length // per_line)
        stop = offset + (lines - 1) * width + length - (lines - 1) * per_line  # after its last base
        crlf = width - per_line == 2
        mixed = InputError(f"{display_name(self.path)}: record {name!r}: its line ends mix CRLF and LF (or a CR "
                           "stands inside a line), which its .fai index cannot place: convert them (dos2unix)")
        if stop > len(self._map):  # (the row's lines past the file's end: not this file's layout)
            raise mixed if self._map.find(b"\r", offset) >= 0 else self._mismatch(f"record {name!r}")
        if not crlf:  # an LF row: no CR at all (memchr over the mapped record, no copy)
            ok = self._map.find(b"\r", offset, stop) < 0
        else:  # a CRLF row: as many CRs as line ends (counted in pieces)
            crs = sum(int(np.count_nonzero(np.frombuffer(self._map, np.uint8, min(CHECK_BYTES, stop - a), a) == 13))
                      for a in range(offset, stop, CHECK_BYTES))
            ok = crs == lines - 1
        if ok and crlf and lines > 1:  # (as many CRs as line ends: each must stand just before one; no view of
            # the map kept past the line, which would hold it open: close() refuses a map with views)
            ok = bool((np.frombuffer(self._map, np.uint8, stop - offset, offset)[width - 2::width][:lines - 1]
                       == 13).all())
        if not ok:
            raise mixed
        if not self._rows_line_ends(offset, per_line, width, lines, stop, crlf):
            raise self._mismatch(f"record {name!r}")
        self._laid_out.add(name)

    def _rows_line_ends(self, offset: int, per_line: int, width: int, lines: int, stop: int, crlf: bool) -> bool:
        """Whether the file has line ends where a record's .fai row puts them: the header's just before its first
        base, the ends of its first line and of the line before its last (CRLF rows: _check_line_ends places their
        CRs), and one just after its last base (CR or LF: the last line of a CRLF record may end in LF alone)
        unless the file ends there. A row without line ends (bytes a line = bases a line) places none:
        nothing to check."""
        m = self._map
        if width == per_line:  # a row without line ends (random_access's copies: records back to back)
            return True
        if offset < 1 or stop > len(m) or m[offset - 1] != 10 or width - per_line not in (1, 2):
            return False
        if stop < len(m) and m[stop] not in (10, 13):
            return False
        return crlf or lines < 2 or m[offset + per_line] == 10 and m[offset + (lines - 1) * width - 1] == 10

    def _slice(self, name: str, offset: int, per_line: int, width: int, start: int, end: int) -> bytes:
        """Bytes [start, end) of the lines from offset (per_line bytes each, width with the line end)."""
        if start == end:
            return b""
        a, b = _raw_bounds(offset, per_line, width, start, end)
        raw = self._map[a:b]
        if width > per_line and b - a > end - start:  # the span crosses line ends ("\n" or "\r\n")
            raw = raw.replace(b"\n", b"")
            if width - per_line == 2:
                raw = raw.replace(b"\r", b"")
            if len(raw) != end - start:
                raise InputError(f"{display_name(self.path)}: record {name!r} does not match its .fai index "
                                 "(rebuild it)")
        return raw

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
        if self._fa is not None:
            self._fa.close()


def _raw_bounds(offset: int, per_line: int, width: int, start: int, end: int) -> tuple[int, int]:
    """The file bytes [a, b) from base start to the end of base end - 1 of a record laid out from offset in
    lines of per_line bases (width bytes with the line end); (offset, offset) when start == end."""
    if end <= start:
        return offset, offset
    a = offset + (start // per_line) * width + start % per_line
    return a, offset + ((end - 1) // per_line) * width + (end - 1) % per_line + 1


def raw_bounds(rows: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """_raw_bounds of many records' bases at once: rows as IndexedFasta.rows gives them, start and end int64
    arrays."""
    offset, per_line, width = rows.T
    lines = np.maximum(per_line, 1)
    last = end - 1
    empty = end <= start
    a = np.where(empty, offset, offset + (start // lines) * width + start % lines)
    return a, np.where(empty, offset, offset + (last // lines) * width + last % lines + 1)


def _fresh(path: str, index: str) -> bool:
    """Whether index (a .fai or .gzi) exists and is not older than path."""
    try:
        return os.path.getmtime(index) >= os.path.getmtime(path)
    except OSError:
        return False


HEADER_MAX = 1 << 16  # bytes of a header line listed_names reads at most


def listed_names(path: str) -> list[str] | None:
    """The names in the .fai beside a plain FASTA file when it lists every record of the file, else None. It
    is checked against the file, one read per record: each row's sequence starts right after one header line
    naming it, which starts where the row before's last sequence line ends (the file's start for the first),
    and the last one ends the file. htslib's .fai leaves out a record without bases and a repeated name, and
    one left from another file lists that file's: their rows fail this check."""
    fai = path + ".fai"
    try:
        if gzipped(path) or not _fresh(path, fai):
            return None
        size = os.path.getsize(path)
        with open(fai, "rb") as fh:
            rows = [line.rstrip(b"\n").split(b"\t") for line in fh]
        if not rows:
            return None
        names = []
        with open(path, "rb") as fh:
            at = 0  # where the next header line must start
            for row in rows:
                if len(row) != 5:  # (FASTQ's .fai has 6 columns; a damaged one: the first pass)
                    return None
                length, offset, bases, width = (int(x) for x in row[1:])
                head = os.pread(fh.fileno(), offset - at, at) if 0 < offset - at <= HEADER_MAX else b""
                words = head[1:].split(None, 1)
                if head[:1] != b">" or head.find(b"\n") != len(head) - 1 or b"\r" in head[:-2] or not words \
                        or words[0] != row[0] or bases <= 0 or width < bases:  # (a CR inside: the reader's error)
                    return None
                names.append(row[0].decode("utf-8"))
                full, part = divmod(length, bases)
                at = offset + full * width + (part + width - bases if part else 0)
        if at != size and not at - size == width - bases > 0:  # (the last line's end may be missing)
            return None  # (more after the last record: a record the .fai leaves out)
        return names
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def identity(path: str) -> tuple:
    """What tells a file apart from another or from itself rewritten: (real path, size, mtime)."""
    st = os.stat(path)
    return os.path.realpath(path), st.st_size, st.st_mtime_ns


def scratch_dir() -> str:
    """This run's temporary directory (under TMPDIR) for indexes and copies that cannot go beside
    their input; made at the first call, removed by drop_scratch() (or by the interrupt handler, or at
    the exit of the process that made it)."""
    if _SCRATCH.get("dir") is None:
        made = tempfile.mkdtemp(prefix="gpualign-idx-")
        _SCRATCH["dir"] = made
        interrupt.track(made)
        pid = os.getpid()
        atexit.register(lambda: os.getpid() == pid and shutil.rmtree(made, ignore_errors=True))
    return _SCRATCH["dir"]


def scratch_path(path: str, suffix: str) -> str:
    """A new name in scratch_dir() for something made from path."""
    _SCRATCH["n"] = _SCRATCH.get("n", 0) + 1
    return os.path.join(scratch_dir(), f"{_SCRATCH['n']}-{os.path.basename(path) or 'stdin'}{suffix}")


def scratch_get(key):
    """What scratch_put recorded under key in this run (processes forked later see it too), or None."""
    return _MADE.get(key)


def scratch_put(key, value) -> None:
    _MADE[key] = value


def spool(path: str) -> str:
    """A file in scratch_dir() holding the bytes of a streamed() path, as they come (to be read again)."""
    out = scratch_path(path, ".spool")
    try:
        with (open(path, "rb") if path != "-" else contextlib.nullcontext(sys.stdin.buffer)) as src, \
                open(out, "wb") as fh:
            while True:
                piece = src.read(1 << 20)
                if not piece:
                    break
                try:
                    fh.write(piece)
                except OSError as e:
                    raise scratch_error(path, e) from None
    except OSError as e:
        raise InputError(f"{display_name(path)}: cannot read ({e.strerror})") from None
    shown_as(out, display_name(path))
    return out


def scratch_error(path: str, err: OSError) -> InputError:
    """The error of a copy of path (or an index of it) that the scratch directory could not take."""
    return InputError(f"{display_name(path)}: cannot keep a copy of it in {os.path.dirname(scratch_dir())} "
                      f"({err.strerror or err}; set TMPDIR to another directory)")


def drop_scratch() -> None:
    """Remove scratch_dir() and forget what was made there (the end of a run)."""
    made = _SCRATCH.pop("dir", None)
    _MADE.clear()
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        interrupt.untrack(made)


def index_paths(path: str, bgzf: bool) -> tuple[str, str | None]:
    """The .fai (and .gzi, for bgzip) to open path with: beside it when there and not older than it;
    else built beside it when its directory takes files; else built in scratch_dir() (an input on a
    read-only directory is never refused for want of an index, and never written beside)."""
    beside = path + ".fai", path + ".gzi"
    if _fresh(path, beside[0]) and (not bgzf or _fresh(path, beside[1])):
        return beside
    try:
        known = scratch_get(identity(path))
    except OSError as e:
        raise InputError(f"{display_name(path)}: cannot read ({e.strerror})") from None
    if known is not None:
        return known
    if _takes_files(os.path.dirname(os.path.abspath(path))):
        err = _build(path, bgzf, *beside)
    else:
        elsewhere = scratch_path(path, ".fai"), scratch_path(path, ".gzi")
        err = _build(path, bgzf, *elsewhere)
        if err is None:
            scratch_put(identity(path), elsewhere)
            return elsewhere
    if err is not None:
        raise Unindexable(f"{display_name(path)}: cannot index for random access ({err})")
    return beside


def _takes_files(directory: str) -> bool:
    """Whether a file can be made in directory (tried: a root process passes os.access on a read-only
    mode, not on a read-only mount)."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".gpualign-probe-"):
            return True
    except OSError:
        return False


def _build(path: str, bgzf: bool, fai: str, gzi: str) -> str | None:
    """Write path's index at fai (and gzi, for bgzip): by build_fai for a plain FASTA of regular lines,
    else by htslib. Returns None, or htslib's message when it could not."""
    import pysam

    if not bgzf and build_fai(path, fai):
        return None
    empty = _empty_records(path)  # (htslib's indexer is lax: FASTQ '+' lines, mixed records; the reader's rules first)
    # htslib's own messages (the line it stopped at) end up in the error, not on stderr before it
    with tempfile.TemporaryFile() as said:
        saved = os.dup(2)
        os.dup2(said.fileno(), 2)
        failed = None
        try:
            pysam.faidx(path, "--fai-idx", fai, "--gzi-idx", gzi)
        except pysam.SamtoolsError as e:
            failed = str(e)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        said.seek(0)
        lines = [x.strip() for x in said.read().decode(errors="replace").splitlines()]
    # a name twice: htslib keeps the first record and says so; a slice by name would be the wrong one
    dup = [x.split("] ", 1)[-1] for x in lines if "duplicate sequence" in x]
    if failed is None and not dup:
        wrong = _add_empty_rows(fai, empty) if empty else None
        if wrong is None:
            return None
    if failed is None:
        for made in (fai, gzi):
            if os.path.exists(made):
                os.unlink(made)
        if not dup:
            return wrong
        m = re.search(r'sequence "(.*)" at byte offset (\d+)', dup[0])
        where = f"name {m.group(1)!r} again at byte {m.group(2)}" if m else dup[0]
        return f"{where}: a name must tell its record apart"
    lines = [x.split("] ", 1)[-1] for x in lines if x.startswith("[E::")] or [failed.split("stderr=")[-1].strip()]
    return "; ".join(dict.fromkeys(lines))


def _empty_records(path: str) -> list:
    """Every record of path read by the record reader (its rules and messages, before htslib's indexer):
    (record number from 0, name) of each record without bases."""
    out, done = [], 0
    for names, seqs, _ in record_chunks(path):
        if not all(seqs):
            out += [(done + i, n) for i, (n, s) in enumerate(zip(names, seqs)) if not s]
        done += len(names)
    return out


def _add_empty_rows(fai: str, empty: list) -> str | None:
    """The records without bases (_empty_records) put in htslib's .fai, which leaves them out (a name
    looked up would not be there, and a name given to an empty record and to another would pass): a row of
    length 0 each, in file order. None, or what is wrong: a name one of them shares with another record, or
    the .fai not written."""
    with open(fai) as fh:
        rows = fh.read().splitlines()
    named = {r.split("\t", 1)[0] for r in rows}
    cols = rows[0].count("\t") + 1 if rows else 5  # (six for FASTQ)
    merged, held = [], iter(rows)
    for k, name in empty:  # (k ascending: htslib's rows up to record k, then its row)
        if name in named:
            return f"name {name!r} again (record {k + 1}, which has no bases): a name must tell its record apart"
        named.add(name)
        merged.extend(itertools.islice(held, k - len(merged)))
        merged.append("\t".join([name] + ["0"] * (cols - 1)))
    merged.extend(held)
    return None if write_fai([r.split("\t") for r in merged], fai) else f"cannot write {fai}"


GAP_BULK = 4096  # gaps between a .fai's records up to this many bytes checked at once (unlisted_line), longer alone


def _regions(c: np.ndarray):
    """The rows of a .fai's columns c (as fai_table's) that hold bases, in file order: their indices into c, first
    bases' offsets, qualities' offsets (-1: FASTA), and where each row's last region (its qualities, else its
    bases) ends in the file. A row without bases has no region (htslib's index leaves such records out, ours
    holds zeros)."""
    keep = np.flatnonzero(c[:, 0] > 0)
    keep = keep[np.argsort(c[keep, 1], kind="stable")]
    ln, off, per, wid, qual = (c[keep, k] for k in range(5))
    per, wid = np.maximum(per, 1), np.maximum(wid, 1)
    full = np.maximum(-(-ln // per) - 1, 0)  # lines before the last
    return keep, off, qual, np.where(qual >= 0, qual, off) + full * wid + ln - full * per


def unlisted_line(buf, c: np.ndarray) -> int | None:
    """Where the file in buf (bytes-like: a memory map) has a line that no row of its .fai (c: n x 5, length,
    offset, bases a line, bytes a line, quality's offset or -1) accounts for: a line with content outside every
    row's bases (and qualities) that is not a header ('>', or '@' and '+' beside a FASTQ index's rows). htslib's
    index leaves out a record whose name came before (keeping the first: a slice by that name would be the other
    record) and one without bases (a header alone: allowed); an index of another file or layout leaves out more.
    Returns that line's byte offset, else None. Reads the bytes between the rows only (header lines, mostly)."""
    size = len(buf)
    keep, off, qual, stop = _regions(c)  # (a record without bases: its header stands in a gap, allowed)
    if len(keep) == 0:
        return 0 if size else None
    heads = (b">+@" if (qual >= 0).any() else b">")
    a = np.concatenate([[0], stop])  # each gap: from the last region's end to the next row's first base
    b = np.concatenate([off, [size]])
    if (b < a).any() or (stop > size).any():
        bad = int(np.flatnonzero(b < a)[0]) if (b < a).any() else len(a) - 1
        return int(min(a[bad], size))
    n = b - a
    small = n <= GAP_BULK
    ok = np.zeros(256, bool)  # a line may start with these
    ok[np.frombuffer(heads + b"\r\n", np.uint8)] = True
    for part in np.array_split(np.flatnonzero(small), max(1, int(n[small].sum()) >> 22)):  # (~4M bytes a part)
        k = n[part]
        first = np.concatenate([[0], np.cumsum(k)[:-1]])  # each gap's first byte among the part's
        kind = np.int32 if size < 1 << 31 else np.int64
        at = np.repeat((a[part] - first).astype(kind), k) + np.arange(int(k.sum()), dtype=kind)
        view = np.frombuffer(buf, np.uint8)
        byte = view[at]
        del view  # (no view of the map kept: a map with views cannot be closed)
        starts = np.empty(len(byte), bool)  # a line's first byte: after a line end in the gap, or the file's first
        starts[1:] = byte[:-1] == 10
        first = first[k > 0]
        starts[first] = a[part][k > 0] == 0  # (a gap starts inside the line of the bases before it)
        wrong = np.flatnonzero(starts & ~ok[byte])
        if len(wrong):
            return int(at[wrong[0]])
    pattern = re.compile(rb"\n[^" + re.escape(heads) + rb"\r\n]")
    for x, y in zip(a[~small].tolist(), b[~small].tolist()):  # (few: a long header, or a record left out)
        m = pattern.search(b"\n" + buf[0:y] if x == 0 else buf[x - 1:y])
        if m:
            return x + m.start()
    return None


def misnamed_row(buf, names: list, c: np.ndarray) -> int | None:
    """The first row (an index into names and c, as fai_table's) whose bases do not follow a header line naming
    it ('>' or '@', the name, then white space or the line's end): a .fai newer than its file after records were
    renamed or reordered (lengths alike); None if every row's does. Reads each header's first bytes only: where
    the record before ends (its row's last line), else (blank lines, a record without bases between) the line
    that ends just before the row's first base."""
    keep, off, qual, stop = _regions(c)
    if len(keep) == 0:
        return None
    size = len(buf)
    a = np.concatenate([[0], stop[:-1]])  # where each row's header starts if it follows the record before
    every = np.frombuffer(("\n".join(names) + "\n").encode(), np.uint8)  # (each name's bytes, one encode)
    name_end = np.flatnonzero(every == 10)
    name_at = np.concatenate([[0], name_end[:-1] + 1])
    wl = (name_end - name_at)[keep]
    starts = np.concatenate([[0], np.cumsum(wl)[:-1]])
    name_bytes = every[np.repeat(name_at[keep] - starts, wl) + np.arange(int(wl.sum()))]
    marker = np.where(qual >= 0, ord("@"), ord(">"))
    view = np.frombuffer(buf, np.uint8)
    head = np.where(a == 0, 0, a + 1 + (view[np.minimum(a, size - 1)] == 13))  # (past its line end: CR LF or LF)
    ok = (head + 1 + wl < off) & (view[np.minimum(head, size - 1)] == marker)
    ok &= np.isin(view[np.minimum(head + 1 + wl, size - 1)], np.frombuffer(b" \t\r\n", np.uint8))
    pos = np.repeat(head + 1 - starts, wl) + np.arange(int(wl.sum()))
    same = view[np.minimum(pos, size - 1)] == name_bytes
    del view  # (no view of the map kept: a map with views cannot be closed)
    named = wl > 0  # (an empty name, as htslib indexes a bare '>': no bytes to compare, and no segment for reduceat)
    if named.any():
        ok[named] &= np.logical_and.reduceat(same, starts[named])
    for i in np.flatnonzero(~ok).tolist():  # (the header elsewhere, or none: the line before the bases, by bytes)
        y = int(off[i]) - 1
        h = buf.rfind(b"\n", 0, max(y, 0)) + 1
        line = buf[h:y]
        word = names[int(keep[i])].encode()
        if not (line[:1] == bytes([int(marker[i])]) and line[1:].split(None, 1)[:1] == [word]):
            return int(keep[i])
    return None


class FaiRows:
    """A .fai's rows by name: index[name] is (byte offset, bases per line, bytes per line, quality's byte offset or
    -1), per line and bytes at least 1; rows(names) gives the first three of many at once. Iterates its names.
    (Columns, not a tuple a record: a million reads' index is made in a fraction of a second.)"""

    def __init__(self, names: list, c: np.ndarray):
        self._at = dict(zip(names, range(len(names))))  # (a name twice: its last row, as a dict of rows kept it)
        self._c = np.stack([c[:, 1], np.maximum(c[:, 2], 1), np.maximum(c[:, 3], 1), c[:, 4]], axis=1)
        self._cols = [col.tolist() for col in self._c.T]

    def __getitem__(self, name: str) -> tuple:
        i = self._at[name]
        off, per_line, width, qual = self._cols
        return off[i], per_line[i], width[i], qual[i]

    def __iter__(self):
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def rows(self, names: list) -> np.ndarray:
        return self._c[np.fromiter(map(self._at.__getitem__, names), np.int64, len(names)), :3]


def _read_fai(path: str) -> FaiRows | None:
    """path's rows (a FASTA .fai: five columns; a FASTQ one: six); None when it is neither or cannot be read."""
    table = fai_table(path)
    if table is not None:
        return FaiRows(*table)
    names, rows = [], []
    try:
        with open(path) as fh:
            for line in fh:
                f = line.rstrip("\n").split("\t")
                if len(f) not in (5, 6):
                    return None
                ln, offset, per_line, width = (int(v) for v in f[1:5])
                if ln and (per_line <= 0 or width < per_line):
                    return None
                names.append(f[0])
                rows.append((ln, offset, per_line, width, int(f[5]) if len(f) == 6 else -1))
    except (OSError, ValueError):
        return None
    try:
        return FaiRows(names, np.array(rows, dtype=np.int64).reshape(-1, 5))
    except OverflowError:  # (a number past int64: no layout a file has)
        return None


def fai_table(path: str) -> tuple[list, np.ndarray] | None:
    """A .fai's names and columns (int64, n x 5: length, byte offset, bases per line, bytes per line, quality's
    byte offset or -1) read in bulk, where every row is as samtools and build_fai write them: five or six
    columns of digits, line ends of one or two bytes, UTF-8 names without a NUL or white space. Else None:
    htslib and the row-by-row reader judge the file, as they always did."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if not data or b"\r" in data or b"\0" in data:
        return None
    if not data.endswith(b"\n"):
        data += b"\n"
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    starts = np.concatenate([[0], ends[:-1] + 1])
    tabs = np.flatnonzero(buf == 9)
    lo, hi = np.searchsorted(tabs, starts), np.searchsorted(tabs, ends)
    cols = int(hi[0] - lo[0]) + 1
    if cols not in (5, 6) or (hi - lo != cols - 1).any():
        return None
    at = tabs[lo[:, None] + np.arange(cols - 1)]
    a, b = at + 1, np.concatenate([at[:, 1:], ends[:, None]], axis=1)
    n = b - a
    if not ((n >= 1) & (n <= 18)).all():
        return None
    c = np.full((len(ends), 5), -1, dtype=np.int64)
    for k in range(cols - 1):
        v = read_ints(buf, a[:, k], n[:, k])
        if v is None:
            return None
        c[:, k] = v
    ln, per_line, width = c[:, 0], c[:, 2], c[:, 3]
    if ((ln > 0) & ((per_line <= 0) | (width < per_line) | (width - per_line > 2))).any():
        return None  # (a line end of more than CR LF: htslib refuses the row)
    named = buf[segment_index(starts, at[:, 0] - starts + 1)].copy()  # each name and the tab after it
    if np.isin(named, (32, 11, 12)).any():  # (htslib cuts a name at white space)
        return None
    named[named == 9] = 10
    try:
        names = named.tobytes().decode("utf-8").split("\n")[:-1]
    except UnicodeDecodeError:
        return None
    return names, c


def build_fai(path: str, fai: str | None = None) -> bool:
    """Write path's .fai (samtools' five columns; at fai if given) for a plain FASTA whose records all have
    consistent line lengths (_regular_rows). Returns False, writing nothing, for anything else or an
    unwritable place: htslib then decides, with its own messages."""
    rows = _regular_rows(path)
    return rows is not None and write_fai(rows, fai or path + ".fai")


def write_fai(rows, fai: str) -> bool:
    """Write .fai rows (five or six columns each) to fai, whole or not at all; False when it cannot."""
    tmp = f"{fai}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as out:
            out.writelines("\t".join(map(str, row)) + "\n" for row in rows)
        os.replace(tmp, fai)
    except OSError:
        if os.path.exists(tmp):
            os.unlink(tmp)
        return False
    return True


def _regular_rows(path: str) -> list | None:
    """.fai rows of a plain FASTA whose records all have consistent line lengths, from a memory map: line
    ends found by threads over the bytes, then every record's layout checked against them at once. None
    for anything else (gzip, FASTQ, empty records, empty or duplicate names, a short line before the last,
    CRLF, a CR in a header line, over MAX_LINES lines)."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0 or fh.read(1) != b">":
                return None
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        return _fai_rows(mm)
    finally:
        try:
            mm.close()
        except BufferError:  # an error above still holds a view of the map: left to the collector
            pass


def _fai_rows(mm: mmap.mmap) -> list | None:
    """(name, length, offset, bases per line, bytes per line) per record of the FASTA in mm, or None when
    a record is not regular or the file has too many lines for this (build_fai). Vectorised over records:
    the line ends and headers are found by threads, then each record's layout is checked at once."""
    data = np.frombuffer(mm, dtype=np.uint8)
    size = len(data)

    def line_ends(a: int) -> np.ndarray:  # in [a, a + SCAN_CHUNK)
        return np.flatnonzero(data[a:a + SCAN_CHUNK] == ord("\n")) + a

    with ThreadPoolExecutor(min(16, os.cpu_count() or 1)) as pool:
        nl = np.concatenate(list(pool.map(line_ends, range(0, size, SCAN_CHUNK))))
    after = nl[nl + 1 < size] + 1
    hd = np.concatenate([[0], after[data[after] == ord(">")]])  # headers: '>' starting a line (the file's first)
    if len(nl) > MAX_LINES or len(hd) == 0 or hd[0] != 0:
        return None
    k = np.searchsorted(nl, hd)  # each header's line end
    if k[-1] >= len(nl):
        return None  # the last header ends the file
    a = nl[k] + 1  # first sequence byte
    end = np.append(hd[1:], size)
    if (a >= end).any():
        return None  # a record without sequence
    cnt = np.searchsorted(nl, end) - k - 1  # line ends in the sequence
    width = np.where(cnt > 0, nl[np.minimum(k + 1, len(nl) - 1)] + 1, end + 1) - a  # first line, with its end
    if (width < 2).any() or (data[a + width - 2] == 13).any():
        return None  # an empty first line, or CRLF
    span = end - a
    full, rest = np.divmod(span, width)
    if (cnt != full + ((rest > 0) & (data[end - 1] == ord("\n")))).any():
        return None
    # regular: the line ends are those of the full lines (and maybe one closing the last line), and as many
    seq_nl = np.delete(nl, k)
    rec = np.repeat(np.arange(len(hd)), cnt)
    j = seq_nl - a[rec] + 1
    if not ((j % width[rec] == 0) & (j // width[rec] <= full[rec]) | (seq_nl == end[rec] - 1)).all():
        return None
    rows, seen = [], set()
    for h, s0, ln, w in zip(hd.tolist(), a.tolist(), (span - cnt).tolist(), width.tolist()):
        header = mm[h + 1:s0 - 1]
        if b"\r" in header:
            return None  # (the readers' rules refuse a CR there: _empty_records' pass names it)
        try:
            name = (header.split(None, 1) or [b""])[0].decode("ascii")
        except UnicodeDecodeError:
            return None
        if not name or name in seen:
            return None
        seen.add(name)
        rows.append((name, ln, s0, w - 1, w))
    return rows
