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
