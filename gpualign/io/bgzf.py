"""BGZF (bgzip) files inflated on several threads: a BGZF file is a run of gzip members of at most 64 KiB
each, whose header gives the member's size (the 'BC' extra field), so the members can be found without
inflating them and inflated side by side (ISA-L's isal_zlib.decompress lets go of the interpreter lock).
Each member's CRC-32 and size are checked. A file that is gzip but not BGZF from its first member on is
read by fastx_fast.open_gz (one stream); a member that is not BGZF further on, damaged bytes or a cut file
raise zlib.error or EOFError (fastx_fast.READ_ERRORS) at that place, as an inflater does, and on every read
after. A file that ends at a member's end without bgzip's empty end member is read as whole (as Python's
gzip module and ISA-L's reader do; htslib warns)."""

from __future__ import annotations

import io
import struct
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from isal import isal_zlib

from ..config import usable_cores

from .fastx_fast import READ_ERRORS, open_gz

HEAD = 18  # a BGZF member's header: gzip's 10 bytes, XLEN, the 'BC' subfield (SI1 SI2 SLEN BSIZE)
TAIL = 8  # CRC-32, ISIZE
THREADS = 8  # members inflated side by side at most (no more than the cores this process may use)
TASK_MEMBERS = 16  # members inflated by one task (up to 1 MiB)
AHEAD = 512  # members read and inflating ahead of the reader at most (up to 32 MiB)
READ_BYTES = 4 << 20  # compressed bytes read from the file at a time


def _member_size(data, at: int) -> int:
    """The size of the BGZF member starting at data[at] (whole header there), or 0 if it is not one."""
    if (data[at:at + 4] != b"\x1f\x8b\x08\x04" or data[at + 10:at + 12] != b"\x06\x00"
            or data[at + 12:at + 16] != b"BC\x02\x00"):
        return 0
    return struct.unpack_from("<H", data, at + 16)[0] + 1


def is_bgzf(path: str) -> bool:
    """Whether path's first gzip member is a BGZF one."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD)
    return len(head) == HEAD and _member_size(head, 0) > 0


def _inflate(members: list) -> bytes:
    """The inflated bytes of whole BGZF members, each checked against its CRC-32 and size."""
    out = []
    for m in members:
        data = isal_zlib.decompress(m[HEAD:-TAIL], wbits=-15)
        crc, size = struct.unpack_from("<II", m, len(m) - TAIL)
        if len(data) != size or isal_zlib.crc32(data) != crc:
            raise zlib.error("BGZF member's CRC-32 or size does not match its data")
        out.append(data)
    return out[0] if len(out) == 1 else b"".join(out)


class BgzfReader(io.RawIOBase):
    """A BGZF file's inflated bytes (readinto, read), its members inflated on up to THREADS threads (no
    more than the cores), up to AHEAD of them ahead of the reader."""

    def __init__(self, path: str, threads: int | None = None):
        self._fh = open(path, "rb")
        threads = threads or max(1, min(THREADS, usable_cores()))  # (more threads than cores: slower)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="gpualign-bgzf")
        self._tasks: deque = deque()  # (future of inflated bytes, members in it), in file order
        self._queued = 0  # members in them
        self._raw = b""  # compressed bytes read, not yet cut into members
        self._at_end = False  # the file read to its end
        self._out = memoryview(b"")  # inflated bytes not yet handed out
        self._error: BaseException | None = None  # raised again by every read after it

    def readable(self) -> bool:
        return True

    def _queue(self) -> None:
        """Cut the next members from the file and start inflating them, up to AHEAD members queued."""
        while self._queued < AHEAD and not (self._at_end and not self._raw):
            if not self._at_end:
                more = self._fh.read(READ_BYTES)
                self._at_end = not more
                self._raw += more
            data, at, members = self._raw, 0, []
            while len(data) - at >= HEAD:
                size = _member_size(data, at)
                if size == 0:
                    members.append(zlib.error("not a BGZF member"))
                    break
                if len(data) - at < size:
                    break
                members.append(data[at:at + size])
                at += size
            self._raw = data[at:]
            failed = bool(members) and isinstance(members[-1], BaseException)
            if self._at_end and self._raw and not failed:  # a member cut short
                members.append(EOFError("Compressed file ended before the end-of-stream marker was reached"))
                failed = True
            whole = members[:-1] if failed else members
            for i in range(0, len(whole), TASK_MEMBERS):
                part = whole[i:i + TASK_MEMBERS]
                self._tasks.append((self._pool.submit(_inflate, part), len(part)))
                self._queued += len(part)
            if failed:  # nothing after it is read
                self._tasks.append((self._pool.submit(_fail, members[-1]), 1))
                self._raw, self._at_end = b"", True
                return

    def readinto(self, b) -> int:
        view = memoryview(b).cast("B")
        while not len(self._out):
            if self._error is not None:
                raise self._error
            self._queue()
            if not self._tasks:
                return 0
            fut, count = self._tasks.popleft()
            self._queued -= count
            try:
                self._out = memoryview(fut.result())
            except READ_ERRORS as e:
                self._error = e
                raise
        n = min(len(view), len(self._out))
        view[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._fh.close()
        super().close()


def _fail(err: BaseException):
    raise err


def open_inflated(path: str):
    """A gzip or bgzip file's inflated bytes as a binary stream: BgzfReader for BGZF, else open_gz's."""
    return BgzfReader(path) if is_bgzf(path) else open_gz(path)
