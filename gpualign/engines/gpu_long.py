"""GPU engine 3: exact edit distance of chromosome-scale strings, two kernels (genome.py picks one).

distance() -- wavefront kernels (kernels/wfa_long.cu), for close strings: one persistent kernel runs
every wavefront step; its blocks meet at a software grid barrier, and the host only polls a small
progress record from another stream. Two int32 columns of 2*max(n,m)+3 entries are allocated once.
kernel="tiled" (default): each round runs ``band`` steps per tile of diagonals in shared memory
between two grid barriers. kernel="step": one grid barrier per step, one diagonal per thread (the
straightforward version, kept to check the tiled one). ``prune`` selects the dynamic-diamond band
(default) or every diagonal |k| <= s.

bp_distance() -- banded bit-parallel DP (kernels/bp_long.cu), for distant strings: n x band / 32 word
steps in strips of 1024 rows, the target's two halves at once, met in the middle.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import numpy as np

from ..devices import on_device
from ..gpu import arrays
from ..gpu.kernels import load_module
from ..pack import CODE2

MAX_LEN = (1 << 31) - 64
TILE_THREADS = 512  # must match kernels/wfa_long.cu (launch bounds: 2 blocks of 512 per SM)
BAND = 64
TILE_MIN = 128
TILE_WIDTH = 4096  # diagonals in shared memory per tile, halo included


def _watch(streams, sources, progress, poll: float, t0: float, report, devices=None) -> None:
    """Wait for the work queued on streams; meanwhile, every poll seconds, copy each device array of
    sources into pinned memory from another stream (the kernels are not disturbed) and call
    progress(report(host copies, seconds since t0)). Without progress: just wait. devices: each stream's
    (and source's) device, when they are not all on the current one."""
    import cupy
    import cupyx

    if progress is not None:
        homes = devices or [None] * len(streams)
        events, watch = [], []
        for st, dev in zip(streams, homes):
            with on_device(dev):
                events.append(st.record())
                watch.append(cupy.cuda.Stream(non_blocking=True))
        snaps = [cupyx.empty_pinned(src.shape, dtype=src.dtype) for src in sources]
        last = time.perf_counter()
        while not all(e.done for e in events):
            time.sleep(0.001)  # short naps: the end is noticed within a millisecond
            if time.perf_counter() - last >= poll:
                last = time.perf_counter()
                for src, snap, w, dev in zip(sources, snaps, watch, homes):
                    with on_device(dev):
                        src.get(stream=w, out=snap)
                        w.synchronize()
                progress(report(snaps, last - t0))
    for st in streams:
        st.synchronize()


def distance(q: np.ndarray, t: np.ndarray, prune: bool = True, progress=None, poll: float = 0.2,
             kernel: str = "tiled", band: int = BAND, tile_min: int = TILE_MIN, upper: int | None = None,
             warp_extend: bool = False, bits: int | None = None) -> dict:
    """q, t: uint8 arrays (folded, rule applied). upper: a known upper bound on the distance (the tiled
    kernel prunes with it from the first step; it must be >= the distance, see long_bound.py).
    warp_extend: long runs of matches extended by whole warps (faster for close strings, ~5% slower
    for distant ones; see kernels/wfa_long.cu). bits: what the tiled kernel compares, 2 (2-bit codes
    packed on the device: ACGT-only strings) or 8 (bytes); None: 2 when both strings allow it.
    Returns dict(distance, cells, seconds, steps, bits)."""
    import cupy

    n, m = len(q), len(t)
    if max(n, m) > MAX_LEN or n + m + 128 >= 1 << 32:
        raise ValueError("strings too long for the GPU long-string engine (2^31 bytes each)")
    if kernel not in ("tiled", "step"):
        raise ValueError(f"unknown kernel {kernel!r}")
    mod = load_module(*WFA_KERNELS)
    tp = (n + 63) // 64 * 64
    size = (tp + m + 127) // 64 * 64 + 64  # >= 64 spare bytes after the target (the kernels read ahead)
    t0 = time.perf_counter()
    d_bytes = cupy.zeros(size, dtype=cupy.uint8)  # the strings go straight to their places on the device
    if n:
        d_bytes[:n].set(np.ascontiguousarray(q))
    if m:
        d_bytes[tp:tp + m].set(np.ascontiguousarray(t))
    d_seq = d_bytes.view(cupy.uint32)
    center = max(n, m) + 1
    col_a = cupy.empty(2 * center + 1, dtype=cupy.int32)
    col_b = cupy.empty(2 * center + 1, dtype=cupy.int32)
    bar = cupy.zeros(2, dtype=cupy.uint32)
    out = cupy.zeros(8, dtype=cupy.int64)
    dev = cupy.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    run = cupy.cuda.Stream(non_blocking=True)
    seq_args = (d_seq, np.uint32(0), np.int32(n), np.uint32(tp), np.int32(m), col_a, col_b, np.int32(center),
                np.int32(1 if prune else 0))
    if kernel == "tiled":
        if bits is None:  # 2 when every byte present is one of ACGT (CODE2 < 255)
            present = (arrays.byte_counts(d_bytes[:n]) + arrays.byte_counts(d_bytes[tp:tp + m])) > 0
            bits = 2 if (CODE2[present] != 255).all() else 8
        if bits not in (2, 8):
            raise ValueError(f"bits must be 2 or 8 (got {bits})")
        tiled_seq = d_seq
        if bits == 2:  # symbol i of the buffer at bits 2i..2i+1 of word i / 16: positions stay the same
            nwords = size // 16
            tiled_seq = cupy.zeros(nwords + 8, dtype=cupy.uint32)
            mod.get_function("pack2")((min(4096, (nwords + 255) // 256),), (256,), (d_seq, tiled_seq,
                                                                                 np.int32(nwords)))
        band = max(1, int(band))
        tmax = TILE_WIDTH - 2 * band
        if tmax < max(1, tile_min):
            raise ValueError(f"band {band} too wide for tiles of {TILE_WIDTH} diagonals")
        u0 = max(n, m) if upper is None else min(max(n, m), int(upper))
        state = cupy.asarray(np.array([u0] * 2 + [2**31 - 1] * 2, np.int32))
        l2 = dev.attributes["L2CacheSize"]
        nbytes = tiled_seq.nbytes
        warm = nbytes if nbytes <= l2 // 2 else 0  # prefetch the strings into L2 when they fit easily
        args = (tiled_seq, *seq_args[1:], np.int32(band), np.int32(max(1, tile_min)), np.int32(tmax), bar, state, out,
                np.int64(warm), np.int32(1 if warp_extend else 0))
        # every block must be resident at once (software grid barrier): two 512-thread blocks per SM
        launch = ((2 * sms,), (TILE_THREADS,), args)
        smem = 2 * TILE_WIDTH * 4
    else:
        launch = ((sms,), (1024,), (*seq_args, bar, out))  # one 1024-thread block per SM
        smem = 0
    dev.synchronize()
    with run:
        mod.get_function(f"wfa_long_tiled<{bits}>" if kernel == "tiled" else "wfa_long")(*launch, shared_mem=smem)
    _watch([run], [out], progress, poll, t0, lambda snaps, elapsed: dict(
        kernel="wfa", score=int(snaps[0][1]), bound=int(snaps[0][2]), diagonals=int(snaps[0][3]),
        final_offset=int(snaps[0][4]), target_len=m, elapsed=elapsed))
    res = out.get()
    if res[7] != 1:
        raise RuntimeError("GPU long-string kernel ended without a result")
    return dict(distance=int(res[0]), cells=int(res[5]), seconds=time.perf_counter() - t0, steps=int(res[1]),
                bits=bits if kernel == "tiled" else 8)


# -- banded bit-parallel DP (kernels/bp_long.cu) -------------------------------------------------------
STRIP_ROWS = 1024  # rows per strip (one warp): must match kernels/bp_long.cu
BPAD = 64  # symbols of padding before the target's codes: must match kernels/bp_long.cu
BP_WARPS_PER_BLOCK = 4  # kernels/bp_long.cu's launch bounds: 128 threads
BP_MAX_SYMBOLS = 31
BP_DEFINES: tuple = ()  # compile-time options of kernels/bp_long.cu (experiments: scripts/profile.py genome)
# (file, names, defines): the kernels this module loads (engines/variants.py); experiments that set
# BP_DEFINES compile on first use
WFA_KERNELS = ("wfa_long.cu", ("wfa_long", "wfa_long_tiled<8>", "wfa_long_tiled<2>", "pack2"), ())
BP_KERNELS = ("bp_long.cu", ("bp_long", "bp_split_min", "bp_long_jobs", "bp_piece_codes"), ())
BP_WARPS_PER_SM = 20  # strips in flight per SM at most (the best of 6..20 tried)
BP_SPLIT_MIN = 1 << 16  # targets at least this long run as two halves at once, met in the middle
BP_RING_BYTES = None  # a cap on one launch's ring memory (fewer warps on wide bands); None: a quarter of free
BP_RING_MIN = 1024  # bp_long's rings: at least this many words (16 columns each) per strip in flight
# bp_long's strips dealt to resident warps spread over the SMs, not taken from a ticket (kernel argument deal).
# A dealt launch needs all its blocks placed at once: one dealt pass at a time per device in this process
# (dealing), none under MPS (_mps) (docs/notes/pruned-band.md)
BP_DEAL = True
_DEALT: dict = {}  # device id -> the lock of its dealt runs
_DEALT_GUARD = threading.Lock()
FAR = np.iinfo(np.int32).max  # a last column's rows that no strip wrote (out of the band, or pruned): any sum
# of two is above every distance (bp_split_min adds them in 64 bits)


def band(n: int, m: int, upper: int) -> tuple[int, int]:
    """Diagonals k = i - j that a path of cost <= upper can use: |k| + |k - (n - m)| <= upper."""
    kf = n - m
    return -((upper - kf) // 2), (kf + upper) // 2


def symbol_table(q_counts: np.ndarray, t_counts: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(table, sigma) from the byte counts of two strings: bytes present in both get codes 0..sigma-1 (in
    byte order), every other byte sigma, which matches nothing. None when sigma > BP_MAX_SYMBOLS."""
    both = (q_counts > 0) & (t_counts > 0)
    sigma = int(both.sum())
    if sigma > BP_MAX_SYMBOLS:
        return None
    table = np.full(256, sigma, dtype=np.uint8)
    table[np.nonzero(both)[0]] = np.arange(sigma, dtype=np.uint8)
    return table, sigma


def symbol_codes(q: np.ndarray, t: np.ndarray, made: tuple | None = None):
    """(q codes, t codes, sigma) on the device (symbol_table's codes of the host strings q and t), or None
    when sigma > BP_MAX_SYMBOLS. made: symbol_table's (table, sigma) when known (another device's)."""
    got = _coded(q, t, made)
    return None if got is None else got[:3]


def _coded(q: np.ndarray, t: np.ndarray, made: tuple | None = None):
    """symbol_codes' triple and the (table, sigma) it used, or None."""
    import cupy

    d_q, d_t = cupy.asarray(q), cupy.asarray(t)
    made = made or symbol_table(arrays.byte_counts(d_q), arrays.byte_counts(d_t))
    if made is None:
        return None
    table, sigma = made
    return arrays.translate(d_q, table), arrays.translate(d_t, table), sigma, made


def _bp_geometry(rows, width):
    """Per run (numpy arrays or ints): strips of rows rows, and ring words per strip for a band width wide."""
    return np.maximum(1, (rows + STRIP_ROWS - 1) // STRIP_ROWS), (STRIP_ROWS + width + 15) // 16 + 4


def _ring_shift(words: int, warps: int) -> int:
    """log2 of the words of each ring of a bp_long launch whose strips write at most words words, or 31:
    rings that hold a whole strip. warps: the launch's warps that are sure to be resident at once. The
    kernel needs ring * (resident warps) >= words (and >= 128 words) so that no strip waits forever; 4x
    that, and BP_RING_MIN, keep writers from waiting on their readers (docs/engines.md)."""
    need = max(BP_RING_MIN, -(-4 * words // max(1, warps))) + 128
    shift = (need - 1).bit_length()
    return shift if (1 << shift) + 1 < words + 4 else 31


def _ring_cap() -> int:
    """Bytes the strips' rings of one launch may take: a quarter of the free device memory, or BP_RING_BYTES."""
    import cupy

    free = cupy.cuda.Device().mem_info[0]
    return min(free // 4, BP_RING_BYTES or free)


def _bp_codes(qc, tc, sigma, nstrips):
    """Device buffers of the kernel: row symbols padded to whole strips, column symbols as byte offsets
    of their match masks with BPAD padding each side."""
    acode = arrays.full(nstrips * STRIP_ROWS + 64, sigma, np.uint8)
    k = min(len(qc), nstrips * STRIP_ROWS)
    if k:
        acode.data.copy_from_device_async(qc.data, k)
    bcode = arrays.full(BPAD + len(tc) + BPAD + 128, 128 * sigma, np.uint16)
    arrays.translate(tc, np.arange(256, dtype=np.uint16) * 128, out=bcode[BPAD:BPAD + len(tc)])
    return acode, bcode


def _mps() -> bool:
    """Whether an MPS control daemon serves this host's CUDA processes (its pipe): its clients share the SMs, so
    a dealt launch's blocks might never all be placed."""
    return os.path.exists(os.path.join(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "control"))


@contextlib.contextmanager
def dealing(devices):
    """The dealt-run lock of each device id held (taken in order of id: two holders never wait on each other), so
    that no two dealt launches of this process share a device's SMs."""
    with _DEALT_GUARD:
        locks = [_DEALT.setdefault(d, threading.Lock()) for d in sorted(set(devices))]
    for lock in locks:
        lock.acquire()
    try:
        yield
    finally:
        for lock in reversed(locks):
            lock.release()


def _resident_warps(kern, sigma: int) -> int:
    """bp_long's warps an SM holds at once in blocks of BP_WARPS_PER_BLOCK (the driver's occupancy for its
    registers and shared memory), at most BP_WARPS_PER_SM; 0 where the driver cannot say (the tests' emulation)."""
    threads = 32 * BP_WARPS_PER_BLOCK
    try:
        from cupy.cuda import driver

        blocks = driver.occupancyMaxActiveBlocksPerMultiprocessor(kern.kernel.ptr, threads,
                                                                   BP_WARPS_PER_BLOCK * (sigma + 1) * 32 * 4)
    except (AttributeError, ImportError, RuntimeError):
        return 0
    return BP_WARPS_PER_BLOCK * min(blocks, BP_WARPS_PER_SM // BP_WARPS_PER_BLOCK)


def _bp_launch(kern, qc, tc, sigma, klo, khi, warps, col_out, stream, deal: int = 0):
    """One run of the kernel on stream: D[n][m] (into the returned ctl[1]) or, with col_out, the last
    column. deal: 0, or the warps that are sure to be resident beside the device's other launches (whole blocks;
    the caller holds dealing()): its strips dealt to at most that many. Returns what must stay alive until the
    stream is done."""
    import cupy

    n, m = len(qc), len(tc)
    rows = n if col_out is None else min(n, m + khi)  # rows below m + khi never meet column m in the band
    nstrips, full = (int(v) for v in _bp_geometry(rows, khi - klo + 1))
    want = max(1, min(nstrips, warps))
    cap = _ring_cap()
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    # one block per SM is resident once the launch runs alone (the other half's launch, MPS neighbours
    # and more warps than fit wait for it): rings are sized for those warps, not for all launched
    sure, dealt = sms * BP_WARPS_PER_BLOCK, 0
    if deal:
        want = sure = min(want, deal)
        dealt = sms
    while True:  # the strips' rings: 8 bytes per 16 columns, at most a strip's, per warp
        shift = _ring_shift(full - 4, min(want, sure))
        slot_words = full if shift == 31 else (1 << shift) + 1
        if want == 1 or (want + 1) * slot_words * 8 <= cap:
            break
        want //= 2
    blocks = (want + BP_WARPS_PER_BLOCK - 1) // BP_WARPS_PER_BLOCK
    threads = 32 * min(want, BP_WARPS_PER_BLOCK)
    nslots = blocks * threads // 32 + 1
    smem = (threads // 32) * (sigma + 1) * 32 * 4
    with stream:  # every fill on the kernel's stream: it must not start before they are done
        acode, bcode = _bp_codes(qc, tc, sigma, nstrips)
        ring = cupy.zeros(nslots * slot_words, dtype=cupy.uint64)  # zero: no word carries a valid tag
        tops = cupy.zeros(2 * nslots, dtype=cupy.uint64)  # per slot: the next strip's top score and start
        ctl = cupy.zeros(4, dtype=cupy.int32)  # ticket, result, the cells computed (uint64)
        kern((blocks,), (threads,), (acode, bcode, np.int32(n), np.int32(m), np.int32(sigma), np.int32(klo),
                                     np.int32(khi), np.int32(nstrips), np.int32(nslots), np.int32(slot_words),
                                     np.int32(shift), ring, tops, ctl, ctl[1:],
                                     col_out if col_out is not None else np.uint64(0), ctl[2:].view(cupy.uint64),
                                     np.int32(dealt)),
             shared_mem=smem)
    return ctl, (acode, bcode, ring, tops), nstrips


def _strips_report(totals, info):
    """The bit-parallel kernel's progress from its tickets (strips taken, one per run)."""
    def report(snaps, elapsed):
        taken = sum(min(int(snap[0]), total) for snap, total in zip(snaps, totals))
        return dict(kernel="bp", strips_taken=taken, strips=sum(totals), elapsed=elapsed, **info)
    return report


def bp_distance(q: np.ndarray, t: np.ndarray, upper: int | None = None, guess: int | None = None,
                warps: int | None = None, split: bool | None = None, progress=None, poll: float = 0.2,
                other: int | None = None) -> dict | None:
    """Exact edit distance by banded bit-parallel DP on the GPU. upper: a known upper bound on the
    distance (default: max(n, m)); guess: a band to try first (any value). The band holds every path
    of cost <= its width parameter u = min(guess, upper); a result above u is not trusted and u is
    doubled (up to upper, whose band holds the optimal path) until it holds the result.
    Time ~ n * band / 32 lane steps (fewer: the kernel skips the band's cells that no path within u passes, about
    half of them in one pass), and at least one sequential step per column: split runs the first
    half of the target forwards and the second half backwards (both strings reversed) at the same time,
    each giving its whole last column, and takes d = min_i F[i] + R[n - i]: half the sequential steps.
    Default: split when the target has BP_SPLIT_MIN symbols or more (`genome` chooses by genome_pair.bp_split:
    each half prunes less, so runs bound by cells rather than steps lose). other: a device number: with
    split, the backward half runs there (its strings uploaded there, its last column copied back to the
    current device); else both halves share the current device. It beats the wavefront kernel on distant
    strings. None when the strings hold more than BP_MAX_SYMBOLS distinct
    common symbols (use distance()). progress: called every poll seconds with dict(kernel="bp", strips_taken, strips, band,
    band_pass, halves, elapsed). Returns dict(distance, cells (DP cells the strips computed), seconds, passes,
    split, cut): with split, cut = (i, m1, d1), a cell on an optimal path and the distance of q[:i] vs t[:m1]."""
    import cupy

    n, m = len(q), len(t)
    if max(n, m) > MAX_LEN:
        raise ValueError("strings too long for the GPU long-string engine (2^31 bytes each)")
    t0 = time.perf_counter()
    if n == 0 or m == 0:
        return dict(distance=max(n, m), cells=0, seconds=0.0, passes=0, split=False)
    coded = _coded(q, t)
    if coded is None:
        return None
    qc, tc, sigma, made = coded
    top = max(n, m)
    ceiling = top if upper is None else max(abs(n - m), min(top, int(upper)))
    u = ceiling if guess is None else max(abs(n - m), min(ceiling, int(guess)))
    split = m >= BP_SPLIT_MIN if split is None else bool(split and m >= 2)
    homes = [None, None] if split else [None]  # each half's device (None: the current one)
    if split and other is not None:
        homes = [cupy.cuda.Device().id, int(other)]
    m1 = m // 2
    halves = [(qc, tc[:m1] if split else tc)]
    if split:
        with on_device(homes[1]):  # the backward half's strings on its device (the same codes)
            bq, bt = (qc, tc[m1:]) if homes[1] is None else symbol_codes(q, t[m1:], made)[:2]
            halves.append((arrays.reverse(bq), arrays.reverse(bt)))
    # caps: a launch's warps at most (its device's share); fits: dealt, the warps sure to be resident beside the
    # device's other launch in whole blocks (0: strips taken from the ticket)
    kerns, streams, caps, fits = [], [], [], []
    deal = BP_DEAL and not _mps()
    for dev in homes:
        with on_device(dev):
            kerns.append(load_module("bp_long.cu", ("bp_long", "bp_split_min"), BP_DEFINES))
            streams.append(cupy.cuda.Stream(non_blocking=True))
            sms, share = cupy.cuda.Device().attributes["MultiProcessorCount"], homes.count(dev)
            resident = _resident_warps(kerns[-1].get_function("bp_long"), sigma) if deal else 0
            fits.append(sms * resident // share // BP_WARPS_PER_BLOCK * BP_WARPS_PER_BLOCK)
            caps.append(fits[-1] or sms * BP_WARPS_PER_SM // share)
            cupy.cuda.get_current_stream().synchronize()  # the codes and halves above are ready for the streams
    ids = [cupy.cuda.Device().id if dev is None else dev for dev in homes]
    cells, passes = 0, 0
    while True:
        klo, khi = band(n, m, u)  # the same diagonals in both halves' own coordinates
        width = khi - klo + 1
        info = dict(band=width, band_pass=passes + 1, halves=len(streams))
        with dealing(ids) if any(fits) else contextlib.nullcontext():  # (a dealt launch assumes the SMs)
            cols, runs = [], []
            for (a, b), st, dev, mod, cap, fit in zip(halves, streams, homes, kerns, caps, fits):
                # strips in flight: a strip starts ~STRIP_ROWS columns after the one above and runs
                # STRIP_ROWS + width columns; more warps than that would only wait
                w = warps or min((STRIP_ROWS + width) // STRIP_ROWS + 2, cap)
                with on_device(dev):
                    col = None
                    if split:
                        with st:
                            col = arrays.full(n + 1, FAR, np.int32)
                            col[:1].set(np.array([len(b)], np.int32))  # D[0][j] = j
                    runs.append(_bp_launch(mod.get_function("bp_long"), a, b, sigma, klo, khi, w, col, st, fit))
                    cols.append(col)
            _watch(streams, [r[0][:1] for r in runs], progress, poll, t0,
                   _strips_report([r[2] for r in runs], info), homes)
            counts = []  # ticket, result and cells of each run (_watch waited for them)
            for r, dev in zip(runs, homes):
                with on_device(dev):
                    counts.append(r[0].get())
        if not split:
            d = int(counts[0][1])
        else:
            with on_device(homes[0]):
                back = cols[1]
                if homes[1] is not None:  # the backward column to the first device (the same one: `--gpus 0,0`)
                    back = cupy.empty_like(cols[0])
                    cupy.cuda.runtime.memcpyPeer(back.data.ptr, homes[0], cols[1].data.ptr, homes[1], back.nbytes)
                total, row, left = _split_min(kerns[0].get_function("bp_split_min"), cols[0], back,
                                              np.zeros(1, np.int64), np.full(1, n, np.int32))  # the cell
            # (row, m1) on an optimal path
            d, cut = int(total[0]), (int(row[0]), m1, int(left[0]))
        del runs
        passes += 1
        cells += sum(int(c[2:].view(np.uint64)[0]) for c in counts)  # what the strips computed (pruned)
        if d <= u or u >= ceiling:
            return dict(distance=d, cells=cells, seconds=time.perf_counter() - t0, passes=passes, split=split,
                        cut=cut if split else None)
        u = min(ceiling, max(2 * u, u + STRIP_ROWS))


def _split_min(kernel, fwd, bwd, off: np.ndarray, rows: np.ndarray):
    """Hirschberg's split of pieces from their forward and backward last columns (bp_split_min: piece p's
    rows 0..rows[p] at fwd/bwd[off[p]:], off int64 on the host): per piece the least total
    fwd[r] + bwd[rows - r], its row r (the first on ties) and fwd[r], as int64 arrays. One piece spreads
    over many blocks."""
    import cupy

    best = arrays.full(len(rows), np.iinfo(np.uint64).max, np.uint64)
    span = -(-(int(rows.max()) + 1) // 256)  # blocks of 256 rows per piece, up to 1,024
    kernel((min(len(rows), 4096), min(span, 1024) if len(rows) == 1 else 1), (256,),
           (fwd, bwd, cupy.asarray(off), cupy.asarray(rows), np.int32(len(rows)), best))
    key = best.get()
    total, row = (key >> np.uint64(32)).astype(np.int64), (key & np.uint64(0xFFFFFFFF)).astype(np.int64)
    left = arrays.gather(fwd, cupy.asarray(off + row)).get().astype(np.int64)
    return total, row, left


class BpSplitter:
    """Hirschberg splits of many pieces of one pair at once (hirschberg.align_path's split): per piece,
    the bit-parallel kernel runs the left half of its longer side forwards and the right half backwards,
    each giving its whole last column, in a band from the piece's known distance (exact: a band of
    that width holds every optimal path). A level costs a few launches whatever its number of pieces:
    bp_piece_codes writes every half's symbol buffers, one bp_long_jobs launch runs every half (its
    strips from one ticket, round by round: every half moves at once; each half with its own ring), and
    bp_split_min takes every piece's best row."""

    def __init__(self, q: np.ndarray, t: np.ndarray):
        import cupy

        codes = symbol_codes(q, t)
        if codes is None:
            raise ValueError(f"more than {BP_MAX_SYMBOLS} distinct symbols")
        self.qc, self.tc, self.sigma = codes
        mod = load_module("bp_long.cu", ("bp_long_jobs", "bp_split_min", "bp_piece_codes"), BP_DEFINES)
        self.kern, self.best = mod.get_function("bp_long_jobs"), mod.get_function("bp_split_min")
        self.piece_codes = mod.get_function("bp_piece_codes")
        self.warps = cupy.cuda.Device().attributes["MultiProcessorCount"] * BP_WARPS_PER_SM  # in flight at most
        self.ring_max = None  # bytes: a cap on a level's rings below _ring_cap's (fewer warps on wide levels)
        self.cells = 0

    def _codes(self, seg_len, pos, count, flags, pre, scale, dtype):
        """One buffer of segments seg_len long (see bp_piece_codes), and each segment's start in it."""
        import cupy

        end = np.cumsum(seg_len)
        total = int(end[-1])
        out = cupy.empty(total, dtype=dtype)
        seg = cupy.asarray(np.concatenate([end, pos, count, flags]).astype(np.int64))
        self.piece_codes((min(65536, (total + 255) // 256),), (256,),
                         (self.qc, self.tc, seg, np.int32(len(end)), np.int64(total), np.int32(pre), np.int32(scale),
                          np.int32(scale * self.sigma), out, np.int32(out.itemsize == 2)))
        return out, end - seg_len

    def _launch_shape(self, nstrips: np.ndarray, slot_words: np.ndarray):
        """bp_long_jobs' blocks, threads per block and each job's ring slots: every strip of the level may be
        in flight; a job's ring holds min(its strips, warps launched) + 1 slots, the warps halved until a
        quarter of the free memory (or BP_RING_BYTES, or ring_max) holds the rings."""
        cap = min(_ring_cap(), self.ring_max or np.iinfo(np.int64).max)
        warps = int(min(self.warps, nstrips.sum()))
        while True:
            blocks = -(-warps // BP_WARPS_PER_BLOCK)
            threads = 32 * min(warps, BP_WARPS_PER_BLOCK)
            nslots = np.minimum(nstrips, blocks * threads // 32) + 1
            if warps == 1 or (nslots * slot_words).sum() * 8 <= cap:
                return blocks, threads, nslots
            warps //= 2

    def _halves(self, p, swap, rows, cols, mid, klo, khi, fwd, bwd, off):
        """Every piece's two halves in one bp_long_jobs launch: piece k's forward half is job 2k (rows a
        against b[:mid]), its backward half job 2k + 1 (a reversed against b[mid:] reversed), a the
        shorter side (the target when swap), their last columns into fwd and bwd at off[k]. Returns the
        device buffers the launch uses."""
        import cupy

        r, klo, khi = (np.repeat(v, 2) for v in (rows, klo, khi))
        width = khi - klo + 1
        c = np.stack([mid, cols - mid], axis=1).ravel()
        back = np.tile([False, True], len(p))
        a0 = np.repeat(np.where(swap, p.ta, p.qa), 2)  # where the rows' string starts (in tc when swapped)
        b0, b1 = np.repeat(np.where(swap, p.qa, p.ta), 2), np.repeat(np.where(swap, p.qb, p.tb), 2)
        a_t, rev = np.repeat(swap, 2).astype(np.int64), 2 * back.astype(np.int64)  # bp_piece_codes' flags
        nstrips, slot_words = _bp_geometry(np.minimum(r, c + khi), width)  # as _bp_launch's
        blocks, threads, nslots = self._launch_shape(nstrips, slot_words)
        acode, a_at = self._codes(nstrips * STRIP_ROWS + 64, np.where(back, a0 + r - 1, a0),
                                  np.minimum(r, nstrips * STRIP_ROWS), a_t | rev, 0, 1, cupy.uint8)
        bcode, b_at = self._codes(c + 2 * BPAD + 128, np.where(back, b1 - 1, b0), c, (1 - a_t) | rev, BPAD, 128,
                                  cupy.uint16)
        ring_len = nslots * slot_words
        ring = cupy.zeros(int(ring_len.sum()), dtype=cupy.uint64)  # zero: no word carries a valid tag
        tops = cupy.zeros(2 * int(nslots.sum()), dtype=cupy.uint64)  # two words a slot
        result = cupy.zeros(len(r), dtype=cupy.int32)
        ticket = cupy.zeros(1, dtype=cupy.uint64)
        col = np.where(back, bwd.data.ptr, fwd.data.ptr) + 4 * np.repeat(off[:-1], 2)
        ring_at, tops_at = np.cumsum(ring_len) - ring_len, np.cumsum(nslots) - nslots
        table = np.stack([acode.data.ptr + a_at, bcode.data.ptr + 2 * b_at, ring.data.ptr + 8 * ring_at,
                          tops.data.ptr + 16 * tops_at, result.data.ptr + 4 * np.arange(len(r)), col, r, c, klo, khi,
                          nstrips, nslots, slot_words, np.full(len(r), 31)], axis=1).astype(np.int64)
        order = np.argsort(-nstrips, kind="stable")  # rounds of tickets: strip s of every job that has one
        rounds = int(nstrips.max())
        first = np.concatenate([[0], np.cumsum(np.bincount(nstrips - 1, minlength=rounds)[::-1].cumsum()[::-1])])
        jobs, first = cupy.asarray(table[order]), cupy.asarray(first.astype(np.int64))
        smem = (threads // 32) * (self.sigma + 1) * 32 * 4
        self.kern((blocks,), (threads,), (jobs, first, np.int32(rounds), np.int32(self.sigma), ticket), shared_mem=smem)
        return jobs, first, acode, bcode, ring, tops, result, ticket

    def __call__(self, q, t, p):
        import cupy

        n, m = p.qb - p.qa, p.tb - p.ta
        swap = n > m  # the longer side is halved; the shorter gives the rows
        rows, cols = np.where(swap, m, n), np.where(swap, n, m)
        mid = cols // 2
        off = np.concatenate([[0], np.cumsum(rows + 1)]).astype(np.int64)
        fwd = arrays.full(int(off[-1]), FAR, np.int32)
        bwd = arrays.full(int(off[-1]), FAR, np.int32)
        d_off = cupy.asarray(off[:-1])
        arrays.scatter(fwd, d_off, cupy.asarray(mid.astype(np.int32)))  # D[0][j] = j
        arrays.scatter(bwd, d_off, cupy.asarray((cols - mid).astype(np.int32)))
        klo, khi = band(rows, cols, p.d)
        self.cells += int((rows * np.minimum(cols, khi - klo + 1)).sum())  # (the band's: the kernel prunes some)
        keep = self._halves(p, swap, rows, cols, mid, klo, khi, fwd, bwd, off)  # alive until the results are read
        total, row, left = _split_min(self.best, fwd, bwd, off[:-1], rows.astype(np.int32))
        if (total != p.d).any():
            k = int(np.argmax(total != p.d))
            raise RuntimeError(f"bit-parallel split: piece distance {int(p.d[k])}, its columns say {int(total[k])}")
        i = np.where(swap, p.qa + mid, p.qa + row)
        j = np.where(swap, p.ta + row, p.ta + mid)
        del keep
        return i, j, left
