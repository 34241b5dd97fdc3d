"""Command line: the Typer app, --version, and one registration line per subcommand (gpualign/commands/).

Exit codes: 0 success, 1 runtime/input error, 2 bad options, 130 Ctrl-C,
141 broken pipe (one line: the output is incomplete).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from . import __version__, interrupt
from .commands import cache, genome, paf, pairs, search
from .commands.usage import HELP_OPTIONS, PlainCommand

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, context_settings=HELP_OPTIONS,
                  help="Exact pairwise DNA alignment and edit distance (GPU when present, else CPU).")


def _version(value: bool) -> None:
    if value:
        print(f"gpualign {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    pass


app.command(name="pairs", short_help="Align record i of one file with record i of another.",
            epilog=pairs.EPILOG, cls=PlainCommand)(pairs.pairs)
app.command(name="paf", short_help="Re-align PAF candidates (minimap2) exactly.", epilog=paf.EPILOG,
            cls=PlainCommand)(paf.paf)
app.command(name="genome", short_help="Edit distance of chromosome-scale strings.", epilog=genome.EPILOG,
            cls=PlainCommand)(genome.genome)
app.command(name="search", short_help="Every occurrence of many patterns with <= k edits.",
            epilog=search.EPILOG, cls=PlainCommand)(search.search)
app.add_typer(cache.app, name="cache", short_help="The compiled GPU kernels: build them ahead, list, clear.")


def main() -> None:
    """The `gpualign` command. Every command has committed or removed its output (and closed its worker
    processes) when the app returns, so the process ends there, skipping the interpreter's teardown
    (collecting every object, cupy's and multiprocessing's exit handlers), which is slow after a GPU run."""
    interrupt.install()
    interrupt.phase("start")
    try:
        app(prog_name="gpualign")
        code = 0
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:  # a signal outside a command's body (option parsing)
        code = 130
    if interrupt.signalled():
        interrupt.finish()
    quick_exit(code)


def quick_exit(code) -> None:
    """End the process now with code (SystemExit's: None is 0, text is printed and 1), stdout and stderr
    flushed; a reader that has gone away (a closed pipe) makes it 141."""
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
    os._exit(code)


if __name__ == "__main__":
    main()
