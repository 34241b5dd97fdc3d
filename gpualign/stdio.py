"""The standard descriptors as the process found them: those it started without get /dev/null before anything
else opens a file (__main__, first of all), and which were closed is kept for the output's checks
(stages.Output). Only os and sys here: it runs before the signal handlers' module and CUDA's start."""

from __future__ import annotations

import os
import sys

CLOSED_AT_START: set = set()  # the standard descriptors (0, 1, 2) the process started without (reopen_closed_std)


def reopen_closed_std() -> None:
    """/dev/null onto each standard descriptor the process started without (`gpualign ... >&-`), so that no file
    the run opens takes its number (a temporary output opened as descriptor 2 would take every message), and
    sys.stdin/stdout/stderr exist. Which were closed is kept: stdout as the output is refused (stdout_closed)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            CLOSED_AT_START.add(fd)
    for fd in sorted(CLOSED_AT_START):
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if fd in CLOSED_AT_START and getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False))


def stdout_closed() -> bool:
    """Whether the process started with stdout closed (then /dev/null: output there would be lost)."""
    return 1 in CLOSED_AT_START
