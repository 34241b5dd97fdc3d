"""TSV: one header line, one line per pair, in input order. Lines built in bulk (text.py)."""

from __future__ import annotations

import numpy as np

from .. import trace
from ..records import OK, STATUS_NAMES, AlignBatch, PairBatch
from ..text import Strings, join_lines
from .common import aligned_ranges, cigar_stats, cigar_text

HEADER = "query\ttarget\tquery_len\ttarget_len\tscore\tedit_distance\tcigar\tstatus\n"
# general scoring: score higher is better; the ranges (0-based, half-open) the CIGAR covers
HEADER_SCORED = ("query\ttarget\tscore\tquery_start\tquery_end\ttarget_start\ttarget_end\tcigar\t"
                 "query_len\ttarget_len\tedit_distance\tstatus\n")
_STATUS = Strings.of(list(STATUS_NAMES))


class TsvFormat:
    """A batch's TSV lines (picklable: formatting may run in a worker process, output/parallel.py)."""

    def __init__(self, metric: str, scored: bool = False):
        self.metric, self.scored = metric, scored
        self.lines = join_lines  # or text_device.DeviceLines (pipeline.py): the same bytes

    @trace.traced("tsv render")
    def render(self, batch: PairBatch, res: AlignBatch) -> tuple:
        """(the lines: bytes, or a memoryview of them from text_device, how many)."""
        n = batch.n
        if n == 0:
            return b"", 0
        failed = res.status != OK
        score = Strings.ints_or(res.score, failed, b"*")
        if self.scored:
            return self._render_scored(batch, res, failed, score), n
        if res.has_cigar:
            tot = cigar_stats(res)
            nm = Strings.ints_or(tot["mismatches"] + tot["ins"] + tot["dels"], failed, b"*")
            cig = Strings(*cigar_text(res))
            cig = cig.where(failed | (res.cigar_len == 0), b"*")
        else:  # distance only: the edit distance is the score (edit metric), no CIGAR
            nm, cig = (score if self.metric == "edit" else b"*"), b"*"
        fields = [Strings.of(batch.q_names), Strings.of(batch.t_names), batch.q_len, batch.t_len, score, nm, cig,
                  _STATUS.take(res.status.astype(np.int64))]
        return self.lines(fields, n), n

    def _render_scored(self, batch: PairBatch, res: AlignBatch, failed: np.ndarray, score):
        qs, qe, ts, te = aligned_ranges(batch, res)
        unknown_q, unknown_t = failed | (qs < 0), failed | (ts < 0)  # score-only: starts not known
        ranges = [Strings.ints_or(v, m, b"*") for v, m in ((qs, unknown_q), (qe, unknown_q), (ts, unknown_t),
                                                            (te, unknown_t))]
        if res.has_cigar:
            tot = cigar_stats(res)
            nm = Strings.ints_or(tot["mismatches"] + tot["ins"] + tot["dels"], failed, b"*")
            cig = Strings(*cigar_text(res)).where(failed | (res.cigar_len == 0), b"*")
        else:
            nm = cig = b"*"
        fields = [Strings.of(batch.q_names), Strings.of(batch.t_names), score, *ranges, cig, batch.q_len,
                  batch.t_len, nm, _STATUS.take(res.status.astype(np.int64))]
        return self.lines(fields, batch.n)


class TsvWriter:
    def __init__(self, stream, metric: str, scored: bool = False, **_):
        self.stream, self.fmt = stream, TsvFormat(metric, scored)
        stream.write((HEADER_SCORED if scored else HEADER).encode())

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        data, n = self.fmt.render(batch, res)
        self.stream.write(data)
        return n

    def close(self) -> None:
        pass
