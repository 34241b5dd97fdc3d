"""Every error a user can see. The CLI catches GpualignError only."""


class GpualignError(Exception):
    """Base class: a message meant for the user, one line, no traceback."""

    exit_code = 1


class ConfigError(GpualignError):
    """A bad option or combination of options (exit code 2)."""

    exit_code = 2


class InputError(GpualignError):
    """Unreadable or malformed input; the message names file and record."""


class RecordError(InputError):
    """A bad record: file name, 1-based record number and what is wrong (kept apart, so that a reader
    parsing a part of a file can report the record's number in the whole file)."""

    def __init__(self, name: str, record: int, detail: str):
        super().__init__(f"{name}: record {record}: {detail}")
        self.name, self.record, self.detail = name, record, detail

    def __reduce__(self):  # pickled across processes with its fields
        return RecordError, (self.name, self.record, self.detail)


class DeviceError(GpualignError):
    """A requested device or engine is not available."""
