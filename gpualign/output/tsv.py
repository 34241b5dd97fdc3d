"""TSV: one header line, one line per pair, in input order. Lines built in bulk (text.py)."""

from __future__ import annotations

import numpy as np

from ..records import OK, STATUS_NAMES, AlignBatch, PairBatch
from ..text import Strings, join_lines
from .common import cigar_stats, cigar_text

HEADER = "query\ttarget\tquery_len\ttarget_len\tscore\tedit_distance\tcigar\tstatus\n"
_STATUS = Strings.of(list(STATUS_NAMES))


class TsvFormat:
    """A batch's TSV lines (picklable: formatting may run in a worker process, output/parallel.py)."""

    def __init__(self, metric: str):
        self.metric = metric

    def render(self, batch: PairBatch, res: AlignBatch) -> tuple[bytes, int]:
        n = batch.n
        if n == 0:
            return b"", 0
        failed = res.status != OK
        score = Strings.of_ints(res.score).where(failed, b"*")
        if res.has_cigar:
            tot = cigar_stats(res)
            nm = Strings.of_ints(tot["mismatches"] + tot["ins"] + tot["dels"]).where(failed, b"*")
            cig = Strings(*cigar_text(res))
            cig = cig.where(failed | (res.cigar_len == 0), b"*")
        else:  # distance only: the edit distance is the score (edit metric), no CIGAR
            nm, cig = (score if self.metric == "edit" else b"*"), b"*"
        fields = [Strings.of(batch.q_names), Strings.of(batch.t_names), batch.q_len, batch.t_len, score, nm, cig,
                  _STATUS.take(res.status.astype(np.int64))]
        return join_lines(fields, n), n


class TsvWriter:
    def __init__(self, stream, metric: str, **_):
        self.stream, self.fmt = stream, TsvFormat(metric)
        stream.write(HEADER.encode())

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        data, n = self.fmt.render(batch, res)
        self.stream.write(data)
        return n

    def close(self) -> None:
        pass
