"""Command line: the click group, --version, and one registration line per subcommand (gpualign/commands/).

Exit codes: 0 success, 1 runtime/input error, 2 bad options, 130 Ctrl-C,
141 broken pipe (one line: the output is incomplete).
"""

from __future__ import annotations

import os
import signal
import sys

import click

from . import __version__, driver, interrupt
from .commands import cache, genome, paf, pairs, search, worker
from .commands.common import quiet_stdout
from .commands.usage import Group, command


def _version(ctx, param, value: bool) -> None:
    if value:
        print(f"gpualign {__version__}")
        ctx.exit(0)


app = Group(help="Exact pairwise DNA alignment and edit distance (GPU when present, else CPU).",
            params=[click.Option(["--version"], is_flag=True, expose_value=False, is_eager=True, callback=_version,
                                 help="Print the version and exit.")])
command(app, "pairs", "Align record i of one file with record i of another.", pairs.EPILOG)(pairs.pairs)
command(app, "paf", "Re-align PAF candidates (minimap2) exactly.", paf.EPILOG)(paf.paf)
command(app, "genome", "Edit distance and alignment of chromosome-scale strings.", genome.EPILOG)(genome.genome)
command(app, "search", "Every occurrence of many patterns with <= k edits.", search.EPILOG)(search.search)
command(app, "worker", "A Dask worker for --scheduler runs, engines warm.", worker.EPILOG)(worker.worker)
app.add_command(cache.app)


def main() -> None:
    """The `gpualign` command. Every command has committed or removed its output (and closed its worker
    processes) when the app returns, so the process ends there, skipping the interpreter's teardown
    (collecting every object, cupy's and multiprocessing's exit handlers), which is slow after a GPU run."""
    interrupt.install()
    interrupt.phase("start")
    try:
        code = _invoke(sys.argv[1:])
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:  # a signal outside a command's body (option parsing)
        code = 130
    if interrupt.signalled():
        interrupt.finish()
    quick_exit(code)


def _invoke(args: list[str]) -> int:
    """The group on args: click's own main() less its handling of Ctrl-C (which prints 'Aborted!' and
    exits 1: a signal is interrupt.py's) and of a closed stdout (commands/common.run_guarded's); usage errors
    print click's message and give its exit code (2)."""
    try:
        with app.make_context("gpualign", args) as ctx:
            app.invoke(ctx)
        return 0
    except click.exceptions.Exit as e:  # --help, --version, a command's own exit code
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except BrokenPipeError:  # help or usage text to a reader that has gone
        quiet_stdout()
        return 141


def quick_exit(code) -> None:
    """End the process now with code (SystemExit's: None is 0, text is printed and 1), stdout and stderr
    flushed; a reader that has gone away (a closed pipe) makes it 141. Unless a signal ended the run, signals are
    ignored from here and the GPU driver's teardown of this process's contexts is handed to a child
    (driver.hand_off)."""
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    code = 0 if code is None else int(code)
    for fh in (sys.stdout, sys.stderr):
        try:
            fh.flush()
        except BrokenPipeError:
            code = code or 141
        except (OSError, ValueError):
            pass
    if interrupt.signalled() is None:  # the output is complete: a signal from here on changes nothing
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except ValueError:  # (not the main thread: a caller's own)
                pass
        interrupt.ending()
        if driver.hand_off():
            interrupt.phase("handed-off")
    os._exit(code)


if __name__ == "__main__":
    main()
