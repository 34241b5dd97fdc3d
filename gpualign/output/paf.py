"""PAF (minimap2's 12 columns) + NM:i, AS:i, cg:Z (none for an empty CIGAR). Failed pairs are not
written. Lines built in bulk (text.py)."""

from __future__ import annotations

import numpy as np

from .. import trace
from ..records import OK, AlignBatch, PairBatch
from ..text import Strings, join_lines
from .common import aligned_ranges, cigar_stats, cigar_text, empty_alignment


class PafFormat:
    """A batch's PAF lines (picklable: formatting may run in a worker process, output/parallel.py).
    scored (general scoring): columns 3-4 and 8-9 are the aligned ranges, AS:i is the score itself,
    and empty alignments (local, score 0) are left out like failed pairs."""

    def __init__(self, scored: bool = False):
        self.scored = scored
        self.lines = join_lines  # or text_device.DeviceLines (pipeline.py): the same bytes

    @trace.traced("paf render")
    def render(self, batch: PairBatch, res: AlignBatch) -> tuple:
        """(the lines: bytes, or a memoryview of them from text_device, how many)."""
        fused = getattr(self.lines, "paf", None)  # text_device.DeviceLines: from the device's columns
        done = None if fused is None or self.scored else fused(batch, res)
        if done is not None:
            return done
        keep = res.status == OK
        if self.scored:
            keep &= ~empty_alignment(batch, res)
        rows = np.flatnonzero(keep)
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
        if self.scored:
            qs, qe, ts, te = (v[rows] for v in aligned_ranges(batch, res))
            score = res.score[rows].astype(np.int64)
        else:
            qs, qe, ts, te, score = b"0", ql, b"0", tl, -res.score[rows].astype(np.int64)
        fields = [Strings.of(batch.q_names).take(rows), ql, qs, qe, b"+", Strings.of(batch.t_names).take(rows), tl,
                  ts, te, matches, matches + nm, b"255", (b"NM:i:", nm), (b"AS:i:", score), (b"cg:Z:", cig)]
        # no CIGAR (two empty sequences, or none computed): no cg:Z (a tag needs a value; minimap2 never
        # writes an empty one)
        return self.lines(fields, len(rows), drop_empty_last=True), len(rows)


class PafWriter:
    def __init__(self, stream, scored: bool = False, **_):
        self.stream, self.fmt = stream, PafFormat(scored)

    def write(self, batch: PairBatch, res: AlignBatch) -> int:
        data, n = self.fmt.render(batch, res)
        self.stream.write(data)
        return n

    def close(self) -> None:
        pass
