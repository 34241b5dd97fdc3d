"""Where a command's output bytes go: stdout, a device or pipe named as the output (/dev/null, a FIFO,
a shell's >(...)), or a file, BGZF-compressed when its name ends in .gz.

Every write goes out whole or raises WriteError (a closed pipe: exit 141; a full disk or any other
failure: exit 1), so a run never counts records that did not leave. Python's buffered writer is not
used: on a pipe closed in the middle of a large write it returns the count written so far without an
error (CPython 3.11), and the rest was dropped silently.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
import zlib

from .. import trace
from ..errors import ConfigError, WriteError
from .reserve import Reserve

BUFFER = 1 << 20  # small writes are gathered up to this many bytes; larger ones go out at once
STDOUT_NAMES = ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


def inherited_fd(path: str) -> int | None:
    """The descriptor a name such as /dev/fd/3, /proc/self/fd/3 or /dev/stderr stands for, else None. Output
    there is written to a copy of that descriptor (os.dup): opened again by name, a file the shell opened
    for appending (3>>log) would be written from its start over what it held."""
    if path == "/dev/stderr":
        return 2
    where, base = os.path.split(os.path.abspath(path))
    if where in ("/dev/fd", "/proc/self/fd", f"/proc/{os.getpid()}/fd") and base.isdigit():
        return int(base)
    return None


def is_stream(path: str) -> bool:
    """Whether output named path is written as it goes, never replaced: stdout ('-'), an existing path
    that is not a regular file (a device, a FIFO, a socket), or a name in /dev, /dev/fd or /proc (such as
    /dev/stderr when stderr is a file: never a temporary file renamed over it)."""
    where = os.path.dirname(os.path.abspath(path))
    if path in STDOUT_NAMES or where in ("/dev", "/dev/fd") or where.startswith("/proc/"):
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not os.path.isdir(path)
    except OSError:
        return False


def compressed(path: str) -> bool:
    """Whether text output to path is BGZF-compressed: a file (not a stream) whose name ends in .gz."""
    return path.lower().endswith(".gz") and not is_stream(path)


def format_from_name(fmt: str | None, path: str, formats: tuple, extensions: dict, default: str) -> str:
    """The output format: fmt when given (one of formats); else `default` for a stream (stdout, a device,
    a FIFO), else the name's extension (.gz after it allowed: compressed text). One clear ConfigError line
    otherwise."""
    if fmt:
        fmt = fmt.lower()
        if fmt not in formats:
            raise ConfigError(f"--format must be one of {', '.join(formats)} (got {fmt!r})")
    elif is_stream(path):
        fmt = default
    else:
        base = path[:-3] if path.lower().endswith(".gz") else path
        ext = os.path.splitext(base)[1].lower()
        fmt = extensions.get(ext)
        if fmt is None:
            names = ", ".join(sorted(extensions))
            raise ConfigError(f"{path}: cannot tell the format from the name: use --format {'|'.join(formats)}, "
                              f"or a name ending in {names} (text formats may add .gz)")
    if fmt == "bam" and compressed(path):
        raise ConfigError(f"{path}: BAM is compressed already: name it .bam (.gz is for the text formats)")
    return fmt


class Sink:
    """Bytes to a file descriptor, each write whole (small ones gathered up to BUFFER bytes first);
    a failure raises WriteError naming the output."""

    def __init__(self, fd: int, name: str, own: bool, reserve: Reserve | None = None):
        """own: close fd at close() (not stdout's). reserve: blocks taken ahead of the writes (a new file
        that will be renamed over its name; reserve.py), given back past the end at close()."""
        self.fd, self.name, self.own = fd, name, own
        self.reserve, self.written = reserve, 0
        self.buf = bytearray()
        self.sendfile = True  # False once the output refused it (send_file then says so at once)

    def write(self, data) -> int:
        # every view of data released when this returns or raises: a caller's buffer (a shared-memory
        # block) can then be closed while a WriteError is handled
        with memoryview(data) as whole, whole.cast("B") as view:
            n = len(view)
            if len(self.buf) + n < BUFFER:
                self.buf += view
                return n
            self.flush()
            self._out(view)
        return n

    def flush(self) -> None:
        if self.buf:
            self._out(memoryview(self.buf))
            self.buf = bytearray()

    @trace.traced("sink send")
    def send_file(self, src: int, count: int) -> bool:
        """The first count bytes of the file open as src written by the kernel (sendfile: no copy through
        this process, no mapping of src here); False, nothing written, where this output cannot take
        them that way (then write them)."""
        if not self.sendfile:
            return False
        self.flush()
        self._cover(count)
        done = 0
        try:
            while done < count:
                sent = os.sendfile(self.fd, src, done, count - done)
                if sent == 0:
                    raise OSError(errno.EIO, f"{count - done} bytes left unsent")
                done += sent
                self.written += sent
        except OSError as e:
            if done == 0 and e.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                self.sendfile = False
                return False
            raise WriteError(self.name, e) from None
        return True

    def close(self) -> None:
        """Everything written out; the descriptor closed if it is ours."""
        try:
            self.flush()
            if self.reserve:
                self.reserve.give_back()
        finally:
            self.release()

    def _cover(self, count: int) -> None:
        """Blocks taken for the next count bytes where this file has a Reserve (none from the first refusal)."""
        if self.reserve and not self.reserve.cover(self.written + count):
            self.reserve.give_back()
            self.reserve = None

    def release(self) -> None:
        """The descriptor closed if it is ours, nothing more written (the run failed)."""
        self.buf = bytearray()
        if self.own and self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.fd = -1

    @trace.traced("sink out")
    def _out(self, data) -> None:
        failed = None
        with memoryview(data) as view:
            self._cover(len(view))
            done = 0
            try:
                while done < len(view):
                    done += os.write(self.fd, view[done:])
            except OSError as e:
                failed = e
            self.written += done
        if failed is not None:  # raised with the views released (write's comment)
            raise WriteError(self.name, failed) from None


# BGZF (SAM spec section 4.1): gzip members of at most 64 KiB, each naming its size in the extra field
# BC, then an empty member as the end-of-file marker; tabix, samtools and `bgzip -d` read it, gzip too
BGZF_DATA = 0xFF00  # uncompressed bytes per block (htslib's BGZF_BLOCK_SIZE): the deflated form fits
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
_BGZF_HEAD = struct.Struct("<4BI2BH2BHH")  # gzip header, XLEN 6, subfield 'BC' of 2 bytes: block size - 1


try:  # ISA-L's deflate (a dependency): several times zlib's speed at the level used
    from isal import isal_zlib as _z
    _LEVEL = 2
except ImportError:  # pragma: no cover - zlib when it is missing
    _z, _LEVEL = zlib, 6


def _deflate(data, level: int = _LEVEL) -> bytes:
    """data as raw deflate (no gzip header)."""
    c = (_z if level else zlib).compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _bgzf(data) -> bytes:
    """data (bytes-like) as BGZF blocks (no view of data kept once it returns)."""
    out = []
    for at in range(0, len(data), BGZF_DATA):
        part = data[at:at + BGZF_DATA]
        body = _deflate(part)
        if len(body) > BGZF_DATA:  # (incompressible: stored, which always fits)
            body = _deflate(part, 0)
        size = _BGZF_HEAD.size + len(body) + 8
        out += [_BGZF_HEAD.pack(31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, size - 1), body,
                struct.pack("<II", zlib.crc32(part), len(part))]
    return b"".join(out)


class BgzfSink:
    """BGZF-compressed bytes to a Sink (write, flush, close like it): blocks of BGZF_DATA bytes; flush()
    ends the block begun, close() adds the end-of-file marker."""

    def __init__(self, sink: Sink):
        self.sink, self.name = sink, sink.name
        self.buf = bytearray()

    def write(self, data) -> int:
        with memoryview(data) as whole, whole.cast("B") as view:  # released on an error too (Sink.write)
            n = len(view)
            start = 0
            if self.buf:  # the block begun first
                start = min(n, BGZF_DATA - len(self.buf))
                self.buf += view[:start]
                if len(self.buf) < BGZF_DATA:
                    return n
                self.sink.write(_bgzf(bytes(self.buf)))
                self.buf = bytearray()
            end = n - (n - start) % BGZF_DATA
            if end > start:
                self.sink.write(_bgzf(view[start:end]))
            self.buf += view[end:]
        return n

    def flush(self) -> None:
        if self.buf:
            self.sink.write(_bgzf(bytes(self.buf)))
            self.buf = bytearray()
        self.sink.flush()

    def close(self) -> None:
        try:
            self.flush()
            self.sink.write(BGZF_EOF)
        finally:
            self.sink.close()

    def release(self) -> None:
        self.buf = bytearray()
        self.sink.release()


