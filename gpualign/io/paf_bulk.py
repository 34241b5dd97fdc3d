"""A chunk of PAF lines parsed as a whole (numpy over its bytes), for the reader processes of `gpualign paf`.

paf.parse_lines takes a line at a time (a regular expression, the columns converted, the tags filtered: ~6 us a
line, most of a reader process's time on short reads). Here the same rules are checked for every line at once;
a chunk holding any line they do not take (non-ASCII text, a CR inside a line, a malformed or out-of-range
column, a number of 19 digits or more) is left to parse_lines, which names the fault in line order. Blank and
'#' lines are skipped as there.
"""

from __future__ import annotations

import numpy as np

from ..records import segment_index
from ..text import read_ints
from .paf import STALE_TAGS, Candidates

_MAX_DIGITS = 18  # (text.read_ints' bound)
_STALE = np.array(sorted(ord(t[0]) << 8 | ord(t[1]) for t in STALE_TAGS), dtype=np.int64)
_INT_COLUMNS = (2, 3, 4, 7, 8, 9, 10, 11, 12)


def parse(lines: list, first: int) -> Candidates | None:
    """The candidates of lines (numbered from first, each ending with LF but maybe the last), or None where
    parse_lines must take them."""
    text = "".join(lines)
    if not text or not text.isascii():
        return None
    buf = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    size = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
    start = np.cumsum(size) - size
    end = start + size
    while True:  # the line's end: its LF, and any CR before it, left out (parse_lines' rstrip("\r\n"))
        m = end > start
        m[m] = (buf[end[m] - 1] == 10) | (buf[end[m] - 1] == 13)
        if not m.any():
            break
        end[m] -= 1
    row = np.flatnonzero((end > start) & (buf[np.minimum(start, len(buf) - 1)] != ord("#")))
    if len(row) == 0:
        return None
    start, end = start[row], end[row]
    cr = np.flatnonzero(buf == 13)
    if len(cr) and (np.searchsorted(cr, end) > np.searchsorted(cr, start)).any():  # a CR inside a line
        return None
    tabs = np.flatnonzero(buf == 9)
    lo, hi = np.searchsorted(tabs, start), np.searchsorted(tabs, end)
    if (hi - lo < 11).any():
        return None
    tab = tabs[lo[:, None] + np.arange(11)]  # each line's first 11 tabs
    col_end = np.where(hi - lo > 11, tabs[np.minimum(lo + 11, len(tabs) - 1)], end)  # column 12's end
    bounds = np.concatenate([start[:, None], tab + 1], axis=1), np.concatenate([tab, col_end[:, None]], axis=1)

    def field(col: int) -> tuple:
        return bounds[0][:, col - 1], bounds[1][:, col - 1]

    vals = {}
    for col in _INT_COLUMNS:
        a, b = field(col)
        n = b - a
        if not ((n >= 1) & (n <= _MAX_DIGITS)).all():
            return None
        vals[col] = read_ints(buf, a, n)
        if vals[col] is None:
            return None
    a, b = field(5)
    strand = buf[a]
    ql, qs, qe, tl, ts, te, mq = (vals[c] for c in (2, 3, 4, 7, 8, 9, 12))
    if not ((b - a == 1) & ((strand == 43) | (strand == 45)) & (qs <= qe) & (qe <= ql) & (ts <= te) & (te <= tl)
            & (mq <= 255)).all():
        return None
    strands = [("-", "+")[k] for k in (strand == 43).tolist()]
    return Candidates.of_columns(line=row + first, qname=_texts(text, *field(1)), qlen=ql, qs=qs, qe=qe,
                                 strand=strands, tname=_shared(_texts(text, *field(6))), tlen=tl, ts=ts, te=te,
                                 mapq=mq, tags=_tags(buf, tabs, lo + 11, hi, end))


def _texts(text: str, a: np.ndarray, b: np.ndarray) -> list:
    return [text[x:y] for x, y in zip(a.tolist(), b.tolist())]


def _tags(buf: np.ndarray, tabs: np.ndarray, lo: np.ndarray, hi: np.ndarray, end: np.ndarray) -> list:
    """Each line's tags after its 12 columns (the tabs from lo to hi of tabs, the line ending at end), but the
    empty ones and STALE_TAGS's: parse_lines's lists (lines with the same tags share one list: not to be changed
    in place)."""
    count = hi - lo
    if not count.any():
        return [[] for _ in range(len(lo))]
    line = np.repeat(np.arange(len(lo)), count)
    at = tabs[np.repeat(lo - np.cumsum(count) + count, count) + np.arange(int(count.sum()))]  # each tag's tab
    some = count > 0
    stop = np.empty_like(at)
    stop[:-1] = at[1:]
    stop[(np.cumsum(count) - 1)[some]] = end[some]  # (a line's last tag ends with it)
    n = stop - at - 1
    pair = np.where(n >= 2, buf[np.minimum(at + 1, len(buf) - 1)].astype(np.int64) << 8
                    | buf[np.minimum(at + 2, len(buf) - 1)], -1)
    keep = (n > 0) & ~np.isin(pair, _STALE)
    # the kept bytes of the lines one after another: each line's run is its kept tags' (each after its tab)
    runs = np.bincount(line[keep], weights=n[keep] + 1, minlength=len(lo)).astype(np.int64)
    firsts = np.cumsum(runs) - runs
    joined = buf[segment_index(at[keep], n[keep] + 1)].tobytes().decode("ascii")
    rows = [joined[a:a + k] for a, k in zip(firsts.tolist(), runs.tolist())]
    lists = {text: text[1:].split("\t") if text else [] for text in dict.fromkeys(rows)}
    return [lists[text] for text in rows]


def _shared(texts: list) -> list:
    """texts with each distinct string one object (a chunk's target names and tag lists repeat: pickled once)."""
    one: dict = {}
    return [one.setdefault(x, x) for x in texts]
