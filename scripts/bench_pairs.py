#!/usr/bin/env python3
"""Benchmark `gpualign pairs` against its peers on the same simulated pairs, in one run.

For each (length, error) setting it simulates N pairs (scripts/simulate.py), writes them as FASTA and
times, on the same data:
  e2e      gpualign pairs A.fa B.fa -o out.paf   (end to end: parse, align, format, write)
  engine   the engine chain alone on in-memory batches (upload + kernels; a GPU engine's CIGARs stay on the
           device, where the command's PAF/SAM lines are made from them)
  engine_dev, engine_dev_fetch, engine_dev_serial (--engine-device-input) the same on the batches the device
           reader makes from the files (no upload); _fetch: each batch's CIGARs brought to the host as well;
           _serial: each batch queued and aligned on one thread, the device synchronised around each pass
  pywfa    pywfa (WFA2-lib) called directly, all cores, same metric, CIGAR, no I/O
  edlib    edlib, all cores, edit distance + path (edit metric only)
  parasail parasail nw (striped, traceback), all cores, affine metric only, on a sample of the pairs
           (--parasail-sample; quadratic, so only a sample is feasible at 1 kbp and above)
  wfa2c    WFA2-lib's own C benchmark (--wfa2-benchmark: tools/align_benchmark built with BUILD_WFA_PARALLEL=1),
           whole process on all cores: reading its input file (the same pairs), aligning, writing score and CIGAR;
           its scores checked against the e2e run's (as sorted lists: its threads write in any order)
and prints a table with pairs/s and ratios, plus one JSON line per run (--json).

  python scripts/bench_pairs.py -n 100000 -l 150,1000 -e 0.02,0.10 --device cpu
  python scripts/bench_pairs.py -n 1000000 -l 150 -e 0.02 --device gpu --peers wfa2c \
      --wfa2-benchmark WFA2-lib/bin/align_benchmark --rounds 3 --engine-repeats 1

--rounds N runs the e2e command (and --host-parse's) and wfa2c N times, alternated; the best is reported,
every time in the JSON line (e2e_all, wfa2c_all).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from simulate import simulate, write_fasta  # noqa: E402

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # commands timed with their bytecode cached (docs/benchmarks.md)

_al = None


def _pywfa_chunk(args):
    """WFA2-lib as gpualign's CPU engine runs it: exact, high memory mode, BiWFA above 10 kbp."""
    global _al
    metric, scope, qs, ts = args
    from pywfa import WavefrontAligner

    mode = "biwfa" if max(map(len, qs)) > 10_000 else "high"
    if _al is None or _al[0] != (metric, scope, mode):
        _al = ((metric, scope, mode), WavefrontAligner(
            distance="levenshtein" if metric == "edit" else "affine", span="end-to-end", heuristic=None,
            scope=scope, memory_mode=mode, match=0, mismatch=4, gap_opening=6, gap_extension=2))
    a = _al[1]
    out = 0
    for q, t in zip(qs, ts):
        out += a.wavefront_align(t, q)
        if scope == "full":
            out += len(a.cigarstring)
    return out


def _parasail_chunk(args):
    import parasail

    qs, ts = args
    m = parasail.matrix_create("ACGT", 0, -4)
    out = 0
    for q, t in zip(qs, ts):  # open = o + e, extend = e (parasail's convention; tests/oracles.py)
        r = parasail.nw_trace_striped_32(q, t, 8, 2, m)
        out += len(r.cigar.decode)
    return out


def _edlib_chunk(args):
    import edlib

    task, qs, ts = args
    return sum(edlib.align(q, t, task=task)["editDistance"] for q, t in zip(qs, ts))


def _wfa2_input(path, q, t):
    """The pairs in align_benchmark's input format: '>pattern' then '<text', a line each."""
    with open(path, "wb") as fh:
        for x, y in zip(q, t):
            fh.write(b">" + x + b"\n<" + y + b"\n")


def _wfa2_run(binary, seq, out, metric, distance_only, threads):
    """Seconds of one whole align_benchmark process (its own reading, aligning and writing)."""
    cmd = [binary, "-a", "edit-wfa" if metric == "edit" else "gap-affine-wfa", "-i", seq, "-o", out,
           "-t", str(threads)]
    cmd += ["-g", "0,4,6,2"] * (metric == "affine") + ["--wfa-score-only"] * distance_only
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True)
    took = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"{binary}: exit {p.returncode}: {p.stderr.decode()[-500:]}")
    return took


def _scores(path, paf):
    """Sorted absolute scores: a PAF's AS:i tags, or the first column of align_benchmark's output."""
    import numpy as np

    vals = []
    with open(path, "rb") as fh:
        for line in fh:
            if paf:  # (the tag up to the next tab or the line's end)
                vals.append(int(line.split(b"\tAS:i:", 1)[1].split(b"\t", 1)[0]))
            else:  # (a tab after the score in today's WFA2-lib, a space in older ones)
                vals.append(int(line.split(None, 1)[0]))
    return np.sort(np.abs(np.array(vals, dtype=np.int64)))


def _pool_time(fn, chunks, threads):
    with Pool(threads) as pool:
        pool.map(fn, chunks[:1])  # warm up the workers
        t0 = time.perf_counter()
        pool.map(fn, chunks)
        return time.perf_counter() - t0


def _chunks(qs, ts, n, extra=()):
    step = max(1, len(qs) // n)
    return [(*extra, qs[i:i + step], ts[i:i + step]) for i in range(0, len(qs), step)]


def _engine_time(q, t, metric, device, threads, distance_only=False, repeats=3, files=None, fetch=False,
                 serial=False):
    """The engine chain on in-memory batches (what `align_pairs` runs), warm: the best of `repeats` passes.
    Batches are queued as stages.stream queues them (their uploads start on this thread; as many aligner
    threads as the first engine's `concurrent`), results are not written. files (A, B): the batches as the
    command's device reader makes them from those files (io/fastx_device.py: the sequences already on the
    GPU, no upload), else built from q, t in page-locked memory as the host reader builds them (uploaded by
    the engine). fetch: each batch's CIGARs brought to the host (as a host writer reads them; a GPU engine
    leaves them on the device until then). serial: each batch queued and aligned on this thread, one after
    the other, the device synchronised before and after each pass (the engine's own time, no thread
    hand-offs)."""
    from concurrent.futures import ThreadPoolExecutor

    from gpualign.config import AlignConfig
    from gpualign.engines import host_allocator, select_engines
    from gpualign.records import PairBatch
    from gpualign.route import prefetch, run_chain

    cfg = AlignConfig(metric=metric, device=device, threads=threads, distance_only=distance_only)
    chain, notice = select_engines(cfg)
    for e in chain:
        e.start()
    batches = []
    if files:
        from gpualign.io.fastx_device import DevicePairReader

        batches = list(DevicePairReader(*files, cfg.batch_bases, cfg.batch_pairs, quals=False))
        if any(b.device is None for b in batches):
            sys.exit(f"{files[0]}: the device reader handed some batches to the host reader")
    else:
        step = cfg.batch_pairs
        for i in range(0, len(q), step):
            b = PairBatch.from_sequences(q[i:i + step], t[i:i + step], alloc=host_allocator(chain))  # as the reader
            batches.append(b)
    run_chain(batches[0], chain, cfg)  # warm-up: compile, staging buffers and device pool at full size

    def run(b):
        res, counts = run_chain(b, chain, cfg)
        if fetch and res.has_cigar:
            res.cigar  # noqa: B018 - (a deferred copy: brought over now)
        return res, counts

    def serial_pass(counts):
        sync()
        for b in batches:
            prefetch(b, chain, cfg)
            for k, v in run(b)[1].items():
                counts[k] = counts.get(k, 0) + v
        sync()

    def threaded_pass(counts):
        pending = []
        for b in [*batches, None]:  # as stages.stream: a batch's upload starts as it is queued, on
            if b is not None:      # this thread, while the aligner threads run the ones before it
                prefetch(b, chain, cfg)
                pending.append(aligner.submit(run, b))
            while pending and (b is None or len(pending) > workers):
                for k, v in pending.pop(0).result()[1].items():
                    counts[k] = counts.get(k, 0) + v

    times = []
    sync = _device_sync(device)
    workers = 0 if serial else max(1, int(chain[0].concurrent))  # (dispatch.Here's window)
    with ThreadPoolExecutor(max(1, workers)) as aligner:
        for _ in range(repeats):  # the best of a few passes over all batches (the first is often slower)
            t0 = time.perf_counter()
            counts = {}
            (serial_pass if serial else threaded_pass)(counts)
            times.append(time.perf_counter() - t0)
    print(f"# engine passes{' (device input)' if files else ''}{' (CIGARs fetched)' if fetch else ''}: "
          f"{', '.join(f'{x:.4f}' for x in times)} s ({len(batches)} batches, "
          f"{'serial, device synchronised' if serial else f'{workers} aligner threads'})",
          file=sys.stderr)
    dt = min(times)
    for e in chain:
        e.close()
    return dt, counts, notice


def _device_sync(device: str):
    """A call that waits for the GPU's queued work (nothing on the CPU)."""
    if device == "cpu":
        return lambda: None
    try:
        import cupy
    except ImportError:
        return lambda: None
    return lambda: cupy.cuda.Device().synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--pairs", type=int, default=100_000)
    ap.add_argument("-l", "--lengths", default="150,1000")
    ap.add_argument("-e", "--errors", default="0.02,0.10")
    ap.add_argument("--metric", default="edit", choices=("edit", "affine"))
    ap.add_argument("--profile", default="uniform", choices=("uniform", "long"), help="simulate.py error profile")
    ap.add_argument("--distance-only", action="store_true", help="scores only, every tool")
    ap.add_argument("--parasail-sample", type=int, default=2000, help="pairs timed with parasail (affine)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "gpu", "auto"))
    ap.add_argument("--peers", default="pywfa,edlib,parasail",
                    help="comma list of pywfa,edlib,parasail,wfa2c (or none)")
    ap.add_argument("--wfa2-benchmark", help="WFA2-lib's align_benchmark binary (the wfa2c peer)")
    ap.add_argument("--rounds", type=int, default=1, help="e2e and wfa2c runs, alternated; the best reported")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="append one JSON line per setting to this file")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--e2e-batch-bases", type=int, default=None,
                    help="bases per batch of the e2e run (gpualign's --batch-bases; its default 2^25 when not given)")
    ap.add_argument("--engine-repeats", type=int, default=3, help="engine column: the best of this many passes")
    ap.add_argument("--engine-device-input", action="store_true",
                    help="also time the engine on the batches the device reader makes from the files (the sequences "
                         "already on the GPU: no upload), CIGARs left on the device (engine_dev) and fetched to the "
                         "host (engine_dev_fetch)")
    ap.add_argument("--host-parse-ab", type=int, default=0, metavar="N",
                    help="also time the e2e run with --host-parse (the inputs parsed on the host), N runs of each "
                         "alternated, outputs compared byte for byte; columns e2e_s (best) and e2e_host_s")
    ap.add_argument("--verify", type=float, default=0.0,
                    help="pass --verify F to the end-to-end run and report its recall")
    a = ap.parse_args()
    peers = [p for p in a.peers.split(",") if p and p != "none"]
    if "wfa2c" in peers and not a.wfa2_benchmark:
        sys.exit("--peers wfa2c needs --wfa2-benchmark PATH (WFA2-lib's tools/align_benchmark)")
    work = a.workdir or tempfile.mkdtemp(prefix="gpualign-bench-")
    os.makedirs(work, exist_ok=True)
    rows = []
    for length in map(int, a.lengths.split(",")):
        for err in map(float, a.errors.split(",")):
            q, t = simulate(a.pairs, length, err, seed=a.seed, profile=a.profile)
            fa, fb, out = (os.path.join(work, f"{length}_{err}_{x}") for x in
                           ("a.fa", "b.fa", "o.tsv" if a.distance_only else "o.paf"))
            write_fasta(fa, q, "q")
            write_fasta(fb, t, "t")
            row = {"pairs": a.pairs, "length": length, "error": err, "metric": a.metric, "device": a.device,
                   "threads": a.threads, "host": platform.node(), "profile": a.profile,
                   "distance_only": a.distance_only}
            flags = ["--distance-only"] if a.distance_only else []
            if a.e2e_batch_bases:
                flags += ["--batch-bases", str(a.e2e_batch_bases)]
            summ = os.path.join(work, "summary.tsv")
            host_out = "_host".join(os.path.splitext(out))
            runs = [("", out, ())] + [("_host", host_out, ("--host-parse",))] * bool(a.host_parse_ab)
            wfa2 = "wfa2c" in peers
            if wfa2:
                seq, wout = (os.path.join(work, f"{length}_{err}_{x}") for x in ("wfa.seq", "wfa.out"))
                _wfa2_input(seq, q, t)
                row["wfa2c_all"] = []
            for _ in range(max(1, a.host_parse_ab, a.rounds)):
                if wfa2:
                    row["wfa2c_all"].append(_wfa2_run(a.wfa2_benchmark, seq, wout, a.metric, a.distance_only,
                                                      a.threads))
                    row["wfa2c_s"] = min(row["wfa2c_all"])
                for key, dest, extra in runs:
                    t0 = time.perf_counter()
                    p = subprocess.run([sys.executable, "-m", "gpualign", "pairs", fa, fb, "-o", dest, "-q",
                                        "--metric", a.metric, "--device", a.device, "-t", str(a.threads),
                                        "--summary", summ, *flags, *extra], capture_output=True)
                    took = time.perf_counter() - t0
                    if p.returncode:
                        sys.exit(p.stderr.decode())
                    row.setdefault(f"e2e{key}_all", []).append(took)
                    if took < row.get(f"e2e{key}_s", float("inf")):
                        stages = dict(line.split("\t") for line in open(summ).read().splitlines()[1:])
                        row[f"e2e{key}_s"] = took
                        row[f"e2e{key}_stages"] = {k: float(stages[k]) for k in (
                            "wall_seconds", "read_seconds", "align_seconds", "write_seconds") if k in stages}
            if a.host_parse_ab and not filecmp.cmp(out, host_out, shallow=False):
                sys.exit(f"{out}: the output of --host-parse differs")
            if wfa2:
                import numpy as np

                if a.distance_only:  # (the e2e run wrote TSV then: its scores from a PAF run of the same pairs)
                    subprocess.run([sys.executable, "-m", "gpualign", "pairs", fa, fb, "-o", out + ".paf", "-q",
                                    "--metric", a.metric, "--device", a.device, "-t", str(a.threads)], check=True)
                if not np.array_equal(_scores(out + ".paf" if a.distance_only else out, True), _scores(wout, False)):
                    sys.exit(f"{wout}: WFA2-lib's scores differ from gpualign's")
                row["wfa2c_scores_equal"] = True
            if a.verify > 0:  # a second end-to-end run, with the sampled check of optimality
                subprocess.run([sys.executable, "-m", "gpualign", "pairs", fa, fb, "-o", out, "-q", "--metric",
                                a.metric, "--device", a.device, "-t", str(a.threads), "--summary", summ, *flags,
                                "--verify", str(a.verify)], check=True, capture_output=True)
                rows_s = dict(line.split("\t") for line in open(summ).read().splitlines()[1:])
                row["verified"], row["recall"] = int(rows_s.get("verified", 0)), rows_s.get("recall", "-")
            row["engine_s"], row["routes"], row["notice"] = _engine_time(q, t, a.metric, a.device, a.threads,
                                                                         a.distance_only, a.engine_repeats)
            if a.engine_device_input:
                for key, fetch, serial in (("engine_dev_s", False, False), ("engine_dev_fetch_s", True, False),
                                           ("engine_dev_serial_s", False, True)):
                    row[key] = _engine_time(q, t, a.metric, a.device, a.threads, a.distance_only, a.engine_repeats,
                                            (fa, fb), fetch, serial)[0]
            qs = [x.decode() for x in q]
            ts = [x.decode() for x in t]
            if "pywfa" in peers:
                scope = "score" if a.distance_only else "full"
                row["pywfa_s"] = _pool_time(_pywfa_chunk, _chunks(qs, ts, 8 * a.threads, (a.metric, scope)), a.threads)
            if "parasail" in peers and a.metric == "affine" and not a.distance_only:
                k = min(len(qs), a.parasail_sample)  # time a sample, scale to all pairs
                row["parasail_s"] = _pool_time(_parasail_chunk, _chunks(qs[:k], ts[:k], 4 * a.threads),
                                               a.threads) * len(qs) / k
            if "edlib" in peers and a.metric == "edit":
                task = "distance" if a.distance_only else "path"
                row["edlib_s"] = _pool_time(_edlib_chunk, _chunks(qs, ts, 8 * a.threads, (task,)), a.threads)
            rows.append(row)
            if a.json:
                with open(a.json, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
            print(json.dumps(row), file=sys.stderr)
    cols = [c for c in ("e2e_s", "e2e_host_s", "engine_s", "engine_dev_s", "engine_dev_fetch_s", "engine_dev_serial_s",
                        "pywfa_s", "edlib_s", "parasail_s", "wfa2c_s")
            if any(c in r for r in rows)]
    print(f"\n{a.metric}{' distance-only' if a.distance_only else ''}, profile {a.profile}, device={a.device}, "
          f"{a.threads} threads, {platform.node()} (parasail: sampled, scaled)")
    print("pairs\tlen\terr\t" + "\t".join(f"{c[:-2]}(s)\t{c[:-2]}(p/s)" for c in cols)
          + "\tpywfa/e2e\tpywfa/engine\twfa2c/e2e\trecall\troutes")
    for r in rows:
        for key in ("e2e", "e2e_host"):
            if f"{key}_stages" in r:
                print(f"# {r['length']} bp {r['error']:.2f}: {key} busy seconds per stage {r[f'{key}_stages']}")
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells += [f"{v:.3f}", f"{r['pairs'] / v:,.0f}"] if v else ["-", "-"]
        ratio = lambda p, k: f"{r[p] / r[k]:.2f}x" if p in r else "-"  # noqa: E731
        print(f"{r['pairs']}\t{r['length']}\t{r['error']:.2f}\t" + "\t".join(cells)
              + f"\t{ratio('pywfa_s', 'e2e_s')}\t{ratio('pywfa_s', 'engine_s')}\t{ratio('wfa2c_s', 'e2e_s')}"
              + f"\t{r.get('recall', '-')}\t{r['routes']}")
        if "wfa2c_all" in r:
            print(f"# {r['length']} bp {r['error']:.2f}: e2e {', '.join(f'{x:.2f}' for x in r['e2e_all'])} s; "
                  f"wfa2c {', '.join(f'{x:.2f}' for x in r['wfa2c_all'])} s (alternated)")


if __name__ == "__main__":
    main()
