"""The public Python API: align in-memory sequences with the same engines as the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import cigar as C
from . import pack, scoring
from .config import AlignConfig
from .engines import select_engines
from .errors import InputError
from .records import ENGINE_NAMES, OK, STATUS_NAMES, AlignBatch, PairBatch
from .route import run_chain


@dataclass
class Alignments:
    """Results in input order: numpy arrays plus CIGAR strings ('' for distance-only)."""

    score: np.ndarray  # int32 penalty (edit distance for the edit metric); general scoring: a score
    ok: np.ndarray  # bool
    status: list  # "ok" / "failed"
    engine: list  # engine name per pair
    cigar: list  # SAM-oriented CIGAR with =/X/I/D
    raw: AlignBatch

    def __len__(self) -> int:
        return len(self.score)


def _as_bytes(s, what: str, i: int) -> bytes:
    if isinstance(s, str):
        try:
            s = s.encode("ascii")
        except UnicodeEncodeError as e:
            raise InputError(f"{what} {i}: invalid sequence character at position {e.start}; "
                             "printable ASCII only") from None
    b = pack.fold(bytes(s))
    bad = pack.first_bad_byte(np.frombuffer(b, dtype=np.uint8))
    if bad >= 0:
        raise InputError(f"{what} {i}: invalid sequence character at position {bad}; printable ASCII only")
    return b


def align_pairs(queries: Sequence, targets: Sequence, config: AlignConfig | None = None) -> Alignments:
    """Align queries[i] with targets[i] (str or bytes). Exact; global unless config.scoring says
    otherwise (general scoring: scores, higher is better; raw.q_start/q_end/t_start/t_end the ranges)."""
    cfg = (config or AlignConfig()).validate()
    if len(queries) != len(targets):
        raise InputError(f"{len(queries)} queries but {len(targets)} targets")
    qs = [_as_bytes(s, "query", i) for i, s in enumerate(queries)]
    ts = [_as_bytes(s, "target", i) for i, s in enumerate(targets)]
    batch = PairBatch.from_sequences(qs, ts)
    if cfg.general:
        scoring.check_batch(batch, scoring.substitution(cfg), cfg, "queries", "targets")
    chain, _ = select_engines(cfg)
    try:
        res, _ = run_chain(batch, chain, cfg)
    finally:
        for e in chain:
            e.close()
    cig = C.to_text(res.cigar, res.cigar_off, res.cigar_len) if res.has_cigar else [""] * res.n
    return Alignments(res.score, res.status == OK, [STATUS_NAMES[s] for s in res.status.tolist()],
                      [ENGINE_NAMES[e] for e in res.engine.tolist()], cig, res)
