"""The GPU engine's seed filter for one-word patterns (kernels/myers_search.cu's seeds, seed_verify and
seed_warps): when many short patterns are searched with a small k, most (pattern, text column) pairs can hold
no hit at all. Each pattern-strand is cut into k + 1 pieces of nearly equal length; an alignment with at most
k edits leaves one of them whole (pigeonhole), so only the windows around exact occurrences of a piece need
Myers' column, and the whole search is as exact as the scan. Two forms, each used where its expected work on
uniform random text is far below the scan's (every column with every pattern):
- sparse (a few hundred patterns: a candidate every base or so): the candidates are counted, written
  compactly, then verified a thread each (seeds, seed_verify);
- dense (thousands: hundreds of candidates a base): a warp per stretch of text, its lanes over the pieces
  found at each base, verifying their windows at once (seed_warps). The pieces of q codes and the longer
  ones are keyed apart (by q and q + 1 codes), so every piece a key names is a candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..records import offsets_from_lengths
from . import alphabet as A

QMIN, QMAX = 4, 8  # codes per key: shorter pieces occur too often; longer keys make too large a table
MAX_PER_BASE = 2.0  # sparse: expected candidates per text base at most (8 bytes each on the device; gpu.py
# scans a chunk whose expected candidates pass half its MAX_SEED_CANDS: 2^27 = 1.6 per base of the default chunks)
WORK_SHARE = 0.25  # sparse: the windows' columns per text base, at most this share of the scan's pattern-columns
# per base (the strands)
DENSE_SHARE = 0.5  # dense: the lanes' window columns per text base (idle lanes too), at most this share of the
# scan's pattern-columns per base (the strands)
DENSE_STEP = 64  # dense: its per-base work besides the windows (the keys, the loads), in lane slots (whole windows)
DENSE_MOST = 1.0  # dense: at the base of a text where it works most (the fullest keys), at most this share of the
# scan's pattern-columns per base
FT = 512  # seed offsets per thread of the sparse form's kernels
DENSE_FT = 64  # seed offsets per warp of the dense form


@dataclass
class Seeds:
    """The pieces of a group of pattern-strands, keyed by their first q codes: the pieces of key x are
    entries[offsets[x]:offsets[x + 1]], each strand << 8 | offset in the strand << 3 | the piece's next
    code after its first q (4: none). Dense: offsets and entries hold only the pieces of q codes, and
    long_offsets, long_entries the longer ones, keyed by their first q + 1 codes."""

    q: int
    offsets: np.ndarray  # uint32 [4^q + 1]
    entries: np.ndarray  # uint32
    per_base: float  # expected candidates per base of uniform random text
    back: int  # the longest strand + k - 1: seeds this far before a reported end can start its alignment
    long_offsets: np.ndarray | None = None  # uint32 [4^(q + 1) + 1] (dense only)
    long_entries: np.ndarray | None = None

    @property
    def dense(self) -> bool:
        return self.long_offsets is not None

    @property
    def ft(self) -> int:
        """Seed offsets per thread (sparse) or warp (dense)."""
        return DENSE_FT if self.dense else FT

    def table(self) -> np.ndarray:
        """The kernels' table: offsets then entries (dense: then the long ones' offsets and entries)."""
        parts = [self.offsets, self.entries] + ([self.long_offsets, self.long_entries] if self.dense else [])
        return np.concatenate(parts)


def _keyed(keys: np.ndarray, entries: np.ndarray, n_keys: int) -> tuple:
    """(offsets [n_keys + 1], entries sorted by key): the entries of key x are entries[offsets[x]:offsets[x + 1]]."""
    order = np.argsort(keys, kind="stable")
    return np.searchsorted(keys[order], np.arange(n_keys + 1)).astype(np.uint32), entries[order]


def _lanes(offsets: np.ndarray, q: int) -> tuple[float, int]:
    """A dense table's lane slots (whole warps' turns: 32 lanes each) per base of uniform random text, keyed by
    q codes, and at a base where its fullest key occurs."""
    turns = 32 * -(-np.diff(offsets.astype(np.int64)) // 32)
    return float(turns.sum()) * 4.0 ** -q, int(turns.max(initial=0))


def plan(codes: list, k: int, rule: str) -> Seeds | None:
    """The seed filter for these pattern-strands (np.uint8 codes, each at most 32), or None where it does not
    apply (a letter other than A/C/G/T, a rule under which such a letter matches more than itself, pieces
    shorter than QMIN) or would not pay: sparse up to MAX_PER_BASE candidates a base (WORK_SHARE), dense
    past it (DENSE_SHARE; and at no base of any text more work than the scan's, so a text of the fullest
    key's letters, poly-A say, costs no more than scanning it)."""
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
    long = np.diff(cuts, axis=1) > q
    n_long = long.sum(axis=1)
    per_base = float(((k + 1 - n_long) * 4.0 ** -q + n_long * 4.0 ** -(q + 1)).sum())
    back, window = int(lengths.max()) + k - 1, int(lengths.max()) + 2 * k
    dense = per_base > MAX_PER_BASE
    if not dense and per_base * window > WORK_SHARE * len(codes):
        return None
    padded = np.zeros((len(codes), 32), np.int64)
    for s, c in enumerate(codes):
        padded[s, :len(c)] = c
    strand = np.repeat(np.arange(len(codes)), k + 1)
    a, long = cuts[:, :-1].ravel(), long.ravel()
    keys = padded[strand[:, None], a[:, None] + np.arange(q)] @ (4 ** np.arange(q - 1, -1, -1))
    after = np.where(long, padded[strand, np.minimum(a + q, 31)], 4)  # (else: none)
    entries = (strand << 8 | a << 3 | after).astype(np.uint32)  # (strand-major, pieces in order)
    if not dense:
        return Seeds(q, *_keyed(keys, entries, 4 ** q), per_base, back)
    short, longer = _keyed(keys[~long], entries[~long], 4 ** q), _keyed(4 * keys[long] + after[long],
                                                                        entries[long], 4 ** (q + 1))
    (slots, most), (slots_l, most_l) = _lanes(short[0], q), _lanes(longer[0], q + 1)
    if (slots + slots_l + DENSE_STEP) * window > DENSE_SHARE * len(codes) or \
            (most + most_l) * window > DENSE_MOST * len(codes):
        return None
    return Seeds(q, *short, per_base, back, *longer)


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
    """The filter kernels' threads (dense: warps) over chunk, as they find them: uint32 first[n], last[n], then
    tile0[n + 1] for its n pieces: piece p's seed offsets [first, last) (those whose alignments can end in its
    reported part, from `back` before it) go to threads tile0[p] .. tile0[p + 1] - 1, seeds.ft offsets each
    (tile0[n]: the threads)."""
    lo, rep, hi = bounds(chunk)
    first = np.maximum(lo, rep - seeds.back)
    # t + q <= hi; none in a piece with nothing to report (so a chunk with seed tiles has scan tiles too)
    last = np.where(chunk.length > 0, np.maximum(first, hi - seeds.q + 1), first)
    tile0 = np.zeros(len(lo) + 1, np.int64)
    np.cumsum(-(-(last - first) // seeds.ft), out=tile0[1:])
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
