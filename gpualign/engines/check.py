"""The judge of --verify: the scores of sampled pairs recomputed by a library that aligns nothing in the
run, so that a check never repeats the computation it checks (the engines: WFA2-lib and the GPU
wavefronts for edit and affine, parasail and gpu-dp for general scoring).

- edit metric: edlib (Myers' bit-vector DP), global;
- affine metric, global: parasail's nw (a gap of length L costs o + L*e: parasail's open = o + e,
  extend = e), scores negated into penalties;
- general scoring (a match bonus, a matrix, protein, local or semi-global): Biopython's PairwiseAligner
  (a plain Gotoh DP), the table of scoring.substitution, open = -(o + e), extend = -e, semi-global with
  the target's end gaps free.

The sequences are the bytes the engines compare (pack.compare_view: case-folded, --n-mismatch's
unmatchable codes; --unknown's letter for general scoring). Scores only; over the shared process pool.
"""

from __future__ import annotations

import numpy as np

from .. import pack, scoring
from ..config import AlignConfig
from ..records import PairBatch
from ._pool import ChunkPool

JUDGES = {"edit": "edlib", "affine": "parasail", "general": "Biopython"}


def judge(cfg: AlignConfig) -> str:
    """The library that checks cfg's scores."""
    return JUDGES["general" if cfg.general else cfg.metric]


def _empty(cfg_kind: str, mode: str, ql: int, tl: int, gaps: tuple) -> int:
    """The score of a pair with an empty side: one gap of the other's length (none for local alignment,
    nor for semi-global's empty query, whose target is all free end)."""
    n = ql or tl
    if n == 0 or mode == "local" or (mode == "semi-global" and ql == 0):
        return 0
    o, e = gaps
    return n if cfg_kind == "edit" else o + n * e if cfg_kind == "affine" else -(o + n * e)


def _edit(q: str, t: str, _params) -> int:
    import edlib

    return int(edlib.align(q.encode("latin-1"), t.encode("latin-1"), mode="NW", task="distance")["editDistance"])


def _affine(q: str, t: str, params) -> int:
    import parasail

    (o, e), x = params
    m = parasail.matrix_create("".join(sorted(set(q + t))), 0, -x)
    r = parasail.nw_scan_32(q, t, o + e, e, m)
    if r.saturated:
        r = parasail.nw_scan_64(q, t, o + e, e, m)
    return -int(r.score)


_aligners: dict = {}


def _general(q: str, t: str, params) -> int:
    """Biopython scores (target, query): its matrix rows are the target's letters, as parasail's are."""
    al = _aligners.get(params)
    if al is None:
        from Bio.Align import PairwiseAligner, substitution_matrices

        sub, mode, (o, e) = params
        al = PairwiseAligner(mode="local" if mode == "local" else "global")
        al.substitution_matrix = substitution_matrices.Array(alphabet=sub.letters, dims=2,
                                                             data=np.array(sub.scores, dtype=float))
        al.open_gap_score, al.extend_gap_score = -(o + e), -e
        if mode == "semi-global":  # the target's ends are free: deletions (target-only bases) at either end
            al.end_deletion_score = 0
        al = _aligners[params] = al
    return max(int(al.score(t, q)), 0) if params[1] == "local" else int(al.score(t, q))


SCORERS = {"edit": _edit, "affine": _affine, "general": _general}


def _score_chunk(kind: str, mode: str, gaps: tuple, params, text: str, q_off, q_len, t_off, t_len) -> np.ndarray:
    """The scores of pairs whose sequences are slices of text; runs in a worker process."""
    fn = SCORERS[kind]
    out = np.zeros(len(q_len), np.int64)
    for i, (qo, ql, to, tl) in enumerate(zip(q_off, q_len, t_off, t_len)):
        if ql == 0 or tl == 0:
            out[i] = _empty(kind, mode, ql, tl, gaps)
        else:
            out[i] = fn(text[qo:qo + ql], text[to:to + tl], params)
    return out


class CheckEngine(ChunkPool):
    """scores(batch, cfg): each pair's optimal score (penalty, or score under general scoring) by cfg's
    judge."""

    name = "check"
    requires = "edlib"

    def scores(self, batch: PairBatch, cfg: AlignConfig) -> np.ndarray:
        kind = "general" if cfg.general else cfg.metric
        p = cfg.effective_penalties
        gaps = (p.gap_open, p.gap_extend)
        params, remap = None, None
        if kind == "affine":
            params = (gaps, p.mismatch)
        elif kind == "general":
            sub = scoring.substitution(cfg)
            params, remap = (sub, cfg.scoring.mode, gaps), scoring.input_map(sub, cfg.scoring.unknown)
        head = (kind, cfg.scoring.mode, gaps, params)

        def chunk_args(part: PairBatch):
            raw = pack.compare_view(part, cfg.n_mismatch).tobytes()
            text = (raw.translate(remap) if remap else raw).decode("latin-1")
            return (*head, text, *(a.tolist() for a in (part.q_off, part.q_len, part.t_off, part.t_len)))

        return self.run_chunks(batch, _score_chunk, chunk_args, np.concatenate).result()
