"""SAM (text, built in bulk) and BAM (the same text converted by htslib)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import weakref

import numpy as np

from .. import __version__, interrupt, trace
from ..errors import GpualignError
from ..io.fastx import display_name
from ..io.targets import TargetLengths
from ..records import (OK, RNAME_RULE, SAM_RNAME_NOT_FIRST, AlignBatch, Names, PairBatch, concatenated,
                       odd_character, rname_odd, rname_odd_bytes, rname_reason, unprintable_bytes)
from ..text import Strings, join_lines
from .common import aligned_ranges, cigar_stats, cigar_text, empty_alignment

# SAM SEQ allows [A-Za-z=.]; any other sequence character is written as N
_SEQ_OK = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=.")
SEQ_TABLE = bytes(c if c in _SEQ_OK else ord("N") for c in range(256))
_FLAG = Strings.of(["0", "4"])  # mapped, unmapped


@trace.traced("sam header")
def header_text(targets, command_line: str, grouped: bool = True) -> bytes:
    """@HD, an @SQ line per target of length > 0 (targets: a {name: length} dict, io.targets.TargetLengths,
    or their @SQ lines made already by sq_lines: bytes, or a uint8 array of them), @PG. grouped: each query's
    records come together (GO:query); else @HD says no grouping (GO absent: none)."""
    cl = command_line.replace("\t", " ").replace("\n", " ")
    made = isinstance(targets, (bytes, np.ndarray))
    sq = memoryview(targets) if made else sq_lines(TargetLengths.of(targets))
    return (b"@HD\tVN:1.6\tSO:unsorted" + b"\tGO:query" * grouped + b"\n" + sq
            + f"@PG\tID:gpualign\tPN:gpualign\tVN:{__version__}\tCL:{cl}\n".encode())


def sq_lines(targets: TargetLengths, source: str = "") -> bytes:
    """An @SQ line per target of length > 0 (SAM allows no empty reference); source: the target file, for
    errors. (pipeline.py: made by the child process that scans the target file.)"""
    check_rnames(targets.names, source)
    keep = targets.lengths > 0
    n = int(keep.sum())
    if n == 0:
        return b""
    names = Strings(targets.names.buf, targets.names.start[keep], targets.names.length[keep])
    return join_lines([b"@SQ", (b"SN:", names), (b"LN:", targets.lengths[keep])], n)


def clean_reason(reason: str) -> str:
    return "".join(ch if ch.isprintable() and ch != "\t" else "_" for ch in reason) or "failed"


def unmapped_tags(res: AlignBatch, rows: np.ndarray, empty: np.ndarray | None = None) -> Strings:
    """zr:Z:reason of each unmapped row: empty_alignment (general scoring's empty local alignment, where
    empty[i]), empty_target (aligned but not placeable), else the engine's reason."""
    return Strings.of(["zr:Z:" + ("empty_alignment" if empty is not None and empty[i] else "empty_target"
                                  if res.status[i] == OK else clean_reason(res.reason.get(i, "failed")))
                       for i in rows.tolist()])


def _clipped(cigar: Strings, left: np.ndarray, right: np.ndarray, n: int) -> Strings:
    """CIGARs with soft clips: {left}S before, {right}S after (none where 0)."""
    def clip(v):
        return Strings.lines(join_lines([v, b"S"], n, sep=b"")).where(v == 0, b"")
    return Strings.lines(join_lines([clip(left), cigar, clip(right)], n, sep=b""))


def render(batch: PairBatch, res: AlignBatch, metric: str, scored: bool = False, residues: bool = False) -> bytes:
    """One SAM line per pair, in order, built in bulk (text.py): aligned pairs with their target as RNAME
    at POS 1, the rest unmapped (FLAG 4) with the reason in zr:Z (a pair with an empty target cannot be
    placed: empty_target). Without CIGARs every record is unmapped, an aligned pair placed on its target
    with its score in AS:i (and NM:i). scored (general scoring): POS is the aligned target start + 1, the
    CIGAR soft-clips the unaligned query ends, AS:i is the score itself, and an empty alignment (local,
    score 0) is unmapped with zr:Z:empty_alignment. residues (protein): SEQ holds the query exactly as read
    ('*' included); else a character SAM's SEQ does not allow is written as N."""
    n = batch.n
    if n == 0:
        return b""
    empty = empty_alignment(batch, res) if scored else np.zeros(n, dtype=bool)
    unmapped = (res.status != OK) | (batch.t_len == 0) | empty
    raw = batch.seq
    if not residues and len(raw) and not (raw.min() >= ord("A") and raw.max() <= ord("Z")):  # (letters pass)
        raw = np.frombuffer(raw.tobytes().translate(SEQ_TABLE), dtype=np.uint8)
    seq = Strings(raw, batch.q_off, batch.q_len).where(batch.q_len == 0, b"*")
    quals = batch.q_quals
    if isinstance(quals, Names):  # (io/fastx_device.py's: the bytes and their places)
        qual = Strings.of(quals).where(quals.length == 0, b"*") if quals.length.any() else b"*"
    else:
        qual = Strings.of([q or "*" for q in quals]) if quals and any(quals) else b"*"
    score = res.score.astype(np.int64)
    pos = np.ones(n, np.int64)
    if scored:
        qs, qe, ts, _ = aligned_ranges(batch, res)
        pos = np.maximum(ts, 0) + 1
    if res.has_cigar:
        tot = cigar_stats(res)
        cigar = Strings(*cigar_text(res))
        if scored:
            cigar = _clipped(cigar, np.maximum(qs, 0), batch.q_len - qe, n)
        cigar = cigar.where(unmapped, b"*")
        tags = [(b"NM:i:", tot["mismatches"] + tot["ins"] + tot["dels"]), (b"AS:i:", score if scored else -score)]
    elif scored:
        cigar = b"*"
        tags = [(b"AS:i:", score)]
    else:
        cigar = b"*"
        tags = [(b"NM:i:", score), (b"AS:i:", -score)] if metric == "edit" else [(b"AS:i:", -score)]
    tag_col = Strings.lines(join_lines(tags, n))
    rows = np.flatnonzero(unmapped)
    if len(rows):
        tag_col = tag_col.put(rows, unmapped_tags(res, rows, empty))
    # without a CIGAR (--distance-only) a record cannot be mapped (htslib: "mapped query must have a
    # CIGAR"): every one is unmapped (FLAG 4, MAPQ 0), an aligned pair placed on its target (RNAME, POS)
    flags = unmapped if res.has_cigar else np.ones(n, bool)
    fields = [Strings.of(batch.q_names), _FLAG.take(flags.astype(np.int64)),
              Strings.of(batch.t_names).where(unmapped, b"*"), np.where(unmapped, 0, pos),
              np.where(flags, 0, 255), cigar, b"*", b"0", b"0", seq, qual, tag_col]
    return join_lines(fields, n)


QNAME_MAX = 254  # SAM's longest QNAME (htslib refuses a longer one)


def check_rnames(names: Names, source: str = "", instead: str = "PAF or TSV") -> None:
    """The GpualignError of the first target whose name SAM's reference names cannot be: one that starts with
    '*' (RNAME '*' is no reference: htslib reads the target's records as unmapped) or '=' (SAM's rule), or one
    that holds a character SAM 1.6's RNAME rule refuses (records.rname_odd); source: the file named first in the
    message, if given; instead: the formats the command could write."""
    if len(names) == 0:
        return
    some = names.length > 0
    first = np.zeros(len(names), np.uint8)
    first[some] = names.buf[names.start[some]]
    bad = np.isin(first, np.frombuffer(SAM_RNAME_NOT_FIRST.encode(), np.uint8))
    odd = _holding(names, rname_odd_bytes(names.packed()))
    if bad.any() or odd.any():
        k = int(np.argmax(bad | odd))
        name = names[k]
        where = f"{source}: " if source else ""
        why = f"starts with {name[0]!r}, which SAM's reference names (@SQ SN, RNAME) cannot {rname_reason(name[0])}" \
            if bad[k] else \
            f"holds {rname_odd(name)!r}, which SAM's reference names (@SQ SN, RNAME) cannot ({RNAME_RULE})"
        raise GpualignError(f"{where}target {_shown(name)!r}: its name {why}: rename it, or write {instead}")


def check_qnames(batch: PairBatch, unit: str = "pair", instead: str = "PAF or TSV", source: str = "") -> None:
    """The GpualignError of the first query whose name cannot be a SAM QNAME (qname_fault; unit: what
    batch.index counts; instead: the formats the command could write; source: the queries' file)."""
    if batch.n:
        refuse_qnames(Names.of(batch.q_names), lambda k: f"{unit} {int(batch.index[k]) + 1}", instead, source)


def refuse_qnames(names: Names, place, instead: str, source: str = "") -> None:
    """A GpualignError if a name cannot be a SAM QNAME (qname_fault): source (a file, first in the message if
    given), the query, place(its index) in brackets, why, and the formats the command could write instead."""
    fault = qname_fault(names)
    if fault is not None:
        k, name, why = fault
        where = f"{source}: " if source else ""
        raise GpualignError(f"{where}query {_shown(name)!r} ({place(k)}): its name {why}: rename it, or write "
                            f"{instead}")


def qname_fault(names: Names) -> tuple[int, str, str] | None:
    """(index, name, why) of the first name that cannot be a SAM QNAME: one that starts with '@' (its line
    would read as a header line: the file could not be read) or holds one (SAM 1.6's QNAME rule: [!-?A-~]), is
    '*' alone (no name), holds a character other than printable ASCII or is longer than QNAME_MAX; None if all
    can."""
    if len(names) == 0:
        return None
    first = np.zeros(len(names), bool)
    star = np.zeros(len(names), bool)
    some = names.length > 0
    if some.any():
        first[some] = names.buf[names.start[some]] == ord("@")
        star[some] = (names.buf[names.start[some]] == ord("*")) & (names.length[some] == 1)
    buf = names.packed()
    odd, at = _holding(names, unprintable_bytes(buf)), _holding(names, buf == ord("@"))
    bad = first | at | star | (names.length > QNAME_MAX) | odd
    if not bad.any():
        return None
    k = int(np.argmax(bad))
    name = names[k]
    why = "starts with '@' (its line would read as a header line), which a SAM QNAME cannot" if first[k] \
        else "is '*', which a SAM QNAME reads as no name" if star[k] \
        else f"holds {odd_character(name)!r}, which a SAM QNAME cannot (printable ASCII only)" if odd[k] \
        else "holds '@', which a SAM QNAME cannot (SAM 1.6: printable ASCII but '@')" if at[k] \
        else f"is longer than {QNAME_MAX} characters, which a SAM QNAME cannot be"
    return k, name, why


def _holding(names: Names, bad: np.ndarray) -> np.ndarray:
    """Per name: whether one of its bytes is marked in bad (a bool per byte of names.packed())."""
    out = np.zeros(len(names), bool)
    if len(names) == 0:
        return out
    if bad.any():
        out[np.repeat(np.arange(len(names)), names.length)[bad]] = True
    return out


def _shown(name: str) -> str:
    return name if len(name) <= 60 else name[:60] + "..."


class SamFormat:
    """A batch's SAM lines (picklable: formatting may run in a worker process, output/parallel.py)."""

    needs_seq = True  # SEQ is the query's bytes

    def __init__(self, metric: str, scored: bool = False, residues: bool = False, source: str = ""):
        """source: the queries' file as messages name it (a name SAM refuses: the file, the pair)."""
        self.metric, self.scored, self.residues, self.source = metric, scored, residues, source
        self.lines = None  # or text_device.DeviceLines (pipeline.py): lines from the device's columns

    def render(self, batch: PairBatch, res: AlignBatch) -> tuple:
        """(the lines: bytes, or a memoryview of them from text_device, how many)."""
        check_qnames(batch, source=self.source)
        if self.residues:
            check_star_seq(batch, self.source)
        if self.lines is not None and not (self.scored or self.residues):
            done = self.lines.sam(batch, res)
            if done is not None:
                return done
        return render(batch, res, self.metric, self.scored, self.residues), batch.n


class _Headed:
    """A writer's stream with the SAM header written first, when the stream is first asked for (the first
    lines, or the end): targets may be a Future of them, or anything whose result() gives them (pipeline.py:
    the target file scanned meanwhile, io/targets.scan_beside)."""

    def __init__(self, stream, targets, command_line: str):
        self._stream, self._head = stream, (targets, command_line)

    @property
    def stream(self):
        self._write_header()
        return self._stream

    def _write_header(self) -> None:
        """The header, once (not marked written until it was: a failed wait or write fails again)."""
        if self._head is not None:
            targets, command_line = self._head
            self._stream.write(header_text(targets.result() if hasattr(targets, "result") else targets,
                                           command_line))
            self._head = None


class SamWriter(_Headed):
    def __init__(self, stream, targets, command_line: str, metric: str, scored: bool = False,
                 residues: bool = False, query_name: str = "", **_):
        """targets: as header_text's, or a Future (or workers.Forked) of them; residues: protein, SEQ
        as read (render); query_name: the queries' file as messages name it."""
        super().__init__(stream, targets, command_line)
        self.fmt = SamFormat(metric, scored, residues, query_name)

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        data, n = self.fmt.render(batch, res)
        self.stream.write(data)
        return n

    def close(self) -> None:
        self._write_header()  # (an empty output's)


class SamToBam:
    """BAM made by htslib from SAM text as it comes: the text goes through a pipe to a process of its own
    running pysam's samtools view with several threads (one pass in C instead of a Python call per record,
    beside the alignment: in this process it would hold the interpreter lock until it returned). path: the
    file to write (stages.Output's temporary one). The process is in a process group of its own (Ctrl-C
    goes to this one, whose handler ends every descendant); write() blocks while it is behind. A process
    forked meanwhile does not hold the pipe open (_release_in_child); one dropped unclosed is killed."""

    THREADS = 4
    PIPE_BYTES = 1 << 20  # the pipe's capacity (Linux; 64 KiB else): fewer hand-overs between the processes

    def __init__(self, path: str, header: str | bytes = b""):
        self.path = path
        self._err = tempfile.TemporaryFile()
        # its temporary files (pysam keeps samtools' stderr in one) in a directory removed however the run ends
        self._tmp = tempfile.mkdtemp(prefix="gpualign-bam-")
        interrupt.track(self._tmp)
        try:  # (-P: not the current directory's modules before pysam's)
            self._proc = subprocess.Popen([sys.executable, "-P", "-c", _CONVERT, path, str(self.THREADS)],
                                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._err,
                                          process_group=0, env={**os.environ, "TMPDIR": self._tmp})
        except OSError as e:
            self._end()
            raise GpualignError(f"{display_name(path)}: writing BAM failed (cannot start {sys.executable!r}: "
                                f"{e.strerror or e})") from None
        self._kill = weakref.finalize(self, _kill, self._proc)  # (dropped unclosed: no BAM written later)
        _converting.add(self)
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(self._proc.stdin.fileno(), getattr(fcntl, "F_SETPIPE_SZ"), self.PIPE_BYTES)
        if header:
            self.write(header if isinstance(header, bytes) else header.encode())

    def write(self, data) -> None:
        try:
            self._proc.stdin.write(data)
        except OSError:  # (BrokenPipeError: it ended; its words say why)
            raise self._failed() from None

    def close(self) -> None:
        try:
            self._proc.stdin.close()  # (the last bytes flushed: a failure here is a BAM cut short)
        except OSError:
            raise self._failed() from None
        if self._proc.wait() != 0:
            raise self._failed()
        self._end()

    def abort(self) -> None:
        """The run failed: the conversion ended (the caller removes what it wrote)."""
        self._proc.kill()
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        self._proc.wait()
        self._end()

    def _end(self) -> None:
        if hasattr(self, "_kill"):
            self._kill.detach()
        _converting.discard(self)
        self._err.close()
        shutil.rmtree(self._tmp, ignore_errors=True)
        interrupt.untrack(self._tmp)

    def _failed(self) -> GpualignError:
        self._proc.kill()
        self._proc.wait()
        self._err.seek(0)
        text = self._err.read().decode(errors="replace").replace("\\n", "\n")  # (pysam's repr of samtools' stderr)
        words = [ln.strip(" '\"") for ln in text.splitlines() if ln.strip(" '\"")]
        self._end()
        errors = [w for w in words if w.startswith("[E::")]  # htslib's words first: they name the record
        warnings = [w for w in words if w.startswith("[W::")]
        why = (errors or warnings or words[-1:] or [f"samtools view ended with status {self._proc.returncode}"])[0]
        return GpualignError(f"{display_name(self.path)}: writing BAM failed ({why})")


_converting: weakref.WeakSet = weakref.WeakSet()  # SamToBam not closed yet


def _kill(proc) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _release_in_child() -> None:
    """In a forked process: the pipes to SamToBam's processes point at /dev/null (the write end held open
    here would keep a conversion from ever seeing its input end; the descriptor stays valid), and this
    process never kills them (at its exit)."""
    if not _converting:
        return
    null = os.open(os.devnull, os.O_WRONLY)
    for bam in list(_converting):
        bam._kill.detach()
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(null, bam._proc.stdin.fileno())
    _converting.clear()
    os.close(null)


os.register_at_fork(after_in_child=_release_in_child)


# SamToBam's process: SAM text on stdin to BAM at argv[1] with argv[2] threads (an error: words on stderr, 1)
_CONVERT = """import sys
import pysam
try:
    pysam.view("-b", "--no-PG", "-o", sys.argv[1], "-@", sys.argv[2], "-", catch_stdout=False)
except pysam.SamtoolsError as e:
    sys.exit(str(e).replace(chr(10), " "))
"""


# BAM's SEQ is a 4-bit code of these (SAM spec 4.2.3); htslib writes any other letter as N
BAM_LETTERS = b"=ACMGRSVTWYHKDBNacmgrsvtwyhkdbn"
_NOT_BAM = np.ones(256, dtype=bool)
_NOT_BAM[np.frombuffer(BAM_LETTERS, dtype=np.uint8)] = False


def bam_refusal(name: str, letter: int, place: str, source: str = "") -> GpualignError:
    """place: where the query is (`pair 3`, `line 7`); source: the file that place counts in, if given."""
    where = f"{source}: " if source else ""
    return GpualignError(f"{where}query {name!r} ({place}): {chr(letter)!r} cannot be written to BAM (its SEQ holds "
                         "A, C, G, T, N and the IUPAC codes only): write SAM, PAF or TSV")


def check_bam_seq(batch: PairBatch, source: str = "") -> None:
    """The GpualignError of the first query holding a letter BAM's SEQ cannot hold (htslib would write N); source:
    the queries' file as messages name it."""
    if batch.n == 0 or not _NOT_BAM[concatenated(batch.seq, batch.q_off, batch.q_len)].any():
        return
    bad = np.concatenate([[0], np.cumsum(_NOT_BAM[batch.seq])])
    k = np.flatnonzero(bad[batch.q_off + batch.q_len] > bad[batch.q_off])
    if len(k):
        at = batch.q_off[k[0]] + np.argmax(_NOT_BAM[batch.seq[batch.q_off[k[0]]:]])
        raise bam_refusal(batch.q_names[k[0]], int(batch.seq[at]), f"pair {int(batch.index[k[0]]) + 1}", source)


def check_star_seq(batch: PairBatch, source: str = "") -> None:
    """The GpualignError of the first query whose whole sequence is '*' (protein: one stop residue): SAM's SEQ
    '*' reads as no sequence stored, not as that residue. source: the queries' file as messages name it."""
    if batch.n == 0:
        return
    one = np.flatnonzero(batch.q_len == 1)
    if len(one):
        star = one[batch.seq[batch.q_off[one]] == ord("*")]
        if len(star):
            k = star[0]
            raise GpualignError(f"{source + ': ' if source else ''}query {batch.q_names[k]!r} "
                                f"(pair {int(batch.index[k]) + 1}): its sequence '*' "
                                "would read as no sequence in SAM (SEQ '*' means none stored): write PAF or TSV")


class BamFormat(SamFormat):
    """SAM lines for BAM: a query holding a letter BAM cannot hold is refused (SAM's lines keep it)."""

    def render(self, batch: PairBatch, res: AlignBatch):
        check_bam_seq(batch, self.source)
        return super().render(batch, res)


class BamWriter(_Headed):
    """BAM: the SAM writer's lines (formatted in bulk like SAM's: on the device or in worker processes),
    converted by htslib (its process started now, the header given with the first lines)."""

    def __init__(self, path: str, targets, command_line: str, metric: str, scored: bool = False,
                 query_name: str = "", **_):
        super().__init__(SamToBam(path), targets, command_line)
        self.fmt = BamFormat(metric, scored, source=query_name)

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        data, n = self.fmt.render(batch, res)
        self.stream.write(data)
        return n

    def close(self) -> None:
        self.stream.close()

    def abort(self) -> None:
        self._stream.abort()
