#!/usr/bin/env python3
"""Benchmark `gpualign search` (every approximate occurrence of many patterns) against its CPU engine
(sassy-rs in worker processes), sassy-rs's own multithreaded search (`search_many` in its batch_patterns
mode, IUPAC profile, its own local-minima semantics: the raw speed of the library) and edlib HW (one pattern at a time, best hits only).

Sets (simulated: a uniform random genome in records of --record-mbp, 1% of it N runs; guides half random,
half drawn from the genome with <= 3 edits):
  a  312 guides x 23 nt, k = 3, genome --genome-mbp (3100 = human-sized)
  b  10,000 guides x 23 nt, k = 4, same genome
  c  1,000 patterns x 150 nt, k = 15, the genome's first 100 Mbp
Per set: the whole `gpualign search` command (subprocess, reading the FASTA included, output TSV) on the
GPU, split into its stages (its --summary: read, search, align, write busy seconds; start-up and end as the
whole minus its own wall) and set against its engine (whole / search busy); the CPU engine and the peers
on --cpu-mbp of the genome (rates per pattern*bp compared, both strands searched everywhere). GPU hits on
the --cpu-mbp slice (in 1 Mbp chunks: borders inside it) and the CPU engine's (default chunks, as a user
runs it) are compared byte for byte.

  python scripts/bench_search.py --sets a,b,c --genome-mbp 3100 --cpu-mbp 20
  python scripts/bench_search.py --genome-mbp 1000 --read-only 0,2      # the text reader alone
  python scripts/bench_search.py --sets a --skip-cpu --text-form bgzip   # the text as bgzip (or gzip)
  python scripts/bench_search.py --genome-mbp 1000 --raw-read 4,16      # reading with no workers, to the GPU
  python scripts/bench_search.py --genome-mbp 20 --sets a --cpu-only    # the CPU engine against sassy, no GPU
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # commands timed with their bytecode cached (docs/benchmarks.md)

SETS = {"a": (312, 23, 3, None), "b": (10_000, 23, 4, None), "c": (1_000, 150, 15, 100)}
LETTERS = np.frombuffer(b"ACGT", np.uint8)


def write_genome(path: str, mbp: int, record_mbp: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "wb") as fh:
        left, r = mbp * 1_000_000, 0
        while left > 0:
            n = min(left, record_mbp * 1_000_000)
            seq = LETTERS[rng.integers(0, 4, n, dtype=np.uint8)]
            for a in rng.integers(0, max(1, n - 10_000), max(1, n // 1_000_000)):  # 1% N in runs of 10 kbp
                seq[a:a + 10_000] = ord("N")
            fh.write(f">chr{r + 1}\n".encode())
            rows = n // 60
            body = np.empty((rows, 61), np.uint8)
            body[:, :60] = seq[:rows * 60].reshape(rows, 60)
            body[:, 60] = 10
            fh.write(body.tobytes())
            if n % 60:
                fh.write(seq[rows * 60:].tobytes() + b"\n")
            left -= n
            r += 1


def first_bases(path: str, n: int) -> bytes:
    out, got = [], 0
    with open(path, "rb") as fh:
        fh.readline()
        for line in fh:
            if line.startswith(b">"):
                break
            out.append(line.strip())
            got += len(out[-1])
            if got >= n:
                break
    return b"".join(out)[:n]


def write_patterns(path: str, n: int, m: int, genome: bytes, seed: int) -> list:
    rng = np.random.default_rng(seed)
    pats = []
    for i in range(n):
        if i % 2:
            pats.append(LETTERS[rng.integers(0, 4, m)].tobytes())
            continue
        while True:
            a = int(rng.integers(0, len(genome) - m - 4))
            p = bytearray(genome[a:a + m])
            if b"N" not in p:
                break
        for _ in range(int(rng.integers(0, 4))):
            p[int(rng.integers(0, m))] = LETTERS[rng.integers(0, 4)]
        pats.append(bytes(p))
    with open(path, "wb") as fh:
        fh.write(b"".join(b">g%d\n%s\n" % (i, p) for i, p in enumerate(pats)))
    return pats


def command(args: list) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "gpualign", "search", *args], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(f"gpualign search failed: {r.stderr}")
    return dt, r.stderr


STAGES = ("read", "search", "align", "write")


def stages(whole: float, summary: str) -> dict:
    """A whole command's split from its --summary TSV: its own wall, each stage's busy seconds (they overlap),
    start-up and end (whole - wall), and whole / search: the command's time per second of its engine."""
    with open(summary) as fh:
        rows = dict(line.rstrip("\n").split("\t", 1) for line in fh
                    if "\t" in line and not line.startswith("key\t"))
    out = {"wall_s": float(rows["wall_seconds"])}
    out.update({f"{k}_s": float(rows[f"{k}_seconds"]) for k in STAGES})
    out["start_end_s"] = round(whole - out["wall_s"], 3)
    out["whole_per_search"] = round(whole / out["search_s"], 2) if out["search_s"] > 0 else None
    return out


def cpu_only(a, head: bytes, slice_fa: str) -> None:
    """--cpu-only: per set, the whole `gpualign search --device cpu` command on the slice at default chunks and
    in 1 Mbp chunks (same bytes required), against sassy-rs search_many on the same text and threads."""
    print("set  patterns  k  slice_Mbp  cpu_default_s  cpu_1Mbp_chunks_s  sassy_many_s  default/sassy")
    for name in a.sets.split(","):
        n, m, k, _ = SETS[name]
        pfa = os.path.join(a.workdir, f"pat_{name}.fa")
        pats = write_patterns(pfa, n, m, head, seed=ord(name))
        times, outs = {}, {}
        for label, cut in (("default", []), ("1M", ["--chunk-bases", "1000000"])):
            outs[label] = os.path.join(a.workdir, f"cpu_{name}_{label}.tsv")
            times[label] = min(command([pfa, slice_fa, "-k", str(k), "-o", outs[label], "--device", "cpu", "-q",
                                        "-t", str(a.threads), *cut])[0] for _ in range(a.repeats))
        if open(outs["default"], "rb").read() != open(outs["1M"], "rb").read():
            raise SystemExit(f"set {name}: the CPU engine's hits differ between chunk sizes")
        s_s = min(sassy_many(pats, head[:a.cpu_mbp * 1_000_000], k, a.threads)[0] for _ in range(a.repeats))
        print(f"{name:4} {n:8} {k:2} {a.cpu_mbp:10} {times['default']:14.2f} {times['1M']:18.2f} {s_s:13.2f} "
              f"{s_s / times['default']:13.2f}", flush=True)


def sassy_many(pats: list, text: bytes, k: int, threads: int) -> tuple[float, int]:
    import sassy

    s = sassy.Searcher("iupac", rc=True)  # its batched multi-pattern mode takes the dna/iupac profiles only
    t0 = time.perf_counter()
    hits = s.search_many(pats, [text], k, threads, "batch_patterns")
    return time.perf_counter() - t0, len(hits)


def edlib_hw(pats: list, text: bytes, k: int) -> float:
    import edlib

    t0 = time.perf_counter()
    for p in pats:
        edlib.align(p, text, mode="HW", task="locations", k=k)
    return time.perf_counter() - t0


def engine_only(mbp: int, variants: list, sets: list, most: int) -> None:
    """The GPU engine's search() alone (upload, kernels, hits back) on an in-memory chunk of random codes,
    per set (at most `most` of its patterns) and kernel variant (-D defines)."""
    import cupy

    from gpualign.search import gpu, seeds
    from gpualign.search import patterns as PT
    from gpualign.search.gpu import GpuSearchEngine
    from gpualign.search.text import Chunk

    default_per, default_threads, default_use_seeds = gpu.PER_THREAD, gpu.THREADS, gpu.SEEDS
    default_dense = seeds.DENSE_SHARE
    rng = np.random.default_rng(3)
    n = mbp * 1_000_000
    gap = 1040
    codes = np.full(n + 2 * gap, 15, np.uint8)
    codes[gap:gap + n] = rng.integers(0, 4, n, dtype=np.uint8)
    one = lambda v: np.array([v], np.int64)  # noqa: E731
    chunk = Chunk(codes, one(gap), one(0), one(0), one(0), one(n), np.array([True]))
    for name in sets:
        npat, m, k, _ = SETS[name]
        npat = min(npat, most)
        codes_p = [rng.integers(0, 4, m, dtype=np.uint8) for _ in range(npat)]
        pats = PT.Patterns([f"p{i}" for i in range(npat)], [c for c in codes_p for c in (c, c[::-1])],
                           np.repeat(np.arange(npat, dtype=np.int32), 2), np.tile([False, True], npat))
        for v in variants:  # -D defines joined by +; P=, T=, S=, D=: gpu.PER_THREAD, THREADS, SEEDS, DENSE_SHARE
            knobs = [x for x in v.split("+") if x[:2] in ("P=", "T=", "S=", "D=")]
            knob = dict(x.split("=") for x in knobs)
            gpu.PER_THREAD = int(knob.get("P", default_per))
            gpu.THREADS = int(knob.get("T", default_threads))
            gpu.SEEDS = knob.get("S", "1") != "0"
            seeds.DENSE_SHARE = float(knob.get("D", default_dense))
            eng = GpuSearchEngine(pats, k, "default", tuple(x for x in v.split("+") if x and x not in knobs))
            eng.search(chunk)
            cupy.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            got = eng.search(chunk)
            dt = time.perf_counter() - t0
            steps = pats.n * n
            print(json.dumps({"engine_only": name, "variant": v or "default", "mbp": mbp, "pattern_strands": pats.n,
                              "m": m, "k": k, "s": round(dt, 4), "T_steps_per_s": round(steps / dt / 1e12, 3),
                              "cands": len(got.ps), "seeds": {w: "dense" if sd.plan.dense else "sparse"
                                                                   for w, sd in eng.seeds.items()}}), flush=True)
    gpu.PER_THREAD, gpu.THREADS, gpu.SEEDS = default_per, default_threads, default_use_seeds
    seeds.DENSE_SHARE = default_dense


def _cached(path: str) -> None:
    """path read through once, so that the timed reading finds it in the page cache."""
    with open(path, "rb") as fh:
        while fh.read(1 << 26):
            pass


_BGZF_BLOCK = 65280  # bgzip's input bytes a member


def _bgzf_member(args) -> bytes:
    """One BGZF member of path's bytes [offset, offset + _BGZF_BLOCK) (level 1: written fast; read as any)."""
    import struct
    import zlib

    from isal import isal_zlib

    path, offset = args
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(_BGZF_BLOCK)
    c = isal_zlib.compressobj(1, isal_zlib.DEFLATED, -15)
    body = c.compress(data) + c.flush()
    return (b"\x1f\x8b\x08\x04\0\0\0\0\0\xff\x06\0BC\x02\0" + struct.pack("<H", len(body) + 25) + body
            + struct.pack("<II", zlib.crc32(data), len(data)))


def text_form(genome: str, form: str, threads: int) -> str:
    """The genome FASTA as `form`: plain (itself), bgzip (members compressed on `threads` processes, as `bgzip -@`
    writes them) or gzip (one stream, ISA-L's threaded writer); written once beside it."""
    if form == "plain":
        return genome
    out = genome + (".bgz" if form == "bgzip" else ".gz")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(genome):  # (a genome written again)
        from concurrent.futures import ProcessPoolExecutor

        from isal import igzip_threaded

        from gpualign.io.bgzf import EOF_MEMBER

        t0 = time.perf_counter()
        with open(out + ".part", "wb") as dst:
            if form == "bgzip":
                offsets = range(0, os.path.getsize(genome), _BGZF_BLOCK)
                with ProcessPoolExecutor(threads) as pool:
                    for m in pool.map(_bgzf_member, ((genome, o) for o in offsets), chunksize=256):
                        dst.write(m)
                dst.write(EOF_MEMBER)
            else:
                with open(genome, "rb") as src, igzip_threaded.open(dst, "wb", compresslevel=1, threads=threads) as z:
                    while piece := src.read(64 << 20):
                        z.write(piece)
        os.replace(out + ".part", out)
        print(f"{form} copy written in {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def read_only(genome: str, workers: list, repeats: int) -> None:
    """The text reader alone (search.text.TextReader, the default chunk size) over the genome FASTA: one stream read
    here (0 workers, or 1: as `-t 1` does) or ranges read by N worker processes; each chunk given back at once
    (as the search does once it is scanned). The FASTA is read once first (page cache)."""
    from gpualign.search.run import CHUNK, worker_pool
    from gpualign.search.text import TextReader

    _cached(genome)
    for w in workers:
        pool = worker_pool(w) if w else None  # (the search's own workers)
        for rep in range(repeats):
            t0, bases = time.perf_counter(), 0
            reader = TextReader(genome, CHUNK, 25, 48, pool, max(1, w))
            for ch in reader:
                bases += int(ch.length.sum())
                reader.release(ch)
            dt = time.perf_counter() - t0
            print(json.dumps({"read_only": genome, "workers": w, "rep": rep, "bases": bases, "s": round(dt, 3),
                              "Mbp_s": round(bases / dt / 1e6)}), flush=True)
        if pool is not None:
            pool.shutdown()


def raw_read(genome: str, threads: list, repeats: int) -> None:
    """The floor of a reading without worker processes (docs/notes/benchmark-history.md): threads `preadv`
    the FASTA's 32 MiB ranges straight into four page-locked buffers in turn, each range uploaded and its line ends counted on the
    GPU (no translation, no layout). The FASTA is read once first (page cache); CuPy's start is timed apart."""
    from concurrent.futures import ThreadPoolExecutor

    _cached(genome)
    t0 = time.perf_counter()
    import cupy

    cupy.zeros(1)
    start = time.perf_counter() - t0
    size, span, piece = os.path.getsize(genome), 32 << 20, 4 << 20
    host = [np.ndarray(span, np.uint8, buffer=cupy.cuda.alloc_pinned_memory(span)) for _ in range(4)]
    dev = [cupy.empty(span, np.uint8) for _ in range(4)]
    count = cupy.ReductionKernel("uint8 x", "int64 y", "x == 10", "a + b", "y = a", "0", "count_line_ends")
    stream = cupy.cuda.Stream(non_blocking=True)
    fd = os.open(genome, os.O_RDONLY)
    for t in threads:
        pool = ThreadPoolExecutor(t)
        for rep in range(repeats):
            sent, ends = [None] * 4, cupy.zeros((), np.int64)
            t0 = time.perf_counter()
            for i, a in enumerate(range(0, size, span)):
                n, j = min(span, size - a), i % 4
                if sent[j] is not None:
                    sent[j].synchronize()
                view = memoryview(host[j])
                list(pool.map(lambda o: os.preadv(fd, [view[o:min(n, o + piece)]], a + o), range(0, n, piece)))
                with stream:
                    dev[j][:n].set(host[j][:n], stream=stream)
                    ends += count(dev[j][:n])
                    sent[j] = stream.record()
            stream.synchronize()
            dt = time.perf_counter() - t0
            print(json.dumps({"raw_read": genome, "threads": t, "rep": rep, "bytes": size, "s": round(dt, 3),
                              "GB_s": round(size / dt / 1e9, 2), "line_ends": int(ends.get()),
                              "cupy_start_s": round(start, 3)}), flush=True)
        pool.shutdown()
    os.close(fd)


def count_hits(path: str) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh) - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="")
    ap.add_argument("--genome-mbp", type=int, default=3100)
    ap.add_argument("--record-mbp", type=int, default=130)
    ap.add_argument("--cpu-mbp", type=int, default=20)
    ap.add_argument("--edlib-patterns", type=int, default=8)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--workdir", default="/tmp/bench_search")
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--engine-only", type=int, default=0, help="time the GPU engine on this many Mbp in memory "
                    "(sets a and c unless --sets is given)")
    ap.add_argument("--engine-patterns", type=int, default=312, help="--engine-only: patterns per set at most")
    ap.add_argument("--variants", default="", help="variants for --engine-only, comma-separated: kernel -D "
                    "defines joined by +, P=N (one-word patterns per thread, 1, 2, 4 or 8), T=N (threads per block, "
                    "one- and two-word patterns), S=0 (no seed filter) and D=X (seeds.DENSE_SHARE)")
    ap.add_argument("--read-only", default="", help="time the text reader alone on the genome with these numbers "
                    "of worker processes, comma-separated (0: one stream)")
    ap.add_argument("--raw-read", default="", help="time reading the genome into page-locked buffers and the GPU "
                    "without workers, with these numbers of threads, comma-separated (the floor of a reading that "
                    "translates on the GPU)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--text-form", default="plain", choices=["plain", "bgzip", "gzip"],
                    help="the genome as the commands and --read-only read it (compressed copies written once)")
    ap.add_argument("--cpu-only", action="store_true", help="the CPU engine alone on the --cpu-mbp slice (default "
                    "chunks and 1 Mbp chunks, best of --repeats) against sassy-rs search_many: no GPU needed")
    a = ap.parse_args()
    if a.engine_only:
        engine_only(a.engine_only, a.variants.split(",") if a.variants else [""], (a.sets or "a,c").split(","),
                    a.engine_patterns)
        return
    a.sets = a.sets or "a,b,c"
    os.makedirs(a.workdir, exist_ok=True)
    genome = os.path.join(a.workdir, f"genome_{a.genome_mbp}.fa")
    t0 = time.perf_counter()
    if not os.path.exists(genome):
        write_genome(genome, a.genome_mbp, a.record_mbp)
    print(f"genome {a.genome_mbp} Mbp ready in {time.perf_counter() - t0:.1f} s", flush=True)
    if a.read_only:
        read_only(text_form(genome, a.text_form, a.threads), [int(w) for w in a.read_only.split(",")], a.repeats)
        return
    if a.raw_read:
        raw_read(genome, [int(t) for t in a.raw_read.split(",")], a.repeats)
        return
    head = first_bases(genome, max(a.cpu_mbp, 100) * 1_000_000)
    slice_fa = os.path.join(a.workdir, f"slice_{a.cpu_mbp}.fa")
    with open(slice_fa, "wb") as fh:
        fh.write(b">slice\n" + head[:a.cpu_mbp * 1_000_000] + b"\n")
    c_fa = os.path.join(a.workdir, "first100.fa")
    with open(c_fa, "wb") as fh:
        fh.write(b">first100\n" + head[:100_000_000] + b"\n")
    if a.cpu_only:
        cpu_only(a, head, slice_fa)
        return
    rows = []
    for name in a.sets.split(","):
        n, m, k, mbp = SETS[name]
        pfa = os.path.join(a.workdir, f"pat_{name}.fa")
        pats = write_patterns(pfa, n, m, head, seed=ord(name))
        text = text_form(genome if mbp is None else c_fa, a.text_form, a.threads)
        size = a.genome_mbp if mbp is None else mbp
        out = os.path.join(a.workdir, f"hits_{name}.tsv")
        command([pfa, slice_fa, "-k", str(k), "-o", out, "--device", "gpu", "-q"])  # kernels compiled
        summ = os.path.join(a.workdir, f"summary_{name}.tsv")
        gpu_s, log = command([pfa, text, "-k", str(k), "-o", out, "--device", "gpu", "--summary", summ])
        row = {"set": name, "patterns": n, "m": m, "k": k, "text_mbp": size, "gpu_s": round(gpu_s, 3),
               "gpu_stages": stages(gpu_s, summ), "gpu_hits": count_hits(out),
               "gpu_Gpbp_s": round(n * size * 1e6 / gpu_s / 1e9, 1), "log": log.strip().splitlines()[-12:]}
        if not a.skip_cpu:
            g_out, c_out = out[:-4] + "_gpu_slice.tsv", out[:-4] + "_cpu_slice.tsv"
            cut = ["--chunk-bases", "1000000"]  # chunk borders inside the slice: runs carried across them
            g_s, _ = command([pfa, slice_fa, "-k", str(k), "-o", g_out, "--device", "gpu", "-q", *cut])
            # the CPU engine as a user runs it (default chunks): its figure is the default command's
            c_s, _ = command([pfa, slice_fa, "-k", str(k), "-o", c_out, "--device", "cpu", "-q",
                              "-t", str(a.threads)])
            same = open(g_out, "rb").read() == open(c_out, "rb").read()
            stext = head[:a.cpu_mbp * 1_000_000]
            s_s, s_hits = sassy_many(pats, stext, k, a.threads)
            e_s = edlib_hw(pats[:a.edlib_patterns], stext, k)
            rate = lambda npat, s: npat * a.cpu_mbp * 1e6 / s / 1e9  # noqa: E731
            row.update(slice_mbp=a.cpu_mbp, slice_gpu_s=round(g_s, 3), slice_cpu_engine_s=round(c_s, 3),
                       slice_identical=same, slice_hits=count_hits(c_out),
                       cpu_engine_Gpbp_s=round(rate(n, c_s), 2), sassy_many_s=round(s_s, 3),
                       sassy_many_Gpbp_s=round(rate(n, s_s), 2), sassy_many_hits=s_hits,
                       edlib_Gpbp_s=round(rate(a.edlib_patterns, e_s), 3),
                       gpu_vs_cpu_engine=round(row["gpu_Gpbp_s"] / rate(n, c_s), 1),
                       gpu_vs_sassy_many=round(row["gpu_Gpbp_s"] / rate(n, s_s), 1))
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\nset  patterns  m    k   text_Mbp  gpu_s    G pattern*bp/s  hits      cpu_engine  sassy_many  edlib"
          "   GPU/cpu  GPU/sassy  identical")
    for r in rows:
        print(f"{r['set']:4} {r['patterns']:8} {r['m']:4} {r['k']:3} {r['text_mbp']:8} {r['gpu_s']:7.2f} "
              f"{r['gpu_Gpbp_s']:14.1f}  {r['gpu_hits']:8}  {r.get('cpu_engine_Gpbp_s', '-'):>10} "
              f"{r.get('sassy_many_Gpbp_s', '-'):>10} {r.get('edlib_Gpbp_s', '-'):>6} "
              f"{r.get('gpu_vs_cpu_engine', '-'):>8} {r.get('gpu_vs_sassy_many', '-'):>9}  "
              f"{r.get('slice_identical', '-')}")
    print("\nthe GPU command's stages (busy seconds; they overlap), start-up and end (whole - its wall), "
          "whole / search")
    print("set  whole_s  wall_s  " + "  ".join(f"{k}_s" for k in STAGES) + "  start_end_s  whole/search")
    for r in rows:
        st = r["gpu_stages"]
        print(f"{r['set']:4} {r['gpu_s']:7.2f} {st['wall_s']:7.2f}  " + "  ".join(f"{st[f'{k}_s']:{len(k) + 2}.2f}"
              for k in STAGES) + f"  {st['start_end_s']:11.2f}  {st['whole_per_search'] or '-':>12}")


if __name__ == "__main__":
    main()
