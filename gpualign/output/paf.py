"""PAF (minimap2's 12 columns) + NM:i, AS:i, cg:Z. Failed pairs are not written."""

from __future__ import annotations

from ..records import AlignBatch, PairBatch
from .common import columns


class PafWriter:
    def __init__(self, stream, **_):
        self.stream = stream

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        c = columns(res)
        ql, tl = batch.q_len.tolist(), batch.t_len.tolist()
        lines = []
        for i in range(batch.n):
            if not c.ok[i]:
                continue
            lines.append(f"{batch.q_names[i]}\t{ql[i]}\t0\t{ql[i]}\t+\t{batch.t_names[i]}\t{tl[i]}\t0\t{tl[i]}\t"
                         f"{c.matches[i]}\t{c.block[i]}\t255\tNM:i:{c.nm[i]}\tAS:i:{-c.score[i]}\t"
                         f"cg:Z:{c.cigar[i]}\n")
        self.stream.write("".join(lines).encode())
        return len(lines)

    def close(self) -> None:
        pass
