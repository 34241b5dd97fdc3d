// dp.cu -- general scoring (gpu_dp.py): Gotoh's affine-gap DP with a substitution matrix, global,
// local (Smith-Waterman) or semi-global (query end to end, the target's two ends free), int32 scores;
// short pairs one thread each (dp_fill, inter-sequence parallelism), long pairs a warp each (dp_long).
//
// Scores are scores (higher is better): H = max(diagonal + S[q][t], V, Z[, 0 when local]);
// V (a query-only base, CIGAR I) = max(H_up - go, V_up - ge); Z (a target-only base, CIGAR D) =
// max(H_left - go, Z_left - ge); go = o + e opens a gap, ge = e extends it (a gap of length L costs
// o + L*e). Sequences come as letter indices into the K x K matrix (K <= 32, kept in shared memory).
//
// A thread walks its query in stripes of ROWS rows; within a stripe it sweeps the target's columns,
// the stripe's H and Z in registers and the row above it (H and V) in a boundary array in global
// memory. The pairs of a warp sit side by side in that array and in the direction array (entry x of
// lane l at [x * 32 + l]), so a warp's loads and stores are coalesced; the host sorts pairs by length
// so warp mates need about the same room. dp_fill writes, per cell, 4 direction bits (the source of H:
// diagonal, V, Z or zero; whether V and Z extended), 16 cells per 64-bit word, and the best score and
// its cell; dp_trace walks back from that cell and writes the CIGAR (BAM op codes, runs packed as
// len << 4 | op), its start cell and its op count.
//
// Long pairs (intra-sequence parallelism): dp_long gives each pair a warp. Lane l takes stripe
// 32 T + l of tile T (32 stripes, 512 rows), skewed: at step x it computes COLS columns from
// (x - l) COLS + 1, with the row above them handed down from lane l - 1's step x - 1 by shuffles;
// lane 0 reads the tile above's last row from the pair's boundary row (one row of n + 1 H and V),
// lane 31 writes its own there. Its direction words are laid out by step ([tile][step][column][lane]),
// so a warp's stores are coalesced; dp_trace<MODE, true> reads them so.

#ifdef __CUDACC_RTC__  // NVRTC (CuPy) has no C library headers
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#define ROWS 16
#define NEG_INF (-(1 << 29))
#ifndef COLS
#define COLS 1  // dp_long's columns per lane and step
#endif
#define FULL_MASK 0xffffffffu

enum { GLOBAL = 0, LOCAL = 1, SEMI = 2 };
enum { FROM_DIAG = 0, FROM_V = 1, FROM_Z = 2, FROM_ZERO = 3 };
enum { OP_I = 1, OP_D = 2, OP_EQ = 7, OP_X = 8 };

// one launch's pairs, by thread: order[t] is the pair of thread t (-1: none); per warp, its longest
// target (w_maxn) and where its boundary rows (w_bound, in ints) and direction words (w_dir) start.
// dp_long and dp_trace<MODE, true> read order, w_bound and w_dir by pair (warp, thread) instead.
#define PAIRS_ARGS                                                                                        \
    const unsigned char *__restrict__ codes, const int *__restrict__ order, int nthreads,                 \
        const int *__restrict__ qoff, const int *__restrict__ qlen, const int *__restrict__ toff,         \
        const int *__restrict__ tlen, const int *__restrict__ w_maxn, const long long *__restrict__ w_bound, \
        const long long *__restrict__ w_dir

// H[i][0] of the DP (the query's first i bases against nothing)
template <int MODE>
__device__ __forceinline__ int first_column(int i, int go, int ge) {
    return (MODE == LOCAL || i == 0) ? 0 : -(go + (i - 1) * ge);
}

// a stripe's query letters (rows i0 + 1 .. i0 + ROWS, 0 past m) and its column 0 (H; Z minus infinity)
template <int MODE>
__device__ __forceinline__ void stripe_start(const unsigned char* q, int m, int i0, int go, int ge,
                                             int (&qc)[ROWS], int (&hl)[ROWS], int (&z)[ROWS]) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        qc[r] = i0 + r < m ? q[i0 + r] : 0;
        hl[r] = first_column<MODE>(i0 + r + 1, go, ge);
        z[r] = NEG_INF;
    }
}

// one column j of a stripe (rows i0 + 1 .. i0 + ROWS; `last`: the stripe row of DP row m): from the row
// above (hup, vup; hdiag = H[i0][j - 1]) and the stripe's H and Z of column j - 1 (hl, z), which become
// column j's; hup and vup become the stripe's last row; the answer (best, bi, bj) is kept up to date
// (columns past n count for nothing); returns the column's direction word
template <int MODE, bool TRACE>
__device__ __forceinline__ uint64_t stripe_column(const int* __restrict__ row, const int (&qc)[ROWS], int (&hl)[ROWS],
                                                  int (&z)[ROWS], int& hup, int& vup, int hdiag, int go, int ge,
                                                  int i0, int last, int j, int n, int& best, int& bi, int& bj) {
    uint64_t word = 0;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int vo = hup - go, ve = vup - ge, v = max(vo, ve);
        const int zo = hl[r] - go, ze = z[r] - ge, zz = max(zo, ze);
        const int d = hdiag + row[qc[r]];
        int h = max(d, max(v, zz));
        if (TRACE) {
            int src = d == h ? FROM_DIAG : v == h ? FROM_V : FROM_Z;
            if (MODE == LOCAL && h <= 0) src = FROM_ZERO;
            word |= (uint64_t)(src | (ve > vo) << 2 | (ze > zo) << 3) << (4 * r);
        }
        if (MODE == LOCAL) {
            h = max(h, 0);
            if (h > best && r <= last && j <= n) best = h, bi = i0 + r + 1, bj = j;
        } else if (r == last && (MODE == SEMI ? h > best && j <= n : j == n)) {
            best = h, bj = j;
        }
        hdiag = hl[r];
        hl[r] = h;
        z[r] = zz;
        hup = h;
        vup = v;
    }
    return word;
}

template <int MODE, bool TRACE>
__global__ void __launch_bounds__(128) dp_fill(PAIRS_ARGS, const int* __restrict__ matrix, int K,
                                               int go, int ge, int* __restrict__ boundH, int* __restrict__ boundV,
                                               uint64_t* __restrict__ dir, int* __restrict__ out_score,
                                               int* __restrict__ out_i, int* __restrict__ out_j) {
    extern __shared__ int S[];
    for (int x = threadIdx.x; x < K * K; x += blockDim.x) S[x] = matrix[x];
    __syncthreads();
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nthreads) return;
    const int p = order[t];
    if (p < 0) return;
    const int w = t >> 5, lane = t & 31;
    const int m = qlen[p], n = tlen[p], maxn = w_maxn[w];
    const unsigned char* __restrict__ q = codes + qoff[p];
    const unsigned char* __restrict__ tg = codes + toff[p];
    int* __restrict__ bH = boundH + w_bound[w] + lane;
    int* __restrict__ bV = boundV + w_bound[w] + lane;
    uint64_t* __restrict__ dr = dir + w_dir[w] + lane;
    for (int j = 1; j <= n; ++j) {  // row 0: gaps in the target (global), free (local, semi-global)
        bH[j * 32] = MODE == GLOBAL ? -(go + (j - 1) * ge) : 0;
        bV[j * 32] = NEG_INF;
    }
    // the answer: local the best cell; semi-global the best of row m (from column 0); global H[m][n]
    int best = MODE == LOCAL ? 0 : first_column<MODE>(m, go, ge), bi = MODE == LOCAL ? 0 : m, bj = 0;
    for (int i0 = 0; i0 < m; i0 += ROWS) {
        int qc[ROWS], hl[ROWS], z[ROWS];
        stripe_start<MODE>(q, m, i0, go, ge, qc, hl, z);
        const int last = m - 1 - i0;  // the stripe row of DP row m (when < ROWS)
        uint64_t* __restrict__ ds = dr + (long long)(i0 / ROWS) * maxn * 32;
        int diag0 = first_column<MODE>(i0, go, ge);  // H[i0][j - 1]
        int tnext = tg[0], hnext = bH[32], vnext = bV[32];  // column j's inputs, loaded a column ahead
        for (int j = 1; j <= n; ++j) {
            const int* __restrict__ row = S + tnext * K;
            int hup = hnext, vup = vnext, hdiag = diag0;
            if (j < n) tnext = tg[j], hnext = bH[(j + 1) * 32], vnext = bV[(j + 1) * 32];
            diag0 = hup;
            const uint64_t word =
                stripe_column<MODE, TRACE>(row, qc, hl, z, hup, vup, hdiag, go, ge, i0, last, j, n, best, bi, bj);
            bH[j * 32] = hup;
            bV[j * 32] = vup;
            if (TRACE) ds[(j - 1) * 32] = word;
        }
    }
    out_score[p] = best;
    out_i[p] = bi;
    out_j[p] = bj;
}

// the long kernel's answer from its lanes: local the best cell first in (stripe, column, row) order, as
// dp_fill finds it; global and semi-global the lane that holds row m
template <int MODE>
__device__ __forceinline__ void warp_answer(int m, int best, int bi, int bj, int* out_score, int* out_i, int* out_j,
                                            int p) {
    const int lane = threadIdx.x & 31;
    if (MODE == LOCAL) {
        for (int k = 16; k > 0; k >>= 1) {
            const int ob = __shfl_xor_sync(FULL_MASK, best, k), oi = __shfl_xor_sync(FULL_MASK, bi, k),
                      oj = __shfl_xor_sync(FULL_MASK, bj, k);
            const int s = (bi - 1) / ROWS, os = (oi - 1) / ROWS;
            if (ob > best || (ob == best && (os < s || (os == s && (oj < bj || (oj == bj && oi < bi))))))
                best = ob, bi = oi, bj = oj;
        }
        if (lane != 0) return;
    } else if (lane != ((m - 1) / ROWS) % 32) {
        return;
    }
    out_score[p] = best;
    out_i[p] = bi;
    out_j[p] = bj;
}

// one warp per pair: order[w] is warp w's pair (-1: none), w_bound[w] its boundary row (n + 1 ints of
// H and of V), w_dir[w] its direction words (tiles * steps * COLS * 32); w_maxn is not read
template <int MODE, bool TRACE>
__global__ void __launch_bounds__(128) dp_long(PAIRS_ARGS, const int* __restrict__ matrix, int K, int go, int ge,
                                               int* __restrict__ boundH, int* __restrict__ boundV,
                                               uint64_t* __restrict__ dir, int* __restrict__ out_score,
                                               int* __restrict__ out_i, int* __restrict__ out_j) {
    extern __shared__ int S[];
    for (int x = threadIdx.x; x < K * K; x += blockDim.x) S[x] = matrix[x];
    __syncthreads();
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (w >= nthreads) return;
    const int p = order[w];
    if (p < 0) return;  // the whole warp
    const int m = qlen[p], n = tlen[p];
    const unsigned char* __restrict__ q = codes + qoff[p];
    const unsigned char* __restrict__ tg = codes + toff[p];
    int* __restrict__ bH = boundH + w_bound[w];
    int* __restrict__ bV = boundV + w_bound[w];
    uint64_t* __restrict__ dr = dir + w_dir[w] + lane;
    for (int j = 1 + lane; j <= n; j += 32) {  // row 0, as in dp_fill
        bH[j] = MODE == GLOBAL ? -(go + (j - 1) * ge) : 0;
        bV[j] = NEG_INF;
    }
    __syncwarp();
    const int cols = (n + COLS - 1) / COLS, steps = cols + 31;
    int best = MODE == LOCAL ? 0 : first_column<MODE>(m, go, ge), bi = MODE == LOCAL ? 0 : m, bj = 0;
    for (int tile = 0; tile * 32 * ROWS < m; ++tile) {
        const int i0 = (tile * 32 + lane) * ROWS;
        int qc[ROWS], hl[ROWS], z[ROWS];
        stripe_start<MODE>(q, m, i0, go, ge, qc, hl, z);
        const int last = m - 1 - i0;
        uint64_t* __restrict__ ds = dr + (long long)tile * steps * COLS * 32;
        int diag0 = first_column<MODE>(i0, go, ge);  // H[i0][j - 1] of the step's first column
        int hin[COLS], vin[COLS], tc[COLS];  // the step's row above (H, V) and target letters
#pragma unroll
        for (int c = 0; c < COLS; ++c) {
            const int j = c + 1 - lane * COLS;
            tc[c] = j >= 1 && j <= n ? tg[j - 1] : 0;
            hin[c] = lane == 0 && j <= n ? bH[j] : 0;
            vin[c] = lane == 0 && j <= n ? bV[j] : 0;
        }
        for (int x = 0; x < steps; ++x) {
            const int j0 = (x - lane) * COLS + 1;
            int hout[COLS] = {}, vout[COLS] = {}, tn[COLS], hn[COLS], vn[COLS];  // (idle lanes shuffle zeros)
#pragma unroll
            for (int c = 0; c < COLS; ++c) {  // the next step's inputs, loaded ahead
                const int j = j0 + COLS + c;
                tn[c] = j >= 1 && j <= n ? tg[j - 1] : 0;
                hn[c] = lane == 0 && j <= n ? bH[j] : 0;
                vn[c] = lane == 0 && j <= n ? bV[j] : 0;
            }
            if (j0 >= 1 && j0 <= n) {
#pragma unroll
                for (int c = 0; c < COLS; ++c) {
                    const int j = j0 + c;
                    const int* __restrict__ row = S + tc[c] * K;
                    int hup = hin[c], vup = vin[c], hdiag = diag0;
                    diag0 = hup;
                    const uint64_t word = stripe_column<MODE, TRACE>(row, qc, hl, z, hup, vup, hdiag, go, ge, i0, last,
                                                                     j, n, best, bi, bj);
                    hout[c] = hup;
                    vout[c] = vup;
                    if (TRACE) ds[((long long)x * COLS + c) * 32] = word;
                    if (lane == 31 && j <= n) bH[j] = hup, bV[j] = vup;
                }
            }
#pragma unroll
            for (int c = 0; c < COLS; ++c) {  // lane l's next step takes lane l - 1's columns of this one
                const int h = __shfl_up_sync(FULL_MASK, hout[c], 1), v = __shfl_up_sync(FULL_MASK, vout[c], 1);
                hin[c] = lane == 0 ? hn[c] : h;
                vin[c] = lane == 0 ? vn[c] : v;
                tc[c] = tn[c];
            }
        }
        __syncwarp();  // lane 31's boundary row, for lane 0 of the next tile
    }
    warp_answer<MODE>(m, best, bi, bj, out_score, out_i, out_j, p);
}

struct Runs {  // the CIGAR being written backwards, runs merged
    uint32_t* out;
    int count, op, len;
    __device__ void add(int o, int l) {
        if (o == op) {
            len += l;
            return;
        }
        if (len) out[count++] = (uint32_t)len << 4 | op;
        op = o;
        len = l;
    }
};

// LONG: the pairs of dp_long, one per thread (w_dir[t]); else of dp_fill
template <int MODE, bool LONG>
__global__ void dp_trace(PAIRS_ARGS, const uint64_t* __restrict__ dir, const int* __restrict__ end_i,
                         const int* __restrict__ end_j, const long long* __restrict__ op_off,
                         uint32_t* __restrict__ ops, int* __restrict__ out_count, int* __restrict__ out_qs,
                         int* __restrict__ out_ts) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nthreads) return;
    const int p = order[t];
    if (p < 0) return;
    const int w = LONG ? t : t >> 5, lane = LONG ? 0 : t & 31;
    const int maxn = LONG ? 0 : w_maxn[w], steps = LONG ? (tlen[p] + COLS - 1) / COLS + 31 : 0;
    const unsigned char* __restrict__ q = codes + qoff[p];
    const unsigned char* __restrict__ tg = codes + toff[p];
    const uint64_t* __restrict__ dr = dir + w_dir[w] + lane;
    int i = end_i[p], j = end_j[p], state = FROM_DIAG;  // the matrix the walk is in: H, V or Z
    Runs runs{ops + op_off[t], 0, 0, 0};
    while (true) {
        if (i == 0 || j == 0) {  // the first row or column: what is left is one gap, or free
            if (MODE != LOCAL && i) runs.add(OP_I, i), i = 0;
            if (MODE == GLOBAL && j) runs.add(OP_D, j), j = 0;
            break;
        }
        const int r = (i - 1) % ROWS, s = (i - 1) / ROWS;
        const long long at = LONG ? (((long long)(s >> 5) * steps + (j - 1) / COLS + (s & 31)) * COLS + (j - 1) % COLS) * 32 + (s & 31)
                                  : ((long long)s * maxn + (j - 1)) * 32;
        const int cell = (int)(dr[at] >> (4 * r)) & 15;
        if (state == FROM_V) {
            runs.add(OP_I, 1);
            state = cell >> 2 & 1 ? FROM_V : FROM_DIAG;
            --i;
        } else if (state == FROM_Z) {
            runs.add(OP_D, 1);
            state = cell >> 3 & 1 ? FROM_Z : FROM_DIAG;
            --j;
        } else {
            const int src = cell & 3;
            if (src == FROM_ZERO) break;
            if (src == FROM_DIAG) {
                runs.add(q[i - 1] == tg[j - 1] ? OP_EQ : OP_X, 1);
                --i;
                --j;
            } else {
                state = src;
            }
        }
    }
    runs.add(-1, 0);  // flush the last run
    uint32_t* out = runs.out;
    for (int a = 0, b = runs.count - 1; a < b; ++a, --b) {
        const uint32_t x = out[a];
        out[a] = out[b];
        out[b] = x;
    }
    out_count[p] = runs.count;
    out_qs[p] = i;
    out_ts[p] = j;
}

// the CIGARs of a launch packed in pair order: thread t's count[p] ops from ops[op_off[t]] to out[dst[p]],
// p = order[t]
__global__ void dp_gather(const int* __restrict__ order, int nthreads, const long long* __restrict__ op_off,
                          const int* __restrict__ count, const long long* __restrict__ dst,
                          const uint32_t* __restrict__ ops, uint32_t* __restrict__ out) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nthreads) return;
    const int p = order[t];
    if (p < 0) return;
    const uint32_t* src = ops + op_off[t];
    uint32_t* to = out + dst[p];
    for (int k = 0, c = count[p]; k < c; ++k) to[k] = src[k];
}
