#!/usr/bin/env python3
"""gpu-dp with CIGARs, three ways on the GPU (gpu_dp.TRACE16, gpu_dp.PINNED_CIGARS): short pairs on dp_fill16
with the CIGARs into pinned memory (the default), dp_fill16 with them into a new pageable array, and dp_fill
(int32) with pageable CIGARs (before bd86fe6). bench_dp's sets (default protein,dna), the same batches for the
three; each way's outputs (scores, CIGARs, ranges) compared; three rounds of two serial passes over the
batches (run_chain per batch, as the pipeline's aligner runs them, one at a time), medians; then each way's
spans with a device sync at their edges (gpualign.trace). docs/benchmarks.md quotes it.

  python scripts/bench_dp_trace.py [--sets protein,dna] [--scale 1.0]
"""

import argparse
import collections
import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_dp as B  # noqa: E402
from gpualign import cigar as C  # noqa: E402
from gpualign import trace  # noqa: E402
from gpualign.config import AlignConfig, default_batch_bases  # noqa: E402
from gpualign.engines import gpu_dp, host_allocator, select_engines  # noqa: E402
from gpualign.route import prefetch, run_chain  # noqa: E402

WAYS = {"dp_fill16, pinned": (True, True), "dp_fill16, pageable": (True, False), "dp_fill, pageable": (False, False)}


class Spans:
    """gpualign.trace's recorder: busy seconds per span, the device synchronised at each edge."""

    def __init__(self):
        self.seconds = collections.defaultdict(float)

    @contextlib.contextmanager
    def span(self, name):
        import cupy

        cupy.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            cupy.cuda.get_current_stream().synchronize()
            self.seconds[name] += time.perf_counter() - t0


def passes(batches, chain, cfg, count: int, keep: bool = False) -> tuple[list, list]:
    """count serial passes over the batches: (seconds of each, the results of the last when keep)."""
    import cupy

    out, res = [], []
    for _ in range(count):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        res = []
        for b in batches:
            prefetch(b, chain, cfg)
            r, _ = run_chain(b, chain, cfg)
            if keep:
                res.append((r.score.tolist(), C.to_text(r.cigar, r.cigar_off, r.cigar_len), r.q_start.tolist(),
                            r.q_end.tolist(), r.t_start.tolist(), r.t_end.tolist()))
        cupy.cuda.Device().synchronize()
        out.append(time.perf_counter() - t0)
    return out, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="protein,dna")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the pair counts")
    a = ap.parse_args()
    for name in a.sets.split(","):
        spec = B.SETS[name]
        n = max(1, int(spec["n"] * a.scale))
        qs, ts = B.simulate(spec, n)
        cells = sum(len(q) * len(t) for q, t in zip(qs, ts))
        cfg = AlignConfig(metric="affine", penalties=spec["pen"], scoring=spec["scoring"], device="gpu", threads=16,
                          batch_bases=default_batch_bases(spec["scoring"], False)).validate()
        chain, _ = select_engines(cfg)
        for e in chain:
            e.start()
        try:
            batches = B.batches_of(qs, ts, cfg, host_allocator(chain))
            outputs = {}
            for way, flags in WAYS.items():
                gpu_dp.TRACE16, gpu_dp.PINNED_CIGARS = flags
                outputs[way] = passes(batches, chain, cfg, 1, keep=True)[1]
            same = all(o == outputs["dp_fill, pageable"] for o in outputs.values())
            print(f"{name}: {n:,} pairs, {cells / 1e9:.2f} G cells, {len(batches)} batches; same outputs: {same}")
            times = {way: [] for way in WAYS}
            for _ in range(3):
                for way, flags in WAYS.items():
                    gpu_dp.TRACE16, gpu_dp.PINNED_CIGARS = flags
                    times[way] += passes(batches, chain, cfg, 2)[0]
            for way, secs in times.items():
                med = statistics.median(secs)
                print(f"  {way:20} median {med * 1e3:7.1f} ms ({cells / med / 1e9:5.0f} GCUPS), all "
                      + " ".join(f"{s * 1e3:.1f}" for s in secs))
            for way, flags in WAYS.items():
                gpu_dp.TRACE16, gpu_dp.PINNED_CIGARS = flags
                rec = Spans()
                trace.install(rec)
                try:
                    passes(batches, chain, cfg, 2)
                finally:
                    trace.install(None)
                top = sorted(rec.seconds.items(), key=lambda kv: -kv[1])[:7]
                print(f"  spans, {way}: " + ", ".join(f"{k} {v / 2 * 1e3:.1f} ms" for k, v in top))
        finally:
            gpu_dp.TRACE16, gpu_dp.PINNED_CIGARS = WAYS["dp_fill16, pinned"]
            for e in chain:
                e.close()


if __name__ == "__main__":
    main()
