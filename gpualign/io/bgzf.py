"""gzip and bgzip files inflated for the device reader. A BGZF (bgzip) file is a run of gzip members of at
most 64 KiB each, so rapidgzip inflates it on several threads (each member's CRC-32 and size checked, since
rapidgzip 0.16.2); plain gzip goes through fastx_fast.open_gz (ISA-L's inflater on a thread of its own).

rapidgzip ends a file cut inside a member as if it were whole, and prints lines of its own on stderr for
bytes that are not BGZF between members, so it is given only files whose member headers chain from the
first byte to bgzip's empty end member (htslib writes it when it closes the file): any other file is read by
open_gz, whose errors say where it stops. rapidgzip's own errors (ValueError, RuntimeError) are raised
as zlib.error (one of fastx_fast.READ_ERRORS), on that read and on every read after."""

from __future__ import annotations

import atexit
import io
import os
import struct
import threading
import weakref
import zlib

import numpy as np

from ..config import usable_cores

from .fastx_fast import open_gz

THREADS = 8  # rapidgzip's threads for one file at most (no more than the cores this process may use)
CHUNK = 1 << 20  # compressed bytes a rapidgzip thread inflates at a time (its default, 4 MiB, holds 2x the memory)
_BGZF_HEAD = b"\x1f\x8b\x08\x04"  # gzip magic, deflate, FEXTRA set
_BC = b"BC\x02\x00"  # the BGZF extra subfield: 'BC', length 2 (BSIZE follows)
WALK_BYTES = 8 << 20  # whole_bgzf reads the file in pieces of this size
HEAD = 18  # a BGZF member's header: gzip's 10 bytes, XLEN, the 'BC' subfield and BSIZE
_HEADER = struct.Struct("<4s6xH4sH")  # a member's header: magic, XLEN, the 'BC' subfield, BSIZE
_ISIZE = struct.Struct("<I")
EOF_MEMBER = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")  # bgzip's end


def whole_bgzf(path: str) -> bool:
    """Whether path is BGZF from its first byte to its last: member headers whose sizes chain to the file's
    end, the last bgzip's empty end member (the file read once: ~10 ms for 5,000 members cached). Any other
    gzip file (cut, damaged between members, holding a plain member) is read by ISA-L's stream: rapidgzip
    would take a cut one as whole, and prints lines of its own on stderr for the others."""
    return members(path) is not None


def members(path: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(each member's offset in path, each member's first inflated byte's offset), int64, with one entry more:
    the file's size and the inflated size (the member's ISIZE, its last 4 bytes, summed: htslib's .gzi holds
    the same), when path is BGZF from its first byte to its last (whole_bgzf); else None."""
    with open(path, "rb", buffering=0) as fh:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
        if size < len(EOF_MEMBER) or os.pread(fd, len(EOF_MEMBER), size - len(EOF_MEMBER)) != EOF_MEMBER:
            return None
        buf = bytearray(WALK_BYTES)
        starts, sizes = [], []
        at = base = held = 0  # the next member's offset; buf holds the file's bytes [base, base + held)
        while at < size:
            if at + (1 << 16) > base + held and base + held < size:  # (a member, 64 KiB at most, whole in buf;
                base, held = at, os.preadv(fd, [buf], at)  # read in large pieces from the file's start on)
            o = at - base
            step = member(buf, o) if o + HEAD <= held else 0
            if step < len(EOF_MEMBER) or at + step > base + held:  # (a member holds its header, data and trailer)
                return None
            starts.append(at)
            sizes.append(_ISIZE.unpack_from(buf, o + step - 4)[0])
            at += step
        if at != size:
            return None
    return (np.array(starts + [size], np.int64),
            np.concatenate([[0], np.cumsum(np.array(sizes, np.int64))]).astype(np.int64))


def cut_short(path: str) -> bool:
    """Whether path starts as BGZF but does not end with bgzip's end member: a file cut at a member's end
    inflates without an error, short (htslib warns that its EOF marker is absent)."""
    with open(path, "rb", buffering=0) as fh:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
        return bool(member(os.pread(fd, HEAD, 0))) and (
            size < len(EOF_MEMBER) or os.pread(fd, len(EOF_MEMBER), size - len(EOF_MEMBER)) != EOF_MEMBER)


def member(head, at: int = 0) -> int:
    """The size of the BGZF member whose header is head[at:at + HEAD] (bytes-like), or 0 if it is not one."""
    if len(head) < at + HEAD:
        return 0
    magic, xlen, bc, bsize = _HEADER.unpack_from(head, at)
    return bsize + 1 if magic == _BGZF_HEAD and xlen == 6 and bc == _BC else 0


class ParallelInflated(io.RawIOBase):
    """A whole BGZF file's inflated bytes through rapidgzip (readinto, read), its errors as zlib.error."""

    def __init__(self, path: str, threads: int | None = None):
        import rapidgzip

        threads = threads or max(1, min(THREADS, usable_cores()))  # (more threads than cores: slower)
        self._fh = rapidgzip.RapidgzipFile(path, parallelization=threads, chunk_size=CHUNK)
        self._error: zlib.error | None = None  # raised again by every read after it
        self._lock = threading.Lock()  # a read and close() one after the other (rapidgzip crashes else)
        _open.add(self)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        with self._lock:
            if self._error is None and self.closed:
                self._error = zlib.error("read after the file was closed")
            if self._error is not None:
                raise self._error
            try:
                return self._fh.readinto(b)
            except (ValueError, RuntimeError) as e:
                self._error = zlib.error(str(e))
                raise self._error from None

    def close(self) -> None:
        """Closed (from any thread): after the read under way, if any."""
        with self._lock:
            if not self.closed:
                self._fh.close()
            super().close()


_open: weakref.WeakSet = weakref.WeakSet()  # ParallelInflated not closed yet


@atexit.register
def _close_open() -> None:
    """Close what is still open: rapidgzip aborts the process if its threads see the interpreter end."""
    for fh in list(_open):
        fh.close()


def open_inflated(path: str):
    """A gzip or bgzip file's inflated bytes as a binary stream: rapidgzip's for a whole BGZF file, else
    open_gz's."""
    return ParallelInflated(path) if whole_bgzf(path) else open_gz(path)
