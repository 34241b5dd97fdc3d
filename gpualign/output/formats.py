"""The output formats of `pairs`, `paf` and `genome` (alignment records), and which one a run writes."""

from __future__ import annotations

import os

from ..errors import ConfigError
from .sink import format_from_name, is_stream

FORMATS = ("paf", "sam", "bam", "tsv")
_EXT = {".paf": "paf", ".sam": "sam", ".bam": "bam", ".tsv": "tsv", ".txt": "tsv"}


def infer_format(fmt: str | None, out: str, distance_only: bool, formats: tuple = FORMATS) -> str:
    """-f's format, else the output name's (stdout and devices: PAF, TSV with --distance-only); formats: the
    command's (its messages list those only)."""
    ext = {e: f for e, f in _EXT.items() if f in formats}
    fmt = format_from_name(fmt, out, formats, ext, "tsv" if distance_only else "paf")
    if fmt == "paf" and distance_only:
        others = [f for f in formats if f != "paf"]
        listed = " or ".join([", ".join(others[:-1]), others[-1]] if len(others) > 1 else others)
        raise ConfigError(f"PAF needs CIGAR-derived columns: use --format {listed} with --distance-only")
    return fmt


def named_format(out: str) -> str | None:
    """The format out's name says by its extension (.gz after it allowed), or None: a stream, or a name no
    format's extension ends."""
    if is_stream(out):
        return None
    base = out[:-3] if out.lower().endswith(".gz") else out
    return _EXT.get(os.path.splitext(base)[1].lower())


def name_notice(given: str | None, out: str, fmt: str) -> str | None:
    """A notice where -f writes a format other than the one the output's name ends in (.paf, .sam, .bam,
    .tsv; .txt says no format): the file is written as asked, its name left as given."""
    named = named_format(out)
    if not given or named is None or named == fmt or out.lower().removesuffix(".gz").endswith(".txt"):
        return None
    return f"writing {fmt.upper()} to {out} as --format says, though its name ends in .{named}"
