"""The search's 4-bit base codes and its three character rules.

Codes: A0 C1 G2 T3 N4, the other IUPAC letters R5 Y6 S7 W8 K9 M10 B11 D12 H13 V14 (case-insensitive),
15 = padding between text pieces (matches nothing). Any other byte in a sequence is an input error.

Rules (``match_table``), pattern code x text code:
- ``default``: equal letters match (N matches N, as everywhere in gpualign);
- ``n_mismatch``: only equal A/C/G/T match (N and IUPAC letters match nothing, themselves included);
- ``iupac``: a pattern letter matches every base A/C/G/T it stands for (N: all four, R: A or G, ...);
  text letters other than A/C/G/T match nothing.
"""

from __future__ import annotations

import numpy as np

LETTERS = b"ACGTNRYSWKMBDHV"
PAD = 15
BAD = 0xFF
RULES = ("default", "n_mismatch", "iupac")

# bytes.translate table: letters (either case) -> code, every other byte -> BAD
TO_CODE = bytearray([BAD] * 256)
for _i, _c in enumerate(LETTERS):
    TO_CODE[_c] = TO_CODE[_c + 32] = _i
TO_CODE = bytes(TO_CODE)
TO_LETTER = bytes(LETTERS[i] if i < len(LETTERS) else ord("N") for i in range(16)) + bytes(240)

_STANDS_FOR = {"A": "A", "C": "C", "G": "G", "T": "T", "N": "ACGT", "R": "AG", "Y": "CT", "S": "CG",
               "W": "AT", "K": "GT", "M": "AC", "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG"}
COMPLEMENT_CODE = np.array([LETTERS.index(b"TGCANYRSWMKVHDB"[i]) for i in range(15)] + [PAD], np.uint8)


def match_table(rule: str) -> np.ndarray:
    """bool [16 pattern codes, 16 text codes]: which pairs match under the rule."""
    t = np.zeros((16, 16), dtype=bool)
    for p, pl in enumerate(LETTERS.decode()):
        for x, xl in enumerate(LETTERS.decode()):
            if rule == "default":
                t[p, x] = p == x
            elif rule == "n_mismatch":
                t[p, x] = p == x and x < 4
            else:
                t[p, x] = x < 4 and xl in _STANDS_FOR[pl]
    return t


def reverse_complement(codes: np.ndarray) -> np.ndarray:
    return COMPLEMENT_CODE[codes[::-1]]


def line_bytes(data: bytes) -> bytes:
    """data without its line ends (LF, CR LF; a CR that ends data too: its LF may begin the next buffer). A CR
    that ends no line stays (io's readers refuse it; to_codes makes it BAD)."""
    if b"\r" not in data:
        return data.translate(None, b"\n")
    if data.endswith(b"\r"):
        data = data[:-1]
    return data.replace(b"\r\n", b"\n").translate(None, b"\n")


def to_codes(data: bytes) -> bytes:
    """Codes of data with its line ends left out (line_bytes); BAD marks a byte that is no IUPAC letter, a CR
    that ends no line too."""
    if not lone_cr(data):  # (every CR a CR LF's, or the buffer's last byte: one translate)
        return data.translate(TO_CODE, b"\r\n")
    return line_bytes(data).translate(TO_CODE)


def lone_cr(data: bytes) -> bool:
    """Whether data holds a CR that ends no line (one ending data may be a CR LF's: not counted)."""
    if b"\r" not in data:
        return False
    n = data.count(b"\r") - data.endswith(b"\r")
    return n != data.count(b"\r\n")


def sassy_profile(rule: str) -> tuple[str, bytes, bytes]:
    """(sassy alphabet, translate table for pattern codes, for text codes) that give the rule's matches
    in sassy-rs: 'ascii' compares bytes (default: letters; n_mismatch: non-ACGT made two bytes that
    match nothing), 'iupac' compares IUPAC sets (text non-ACGT made 'X', which matches nothing)."""
    pat, txt = bytearray(TO_LETTER), bytearray(TO_LETTER)
    txt[PAD] = 3  # padding matches nothing
    if rule == "default":
        return "ascii", bytes(pat), bytes(txt)
    for c in range(4, 16):
        txt[c] = 2 if rule == "n_mismatch" else ord("X")
        if rule == "n_mismatch":
            pat[c] = 1
    return ("ascii" if rule == "n_mismatch" else "iupac"), bytes(pat), bytes(txt)
