"""General scoring: the substitution table a config asks for, and the check of input characters.

A ``Substitution`` is the scores of every letter pair (integers, symmetric or not) over its letters,
picklable (the cpu-dp workers build their parasail matrix from it). It comes from Biopython's
``substitution_matrices`` (a name such as BLOSUM62, PAM250, NUC.4.4, or a file in that format) or from
the match bonus and mismatch penalty over the DNA letters. Sequences are case-folded upper case, so the
matrix's letters are too. ``check_batch`` stops a run at the first character the table cannot score
(naming file, record and character) unless ``--unknown`` names the letter such characters become.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import numpy as np

from . import pack
from .config import DNA_LETTERS, PROTEIN_LETTERS, SCORE_MAX, AlignConfig
from .errors import ConfigError, InputError
from .records import PairBatch, concatenated, offsets_from_lengths


@dataclass(frozen=True)
class Substitution:
    name: str
    letters: str  # one character per row/column of scores
    scores: tuple  # rows of ints (a tuple of tuples: hashable, picklable)

    def array(self) -> np.ndarray:
        return np.array(self.scores, dtype=np.int64).reshape(len(self.letters), len(self.letters))

    def lookup(self) -> np.ndarray:
        """(256, 256) int64 scores by byte pair (0 outside the letters): for re-scoring CIGARs."""
        out = np.zeros((256, 256), np.int64)
        idx = np.frombuffer(self.letters.encode("latin-1"), dtype=np.uint8)
        out[np.ix_(idx, idx)] = self.array()
        return out


def _load_matrix(name: str):
    from Bio.Align import substitution_matrices as sm

    try:
        if os.path.isfile(name):
            _check_layout(name)
            return sm.read(name)
        if os.path.exists(name) and not os.path.isdir(name):  # (a pipe: the matrix is read more than once)
            raise ConfigError(f"--matrix {name}: not a regular file (the matrix is read more than once: give a file)")
        return sm.load(name)  # (a directory of that name aside: Biopython's own)
    except FileNotFoundError:
        known = ", ".join(sm.load())
        what = "a directory, not a matrix file," if os.path.isdir(name) else "neither a file"
        raise ConfigError(f"--matrix {name}: {what} nor a matrix Biopython knows ({known})") from None
    except OSError as e:
        why = "a directory, not a matrix file" if os.path.isdir(name) else f"cannot read it ({e.strerror})"
        raise ConfigError(f"--matrix {name}: {why}") from None
    except (ValueError, IndexError, KeyError, AssertionError, UnboundLocalError, UnicodeDecodeError) as e:
        raise ConfigError(f"--matrix {name}: cannot read it as a substitution matrix ({e})") from None


def _check_layout(path: str) -> None:
    """A ConfigError unless the file is a whole square matrix as Biopython's reader takes it: '#' lines first,
    a line of K letters, then K lines each of the next letter and K scores, and nothing after but blank or '#'
    lines.
    (Biopython reads a short row as scores of 0, ignores rows past the K-th, and stops on others with an
    assertion.)"""
    with open(path, encoding="ascii", errors="replace") as fh:
        lines = [line.rstrip("\r\n") for line in fh]  # (lines as Biopython's readlines() cuts them: no \f, \v)
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        n += 1
    letters = lines[n].split() if n < len(lines) else []
    if not letters:
        raise ConfigError(f"--matrix {path}: no letters" + ("" if lines else " (an empty file)") +
                          ("" if n >= len(lines) else f" on line {n + 1}, after the '#' lines"))
    body = lines[n + 1:]
    for k, letter in enumerate(letters):
        if k >= len(body):
            raise ConfigError(f"--matrix {path}: {k} rows of scores for {len(letters)} letters")
        row, at = body[k].split(), n + 2 + k
        if not row or row[0] != letter:
            raise ConfigError(f"--matrix {path}: line {at}: the row of {letter!r} expected here (a row for each "
                              "letter, in the letters' order, no blank or comment line between)")
        if len(row) != len(letters) + 1:
            raise ConfigError(f"--matrix {path}: line {at}: {len(row) - 1} scores after its letter, for "
                              f"{len(letters)} letters")
    extra = [i for i, line in enumerate(body[len(letters):], n + 2 + len(letters))
             if line.strip() and not line.startswith("#")]
    if extra:
        raise ConfigError(f"--matrix {path}: line {extra[0]}: more rows than letters")


def substitution(cfg: AlignConfig) -> Substitution:
    """The table cfg scores with (the matrix, or match/mismatch over the DNA or protein letters).
    With --n-mismatch two extra codes (pack.Q_WILD, pack.T_WILD: every non-ACGT query/target letter
    after pack.compare_view) score a mismatch against everything."""
    sc, p = cfg.scoring, cfg.effective_penalties
    name = sc.matrix_name
    if name is not None:
        m = _load_matrix(name)
        if len(m.shape) != 2 or m.shape[0] != m.shape[1]:
            raise ConfigError(f"--matrix {name}: not a square substitution matrix")
        values = np.asarray(m, dtype=float)
        if not np.all(values == np.round(values)):
            raise ConfigError(f"--matrix {name}: scores must be integers")
        letters = "".join(m.alphabet).upper()
        if len(set(letters)) != len(letters) or any(len(c) != 1 for c in m.alphabet):
            raise ConfigError(f"--matrix {name}: letters must be single characters, distinct in upper case")
        if np.abs(values).max(initial=0) > SCORE_MAX:
            raise ConfigError(f"--matrix {name}: scores must lie within -{SCORE_MAX}..{SCORE_MAX}")
        table = values.astype(np.int64)
        label = os.path.basename(name)
    else:
        letters = DNA_LETTERS if sc.alphabet == "dna" else PROTEIN_LETTERS
        if cfg.n_mismatch:
            letters += chr(pack.Q_WILD) + chr(pack.T_WILD)
        k = len(letters)
        table = np.full((k, k), -p.mismatch, np.int64)
        np.fill_diagonal(table, sc.match)
        if cfg.n_mismatch:
            for i, c in enumerate(letters):
                if c not in "ACGT":
                    table[i, i] = -p.mismatch
        label = f"match {sc.match} mismatch {p.mismatch}"
    if sc.unknown is not None and sc.unknown.upper() not in letters:
        raise ConfigError(f"--unknown {sc.unknown}: not a letter of {label}")
    return Substitution(label, letters, tuple(tuple(int(v) for v in row) for row in table))


def residues(cfg: AlignConfig) -> bool:
    """Whether cfg's sequences are protein (SAM's SEQ as read, with '*'; no BAM): --alphabet protein, or a
    matrix holding a letter that is no DNA letter (--matrix BLOSUM62 given without --alphabet protein)."""
    if cfg.scoring.alphabet == "protein":
        return True
    if not cfg.general or cfg.scoring.matrix_name is None:
        return False
    return any(c not in DNA_LETTERS for c in substitution(cfg).letters)


def allowed_table(sub: Substitution) -> np.ndarray:
    """bool[256]: the bytes the table scores (the wildcard codes are not input characters)."""
    ok = np.zeros(256, dtype=bool)
    ok[[ord(c) for c in sub.letters if ord(c) >= pack.MIN_BYTE]] = True
    return ok


def input_map(sub: Substitution, unknown: str | None) -> bytes | None:
    """A bytes.translate table turning every character the table cannot score into the --unknown letter,
    or None when there is no --unknown letter."""
    if unknown is None:
        return None
    ok = allowed_table(sub)
    u = ord(unknown.upper())
    return bytes(c if ok[c] or c < pack.MIN_BYTE else u for c in range(256))


_LOADED: dict = {}  # loaded(): (table, input_map) by (config, its matrix file's time)


def loaded(cfg: AlignConfig) -> tuple:
    """(substitution(cfg), its input_map for --unknown), made once per config and matrix file version (for
    the work done a batch at a time: the matrix file read once)."""
    name = cfg.scoring.matrix_name
    key = (cfg, os.path.getmtime(name) if name and os.path.isfile(name) else None)
    if key not in _LOADED:
        sub = substitution(cfg)
        _LOADED[key] = (sub, input_map(sub, cfg.scoring.unknown))
    return _LOADED[key]


def restate_matches(batch: PairBatch, res, cfg: AlignConfig):
    """res with the =/X ops of the pairs holding a character --unknown maps said by the characters themselves:
    the engines compare the mapped letters, and J against O (both X) is no match. Scores stay (they are the
    mapped letters'). res itself when no pair holds one."""
    from . import cigar as C

    if not res.has_cigar or batch.n == 0:
        return res
    remap = loaded(cfg)[1]
    if remap is None:
        return res
    view = pack.compare_view(batch, cfg.n_mismatch)
    moved = np.frombuffer(view.tobytes().translate(remap), np.uint8) != view
    if not moved.any():
        return res
    mark = np.concatenate([[0], np.cumsum(moved, dtype=np.int64)])
    held = lambda off, ln: mark[off + ln] > mark[off]  # noqa: E731
    idx = np.flatnonzero((held(batch.q_off, batch.q_len) | held(batch.t_off, batch.t_len)) & (res.cigar_len > 0))
    if not len(idx):
        return res
    sub = res.take(idx)
    q0 = batch.q_off[idx] + (0 if sub.q_start is None else sub.q_start)
    t0 = batch.t_off[idx] + (0 if sub.t_start is None else sub.t_start)
    ops, _, counts = C.recompare(sub.cigar, sub.cigar_off, sub.cigar_len, q0, t0, view)
    sub = dataclasses.replace(sub, cigar=ops, cigar_off=offsets_from_lengths(counts), cigar_len=counts)
    keep = np.setdiff1d(np.arange(batch.n), idx)
    return type(res).merge(batch.n, [(keep, res.take(keep)), (idx, sub)], True)


def check_batch(batch: PairBatch, sub: Substitution, cfg: AlignConfig, query_path: str = "query",
                target_path: str = "target") -> None:
    """Raise InputError at the first pair of the batch holding a character the table cannot score (its query's
    first, else its target's; none with --unknown): the pair the device reader stops at (io/fastx_device.py,
    allowed_bytes), wherever the batches are cut."""
    if cfg.scoring.unknown is not None or batch.n == 0:
        return
    ok = allowed_table(sub)
    faults = []  # (pair, side, the character's place in the side's letters, the letters)
    for side, (off, ln) in enumerate(((batch.q_off, batch.q_len), (batch.t_off, batch.t_len))):
        letters = concatenated(batch.seq, off, ln)
        good = ok[letters]
        if not good.all():
            at = int(np.argmin(good))
            faults.append((int(np.searchsorted(np.cumsum(ln), at, side="right")), side, at, letters))
    if faults:
        pair, side, at, letters = min(faults, key=lambda f: f[:2])
        names, path = (batch.q_names, query_path) if side == 0 else (batch.t_names, target_path)
        char = chr(int(letters[at]))
        name = f" ({names[pair]})" if len(names) > pair else ""
        where = f"{path}: record {int(batch.index[pair]) + 1}{name}"
        if cfg.scoring.matrix_name is None and cfg.scoring.alphabet == "dna" and char in PROTEIN_LETTERS:
            raise InputError(f"{where}: protein residue {char!r} with DNA scoring (use --alphabet protein)")
        some = "X" if "X" in sub.letters else sub.letters[-1]
        raise InputError(f"{where}: character {char!r} is not in the alphabet of {sub.name} "
                         f"(--unknown {some} maps such characters to {some})")


def allowed_bytes(cfg: AlignConfig) -> np.ndarray | None:
    """bool[256]: the (case-folded) bytes check_batch lets through, or None where it lets every byte through
    (not general scoring, or --unknown)."""
    if not cfg.general or cfg.scoring.unknown is not None:
        return None
    return allowed_table(substitution(cfg))


def checked(batches, cfg: AlignConfig, query_path: str, target_path: str, done=lambda batch: False):
    """The batches, each checked against cfg's substitution table (general scoring only) unless done(batch)
    says it was checked already (io/fastx_device's, read with allowed_bytes)."""
    sub = substitution(cfg)
    for batch in batches:
        if not done(batch):
            check_batch(batch, sub, cfg, query_path, target_path)
        yield batch
