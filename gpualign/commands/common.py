"""What the subcommands share: option types, the error wrapper, stderr helpers and the summary table."""

from __future__ import annotations

import errno
import os
import shlex
import sys
from contextlib import contextmanager
from typing import Optional

import click

from .. import interrupt, progress
from ..config import cap_threads
from ..errors import ConfigError, GpualignError, InputError, OutOfMemory, RecordError, WorkerLost, WriteError

CHAR_RULE = ("Sequences are compared case-insensitively. By default two equal characters match "
             "(N matches N, as in edlib and WFA2-lib); with --n-mismatch every character other than "
             "A/C/G/T mismatches everything, itself included (SAM's NM rule). The rule applies to the "
             "score, the CIGAR =/X, NM and the PAF columns alike.")

THREADS = click.option("--threads", "-t", type=int, default=0,
                       help="CPU worker processes (0 = all cores, fewer for a small input).")
DEBUG = click.option("--debug", is_flag=True, help="Show tracebacks.")
# several GPUs (devices.py) and the distributed path (cluster.py)
GPUS = click.option("--gpus", help="Align on this host's GPUs from this process: N (the first N), 'all', or device "
                                   "numbers (0,2; 0,0: two slots on one GPU).")
SCHEDULER = click.option("--scheduler", help="Align on an existing Dask cluster (tcp://host:8786) whose workers have "
                                             "gpualign installed; this process reads and writes.")
CPU_WORKERS = click.option("--cpu-workers", type=int, default=0,
                           help="Align on N local Dask CPU workers (the distributed path without a GPU).")


def stderr_console():
    """rich's console on stderr. A reader of stderr that has gone (`2>&1 | head -1`) loses the messages, not the
    run: rich's own handling (devnull onto stdout, then exit 1) would fail a run whose output is complete."""
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    console.on_broken_pipe = _stderr_gone
    return console


def _stderr_gone() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)


def _same_file(a: str, b: str) -> bool:
    """Whether writing to path a in place (open, as the summary is written) writes file b."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # (one of them not there yet)
        return os.path.realpath(a) == os.path.realpath(b)


def _same_name(a: str, b: str) -> bool:
    """Whether renaming a file over path a (as the output is committed) replaces file b: the same directory
    entry (a symbolic link named a: the entry it points to, which the output replaces, the link kept), or the
    entry of the file b reaches through links (b a link to a's file: the input's bytes went, exit 0); a
    directory reached by two paths (a bind mount) counts as one. (A hard link to b is another entry: b keeps
    its bytes.)"""
    def entry(p):
        return os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(p))), os.path.basename(p))

    def same_entry(x, y):
        if x == y:
            return True
        try:
            return os.path.basename(x) == os.path.basename(y) and os.path.samefile(os.path.dirname(x),
                                                                                   os.path.dirname(y))
        except OSError:  # (a directory not there: the output's check says so)
            return False

    at = entry(os.path.realpath(a) if os.path.islink(a) else a)
    return same_entry(at, entry(b)) or same_entry(at, os.path.realpath(b))


def indexes(*paths: str) -> list:
    """The index files random access reads and makes beside FASTA files (faidx's .fai, bgzip's .gzi)."""
    return [p + ext for p in paths for ext in (".fai", ".gzi")]


def check_paths(inputs: list, output: str, summary: Optional[str]) -> None:
    """Before anything runs: the output (-o, renamed over its name when complete) and the --summary file
    (written in place) are neither an input nor each other (the output was replaced, or an input overwritten,
    with exit 0), and the summary can be written. inputs: every file the run reads by name (None: none)."""
    from ..stages import STDOUT_NAMES, check_output, is_stream

    def named(p):  # a path the run writes or reads by name (not stdin/stdout, not a device or pipe)
        return p is not None and p not in STDOUT_NAMES and not is_stream(p)

    for flag, p in (("-o", output), ("--summary", summary)):
        if p == "":
            raise ConfigError(f"{flag}: an empty file name (give a path{', or - for stdout' if flag == '-o' else ''})")
    if summary == "-":
        raise ConfigError("--summary takes a file name ('-' is not stdout here; /dev/stdout is)")
    if named(output) and os.path.isdir(output):  # (before the format is read from its name: one answer)
        raise InputError(f"{output}: cannot write (a directory)")
    if named(summary) and named(output) and _same_file(summary, output):
        raise ConfigError(f"--summary {summary} is the output file (-o): give it another name")
    for flag, p, same in (("-o", output, _same_name), ("--summary", summary, _same_file)):
        if named(p):
            for inp in inputs:
                if named(inp) and same(p, inp):
                    raise ConfigError(f"{flag} {p} is an input file: the run would overwrite it")
    if named(summary):
        if os.path.isfile(summary):
            if not os.access(summary, os.W_OK):
                raise InputError(f"{summary}: cannot write the summary (permission denied)")
        else:
            check_output(summary)


def print_summary(summary, path: Optional[str], quiet: bool) -> None:
    """The summary's rows to --summary's file and, unless quiet, as a table on stderr."""
    rows = summary.rows()
    if path:
        try:
            _write_summary(path, "key\tvalue\n" + "".join(f"{k}\t{v}\n" for k, v in rows))
        except OSError as e:
            raise InputError(f"{path}: cannot write the summary ({e.strerror or e})") from None
        except WriteError as e:
            raise InputError(f"{path}: cannot write the summary ({e.why})") from None
        except GpualignError as e:  # (Output's own, naming the file: a directory, a missing one)
            raise InputError(f"cannot write the summary: {e}") from None
    if quiet:
        return
    from rich.table import Table

    table = Table(title="gpualign summary", show_header=False, box=None)
    for k, v in rows:
        table.add_row(k, v)
    stderr_console().print(table)


def _write_summary(path: str, text: str) -> None:
    """text written as a run's output is (stages.Output): a file whole beside its name and renamed over it (a
    full disk leaves the file that was there, not an empty one), a descriptor (/dev/fd/3) through a copy of it
    (kept in append mode), another device or pipe in place; OSError or WriteError when it cannot."""
    from ..stages import Output, is_stream

    if not is_stream(path) and os.path.islink(path):  # (a link's target written, as open() wrote it)
        path = os.path.realpath(path)
    out = Output(path, binary_via_path=False)
    try:
        out.sink.write(text.encode())
        out.commit()
    except BaseException:
        out.abort()
        raise


def run_guarded(body, debug: bool, inputs: tuple = (), quiet: bool = False) -> None:
    """Run body() and turn every failure into a one-line message and an exit code. inputs: the command's input
    files, whose damaged gzip data is then reported where it stops (io/damage.py), once body() has ended.
    quiet (-q): a reader that closed the output's pipe ends the run with 141 alone, as `| head` expects."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        try:
            interrupt.guard(body)  # a signal: workers and temporary files gone, `interrupted`, 130/143/129
        except BrokenProcessPool as e:  # (any pool's worker killed: the out-of-memory killer's SIGKILL, most often)
            if not WorkerLost.died(e):
                raise
            raise WorkerLost() from e
        except MemoryError as e:  # (numpy's: "Unable to allocate 1.2 GiB for an array with shape ...")
            raise OutOfMemory(str(e) or type(e).__name__) from e
    except GpualignError as e:
        if isinstance(e, WriteError) and e.broken_pipe:
            quiet_stdout()
            if quiet and not debug:
                raise click.exceptions.Exit(e.exit_code) from None
        if isinstance(e, RecordError) and inputs:
            from ..io import damage, fastx

            e = damage.located(e, {fastx.display_name(p): p for p in inputs})
        if debug:
            raise
        from rich.markup import (
            escape,  # the message's own brackets are text ([tcp://], [::1])
        )

        stderr_console().print(f"[bold red]error:[/] {escape(str(e))}", markup=True, soft_wrap=True)
        raise click.exceptions.Exit(e.exit_code)
    except KeyboardInterrupt:
        raise click.exceptions.Exit(130)
    except (BrokenPipeError, OSError) as e:
        if isinstance(e, BrokenPipeError) or getattr(e, "errno", None) == errno.EPIPE:
            quiet_stdout()
            raise click.exceptions.Exit(141)
        if debug:
            raise
        stderr_console().print(f"error: {e}", markup=False, soft_wrap=True)
        raise click.exceptions.Exit(1)


def quiet_stdout() -> None:
    """stdout onto /dev/null: its reader has gone, and the exit's flush must not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


@contextmanager
def feedback(command: str, threads: int, quiet: bool, total=None):
    """What a command over many records says on stderr: yields (threads capped at the usable cores, the
    notice printer, the progress reporter), having noticed the cap; the progress line ends with the block.
    total: () -> progress.Total, the input's size (for the share done and the time left; not with quiet)."""
    n_threads, capped = cap_threads(threads)
    err = stderr_console()
    notice = notice_printer(err, quiet)
    if capped and notice:
        notice(capped)
    size = total() if total is not None and not quiet else progress.Total()
    # rich on a terminal, else a line every 10 s
    shown = progress.genome(err, quiet) if command == "genome" else progress.records(err, command, quiet, size)
    from ..gpu import kernels

    kernels.set_notice(notice)  # a kernel compiled on first use is said
    try:
        with shown as report:
            yield n_threads, notice, report
    finally:
        kernels.set_notice(None)


def notice_printer(err, quiet: bool):
    """The one-line notices of a command (which engine ran, fallbacks) on stderr; None with --quiet."""
    return None if quiet else (lambda text: err.print(f"gpualign: {text}", markup=False, soft_wrap=True))


def command_line() -> str:
    """The command as typed, for SAM's @PG CL."""
    return "gpualign " + " ".join(shlex.quote(a) for a in sys.argv[1:])
