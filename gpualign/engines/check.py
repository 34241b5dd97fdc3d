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
unmatchable codes; --unknown's letter for general scoring). Scores over the shared process pool; the
CIGARs of the same pairs checked here (cigar_faults: an alignment of the pair's ranges, its =/X true, its
score the reported one).
"""

from __future__ import annotations

import numpy as np

from .. import cigar as C
from .. import pack, scoring
from ..config import AlignConfig
from ..records import AlignBatch, PairBatch, offsets_from_lengths, segment_index
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


def cigar_faults(batch: PairBatch, res: AlignBatch, idx: np.ndarray, cfg: AlignConfig) -> np.ndarray:
    """bool per pair of idx (pairs with CIGARs): its aligned ranges lie outside its sequences or break the
    mode (global: both whole; semi-global: the query whole), its CIGAR is not an alignment of them
    (cigar.batch_faults: =/X said of the bytes the engines compare, the characters themselves: --unknown's
    letter scores, it does not match), or its score is not the reported one (edit: X, I and D bases; affine:
    x a mismatch and o + L*e a gap; general scoring: the table's scores of the =/X columns less the gaps')."""
    idx = np.asarray(idx, np.int64)
    ql, tl = batch.q_len[idx].astype(np.int64), batch.t_len[idx].astype(np.int64)
    qs, qe, ts, te = (a[idx] for a in res.ranges(batch.q_len, batch.t_len))
    bad = (qs < 0) | (qs > qe) | (qe > ql) | (ts < 0) | (ts > te) | (te > tl)
    mode = cfg.scoring.mode if cfg.general else "global"
    if mode != "local":
        bad |= (qs != 0) | (qe != ql)
    if mode == "global" and not cfg.ends_free_target:
        bad |= (ts != 0) | (te != tl)
    ln = np.where(bad, 0, res.cigar_len[idx]).astype(np.int64)  # (a bad pair's ops not read)
    ops = res.cigar[segment_index(res.cigar_off[idx], ln)]
    off = offsets_from_lengths(ln)
    view = pack.compare_view(batch, cfg.n_mismatch)
    wrong, c_pair, qi, ti = C.batch_faults(ops, off, ln, batch.q_off[idx] + qs, batch.t_off[idx] + ts, qe - qs,
                                           te - ts, view)
    bad |= wrong
    tot = C.op_totals(ops, off, ln)
    p = cfg.effective_penalties
    gaps = p.gap_open * C.gap_opens(ops, off, ln) + p.gap_extend * (tot["ins"] + tot["dels"])
    if cfg.general:
        sub, remap = scoring.loaded(cfg)
        a, b = view[qi], view[ti]
        if remap is not None:
            table = np.frombuffer(bytes(range(256)).translate(remap), np.uint8)
            a, b = table[a], table[b]
        score = np.rint(np.bincount(c_pair, sub.lookup()[b, a], len(idx))).astype(np.int64) - gaps
    elif cfg.metric == "edit":
        score = tot["mismatches"] + tot["ins"] + tot["dels"]
    else:
        score = p.mismatch * tot["mismatches"] + gaps
    return bad | (score != res.score[idx].astype(np.int64))
