"""The one character rule and the encodings derived from it.

Sequences are case-folded once when read (``fold``). Files' sequences hold letters only
(``LETTERS``); with general scoring also ``*`` and ``-`` (``SYMBOLS``), which the scoring's alphabet
check then accepts or refuses (protein: ``*``). The API accepts printable ASCII (33..126). Comparison bytes (``compare_view``) implement the
N/IUPAC policy: by default equal characters match; with ``n_mismatch`` every
non-ACGT character is rewritten to a code that matches nothing (1 in queries,
2 in targets), so any byte-comparing engine obeys the rule unchanged.
"""

from __future__ import annotations

import numpy as np

from .records import PairBatch, segment_index

FOLD = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
MIN_BYTE, MAX_BYTE = 33, 126
Q_WILD, T_WILD = 1, 2  # n_mismatch codes: never equal to each other or to a letter

_ACGT = np.zeros(256, dtype=bool)
_ACGT[list(b"ACGT")] = True

# 2-bit codes from bits 1-2 of the ASCII byte: A=0, C=1, T=2, G=3 (GPU packing uses the same)
CODE2 = np.full(256, 255, dtype=np.uint8)
for _c in b"ACGT":
    CODE2[_c] = (_c >> 1) & 3


LETTERS = bytes(range(65, 91)) + bytes(range(97, 123))
SYMBOLS = b"*-"  # allowed in files' sequences with general scoring (its alphabet check decides)
QUALITY = bytes(range(33, 127))  # FASTQ quality characters


def symbols(general: bool) -> bytes:
    """The non-letter bytes a file's sequences may hold: SYMBOLS with general scoring, else none."""
    return SYMBOLS if general else b""


def fold_table(symbols: bytes = b"") -> bytes:
    """A bytes.translate table: letters to upper case, `symbols` kept, every other byte to 0."""
    table = bytearray(256)
    for c in LETTERS + symbols:
        table[c] = FOLD[c]
    return bytes(table)


_FOLD_CHECKED = {b"": fold_table(b"")}


def fold_checked(seq: bytes, symbols: bytes = b"") -> tuple[bytes, int]:
    """(seq case-folded, index of its first byte that is neither a letter nor in symbols, or -1): one
    translate and one search."""
    table = _FOLD_CHECKED.get(symbols)
    if table is None:
        table = _FOLD_CHECKED[symbols] = fold_table(symbols)
    out = seq.translate(table)
    return out, out.find(0)


def fold(seq: bytes) -> bytes:
    return seq.translate(FOLD)


def first_bad_byte(buf: np.ndarray) -> int:
    """Index of the first byte outside 33..126, or -1."""
    bad = (buf < MIN_BYTE) | (buf > MAX_BYTE)
    if not bad.any():
        return -1
    return int(np.argmax(bad))


def is_acgt(buf: np.ndarray) -> np.ndarray:
    return _ACGT[buf]


def compare_view(batch: PairBatch, n_mismatch: bool) -> np.ndarray:
    """The bytes engines compare: seq itself, or with non-ACGT made unmatchable."""
    if not n_mismatch:
        return batch.seq
    out = batch.seq.copy()
    for off, ln, code in ((batch.q_off, batch.q_len, Q_WILD), (batch.t_off, batch.t_len, T_WILD)):
        idx = segment_index(off, ln)
        out[idx] = make_wild(out[idx], code)
    return out


def make_wild(seq: np.ndarray, code: int) -> np.ndarray:
    """seq with every non-ACGT byte rewritten to code (Q_WILD for queries, T_WILD for targets), in place."""
    seq[~_ACGT[seq]] = code
    return seq


def equal(a: np.ndarray, b: np.ndarray, n_mismatch: bool) -> np.ndarray:
    """Elementwise match under the character rule (inputs already case-folded)."""
    eq = a == b
    if n_mismatch:
        eq &= _ACGT[a] & _ACGT[b]
    return eq
