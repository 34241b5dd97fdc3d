// wfa_long.cu -- exact edit distance between two very long strings (distance only).
//
// Entry point:
//   wfa_long(seq, qp, n, tp, m, colA, colB, center, prune, bar, out)
//     seq      uint32*  the (case-folded) bytes of both strings, as words (see common.cuh, BITS = 8),
//                       query at byte qp, target at byte tp, two spare words at the end
//     n, m     int32    lengths (each < 2^31)
//     colA/B   int32*   two wavefront columns, 2 * center + 1 entries each (center >= max(n, m) + 1);
//                       nothing needs initialising: reads outside the previous step's range are
//                       treated as "no path"
//     prune    int32    1: dynamic diamond (see below); 0: every diagonal |k| <= s (the plain version,
//                       kept to check the pruned one)
//     bar      uint32*  2 zeroed words: the grid barrier's counter and generation
//     out      long long* 8 words, zeroed: out[0] = distance (when out[7] == 1), out[1] = current score,
//                       out[2] = upper bound U, out[3] = active diagonals, out[4] = offset reached on the
//                       final diagonal, out[5] = wavefront cells computed, out[7] = done flag; updated
//                       every 256 steps so a host can poll them from another stream
//     Launch: a grid whose blocks are all resident at once (one or two blocks per SM): the steps are
//     separated by a software grid barrier, so the host never synchronises until the end.
//
// Method: W[s][k] = furthest target offset h on diagonal k = h - v after s edits:
// max(W[s-1][k] + 1, W[s-1][k-1] + 1, W[s-1][k+1]), each candidate kept only inside the matrix, then
// extended along matches (4 bytes per compare). Dynamic diamond: with f = W[s][kf] on the final
// diagonal kf = m - n, d <= U = s + (m - f) (the rest of that diagonal costs at most one edit per
// base). A cell (s, k) with s + |k - kf| > U cannot lie on an optimal path, so step s only computes
// kf - (U - s) <= k <= kf + (U - s): the band shrinks from both sides as U falls. Every cell of an
// optimal path stays inside the band, so the distance is exact (checked against the plain version).
#include "common.cuh"

#define NEG (-0x40000000)

__device__ __forceinline__ void grid_barrier(unsigned int* count, volatile unsigned int* gen, unsigned int nblocks) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned int g = *gen;
        if (atomicAdd(count, 1u) == nblocks - 1) {
            atomicExch(count, 0u);
            __threadfence();
            atomicAdd((unsigned int*)gen, 1u);
        } else {
            while (*gen == g) { }
        }
        __threadfence();
    }
    __syncthreads();
}

__device__ __forceinline__ int col_get(const int* col, int k, int lo, int hi, int center) {
    return (k >= lo && k <= hi) ? __ldcg(col + k + center) : NEG;
}

extern "C" __global__ void wfa_long(const uint32_t* __restrict__ seq, uint32_t qp, int n, uint32_t tp, int m,
                                    int* colA, int* colB, int center, int prune, unsigned int* bar,
                                    long long* out) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int nth = gridDim.x * blockDim.x;
    const int kf = m - n;
    long long U = n > m ? n : m;  // d <= max(n, m)
    if (tid == 0) colA[center] = common_prefix<8>(seq, qp, tp, n < m ? n : m);
    grid_barrier(bar, bar + 1, gridDim.x);
    int lo_p = 0, hi_p = 0;
    long long cells = 1;
    int s = 0;
    int f = (kf == 0) ? __ldcg(colA + center) : NEG;
    bool done = (kf == 0 && f == m);
    if (!done && f >= 0) U = (long long)(m - f) < U ? (long long)(m - f) : U;
    while (!done) {
        s++;
        int lo = -s > -n ? -s : -n;
        int hi = s < m ? s : m;
        if (prune) {
            const long long slack = U - s;
            if ((long long)kf - slack > lo) lo = (int)(kf - slack);
            if ((long long)kf + slack < hi) hi = (int)(kf + slack);
        }
        for (int k = lo + tid; k <= hi; k += nth) {
            const int hx = col_get(colA, k, lo_p, hi_p, center) + 1;
            const int hd = col_get(colA, k - 1, lo_p, hi_p, center) + 1;
            const int hn = col_get(colA, k + 1, lo_p, hi_p, center);
            int best = NEG;
            if (hx >= 0 && hx <= m && hx - k <= n) best = hx;
            if (hd >= 0 && hd <= m && hd - k <= n && hd > best) best = hd;
            if (hn >= 0 && hn <= m && hn - k <= n && hn > best) best = hn;
            if (best >= 0) {
                const int v = best - k;
                const int room = (n - v) < (m - best) ? (n - v) : (m - best);
                best += common_prefix<8>(seq, qp + v, tp + best, room);
            }
            colB[k + center] = best;
        }
        grid_barrier(bar, bar + 1, gridDim.x);
        cells += hi - lo + 1;
        f = (kf >= lo && kf <= hi) ? __ldcg(colB + kf + center) : NEG;
        done = (f == m);
        if (f >= 0 && s + (long long)(m - f) < U) U = s + (long long)(m - f);
        int* t = colA; colA = colB; colB = t;
        lo_p = lo; hi_p = hi;
        if (tid == 0 && (s & 255) == 0) {
            volatile long long* o = out;
            o[1] = s; o[2] = U; o[3] = hi - lo + 1; o[4] = f; o[5] = cells;
        }
    }
    if (tid == 0) {  // also reached when the strings are equal (s = 0)
        volatile long long* o = out;
        o[1] = s; o[2] = U; o[4] = f; o[5] = cells; o[0] = s;
        __threadfence_system();
        o[7] = 1;
    }
}

// ---- Tiled version: several steps per tile between grid barriers -------------------------------
//
//   wfa_long_tiled<BITS>(seq, qp, n, tp, m, colA, colB, center, prune, band, tmin, tmax, bar, state, out,
//                        warm_bytes, warp_extend)
//     BITS     8: seq holds bytes (as for wfa_long); 2: seq holds 2-bit codes (pack2 in common.cuh, 16
//              per word; ACGT-only strings), qp and tp count symbols; four times as many bases per load
//     seq .. center, bar, out   as for wfa_long (out[3] = diagonals of the last round's output)
//     band     int32   steps per round (between two grid barriers)
//     tmin/tmax int32  output diagonals per tile; dynamic shared memory 2 * (tmax + 2 * band) int32
//     state    int32*  4 words: [0], [1] upper bound U (both set to max(n, m) by the host),
//                      [2], [3] distance found (both INT_MAX); double-buffered by round parity so no
//                      block reads a word that another block may be writing in the same round
//     warm_bytes       bytes of seq to prefetch into L2 first (0: none; the strings should fit in L2)
//     warp_extend      1: runs of matches past the first 5 windows are continued by the whole warp, 32
//                      windows per round trip (close strings: long runs); 0: by their own lane, 4 windows
//                      per round trip (distant strings: the warp-wide loop costs more than it saves)
//     Launch: blockDim.x = TILE_THREADS, at most 2 blocks per SM, all resident (software grid barrier).
//
// A round advances the wavefront from score s0 (column A, diagonals [lo_p, hi_p]) to s1 = s0 + bq
// (column B). Its output diagonals [loB, hiB] are cut into tiles of T; a tile loads column A for its
// diagonals widened by bq on each side (the dependency cone: a cell needs diagonals k-1..k+1 of the
// step before) into shared memory, runs the bq steps there with one block barrier per step, the
// computed range narrowing by one diagonal per side per step, and writes its T diagonals of step s1.
// Halo cells are computed twice (by neighbouring tiles), the same values both times.
// Pruning (prune = 1): U, read once per round, bounds d from above, so step s needs only diagonals
// with |k - kf| <= U - s (kf = m - n: any path through (s, k) costs at least s + |k - kf|). U is
// lowered after each round from every cell of its last step: a cell (s, k) with offsets (v, h) gives
// d <= s + max(n - v, m - h) (the rest costs at most one edit per base of the longer remainder).
// Both ends stay exact: every cell of an optimal path lies inside the band of every round.
#ifndef TILE_THREADS
#define TILE_THREADS 512
#endif

__device__ __forceinline__ void step_range(int s, int n, int m, int kf, int U, int prune, int& lo, int& hi) {
    lo = -s > -n ? -s : -n;
    hi = s < m ? s : m;
    if (prune) {
        const long long slack = (long long)U - s;
        if ((long long)kf - slack > lo) lo = (int)(kf - slack);
        if ((long long)kf + slack < hi) hi = (int)(kf + slack);
    }
}

__device__ __forceinline__ int remaining_bound(int s, int k, int h, int n, int m) {
    const long long v = (long long)h - k;
    const long long rest = (n - v) > (m - h) ? (n - v) : (long long)(m - h);
    const long long u = s + rest;
    return u < 0x7fffffff ? (int)u : 0x7fffffff;
}

// NW windows of 32 bits (S = 32 / BITS symbols each) from symbol l on: the common prefix length when it
// ends inside them (or reaches maxlen), else -1 (all S * NW symbols matched). Independent loads: one
// memory round trip.
template <int NW, int BITS>
__device__ __forceinline__ int prefix_windows(const uint32_t* __restrict__ w, uint32_t a, uint32_t b, int l,
                                              int maxlen) {
    constexpr int S = 32 / BITS;
    const uint32_t pa = a + l, pb = b + l, sa = (pa % S) * BITS, sb = (pb % S) * BITS;
    const uint32_t* A = w + pa / S;
    const uint32_t* B = w + pb / S;
    uint32_t ra[NW + 1], rb[NW + 1];
#pragma unroll
    for (int u = 0; u <= NW; u++) { ra[u] = A[u]; rb[u] = B[u]; }
#pragma unroll
    for (int u = 0; u < NW; u++) {
        const uint32_t x = __funnelshift_r(ra[u], ra[u + 1], sa) ^ __funnelshift_r(rb[u], rb[u + 1], sb);
        if (x) {
            const int r = l + S * u + (__ffs(x) - 1) / BITS;
            return r < maxlen ? r : maxlen;
        }
    }
    return l + S * NW >= maxlen ? maxlen : -1;
}

// Extend runs of matches with the whole warp: each lane with more = true (its first window matched)
// has its run continued 32 windows (128 bytes, or 512 bases packed 2-bit) per memory round trip, one
// lane at a time, every lane comparing one 32-bit window; returns the lane's common prefix length (l
// for lanes without more). All 32 lanes of the warp must call it together.
template <int BITS>
__device__ __forceinline__ int extend_warp(const uint32_t* __restrict__ w, uint32_t a, uint32_t b, int l, int room,
                                           bool more) {
    constexpr int S = 32 / BITS;
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    for (unsigned mask = __ballot_sync(full, more); mask; mask &= mask - 1) {
        const int src = __ffs(mask) - 1;
        const uint32_t sa = __shfl_sync(full, a, src), sb = __shfl_sync(full, b, src);
        const int sroom = __shfl_sync(full, room, src);
        int at = __shfl_sync(full, l, src), got = -1;
        while (got < 0) {  // uniform: every lane sees the same broadcast values and ballots
            const int off = at + S * lane;
            uint32_t xx = 0;
            if (off < sroom) xx = load_window<BITS>(w, sa + off) ^ load_window<BITS>(w, sb + off);
            const unsigned stop = __ballot_sync(full, off >= sroom || xx != 0);
            if (stop) {
                const int f = __ffs(stop) - 1;
                const uint32_t fx = __shfl_sync(full, xx, f);
                const int r = at + S * f + (fx ? (__ffs(fx) - 1) / BITS : 0);
                got = r < sroom ? r : sroom;
            }
            at += 32 * S;
        }
        if (lane == src) l = got;
    }
    return l;
}

template <int BITS>
__global__ void __launch_bounds__(TILE_THREADS, 2)
wfa_long_tiled(const uint32_t* __restrict__ seq, uint32_t qp, int n, uint32_t tp, int m, int* colA, int* colB,
               int center, int prune, int band, int tmin, int tmax, unsigned int* bar, int* state,
               long long* out, long long warm_bytes, int warp_extend) {
    constexpr int S = 32 / BITS;  // symbols per 32-bit window
    extern __shared__ int sh[];
    int* const buf0 = sh;
    int* const buf1 = sh + tmax + 2 * band;
    const int kf = m - n;
    volatile int* vstate = state;
    // bring both strings into L2 when they fit (warm_bytes > 0): the leading diagonals then extend
    // from L2 instead of device memory, which is most of a step's latency for close strings
    for (long long b = (long long)(blockIdx.x * blockDim.x + threadIdx.x) * 128; b < warm_bytes;
         b += (long long)gridDim.x * blockDim.x * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const char*>(seq) + b));
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const int f0 = BITS == 8 ? common_prefix_bytes8(seq, qp, tp, n < m ? n : m)
                                 : common_prefix<BITS>(seq, qp, tp, n < m ? n : m);
        colA[center] = f0;
        if (kf == 0 && f0 == m) state[2] = 0;
        if (prune) atomicMin(state, remaining_bound(0, 0, f0, n, m));
    }
    grid_barrier(bar, bar + 1, gridDim.x);
    int s0 = 0, lo_p = 0, hi_p = 0, r = 0;
    long long cells = 1;
    int dist;
    while (true) {
        const int U = vstate[r & 1];
        dist = vstate[2 + (r & 1)];
        if (dist != 0x7fffffff) break;
        int* const u_next = state + ((r + 1) & 1);
        int* const d_next = state + 2 + ((r + 1) & 1);
        if (blockIdx.x == 0 && threadIdx.x == 0) atomicMin(u_next, U);
        const int bq = band < U - s0 ? band : U - s0;  // >= 1: s0 < d <= U while not done
        int loB, hiB;
        step_range(s0 + bq, n, m, kf, U, prune, loB, hiB);
        const int w = hiB - loB + 1;
        int T = (w + gridDim.x - 1) / gridDim.x;
        T = T < tmin ? tmin : (T > tmax ? tmax : T);
        const int ntiles = (w + T - 1) / T;
        for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
            const int a = loB + tile * T;
            const int b = a + T - 1 < hiB ? a + T - 1 : hiB;
            const int base = a - bq, W = b - a + 1 + 2 * bq;
            for (int i = threadIdx.x; i < W; i += blockDim.x) {
                const int k = base + i;
                buf0[i] = (k >= lo_p && k <= hi_p) ? __ldcg(colA + k + center) : NEG;
            }
            __syncthreads();
            int umin = 0x7fffffff;
            for (int j = 1; j <= bq; j++) {
                const int s = s0 + j;
                int lo, hi;
                step_range(s, n, m, kf, U, prune, lo, hi);
                const int* prev = (j & 1) ? buf0 : buf1;
                int* cur = (j & 1) ? buf1 : buf0;
                const int i_lo = lo - base, i_hi = hi - base, i_end = W - 1 - j;
                // two cells per thread and pass: the first window compares of both are issued together
                // (32-bit windows: one funnel shift each; most cells stop inside them)
                // whole warps run the loop (the trip count follows the warp's first lane): runs of matches
                // longer than the first window are extended by the warp together (extend_warp)
                for (int i0 = j + threadIdx.x; i0 - (int)(threadIdx.x & 31) <= i_end; i0 += 2 * TILE_THREADS) {
                    int bst[2], rm[2];
                    uint32_t x[2];
#pragma unroll
                    for (int u = 0; u < 2; u++) {
                        const int i = i0 + u * TILE_THREADS, k = base + i;
                        int best = NEG, room = 0;
                        uint32_t xx = 0;
                        if (i <= i_end && i >= i_lo && i <= i_hi) {
                            // a candidate counts when it stays in the matrix: h <= m and v = h - k <= n;
                            // "no path" (NEG) candidates stay negative whatever wins
                            const int lim = m < n + k ? m : n + k;
                            const int hx = prev[i] + 1, hd = prev[i - 1] + 1, hn = prev[i + 1];
                            best = max(max(hx <= lim ? hx : NEG, hd <= lim ? hd : NEG), hn <= lim ? hn : NEG);
                            if (best >= 0) {
                                const int v = best - k;
                                room = (n - v) < (m - best) ? (n - v) : (m - best);
                                xx = load_window<BITS>(seq, qp + v) ^ load_window<BITS>(seq, tp + best);
                            }
                        }
                        bst[u] = best; rm[u] = room; x[u] = xx;
                    }
#pragma unroll
                    for (int u = 0; u < 2; u++) {
                        const int i = i0 + u * TILE_THREADS, k = base + i;
                        int best = bst[u], l = 0;
                        bool more = false;
                        if (best >= 0) {  // (never for i > i_end)
                            l = x[u] ? (__ffs(x[u]) - 1) / BITS : S;
                            if (l >= rm[u]) {
                                l = rm[u];
                            } else if (!x[u]) {  // 4 more windows alone, then the warp takes the rest
                                const int r = prefix_windows<4, BITS>(seq, qp + best - k, tp + best, S, rm[u]);
                                more = r < 0;
                                l = more ? 5 * S : r;
                            }
                        }
                        if (warp_extend) {  // uniform (a kernel argument): whole warps call it
                            l = extend_warp<BITS>(seq, qp + best - k, tp + best, l, rm[u], more);
                        } else {
                            while (more) {  // alone, 4 windows per round trip
                                const int r = prefix_windows<4, BITS>(seq, qp + best - k, tp + best, l, rm[u]);
                                more = r < 0;
                                l = more ? l + 4 * S : r;
                            }
                        }
                        if (best >= 0) {
                            best += l;
                            if (k == kf && best == m) atomicMin(d_next, s);
                            if (j == bq) {
                                const int ub = remaining_bound(s, k, best, n, m);
                                umin = ub < umin ? ub : umin;
                            }
                        }
                        if (i <= i_end) cur[i] = best;
                    }
                }
                __syncthreads();
            }
            const int* fin = (bq & 1) ? buf1 : buf0;
            for (int i = bq + threadIdx.x; i <= bq + b - a; i += blockDim.x) colB[base + i + center] = fin[i];
            if (prune) {
                for (int o = 16; o > 0; o >>= 1) {
                    const int x = __shfl_xor_sync(0xffffffffu, umin, o);
                    umin = x < umin ? x : umin;
                }
                if ((threadIdx.x & 31) == 0 && umin != 0x7fffffff) atomicMin(u_next, umin);
            }
            if (threadIdx.x == 0 && kf >= a && kf <= b) ((volatile long long*)out)[4] = fin[kf - base];
            __syncthreads();  // the next tile reloads buf0
        }
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            for (int j = 1; j <= bq; j++) {
                int lo, hi;
                step_range(s0 + j, n, m, kf, U, prune, lo, hi);
                cells += hi - lo + 1;
            }
            volatile long long* o = out;
            o[1] = s0 + bq; o[2] = U; o[3] = w; o[5] = cells;
        }
        grid_barrier(bar, bar + 1, gridDim.x);
        int* t = colA; colA = colB; colB = t;
        lo_p = loB; hi_p = hiB;
        s0 += bq;
        r++;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        volatile long long* o = out;
        o[1] = dist; o[5] = cells; o[0] = dist;
        __threadfence_system();
        o[7] = 1;
    }
}

// Explicit instances: what gpu_long.py asks for by name, and what a bare nvcc build checks.
#define WFA_LONG_TILED(B) template __global__ void __launch_bounds__(TILE_THREADS, 2) wfa_long_tiled<B>( \
    const uint32_t*, uint32_t, int, uint32_t, int, int*, int*, int, int, int, int, int, unsigned int*, int*, \
    long long*, long long, int);
WFA_LONG_TILED(8) WFA_LONG_TILED(2)
