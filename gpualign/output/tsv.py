"""TSV: one header line, one line per pair, in input order."""

from __future__ import annotations

from ..records import STATUS_NAMES, AlignBatch, PairBatch
from .common import columns

HEADER = "query\ttarget\tquery_len\ttarget_len\tscore\tedit_distance\tcigar\tstatus\n"


class TsvWriter:
    def __init__(self, stream, metric: str, **_):
        self.stream, self.metric = stream, metric
        stream.write(HEADER.encode())

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        c = columns(res)
        ql, tl = batch.q_len.tolist(), batch.t_len.tolist()
        st = res.status.tolist()
        lines = []
        for i in range(batch.n):
            if c.ok[i]:
                score = c.score[i]
                if res.has_cigar:
                    nm, cig = c.nm[i], c.cigar[i] or "*"
                else:
                    nm, cig = (score if self.metric == "edit" else "*"), "*"
            else:
                score = nm = cig = "*"
            lines.append(f"{batch.q_names[i]}\t{batch.t_names[i]}\t{ql[i]}\t{tl[i]}\t{score}\t{nm}\t{cig}\t"
                         f"{STATUS_NAMES[st[i]]}\n")
        self.stream.write("".join(lines).encode())
        return batch.n

    def close(self) -> None:
        pass
