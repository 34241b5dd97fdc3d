"""Whole FASTA records found in a buffer with array operations (no Python step per line or record): the one
block scanner under io's strict reader (its blocks of many records) and search's text stream and ranges. The
letter rule is the caller's, as a 256-byte translate table (`table`): each byte a sequence may hold to its code
(a letter to itself, or search's 4-bit code), CR and LF to LINE_END, every other byte ('>' too) to BAD."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

LINE_END = 0xFE  # a table's value for CR and LF: left out of the codes
BAD = 0xFF  # a table's value for a byte no sequence line may hold


def table(codes: bytes) -> bytes:
    """A scan table from codes (256 bytes: a byte's code, BAD for a byte not allowed): CR and LF made LINE_END."""
    out = bytearray(codes)
    out[10] = out[13] = LINE_END
    out[62] = BAD  # ('>' starts a record; inside a sequence line it is no letter)
    return bytes(out)


class Block(NamedTuple):
    """The records of a buffer from its first '>': starts (each '>'), ends (each finished header line's LF;
    only the last header can be unfinished, so len(ends) is len(starts) or one less), codes (the sequence
    lines' bytes translated, line ends left out, one record after another) and counts (codes after each
    finished header, up to the next '>' or the buffer's end: the last record may go on after it)."""

    starts: np.ndarray
    ends: np.ndarray
    codes: np.ndarray
    counts: np.ndarray


def scan(data: bytes, first: int, codes: bytes) -> Block | None:
    """The records of data[first:] (data[first] is a '>' that starts a line; codes: a `table`): a record starts
    at each '>' that starts a line. None where a sequence line holds a byte the table makes BAD (a '>' too):
    the caller's reader then goes through the bytes closer, to name the fault and its line."""
    arr = np.frombuffer(data, np.uint8)
    gts = np.flatnonzero(arr[first:] == 62) + first
    starts = gts[np.append(True, arr[gts[1:] - 1] == 10)]  # (a '>' inside a header line belongs to it; one
    # inside a sequence line is BAD)
    t = np.frombuffer(data[first:].translate(codes), np.uint8)
    drop = np.flatnonzero(t == LINE_END) + first
    lfs = drop[arr[drop] == 10]
    e = np.searchsorted(lfs, starts)
    done = int((e < len(lfs)).sum())  # (only the last header can be unfinished)
    ends = lfs[e[:done]]
    closes = np.append(ends + 1, len(data))[:len(starts)]  # where each header line ends (an unfinished one: data's)
    bounds = np.column_stack([starts, closes]).ravel()
    in_header = np.repeat(np.tile(np.array([True, False]), len(starts)), np.diff(bounds, append=len(data)))
    keep = t != LINE_END
    keep &= ~in_header
    out = t[keep]
    if len(out) and out.max() == BAD:
        return None
    hi = np.append(starts[1:], len(data))[:done]  # each record's end (the next '>')
    counts = (hi - ends - 1) - (np.searchsorted(drop, hi) - np.searchsorted(drop, ends + 1))
    return Block(starts, ends, out, counts)
