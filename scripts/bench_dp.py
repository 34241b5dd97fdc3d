#!/usr/bin/env python3
"""Benchmark general-scoring alignment (issue 25's sets): gpualign's engines (cpu-dp, and with --device
gpu the GPU chain: gpu-dp, cpu-dp for pairs beyond its limits) against parasail called directly, all
cores, on the same pairs in one run; GCUPS = sum of n*m cells / seconds / 1e9.

Sets (--scale multiplies the pair counts; lengths stay):
  dna      1,000,000 pairs, 150 bp queries in 300 bp targets (a mutated copy inside random flanks),
           local, +2 -3 -(5 + 2L)
  protein  100,000 pairs ~350 aa (random proteins, 20% substitutions and indels), local, BLOSUM62 11/1
           (BLAST's convention: a gap of length L costs 11 + L)
  long     1,000 pairs 10 kbp (5% edits), global, +2 -3 -(5 + 2L)
Timings are wall clock of the engine on in-memory batches (built beforehand as the pipeline's reader
cuts them: at most batch_bases bases and batch_pairs pairs; no file I/O), run as stages.stream runs
them (the first engine's `concurrent` batches at once, a thread each), after a warm-up on a few pairs; CIGARs are made unless --score-only. parasail direct: the same function family the engine
uses (sw striped / nw scan, trace variants for CIGARs, 16-bit with a 32-bit re-run on saturation)
with CIGARs decoded, in a process pool of the same size. One JSON line per set on stderr.

  python scripts/bench_dp.py --scale 0.01            # the dev machine
  python scripts/bench_dp.py --device gpu            # GPU chain, cpu-dp and parasail in one run
  python scripts/bench_dp.py --commands 200000        # whole `gpualign pairs` commands, GPU vs CPU, same scores
  python scripts/bench_dp.py --device gpu --sets long --length 1500 --scale 20 --kernel fill   # gpu-dp's
      two kernels on the same pairs (--kernel fill|long: every pair on dp_fill or on dp_long)
  python scripts/bench_dp.py --device gpu --skip-cpu-engine --concurrent 1,2 --gpu-repeats 3   # one
      batch at a time against two at once, on the same pairs
  python scripts/bench_dp.py --device gpu --sets protein --score-only --engine-device-input --gpu-repeats 5
      # also the engine on the batches the command's GPU reader makes from the set written as FASTA (/dev)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from multiprocessing import Pool

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpualign.config import AlignConfig, Penalties, Scoring, default_batch_bases  # noqa: E402
from gpualign.records import PairBatch  # noqa: E402

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # commands timed with their bytecode cached (docs/benchmarks.md)

AA = "ACDEFGHIKLMNPQRSTVWY"
SETS = {
    "dna": dict(n=1_000_000, mode="local", letters="ACGT", qlen=150, tlen=300, rate=0.05,
                pen=Penalties(3, 5, 2), scoring=Scoring(mode="local", match=2)),
    "protein": dict(n=100_000, mode="local", letters=AA, qlen=350, tlen=350, rate=0.20,
                    pen=Penalties(1, 11, 1), scoring=Scoring(mode="local", alphabet="protein", matrix="BLOSUM62")),
    "long": dict(n=1_000, mode="global", letters="ACGT", qlen=10_000, tlen=10_000, rate=0.05,
                 pen=Penalties(3, 5, 2), scoring=Scoring(mode="global", match=2)),
}


def simulate(spec: dict, n: int, seed: int = 1):
    """(queries, targets) as lists of bytes: n random queries of the set's letters and length, each
    target a mutated copy (substitutions, deletions and insertions of one letter, each at rate/3 per
    position; an insertion is a random letter after the position's own) inside random flanks up to the
    target length. All pairs at once (numpy; a million DNA pairs take a few seconds)."""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(spec["letters"].encode(), dtype=np.uint8)
    ql, rate = spec["qlen"], spec["rate"]
    q = rng.choice(letters, (n, ql))
    r = rng.random((n, ql), dtype=np.float32)  # (a million DNA pairs: 0.6 GB)
    out = q.copy()
    sub = r < rate / 3
    out[sub] = rng.choice(letters, int(sub.sum()))
    reps = np.where((r >= rate / 3) & (r < 2 * rate / 3), 0, np.where((r >= 2 * rate / 3) & (r < rate), 2, 1))
    core = np.repeat(out.ravel(), reps.ravel())
    second = (np.cumsum(reps.ravel()) - 1)[reps.ravel() == 2]  # the inserted letter after its position's
    core[second] = rng.choice(letters, len(second))
    lens = reps.sum(axis=1)
    flank = np.maximum(spec["tlen"] - lens, 0)
    left = rng.integers(0, flank + 1)
    tlens = lens + flank
    t = rng.choice(letters, int(tlens.sum()))  # the flanks' letters; the cores go in between
    t_off, c_off = np.cumsum(tlens) - tlens, np.cumsum(lens) - lens
    t[np.repeat(t_off + left - c_off, lens) + np.arange(len(core))] = core
    tb, qb = t.tobytes(), q.tobytes()
    ends = np.cumsum(tlens).tolist()
    return ([qb[i * ql:(i + 1) * ql] for i in range(n)],
            [tb[a:b] for a, b in zip([0] + ends[:-1], ends)])


def _parasail_chunk(args):
    import parasail

    mode, matrix_name, match, mismatch, o, e, trace, qs, ts = args
    m = getattr(parasail, matrix_name.lower()) if matrix_name else parasail.matrix_create("ACGT", match, -mismatch)
    fam, vec = ("sw", "striped") if mode == "local" else ("nw", "scan")
    tr = "_trace" if trace else ""
    f16, f32 = getattr(parasail, f"{fam}{tr}_{vec}_16"), getattr(parasail, f"{fam}{tr}_{vec}_32")
    total = 0
    for q, t in zip(qs, ts):
        r = f16(q, t, o + e, e, m)
        if r.saturated:
            r = f32(q, t, o + e, e, m)
        total += r.score
        if trace:
            total += len(r.get_cigar().seq)
    return total


def parasail_direct(spec, qs, ts, threads: int, trace: bool) -> float:
    p, sc = spec["pen"], spec["scoring"]
    qs = [q.decode() for q in qs]
    ts = [t.decode() for t in ts]
    k = max(1, 4 * threads)
    step = (len(qs) + k - 1) // k
    head = (sc.mode, sc.matrix_name, sc.match, p.mismatch, p.gap_open, p.gap_extend, trace)
    chunks = [(*head, qs[i:i + step], ts[i:i + step]) for i in range(0, len(qs), step)]
    with Pool(threads) as pool:
        pool.map(_parasail_chunk, chunks[:1])  # warm-up (imports in the workers)
        t0 = time.perf_counter()
        pool.map(_parasail_chunk, chunks)
        return time.perf_counter() - t0


def batches_of(qs, ts, cfg: AlignConfig, alloc=None) -> list:
    """PairBatches as the pipeline's reader cuts them (batch_bases, batch_pairs; bytes where alloc puts
    them: engines.host_allocator's pinned memory for the GPU engines)."""
    out, i = [], 0
    while i < len(qs):
        j, size = i, 0
        while j < len(qs) and j - i < cfg.batch_pairs and (j == i or size + len(qs[j]) + len(ts[j]) <= cfg.batch_bases):
            size += len(qs[j]) + len(ts[j])
            j += 1
        out.append(PairBatch.from_sequences(qs[i:j], ts[i:j], alloc=alloc))
        i = j
    return out


def write_pairs(d: str, qs, ts) -> tuple[str, str]:
    """The pairs as two FASTA files a.fa, b.fa in directory d (records a0.., b0..): their paths."""
    from simulate import write_fasta  # (scripts/simulate.py)

    paths = os.path.join(d, "a.fa"), os.path.join(d, "b.fa")
    write_fasta(paths[0], qs, "a")
    write_fasta(paths[1], ts, "b")
    return paths


def device_batches(files, cfg: AlignConfig) -> list:
    """The batches the command's GPU reader makes from files (A, B): sequences parsed, checked and left on
    the device (no upload in the engine's time)."""
    from gpualign import pack, scoring
    from gpualign.io.fastx_device import DevicePairReader

    out = list(DevicePairReader(*files, cfg.batch_bases, cfg.batch_pairs, pack.symbols(cfg.general), quals=False,
                                allowed=scoring.allowed_bytes(cfg)))
    if any(b.device is None for b in out):
        raise SystemExit(f"{files[0]}: the GPU reader handed some batches to the host reader")
    return out


def engine_time(spec, qs, ts, threads: int, trace: bool, device: str = "cpu", concurrent: int = 0,
                repeats: int = 1, batch_bases: int = 0, files=None) -> tuple[list, dict]:
    """(seconds of each of `repeats` runs, pairs per engine) of select_engines' chain for device over every
    batch, run as stages.stream runs it: each batch's upload started as it is queued, as many batches
    aligning at once as the chain's first engine takes (its `concurrent`, a thread each; concurrent > 0
    overrides it). The runs share the chain and its threads, as a command's batches do: a thread's CUDA
    stream keeps the device memory it allocated (CuPy's pool reuses a block on the stream that freed it),
    so later runs, as a rule, find it allocated. files (A, B): the batches the command's GPU reader makes from
    them (device_batches), not uploaded by the engine."""
    from concurrent.futures import ThreadPoolExecutor

    from gpualign.engines import host_allocator, select_engines
    from gpualign.route import prefetch, run_chain

    cfg = AlignConfig(metric="affine", penalties=spec["pen"], scoring=spec["scoring"], device=device,
                      threads=threads, distance_only=not trace,
                      batch_bases=batch_bases or default_batch_bases(spec["scoring"], not trace)).validate()
    chain, _ = select_engines(cfg)
    for e in chain:
        e.start()
    workers = concurrent or max(1, int(chain[0].concurrent))
    counts: dict = {}

    def add(fut):
        for k, v in fut.result()[1].items():
            counts[k] = counts.get(k, 0) + v

    try:
        run_chain(PairBatch.from_sequences(qs[:8], ts[:8]), chain, cfg)  # warm-up
        batches = device_batches(files, cfg) if files else batches_of(qs, ts, cfg, host_allocator(chain))
        seconds = []
        with ThreadPoolExecutor(workers) as pool:
            for _ in range(repeats):
                counts.clear()
                t0 = time.perf_counter()
                pending = []
                for b in batches:
                    prefetch(b, chain, cfg)
                    pending.append(pool.submit(run_chain, b, chain, cfg))
                    while len(pending) > workers:
                        add(pending.pop(0))
                for fut in pending:
                    add(fut)
                seconds.append(time.perf_counter() - t0)
        return seconds, counts
    finally:
        for e in chain:
            e.close()


def commands(n: int, threads: int, json_path: str | None) -> None:
    """Whole `gpualign pairs` commands on n pairs of the dna set written as FASTA: --device gpu (twice)
    and cpu, wall clock, the summary's busy stages and routes, the TSVs' scores compared."""
    import tempfile

    spec = SETS["dna"]
    qs, ts = simulate(spec, n)
    d = tempfile.mkdtemp(prefix="bench_dp_")
    write_pairs(d, qs, ts)
    p, sc = spec["pen"], spec["scoring"]
    opts = ["--mode", sc.mode, "--match", str(sc.match), "-x", str(p.mismatch), "-O", str(p.gap_open), "-E",
            str(p.gap_extend), "-t", str(threads), "-f", "tsv", "-q"]
    scores = {}
    for dev in ("gpu", "gpu", "cpu"):
        out, summ = os.path.join(d, f"{dev}.tsv"), os.path.join(d, f"{dev}.summary")
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "gpualign", "pairs", os.path.join(d, "a.fa"), os.path.join(d, "b.fa"),
                            "-o", out, "--device", dev, "--summary", summ, *opts], capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if r.returncode:
            raise SystemExit(f"gpualign pairs --device {dev} failed: {r.stderr.strip()}")
        with open(summ) as fh:
            rows = dict(line.rstrip("\n").split("\t", 1) for line in fh if not line.startswith("key\t"))
        with open(out) as fh:
            scores[dev] = [line.split("\t")[2] for line in fh.read().splitlines()[1:]]
        row = dict(set="dna", run=f"pairs --device {dev}", pairs=n, seconds=seconds,
                   **{k: rows[k] for k in rows if k.startswith("route:") or k.endswith("_seconds")})
        print(f"pairs --device {dev}: {seconds:.2f} s, read/align/write busy {rows.get('read_seconds')}/"
              f"{rows.get('align_seconds')}/{rows.get('write_seconds')} s, "
              f"{', '.join(f'{k}={v}' for k, v in rows.items() if k.startswith('route:'))}")
        print(json.dumps(row), file=sys.stderr)
        if json_path:
            with open(json_path, "a") as fh:
                fh.write(json.dumps(row) + "\n")
    print(f"same scores GPU and CPU: {scores['gpu'] == scores['cpu']} ({len(scores['cpu'])} pairs)")


def force_kernel(kind: str) -> None:
    """gpu-dp's route: auto (its rule), or every pair on dp_fill (a thread per pair) or dp_long (a block)."""
    from gpualign.engines import gpu_dp

    if kind == "fill":
        gpu_dp.LONG_ROWS, gpu_dp.LONG_CELLS, gpu_dp.MAX_CELLS = 1 << 62, 1 << 62, 1 << 62
    elif kind == "long":
        gpu_dp.LONG_ROWS, gpu_dp.LONG_CELLS = 0, 0


def git_sha() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="dna,protein,long")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the pair counts (0.01 on a laptop)")
    ap.add_argument("--threads", type=int, default=0, help="processes (0 = all cores)")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--score-only", action="store_true", help="scores without CIGARs")
    ap.add_argument("--skip-cpu-engine", action="store_true", help="with --device gpu: time parasail direct only")
    ap.add_argument("--json", help="append one JSON line per set to this file")
    ap.add_argument("--length", type=int, default=0, help="queries and targets of this length (the sets' own: 0)")
    ap.add_argument("--kernel", choices=("auto", "fill", "long"), default="auto",
                    help="with --device gpu: gpu-dp's kernel for every pair (auto: its routing rule)")
    ap.add_argument("--concurrent", default="0",
                    help="with --device gpu: batches aligned at once (0: the engine's own `concurrent`); "
                         "several, comma-separated: a GPU row each, on the same pairs")
    ap.add_argument("--gpu-repeats", type=int, default=1,
                    help="with --device gpu: runs of the GPU chain, one chain and its threads for all (median)")
    ap.add_argument("--cols", type=int, default=0,
                    help="with --device gpu: dp_long's columns per lane and step (gpu_dp.COLS; 0: its own)")
    ap.add_argument("--team", default="0",
                    help="with --device gpu: dp_long's warps per pair (gpu_dp.TEAM; 0: its own choice); several, "
                         "comma-separated: a GPU row each, on the same pairs")
    ap.add_argument("--int16", default="1",
                    help="with --device gpu: 1 long pairs on dp_long16 where their values fit int16 (gpu_dp.INT16; "
                         "with CIGARs not local), 0 never; both, comma-separated: a GPU row each, on the same pairs")
    ap.add_argument("--batch-bases", default="0",
                    help="with --device gpu: bases per batch (0: the pairs command's default, default_batch_bases); "
                         "several, comma-separated: a GPU row each, on the same pairs")
    ap.add_argument("--commands", type=int, default=0, metavar="N",
                    help="instead: whole `gpualign pairs` commands on N pairs of the dna set, GPU vs CPU")
    ap.add_argument("--engine-device-input", action="store_true",
                    help="with --device gpu: also time the engine on the batches the command's GPU reader makes from "
                         "the set written as FASTA (no upload; rows labelled /dev)")
    a = ap.parse_args()
    if a.gpu_repeats < 1:
        ap.error(f"--gpu-repeats must be >= 1 (got {a.gpu_repeats})")
    if a.cols < 0:
        ap.error(f"--cols must be >= 1, or 0 for gpu-dp's own (got {a.cols})")
    teams = [int(x) for x in a.team.split(",")]
    if any(t not in (0, 1, 2, 4) for t in teams):
        ap.error(f"--team takes 1, 2, 4 or 0 for gpu-dp's own choice (got {a.team})")
    if any(x not in ("0", "1") for x in a.int16.split(",")):
        ap.error(f"--int16 takes 1, 0 or both comma-separated (got {a.int16})")
    narrows = [x == "1" for x in a.int16.split(",")]
    if not all(x.isdigit() for x in a.batch_bases.split(",")):
        ap.error(f"--batch-bases takes sizes >= 0, comma-separated (got {a.batch_bases})")
    sizes = [int(x) for x in a.batch_bases.split(",")]
    if a.commands:
        commands(a.commands, a.threads or len(os.sched_getaffinity(0)), a.json)
        return
    threads = a.threads or len(os.sched_getaffinity(0))
    trace = not a.score_only
    gpu = a.device == "gpu"
    force_kernel(a.kernel)
    from gpualign.engines import gpu_dp

    if a.cols:
        gpu_dp.COLS = a.cols
    print(f"{'set':8} {'pairs':>9} {'Gcells':>8} {'gpu s':>8} {'GCUPS':>7} {'cpu-dp s':>9} {'GCUPS':>7} "
          f"{'parasail s':>10} {'GCUPS':>7} {'gpu/parasail':>12}")
    for name in a.sets.split(","):
        spec = dict(SETS[name], **(dict(qlen=a.length, tlen=a.length) if a.length else {}))
        n = max(1, int(round(spec["n"] * a.scale)))
        qs, ts = simulate(spec, n)
        cells = float(sum(len(q) * len(t) for q, t in zip(qs, ts)))
        gpu_rows = []  # (concurrent, team, int16, batch bases, input files, median seconds, runs, routes)
        sources = [None]
        if gpu and a.engine_device_input:
            import tempfile

            sources.append(write_pairs(tempfile.mkdtemp(prefix="bench_dp_"), qs, ts))
        for c in ([int(x) for x in a.concurrent.split(",")] if gpu else []):
            for tm in teams:
                for narrow in narrows:
                    for bb in sizes:
                        for src in sources:
                            gpu_dp.TEAM, gpu_dp.INT16 = tm or None, narrow
                            runs, routes = engine_time(spec, qs, ts, threads, trace, "gpu", c, a.gpu_repeats, bb, src)
                            gpu_rows.append((c, tm, narrow, bb, src, float(np.median(runs)),
                                             [round(r, 4) for r in runs], routes))
        te = engine_time(spec, qs, ts, threads, trace)[0][0] if not (gpu and a.skip_cpu_engine) else 0.0
        tp = parasail_direct(spec, qs, ts, threads, trace)
        rate = lambda s: cells / s / 1e9 if s else 0.0  # noqa: E731
        import parasail

        for c, tm, narrow, bb, src, tg, runs, routes in gpu_rows or [(None, None, None, 0, None, 0.0, [], {})]:
            label = name if c is None or len(gpu_rows) == len(sources) else f"{name}/c{c or 'e'}"
            label += f"/t{tm or 'e'}" if c is not None and len(teams) > 1 else ""
            label += f"/i{16 if narrow else 32}" if c is not None and len(narrows) > 1 else ""
            size = bb or default_batch_bases(spec["scoring"], not trace)
            label += f"/b{size.bit_length() - 1}" if c is not None and len(sizes) > 1 else ""
            label += "/dev" if src else ""
            print(f"{label:8} {n:>9,} {cells / 1e9:>8.3f} {tg:>8.3f} {rate(tg):>7.1f} {te:>9.2f} {rate(te):>7.2f} "
                  f"{tp:>10.2f} {rate(tp):>7.2f} {(tp / tg if tg else 0):>12.1f}")
            row = dict(set=name, pairs=n, cells=cells, cigar=trace, threads=threads, engine_s=te,
                       engine_gcups=rate(te), parasail_s=tp, parasail_gcups=rate(tp),
                       device=f"cpu x{threads} ({platform.processor() or platform.machine()})",
                       parasail=parasail.__version__, git=git_sha(), date=time.strftime("%Y-%m-%d"))
            if gpu:
                from gpualign.gpu.kernels import gpu_status

                row.update(gpu=gpu_status()[1], gpu_s=tg, gpu_runs=runs, gpu_gcups=rate(tg), gpu_routes=routes,
                           kernel=a.kernel, length=a.length or None, concurrent=c or None, cols=a.cols or None,
                           team=tm or None, int16=narrow, batch_bases=size, device_input=bool(src))
            print(json.dumps(row), file=sys.stderr)
            if a.json:
                with open(a.json, "a") as fh:
                    fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
