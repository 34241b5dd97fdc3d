"""The GPU engine's seed filter for one-word patterns (kernels/myers_search.cu's seeds and seed_verify):
when a few hundred short patterns are searched with a small k, most text columns can hold no hit at all.
Each pattern-strand is cut into k + 1 pieces of nearly equal length; an alignment with at most k edits
leaves one of them whole (pigeonhole), so only the windows around exact occurrences of a piece need Myers'
column, and the whole search is as exact as the scan. Used where the pieces are long enough that their
expected occurrences in uniform random text cost far less than scanning every column with every pattern.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..records import offsets_from_lengths
from . import alphabet as A

QMIN, QMAX = 4, 8  # codes per key: shorter pieces occur too often; longer keys make too large a table
MAX_PER_BASE = 2.0  # expected candidates per text base at most (8 bytes each on the device; gpu.py scans a
# chunk whose expected candidates pass half its MAX_SEED_CANDS: 2^27 = 1.6 per base of the default chunks)
WORK_SHARE = 0.25  # the windows' columns per text base, at most this share of the scan's pattern-columns
FT = 512  # seed offsets per thread of the candidate kernels


@dataclass
class Seeds:
    """The pieces of a group of pattern-strands, keyed by their first q codes: the pieces of key x are
    entries[offsets[x]:offsets[x + 1]], each strand << 8 | offset in the strand << 3 | the piece's next
    code after its first q (4: none)."""

    q: int
    offsets: np.ndarray  # uint32 [4^q + 1]
    entries: np.ndarray  # uint32
    per_base: float  # expected candidates per base of uniform random text
    back: int  # the longest strand + k - 1: seeds this far before a reported end can start its alignment


def plan(codes: list, k: int, rule: str) -> Seeds | None:
    """The seed filter for these pattern-strands (np.uint8 codes, each at most 32), or None where it does not
    apply (a letter other than A/C/G/T, a rule under which such a letter matches more than itself, pieces
    shorter than QMIN) or would not pay (MAX_PER_BASE, WORK_SHARE)."""
    if not codes or k < 0:
        return None
    table = A.match_table(rule)
    if any(table[p].sum() != 1 or not table[p, p] for p in range(4)):
        return None
    lengths = np.array([len(c) for c in codes])
    if lengths.max() > 32 or int(np.concatenate(codes).max(initial=0)) > 3:
        return None
    q = int((lengths // (k + 1)).min())
    if q < QMIN:
        return None
    q = min(q, QMAX)
    cuts = np.arange(k + 2) * lengths[:, None] // (k + 1)  # piece i of strand s: [cuts[s, i], cuts[s, i + 1])
    longer = (np.diff(cuts, axis=1) > q).sum(axis=1)
    per_base = float(((k + 1 - longer) * 4.0 ** -q + longer * 4.0 ** -(q + 1)).sum())
    back = int(lengths.max()) + k - 1
    if per_base > MAX_PER_BASE or per_base * (lengths.max() + 2 * k) > WORK_SHARE * len(codes):
        return None
    padded = np.zeros((len(codes), 32), np.int64)
    for s, c in enumerate(codes):
        padded[s, :len(c)] = c
    strand = np.repeat(np.arange(len(codes)), k + 1)
    a = cuts[:, :-1].ravel()
    keys = padded[strand[:, None], a[:, None] + np.arange(q)] @ (4 ** np.arange(q - 1, -1, -1))
    after = np.where(np.diff(cuts, axis=1).ravel() > q, padded[strand, np.minimum(a + q, 31)], 4)  # (else: none)
    entries = (strand << 8 | a << 3 | after).astype(np.uint32)  # (strand-major, pieces in order)
    order = np.argsort(keys, kind="stable")
    offsets = np.searchsorted(keys[order], np.arange(4 ** q + 1)).astype(np.uint32)
    return Seeds(q, offsets, entries[order], per_base, back)


def bounds(chunk) -> tuple:
    """Per piece of chunk: its first byte (context included), its first reported offset, its end."""
    rep = chunk.buf + chunk.context
    return chunk.buf, rep, rep + chunk.length


def spans(lo: np.ndarray, hi: np.ndarray, step: int) -> np.ndarray:
    """uint32 [n, 3]: (piece, a, b) for each piece's [lo, hi) (buffer offsets, hi >= lo) cut into spans of
    step (its last one shorter; none for an empty piece), pieces in order. All pieces at once: a chunk may
    hold many thousands of contigs."""
    per = -(-(hi - lo) // step)
    out = np.empty((int(per.sum()), 3), np.uint32)
    out[:, 0] = np.repeat(np.arange(len(lo), dtype=np.uint32), per)
    at = out[:, 1]
    at[:] = np.arange(len(out), dtype=np.uint32)
    at -= np.repeat(offsets_from_lengths(per).astype(np.uint32), per)  # (span within its piece)
    at *= np.uint32(step)
    at += np.repeat(lo.astype(np.uint32), per)
    np.minimum(at + np.uint32(step), np.repeat(hi.astype(np.uint32), per), out=out[:, 2])
    return out


def tiles(chunk, seeds: Seeds) -> np.ndarray:
    """The candidate kernels' threads over chunk, as they find them: uint32 first[n], last[n], then tile0[n + 1]
    for its n pieces: piece p's seed offsets [first, last) (those whose alignments can end in its reported part,
    from `back` before it) go to threads tile0[p] .. tile0[p + 1] - 1, FT offsets each (tile0[n]: the threads)."""
    lo, rep, hi = bounds(chunk)
    first = np.maximum(lo, rep - seeds.back)
    # t + q <= hi; none in a piece with nothing to report (so a chunk with seed tiles has scan tiles too)
    last = np.where(chunk.length > 0, np.maximum(first, hi - seeds.q + 1), first)
    tile0 = np.zeros(len(lo) + 1, np.int64)
    np.cumsum(-(-(last - first) // FT), out=tile0[1:])
    return np.concatenate([first, last, tile0]).astype(np.uint32)


def best(ends: np.ndarray, ps: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Indices of the entries that keep, for each (ps, end), the least d (seed_verify reports an end once per
    window that reaches it): sorted by ps, end."""
    key = (ps.astype(np.uint64) << np.uint64(42)) | (ends.astype(np.uint64) << np.uint64(10)) | d.astype(np.uint64)
    order = np.argsort(key, kind="stable")
    top = key[order] >> np.uint64(10)
    keep = np.ones(len(order), bool)
    keep[1:] = top[1:] != top[:-1]
    return order[keep]
