"""The CLI as the tests spawn it: `python -m gpualign ARGS` from this source tree, in one place."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli_command(*args) -> list[str]:
    """The argument vector of `gpualign ARGS` run by this interpreter."""
    return [sys.executable, "-m", "gpualign", *map(str, args)]


def cli_env(env: dict | None = None) -> dict:
    """The environment a spawned CLI gets: this one, unbuffered, this source tree's gpualign first on the
    path (as the tests import it), plus env."""
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path, **(env or {})}


def run_cli(*args, stdin=None, env: dict | None = None, cwd=None, text: bool = False,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """`gpualign ARGS` to its end: stdout and stderr captured (bytes, or str with text=True); stdin: the
    bytes (str with text=True) it reads, else nothing."""
    return subprocess.run(cli_command(*args), input=stdin, capture_output=True, cwd=cwd, env=cli_env(env),
                          text=text, timeout=timeout)
