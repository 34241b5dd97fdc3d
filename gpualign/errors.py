"""Every error a user can see. The CLI catches GpualignError only."""

import errno


class GpualignError(Exception):
    """Base class: a message meant for the user, one line, no traceback."""

    exit_code = 1


class ConfigError(GpualignError):
    """A bad option or combination of options (exit code 2)."""

    exit_code = 2


class InputError(GpualignError):
    """Unreadable or malformed input; the message names file and record."""


class RecordError(InputError):
    """A bad record: file name, 1-based record number, what is wrong and the line (when known) (kept
    apart, so that a reader parsing a part of a file can report the numbers in the whole file)."""

    def __init__(self, name: str, record: int, detail: str, line: int | None = None):
        at = f" (line {line})" if line else ""
        super().__init__(f"{name}: record {record}{at}: {detail}")
        self.name, self.record, self.detail, self.line = name, record, detail, line

    def moved(self, records: int, lines: int) -> "RecordError":
        """The same error for a part of a file that starts after `records` records and `lines` lines."""
        return RecordError(self.name, self.record + records, self.detail, self.line and self.line + lines)

    def __reduce__(self):  # pickled across processes with its fields
        return RecordError, (self.name, self.record, self.detail, self.line)


class WorkerLost(GpualignError):
    """A worker process that ended without its result: killed (the out-of-memory killer's SIGKILL, most
    often) or exited early."""

    def __init__(self, how: str = "killed"):
        super().__init__(f"a worker process ended without its result ({how}; out of memory? try fewer threads, "
                         "-t); the run stopped")
        self.how = how

    def __reduce__(self):
        return WorkerLost, (self.how,)

    @staticmethod
    def died(broken: Exception) -> bool:
        """Whether a pool's BrokenProcessPool says a worker died (the pool gives no cause then): a result or
        exception the parent could not unpickle breaks the pool too, with the traceback of that as its cause
        (a bug to see, not a killed process)."""
        cause = broken.__cause__
        return cause is None or "Traceback (most recent call last)" not in str(cause)


class OutOfMemory(GpualignError):
    """The host could not give an allocation the run needed (numpy's MemoryError, a worker's included)."""

    def __init__(self, what: str):
        super().__init__(f"out of memory: {what}; the run stopped (try fewer threads, -t, or smaller batches)")


class DeviceError(GpualignError):
    """A requested device or engine is not available."""


class KernelError(DeviceError):
    """A kernel that cannot be built: no NVRTC, or NVRTC's error with its log."""


class WriteError(GpualignError):
    """Output that could not be written: the output's name and the reason; exit 141 for a closed pipe
    (the reader went away, as SIGPIPE's 128 + 13), else 1."""

    def __init__(self, name: str, err: OSError):
        self.broken_pipe = err.errno == errno.EPIPE
        self.exit_code = 141 if self.broken_pipe else 1
        self.why = "broken pipe (the reader closed it)" if self.broken_pipe else (err.strerror or str(err))
        super().__init__(f"{name}: cannot write: {self.why}; the output is incomplete")
        self.name, self.errno, self.strerror = name, err.errno, err.strerror or str(err)

    def __reduce__(self):  # pickled across processes (a worker's error) with its fields
        return WriteError, (self.name, OSError(self.errno, self.strerror))
