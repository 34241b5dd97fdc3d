"""What every writer derives from an AlignBatch, computed in bulk."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import cigar as C
from ..records import OK, AlignBatch


@dataclass
class Columns:
    """Per-pair values shared by the writers (lists, ready to format)."""

    ok: list
    score: list
    cigar: list  # text, "" when absent
    matches: list
    mismatches: list
    ins: list
    dels: list
    nm: list
    block: list


def columns(res: AlignBatch) -> Columns:
    if res.has_cigar:
        tot = C.op_totals(res.cigar, res.cigar_off, res.cigar_len)
        text = C.to_text(res.cigar, res.cigar_off, res.cigar_len)
    else:
        z = np.zeros(res.n, np.int64)
        tot = dict(matches=z, mismatches=z, ins=z, dels=z)
        text = [""] * res.n
    nm = tot["mismatches"] + tot["ins"] + tot["dels"]
    block = nm + tot["matches"]
    return Columns((res.status == OK).tolist(), res.score.tolist(), text,
                   tot["matches"].tolist(), tot["mismatches"].tolist(), tot["ins"].tolist(),
                   tot["dels"].tolist(), nm.tolist(), block.tolist())
