"""The patterns of a search: read, checked, and expanded into pattern-strands (a pattern, or its reverse
complement for strand '-'), with the bit masks the bit-parallel engines use."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, InputError, RecordError
from ..io import fastx
from ..records import Names
from . import alphabet as A

MAX_LEN = 1024  # 32 words of 32 bits per pattern
WORDS = (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32)  # the kernel's instances (kernels/myers_search.cu)


@dataclass
class Patterns:
    """Pattern-strands in output order: pattern i's '+' before its '-' (as chosen by --strand)."""

    names: list  # per pattern
    codes: list  # per pattern-strand: np.uint8 codes (reverse complement for '-')
    pattern: np.ndarray  # int32 per pattern-strand: index into names
    minus: np.ndarray  # bool per pattern-strand
    quals: list | None = None  # per pattern-strand: FASTQ's quality string (reversed for '-'); None: FASTA

    def __post_init__(self):
        self.lengths = np.array([len(c) for c in self.codes], dtype=np.int64)
        self._matrix: dict = {}

    @property
    def n(self) -> int:
        return len(self.codes)

    def matrix(self, m: int) -> np.ndarray:
        """uint8 [n, m]: row i = pattern-strand i's codes where its length is m (zeros elsewhere)."""
        if m not in self._matrix:
            out = np.zeros((self.n, m), np.uint8)
            for i in np.flatnonzero(self.lengths == m).tolist():
                out[i] = self.codes[i]
            self._matrix[m] = out
        return self._matrix[m]


def read(path: str, k: int, strand: str, force: bool = False) -> Patterns:
    """Patterns from FASTA/FASTQ; one InputError naming file and record for each kind of bad pattern."""
    names, codes, quals = [], [], []
    for i, (name, seq, qual) in enumerate(fastx.records(path), start=1):
        raw = seq.encode() if isinstance(seq, str) else seq
        if not raw:
            raise RecordError(fastx.display_name(path), i, f"pattern {name!r} is empty")
        c = A.to_codes(raw)
        if A.BAD in c:
            bad = raw[c.index(A.BAD)]
            raise RecordError(fastx.display_name(path), i,
                              f"pattern {name!r}: {chr(bad)!r} is not a DNA/IUPAC letter")
        if len(c) > MAX_LEN:
            raise RecordError(fastx.display_name(path), i, f"pattern {name!r} is {len(c)} bases long; search "
                              f"takes patterns of up to {MAX_LEN} (align longer ones with gpualign pairs/paf)")
        if k >= len(c) and not force:
            raise ConfigError(f"{fastx.display_name(path)}: record {i}: -k {k} >= length {len(c)} of pattern "
                              f"{name!r}: it would match at every position (use --force to search anyway)")
        names.append(name)
        codes.append(np.frombuffer(c, dtype=np.uint8))
        quals.append(qual)
    if not names:
        raise InputError(f"{fastx.display_name(path)}: no patterns")
    strands = {"both": (False, True), "+": (False,), "-": (True,)}[strand]
    ps_codes, ps_pat, ps_minus, ps_qual = [], [], [], []
    for i, c in enumerate(codes):
        for minus in strands:
            ps_codes.append(A.reverse_complement(c) if minus else c)
            ps_pat.append(i)
            ps_minus.append(minus)
            ps_qual.append(quals[i][::-1] if minus and quals[i] is not None else quals[i])
    has = any(q is not None for q in quals)
    return Patterns(names, ps_codes, np.array(ps_pat, np.int32), np.array(ps_minus, bool), ps_qual if has else None)


def check_sam_names(pats: Patterns, path: str) -> None:
    """SAM/BAM: a RecordError at the first pattern whose name cannot be its records' QNAME (output/sam.qname_fault:
    one starting with '@', '*' alone, holding a character other than printable ASCII or longer than QNAME_MAX),
    or one an earlier pattern has (their records' QNAME would be the same, each with a primary hit: a reader
    could not tell them apart). TSV, PAF and BED take any names, as given."""
    from ..output.sam import qname_fault

    fault = qname_fault(Names.of(list(pats.names)))  # (the rule pairs, genome and paf apply to their queries)
    if fault is not None:
        k, _, why = fault
        raise RecordError(fastx.display_name(path), k + 1, f"pattern name {why}: rename it, or write TSV, PAF or "
                          "BED")
    if len(set(pats.names)) == len(pats.names):
        return
    first: dict = {}
    for i, name in enumerate(pats.names):
        j = first.setdefault(name, i)
        if j != i:
            raise RecordError(fastx.display_name(path), i + 1, f"pattern name {name!r} appears twice (record "
                              f"{j + 1}): SAM/BAM need one name per pattern (QNAME); rename it, or write TSV, "
                              "PAF or BED")


def words(m: int) -> int:
    """32-bit words the kernel uses for a pattern of length m (the smallest instance that holds it)."""
    for w in WORDS:
        if 32 * w >= m:
            return w
    raise ValueError(f"pattern of length {m} > {MAX_LEN}")


def masks(codes: list, w: int, rule: str) -> np.ndarray:
    """uint32 [n][w][16]: bit r of word q, entry c = row 32q + r matches text code c. Each pattern sits at
    the top of its words; the rows below it match every code (a free prefix), so row m is always the last
    bit (kernels/myers_search.cu)."""
    table = A.match_table(rule)
    rows = 32 * w
    bits = np.ones((len(codes), 16, rows), dtype=bool)
    for i, c in enumerate(codes):
        bits[i, :, rows - len(c):] = table[c].T
    packed = np.packbits(bits, axis=2, bitorder="little").view("<u4")  # [n][16][w]
    return np.ascontiguousarray(packed.transpose(0, 2, 1)).astype(np.uint32)
