"""`gpualign genome` without --distance-only: an optimal alignment (packed CIGAR) of one long pair.

GPU: the distance from the kernel genome_pair.kernel_options picks (the bit-parallel one gives a first
Hirschberg split with it); when the anchored upper bound (long_bound.py) equals the distance, its path
of anchors and gaps is an optimal one and gives the pieces, else Hirschberg splits from the whole pair.
hirschberg.align_path splits the pieces further (gpu_long.BpSplitter, a level's pieces side by side)
and the batched engines (eWFA, affine WFA with edit penalties, the CPU rescue) align the leaves. On several
devices (Spread: `--gpus` with fewer record pairs than devices) the bit-parallel distance runs its two halves
on two of them, and every level's pieces and the leaves are divided among all of them.
CPU: edlib's path mode or WFA2-lib BiWFA (cpu_long.path), in a child process.
The strings carry the character rule already (genome_pair.apply_rule), so every comparison is on bytes.
"""

from __future__ import annotations

import time

import numpy as np

from . import hirschberg
from .config import AlignConfig
from .records import OK, PairBatch, concatenated, offsets_from_lengths

# the leaves' engines: one launch's workspace at most (bytes; None: the engine's own cap). The real E. coli
# pair's 1,024 leaves need 4.74 GiB in one launch: capped, they take 3 launches (0.04-0.1 s more), and with the
# levels' rings capped too (SPLIT_RINGS) the path's peak is the leaves', 3.1 GiB (docs/benchmarks.md)
LEAF_WORKSPACE = 2 << 30
# the Hirschberg levels' rings: one launch's at most (bytes; None: gpu_long's own cap, a quarter of the free
# memory). Uncapped, the real E. coli pair's first level took 3.88 GiB, the path's peak (docs/benchmarks.md)
SPLIT_RINGS = 3 << 30
# the leaves of a batch whose bases are at least this share of the stretches of q and t they span are sent as
# those stretches (one copy each), not gathered base by base (48 Mbp at 8.4%: the gaps are 84% of the bases)
SPAN_SHARE = 0.5


def leaf_aligner(chain, cfg: AlignConfig):
    """align_leaves for hirschberg.align_path: the leaves through the engine chain (edit metric, CIGARs),
    in batches of at most cfg.batch_bases bases; each leaf must come back at its known distance."""
    from .route import run_chain

    leaf_cfg = AlignConfig(metric="edit", device=cfg.device, threads=cfg.threads, batch_bases=cfg.batch_bases,
                           batch_pairs=cfg.batch_pairs)

    def align_leaves(q: np.ndarray, t: np.ndarray, p: hirschberg.Pieces):
        n, m = p.qb - p.qa, p.tb - p.ta
        size = np.cumsum(n + m)
        ops, lens = [], []
        start = 0
        while start < len(p):
            base = size[start - 1] if start else 0
            stop = max(start + 1, int(np.searchsorted(size, base + leaf_cfg.batch_bases, side="right")))
            stop = min(stop, start + leaf_cfg.batch_pairs, len(p))
            idx = np.arange(start, stop)
            res, _ = run_chain(_leaf_batch(q, t, p.take(idx)), chain, leaf_cfg)
            bad = (res.status != OK) | (res.score != p.d[idx])
            if bad.any():
                k = int(np.argmax(bad))
                raise RuntimeError(f"alignment path: a leaf of {int(n[idx][k])} x {int(m[idx][k])} came back "
                                   f"{res.reason.get(k, 'at ' + str(int(res.score[k])))}, its distance is "
                                   f"{int(p.d[idx][k])}")
            ops.append(concatenated(res.cigar, res.cigar_off, res.cigar_len))
            lens.append(res.cigar_len)
            start = stop
        ln = np.concatenate(lens)
        return np.concatenate(ops), offsets_from_lengths(ln), ln

    return align_leaves


def _leaf_batch(q: np.ndarray, t: np.ndarray, p: hirschberg.Pieces) -> PairBatch:
    """The pieces p as a batch (PairBatch.of_pieces: the stretches they lie in where they fill SPAN_SHARE of
    them, else gathered)."""
    return PairBatch.of_pieces(q, t, p.qa, p.qb - p.qa, p.ta, p.tb - p.ta, SPAN_SHARE)


def leaf_chain(cfg: AlignConfig) -> list:
    """The batched engines that align the leaves of gpu_path (close with close_chain), each launch's workspace
    within LEAF_WORKSPACE."""
    from .engines import select_engines

    chain = select_engines(AlignConfig(metric="edit", device="gpu", threads=cfg.threads))[0]
    for e in chain:
        if hasattr(e, "workspace_max") and LEAF_WORKSPACE is not None:
            e.workspace_max = LEAF_WORKSPACE
    return chain


def level_splitter(q: np.ndarray, t: np.ndarray):
    """gpu_long.BpSplitter for q and t, each level's rings within SPLIT_RINGS."""
    from .engines.gpu_long import BpSplitter

    splitter = BpSplitter(q, t)
    splitter.ring_max = SPLIT_RINGS
    return splitter


def close_chain(chain: list) -> None:
    for e in chain:
        e.close()


def anchored_pieces(n: int, m: int, path) -> hirschberg.Pieces:
    """The pieces of long_bound's path (its anchors, exact matches of K bases, and the gaps between them
    with their costs), in order. When the bound equals the distance every piece's cost is its own
    distance (a cheaper piece would give a cheaper whole), so the pieces are an optimal path's."""
    from .long_bound import K, gaps

    a_q, a_t, cost = path
    qs, ql, ts, tl = gaps(np.asarray(a_q, np.int64), np.asarray(a_t, np.int64), n, m)
    k = len(a_q)
    qa, ta = np.empty(2 * k + 1, np.int64), np.empty(2 * k + 1, np.int64)
    qb, tb, d = np.empty_like(qa), np.empty_like(qa), np.zeros(2 * k + 1, np.int64)
    qa[0::2], qb[0::2], ta[0::2], tb[0::2], d[0::2] = qs, qs + ql, ts, ts + tl, cost
    qa[1::2], ta[1::2] = a_q, a_t
    qb[1::2], tb[1::2] = np.asarray(a_q) + K, np.asarray(a_t) + K
    return hirschberg.Pieces(qa, qb, ta, tb, d)


class PeerLost(Exception):
    """The device of a Spread's part index + 1 (spread[index] of gpu_path's) failed: error, its CUDA error."""

    def __init__(self, index: int, error: BaseException):
        super().__init__(f"shared device {index + 1} failed: {error}")
        self.index, self.error = index, error


class Spread:
    """One pair's work divided among devices: devices[0] the current one (this thread's), each other on a
    thread of its own with its device current. run(fn, parts) -> [fn(k, part), ...] with part k on device k."""

    def __init__(self, devices: list):
        from concurrent.futures import ThreadPoolExecutor

        self.devices = devices
        self.pool = ThreadPoolExecutor(max(1, len(devices) - 1), thread_name_prefix="gpualign-spread")

    def run(self, fn, parts: list) -> list:
        """Every part's result once all have ended; else the first error in device order (a device failure of
        another device than this thread's raised as PeerLost, naming it)."""
        from concurrent.futures import wait

        from .devices import is_device_failure, on_device

        def there(k):
            with on_device(self.devices[k]):
                return fn(k, parts[k])

        futures = {k: self.pool.submit(there, k) for k in range(1, len(parts)) if parts[k] is not None}
        try:
            first = fn(0, parts[0]) if parts[0] is not None else None
        finally:
            wait(list(futures.values()))  # each ended, whatever happened here
        outs = {}
        for k, f in sorted(futures.items()):
            err = f.exception()
            if err is not None:
                raise PeerLost(k - 1, err) if is_device_failure(err) else err
            outs[k] = f.result()
        return [first if k == 0 else outs.get(k) for k in range(len(parts))]

    def divide(self, cost: np.ndarray) -> list:
        """Consecutive index ranges, one per device, of about equal total cost (None: an empty one)."""
        k = len(self.devices)
        ends = np.searchsorted(np.cumsum(cost), cost.sum() * np.arange(1, k) / k, side="right")
        cuts = [0, *ends.tolist(), len(cost)]
        return [np.arange(a, b) if b > a else None for a, b in zip(cuts, cuts[1:])]

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def spread_splitter(q: np.ndarray, t: np.ndarray, spread: Spread, make=None):
    """hirschberg.align_path's split over spread's devices: make(q, t) on each (default level_splitter: a
    splitter with a cells count), a level's pieces divided by their DP cells (rows x band, about); cells():
    the splitters' cells."""
    make = make or level_splitter
    splitters = spread.run(lambda k, _: make(q, t), [True] * len(spread.devices))

    def split(q, t, p):
        rows, cols = np.minimum(p.qb - p.qa, p.tb - p.ta), np.maximum(p.qb - p.qa, p.tb - p.ta)
        parts = spread.divide(rows * np.minimum(cols, p.d + cols - rows + 1))
        outs = spread.run(lambda k, idx: splitters[k](q, t, p.take(idx)), parts)
        got = [o for o in outs if o is not None]
        return tuple(np.concatenate([np.asarray(o[x], np.int64) for o in got]) for x in range(3))

    split.cells = lambda: sum(s.cells for s in splitters)
    return split


def spread_leaves(chains: list, cfg: AlignConfig, spread: Spread):
    """align_leaves over spread's devices (chains[k]: device k's leaf chain): the leaves divided by their bases
    and distances, each part aligned there; (ops, off, len) joined in order."""
    aligners = [leaf_aligner(c, cfg) for c in chains]

    def align_leaves(q, t, p):
        parts = spread.divide(p.qb - p.qa + p.tb - p.ta + p.d)
        outs = [o for o in spread.run(lambda k, idx: aligners[k](q, t, p.take(idx)), parts) if o is not None]
        shift = np.cumsum([0] + [len(o[0]) for o in outs[:-1]])
        return (np.concatenate([o[0] for o in outs]), np.concatenate([o[1] + s for o, s in zip(outs, shift)]),
                np.concatenate([o[2] for o in outs]))

    return align_leaves


def gpu_path(q: np.ndarray, t: np.ndarray, cfg: AlignConfig, plan, bound: dict | None, progress=None,
             chain=None, spread=None):
    """(distance, packed CIGAR, stats) on the GPU, or None when the bit-parallel kernel cannot take
    the strings (more than 31 distinct symbols). plan: genome_pair.kernel_options; bound: long_bound's dict
    (gpu_bound(..., detail=True)) or None. The distance comes from the kernel the plan picks (the
    bit-parallel one also gives the first split); when it equals the anchored bound, the bound's path
    gives the pieces (how = "anchors"), else Hirschberg starts from the whole pair (how = "split").
    stats: how, cells (bit-parallel DP cells), levels, leaves, first_s (distance and first split),
    split_s (the other levels' splits), leaves_s. chain: the engine chain that aligns the leaves (leaf_chain's,
    kept by the caller for its pairs), or None: one started and closed for this pair. spread: [(device,
    leaf chain), ...] of other devices the pair is divided with (the bit-parallel distance's backward half on
    the first; the levels and leaves on all), or None."""
    from .engines import gpu_long

    n, m = len(q), len(t)
    t0 = time.perf_counter()
    upper = bound["bound"] if bound else None
    cut = None
    if plan.kernel == "wfa":
        r = gpu_long.distance(q, t, upper=upper, warp_extend=plan.warp_extend, progress=progress)
    else:
        r = gpu_long.bp_distance(q, t, upper=upper, guess=plan.band_guess, split=m >= 2, progress=progress,
                                 other=spread[0][0] if spread else None)
        if r is None:
            return None
        cut = r.get("cut")
    d = r["distance"]
    if bound and bound["bound"] == d:
        how, pieces = "anchors", anchored_pieces(n, m, bound["path"])
    elif cut is not None:
        i, j, d1 = cut
        how = "split"
        pieces = hirschberg.Pieces(*(np.array(v, np.int64) for v in ([0, i], [i, n], [0, j], [j, m], [d1, d - d1])))
    else:
        how, pieces = "split", hirschberg.Pieces.one(n, m, d)
    first_s = time.perf_counter() - t0
    own = chain is None
    if own:
        chain = leaf_chain(cfg)
    many = Spread([None, *(d for d, _ in spread)]) if spread else None
    try:
        return _levels(q, t, cfg, d, r["cells"], how, pieces, chain, spread, many, progress, t0, first_s)
    finally:
        if many is not None:
            many.close()
        if own:
            close_chain(chain)


def _levels(q, t, cfg, d, first_cells, how, pieces, chain, spread, many, progress, t0, first_s):
    """gpu_path's Hirschberg levels and leaves (on many's devices, when it is given)."""
    try:
        if many is None:
            splitter = level_splitter(q, t)
            cells = lambda: splitter.cells  # noqa: E731
        else:
            splitter = spread_splitter(q, t, many)
            cells = splitter.cells
    except ValueError:  # more than 31 distinct symbols
        return None
    levels = []

    def report(info):
        levels.append(dict(info, at=time.perf_counter()))
        if progress is not None:
            progress(info)

    align = leaf_aligner(chain, cfg) if many is None else spread_leaves([chain, *(c for _, c in spread)], cfg, many)
    leaves_s = []

    def timed_leaves(*args):
        import cupy

        # the levels' rings stay in the pool's cache, and the leaves' workspace cannot reuse them: the real
        # E. coli pair held 3.9 + 9.1 GB so (docs/benchmarks.md); given back, the peak is the larger alone
        # (this device's pool: on several devices the others keep theirs)
        cupy.get_default_memory_pool().free_all_blocks()
        t1 = time.perf_counter()
        out = align(*args)
        leaves_s.append(time.perf_counter() - t1)
        return out

    ops = hirschberg.align_path(q, t, pieces, splitter, timed_leaves, report)
    return d, ops, dict(how=how, cells=first_cells + cells(), levels=len(levels),
                        leaves=levels[-1]["pieces"], first_s=first_s, split_s=levels[-1]["at"] - t0 - first_s,
                        leaves_s=sum(leaves_s))
