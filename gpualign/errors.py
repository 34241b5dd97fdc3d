"""Every error a user can see. The CLI catches GpualignError only."""


class GpualignError(Exception):
    """Base class: a message meant for the user, one line, no traceback."""

    exit_code = 1


class ConfigError(GpualignError):
    """A bad option or combination of options (exit code 2)."""

    exit_code = 2


class InputError(GpualignError):
    """Unreadable or malformed input; the message names file and record."""


class DeviceError(GpualignError):
    """A requested device or engine is not available."""
