"""PAF (minimap2's 12 columns) + NM:i, AS:i, cg:Z. Failed pairs are not written. Lines built in bulk
(text.py)."""

from __future__ import annotations

import numpy as np

from ..records import OK, AlignBatch, PairBatch
from ..text import Strings, join_lines
from .common import cigar_stats, cigar_text


class PafFormat:
    """A batch's PAF lines (picklable: formatting may run in a worker process, output/parallel.py)."""

    def render(self, batch: PairBatch, res: AlignBatch) -> tuple[bytes, int]:
        rows = np.flatnonzero(res.status == OK)
        if len(rows) == 0:
            return b"", 0
        if res.has_cigar:
            tot = cigar_stats(res)
            cig = Strings(*cigar_text(res)).take(rows)
            matches = tot["matches"][rows]
            nm = (tot["mismatches"] + tot["ins"] + tot["dels"])[rows]
        else:
            z = np.zeros(len(rows), np.int64)
            cig, matches, nm = Strings(np.zeros(0, np.uint8), z, z), z, z
        ql, tl = batch.q_len[rows], batch.t_len[rows]
        fields = [Strings.of(batch.q_names).take(rows), ql, b"0", ql, b"+", Strings.of(batch.t_names).take(rows), tl,
                  b"0", tl, matches, matches + nm, b"255", (b"NM:i:", nm), (b"AS:i:", -res.score[rows].astype(np.int64)),
                  (b"cg:Z:", cig)]
        return join_lines(fields, len(rows)), len(rows)


class PafWriter:
    def __init__(self, stream, **_):
        self.stream, self.fmt = stream, PafFormat()

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        data, n = self.fmt.render(batch, res)
        self.stream.write(data)
        return n

    def close(self) -> None:
        pass
