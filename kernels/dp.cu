// dp.cu -- general scoring (gpu_dp.py): Gotoh's affine-gap DP with a substitution matrix, global,
// local (Smith-Waterman) or semi-global (query end to end, the target's two ends free), int32 scores;
// short pairs one thread each (dp_fill, inter-sequence parallelism; where the host proves the values fit
// int16, dp_fill16: two cells a word), long pairs a block each (dp_long; where the
// values fit int16, dp_long16, with CIGARs global and semi-global only). dp_keys and dp_warps make
// dp_fill's launch order on the device.
//
// Scores are scores (higher is better): H = max(diagonal + S[q][t], V, Z[, 0 when local]);
// V (a query-only base, CIGAR I) = max(H_up - go, V_up - ge); Z (a target-only base, CIGAR D) =
// max(H_left - go, Z_left - ge); go = o + e opens a gap, ge = e extends it (a gap of length L costs
// o + L*e). Sequences come as letter indices into the K x K matrix (K <= 32, kept in shared memory).
//
// A thread walks its query in stripes of ROWS rows; within a stripe it sweeps the target's columns,
// the stripe's G = H - go and Z in registers and the row above it (G and V) in a boundary array in
// global memory. The pairs of a warp sit side by side in that array and in the direction array (entry
// x of lane l at [x * 32 + l]), so a warp's loads and stores are coalesced; the host sorts pairs by
// length so warp mates need about the same room. dp_fill writes, per cell, 4 direction bits (the source
// of H: diagonal, V or Z; whether V and Z extended), 16 cells per 64-bit word, and the best score and
// its cell; dp_trace walks back from that cell and writes the CIGAR (BAM op codes, runs packed as
// len << 4 | op), its start cell and its op count.
//
// Long pairs (intra-sequence parallelism): dp_long gives each pair a block, a team of 1, 2 or 4 warps.
// Warp w takes tiles w, w + team, ... of 32 stripes (512 rows); lane l takes stripe 32 T + l of tile T,
// skewed: at step x it computes COLS columns from (x - l) COLS + 1, with the row above them handed down
// from lane l - 1's step x - 1 by shuffles, and lane 0 from the warp above (shared memory) or the tile
// above's last row (the pair's boundary row of n + 1 G and V). Its direction words are laid out by step
// ([tile][step][column][lane]), so a warp's stores are coalesced; dp_trace<MODE, 1> reads them so.

#ifdef __CUDACC_RTC__  // NVRTC (CuPy) has no C library headers
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#define ROWS 16
#define NEG_INF (-(1 << 29))
#ifndef COLS
#define COLS 2  // dp_long's columns per lane and step
#endif
#ifndef COLS16
#define COLS16 8  // dp_long16's columns per lane and step
#endif
#define FULL_MASK 0xffffffffu

enum { GLOBAL = 0, LOCAL = 1, SEMI = 2 };
enum { FROM_DIAG = 0, FROM_V = 1, FROM_Z = 2 };  // dp_trace's states: in H, V or Z
enum { OP_I = 1, OP_D = 2, OP_EQ = 7, OP_X = 8 };

// a tile's steps in dp_long (COLS columns a step, 31 more for its lanes' skew) or dp_long16 (NARROW:
// COLS16 columns, 63 more: two stripes a lane) for a target of n bases; dp_trace reads their layouts by it
template <bool NARROW>
__device__ __forceinline__ int long_steps(int n) {
    return NARROW ? (n + COLS16 - 1) / COLS16 + 63 : (n + COLS - 1) / COLS + 31;
}

// one launch's pairs, by thread: order[t] is the pair of thread t (-1: none); per warp, its longest
// target (w_maxn) and where its boundary rows (w_bound, in ints) and direction words (w_dir) start.
// dp_long, dp_long16 and dp_trace of their pairs read order, w_bound and w_dir by pair (block, warp)
// instead.
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

// a stripe's query letters (rows i0 + 1 .. i0 + ROWS, 0 past m) as byte offsets into a matrix row, and
// its column 0 (G = H - go; Z minus infinity)
template <int MODE>
__device__ __forceinline__ void stripe_start(const unsigned char* q, int m, int i0, int go, int ge,
                                             int (&qc)[ROWS], int (&g)[ROWS], int (&z)[ROWS]) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        qc[r] = (i0 + r < m ? q[i0 + r] : 0) * 4;
        g[r] = first_column<MODE>(i0 + r + 1, go, ge) - go;
        z[r] = NEG_INF;
    }
}

// the shared-memory address of target letter t's row of S, and the int at byte offset off of such a row
// (one add per cell; indexing S itself took two, nvcc 13 sm_90)
__device__ __forceinline__ uint32_t smem_row(const int* S, int t, int K) {
    return (uint32_t)__cvta_generic_to_shared(S) + (uint32_t)(t * 4 * K);
}
template <int BITS = 32>  // (16: a sign-extended int16, load_matrix16_lanes' entries)
__device__ __forceinline__ int smem_at(uint32_t row, int off) {
#ifdef __CUDA_ARCH__
    int s;
    // (volatile, "memory": kept after load_matrix's __syncthreads; the SASS is the same as without)
    if (BITS == 16) asm volatile("ld.shared.s16 %0, [%1];" : "=r"(s) : "r"(row + off) : "memory");
    else asm volatile("ld.shared.s32 %0, [%1];" : "=r"(s) : "r"(row + off) : "memory");
    return s;
#else  // compiled for the CPU by the tests (tests/emu)
    return BITS == 16 ? emu_lds16(row + off) : emu_lds(row + off);
#endif
}

// the int at shared-memory address addr (smem_row's kind of address), written
__device__ __forceinline__ void smem_put(uint32_t addr, int v) {
#ifdef __CUDA_ARCH__
    asm volatile("st.shared.s32 [%0], %1;" : : "r"(addr), "r"(v) : "memory");
#else
    emu_sts(addr, v);
#endif
}

// one column j of a stripe (rows i0 + 1 .. i0 + ROWS): from the row above (gup = H[i0][j] - go, vup;
// gdiag = H[i0][j - 1] - go) and the stripe's G = H - go and Z of column j - 1 (g, z), which become column
// j's; gup and vup become the stripe's last row. row: the shared matrix's row of target letter t_j, plus
// go (so that gdiag + row[q] is the diagonal's H + S). Carrying H - go spares a subtraction per cell: a
// cell's G opens both its V below and its Z to the right.
// Direction bits (TRACE), 4 per cell, the sign bits of four differences shifted in as they come: 8 V
// extended here (not opened from H above), 4 Z extended, 2 H from Z rather than V, 1 H not from the
// diagonal (ties: diagonal, then V, then Z; open before extend). Row r's bits are bits 4 (15 - r) of the
// column's word. A local cell of H 0 is where the alignment starts: dp_trace knows it by the score it
// carries. Each max is one DPX instruction (VIADDMNMX: max(a + b, c)); dp_fill's loop is 9.4 SASS
// instructions per cell with scores only (local, at 96 registers; 9.1 at nvcc's own 104), 16.8 (global) to
// 18.9 (local) with directions (sm_90).
// LOCAL: key, the column's best cell as H * 16 + 15 - r (the highest H, then the first row; scores only:
// H * 16 + 15, the cell not wanted).
// EDGE: the stripe holds row m (its row `last`; rows past it are not cells): key leaves them out, and
// hlast is row m's H (global, semi-global).
template <int MODE, bool TRACE, bool EDGE>
__device__ __forceinline__ uint64_t stripe_column(uint32_t row, const int (&qc)[ROWS], int (&g)[ROWS],
                                                  int (&z)[ROWS], int& gup, int& vup, int gdiag, int go, int ge,
                                                  int last, uint32_t& key, int& hlast) {
    uint32_t lo = 0, hi = 0;  // rows 0-7, 8-15
    int hmax = 0;  // (scores only: the column's best H, its row not wanted)
    key = 0;
    hlast = NEG_INF;  // (a lane of dp_long's last tile whose stripe does not hold row m)
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int s = smem_at(row, qc[r]);
        const int v = __viaddmax_s32(vup, -ge, gup);  // max(V above - ge, H above - go)
        const int zz = __viaddmax_s32(z[r], -ge, g[r]);
        const int vz = max(v, zz);
        const int h = MODE == LOCAL ? __viaddmax_s32_relu(gdiag, s, vz) : __viaddmax_s32(gdiag, s, vz);
        if (TRACE) {
            uint32_t& w = r < 8 ? lo : hi;
            w = __funnelshift_l((uint32_t)(gup - vup + ge), w, 1);  // < 0: V extended
            w = __funnelshift_l((uint32_t)(g[r] - z[r] + ge), w, 1);  // < 0: Z extended
            w = __funnelshift_l((uint32_t)(v - zz), w, 1);  // < 0: Z over V
            w = __funnelshift_l((uint32_t)(gdiag + s - vz), w, 1);  // < 0: not the diagonal
        }
        if (MODE == LOCAL && (!EDGE || r <= last)) {
            if (TRACE) key = max(key, (uint32_t)h * 16u + (15 - r));
            else hmax = max(hmax, h);
        } else if (MODE != LOCAL && EDGE && r == last) {
            hlast = h;
        }
        gdiag = g[r];
        g[r] = h - go;
        z[r] = zz;
        gup = g[r];
        vup = v;
    }
    if (MODE == LOCAL && !TRACE) key = (uint32_t)hmax * 16u + 15u;
    return (uint64_t)lo << 32 | hi;
}

// the answer so far: local the best cell (bestkey: H * 16 + 15 - r; its stripe's first row i0b and its
// column bj; ties: the first in stripe, column, row order), semi-global the best cell of row m (best, bj),
// global H[m][n] (best)
struct Best {
    int best, bj, i0b;
    uint32_t bestkey;
};

template <int MODE, bool EDGE>
__device__ __forceinline__ void best_update(Best& b, uint32_t key, int hlast, int i0, int j, int n) {
    if (MODE == LOCAL) {
        if (key > (b.bestkey | 15u)) b.bestkey = key, b.bj = j, b.i0b = i0;  // a higher H, not an equal one
    } else if (EDGE) {
        if (MODE == SEMI ? hlast > b.best : j == n) b.best = hlast, b.bj = j;
    }
}

template <int MODE>
__device__ __forceinline__ Best best_start(int m, int go, int ge) {
    return Best{MODE == LOCAL ? 0 : first_column<MODE>(m, go, ge), 0, 0, 0u};
}

// (score, end row, end column)
template <int MODE>
__device__ __forceinline__ void best_end(const Best& b, int m, int& best, int& bi, int& bj) {
    if (MODE != LOCAL) {
        best = b.best, bi = m, bj = b.bj;
    } else if (b.bestkey < 16u) {  // no cell above 0: the empty alignment
        best = 0, bi = 0, bj = 0;
    } else {
        best = (int)(b.bestkey >> 4), bi = b.i0b + 16 - (int)(b.bestkey & 15u), bj = b.bj;
    }
}

// a boundary row before the first stripe: row 0's G (global: the gaps in the target, else 0; minus go)
// and V (neg, -infinity), at columns j0, j0 + dj, ... up to n, column j at bH[j * stride], bV[j * stride]
template <int MODE>
__device__ __forceinline__ void row0(int* __restrict__ bH, int* __restrict__ bV, int n, int go, int ge, int neg, int j0,
                                     int dj, int stride) {
    for (int j = j0; j <= n; j += dj) {
        bH[j * stride] = (MODE == GLOBAL ? -(go + (j - 1) * ge) : 0) - go;
        bV[j * stride] = neg;
    }
}

// the shared matrix: S[t * K + q] + go
__device__ __forceinline__ void load_matrix(int* S, const int* __restrict__ matrix, int K, int go) {
    for (int x = threadIdx.x; x < K * K; x += blockDim.x) S[x] = matrix[x] + go;
    __syncthreads();
}

// dp_fill's stripe from row i0 + 1 (EDGE: the last, holding row m) over columns 1 .. n
template <int MODE, bool TRACE, bool EDGE>
__device__ __forceinline__ void fill_stripe(const int* S, int K, const unsigned char* __restrict__ q,
                                            const unsigned char* __restrict__ tg, int m, int n, int i0, int go,
                                            int ge, int* __restrict__ bH, int* __restrict__ bV,
                                            uint64_t* __restrict__ ds, Best& b) {
    int qc[ROWS], g[ROWS], z[ROWS];
    stripe_start<MODE>(q, m, i0, go, ge, qc, g, z);
    const int last = m - 1 - i0;
    int gdiag0 = first_column<MODE>(i0, go, ge) - go;  // G[i0][j - 1]
    int tnext = tg[0], gnext = bH[32], vnext = bV[32];  // column j's inputs, loaded a column ahead
#pragma unroll 2  // (the stripe's registers then alternate between two sets instead of being copied back)
    for (int j = 1; j <= n; ++j) {
        const uint32_t row = smem_row(S, tnext, K);
        int gup = gnext, vup = vnext, gdiag = gdiag0;
        if (j < n) tnext = tg[j], gnext = bH[(j + 1) * 32], vnext = bV[(j + 1) * 32];
        gdiag0 = gup;
        uint32_t key;
        int hlast;
        const uint64_t word = stripe_column<MODE, TRACE, EDGE>(row, qc, g, z, gup, vup, gdiag, go, ge, last, key, hlast);
        best_update<MODE, EDGE>(b, key, hlast, i0, j, n);
        bH[j * 32] = gup;
        bV[j * 32] = vup;
        if (TRACE) ds[(j - 1) * 32] = word;
    }
}

// (local with scores only: 5 blocks of 128 per SM, 96 registers and no spills, where nvcc's own choice of
// 104 allowed 4; the other variants spill at 5, and their second bound 0 leaves nvcc its own choice)
template <int MODE, bool TRACE>
__global__ void __launch_bounds__(128, MODE == LOCAL && !TRACE ? 5 : 0)
    dp_fill(PAIRS_ARGS, const int* __restrict__ matrix, int K, int go, int ge, int* __restrict__ boundH,
            int* __restrict__ boundV, uint64_t* __restrict__ dir, int* __restrict__ out_score,
            int* __restrict__ out_i, int* __restrict__ out_j) {
    extern __shared__ int S[];
    load_matrix(S, matrix, K, go);
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nthreads) return;
    const int p = order[t];
    if (p < 0) return;
    const int w = t >> 5, lane = t & 31;
    const int m = qlen[p], n = tlen[p], maxn = w_maxn[w];
    const unsigned char* __restrict__ q = codes + qoff[p];
    const unsigned char* __restrict__ tg = codes + toff[p];
    int* __restrict__ bH = boundH + w_bound[w] + lane;  // the row above the stripe: G = H - go, and V
    int* __restrict__ bV = boundV + w_bound[w] + lane;
    uint64_t* __restrict__ dr = dir + w_dir[w] + lane;
    row0<MODE>(bH, bV, n, go, ge, NEG_INF, 1, 1, 32);
    Best b = best_start<MODE>(m, go, ge);
    const int edge = (m - 1) / ROWS * ROWS;  // the last stripe's first row
    for (int i0 = 0; i0 < edge; i0 += ROWS)
        fill_stripe<MODE, TRACE, false>(S, K, q, tg, m, n, i0, go, ge, bH, bV, dr + (long long)(i0 / ROWS) * maxn * 32, b);
    fill_stripe<MODE, TRACE, true>(S, K, q, tg, m, n, edge, go, ge, bH, bV, dr + (long long)(edge / ROWS) * maxn * 32, b);
    best_end<MODE>(b, m, out_score[p], out_i[p], out_j[p]);
}

// a long pair's boundary row before its first tile, by the block's threads (row0)
template <int MODE>
__device__ __forceinline__ void long_row0(int* __restrict__ bH, int* __restrict__ bV, int n, int go, int ge, int neg) {
    row0<MODE>(bH, bV, n, go, ge, neg, 1 + threadIdx.x, blockDim.x, 1);
    __syncthreads();
}

// whether the cell (ob, oi, oj) comes before (best, bi, bj) as local's answer: a higher score, then the
// first in (stripe, column, row) order, as dp_fill finds it
__device__ __forceinline__ bool local_before(int ob, int oi, int oj, int best, int bi, int bj) {
    const int s = (bi - 1) / ROWS, os = (oi - 1) / ROWS;
    return ob > best || (ob == best && (os < s || (os == s && (oj < bj || (oj == bj && oi < bi)))));
}

// dp_long's answer from its team: local the best cell of all its warps' lanes; global and semi-global the
// lane that holds row m (in the warp of the last tile). ans: 3 ints per warp in shared memory.
template <int MODE>
__device__ __forceinline__ void team_answer(int m, int tiles, const Best& b, int* ans, int* out_score, int* out_i,
                                            int* out_j, int p) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, team = blockDim.x >> 5;
    int best, bi, bj;
    best_end<MODE>(b, m, best, bi, bj);
    if constexpr (MODE != LOCAL) {
        if (warp == (tiles - 1) % team && lane == ((m - 1) / ROWS) % 32)
            out_score[p] = best, out_i[p] = bi, out_j[p] = bj;
    } else {
        for (int k = 16; k > 0; k >>= 1) {
            const int ob = __shfl_xor_sync(FULL_MASK, best, k), oi = __shfl_xor_sync(FULL_MASK, bi, k),
                      oj = __shfl_xor_sync(FULL_MASK, bj, k);
            if (local_before(ob, oi, oj, best, bi, bj)) best = ob, bi = oi, bj = oj;
        }
        if (lane == 0) ans[3 * warp] = best, ans[3 * warp + 1] = bi, ans[3 * warp + 2] = bj;
        __syncthreads();
        if (threadIdx.x != 0) return;
        for (int w = 1; w < team; ++w)
            if (local_before(ans[3 * w], ans[3 * w + 1], ans[3 * w + 2], best, bi, bj))
                best = ans[3 * w], bi = ans[3 * w + 1], bj = ans[3 * w + 2];
        out_score[p] = best;
        out_i[p] = bi;
        out_j[p] = bj;
    }
}

// One round of dp_long's team: warp w fills tile `tile` (EDGE: the round holding row m; active: the pair
// has that tile), lane l its stripe 32 tile + l, skewed: at its step x it computes COLS columns from
// (x - l) COLS + 1, with the row above them handed down from lane l - 1's step x - 1 by shuffles. The
// warps run `total` steps together, a block barrier after each, warp w 32 w steps behind warp 0, so that
// lane 0 of warp w takes the row above from lane 31 of warp w - 1 one step after it was written, through
// hand (per warp, two steps of COLS G and V in shared memory). Warp 0 reads the row above its tile from
// the pair's boundary row (one row of n + 1 G and V, loaded a step ahead); the team's last warp writes its
// own last row there, for warp 0's next round.
template <int MODE, bool TRACE, bool EDGE, bool TEAM>
__device__ __forceinline__ void long_tile(const int* S, int K, const unsigned char* __restrict__ q,
                                          const unsigned char* __restrict__ tg, int m, int n, int tile, bool active,
                                          int go, int ge, int* __restrict__ bH, int* __restrict__ bV, uint32_t hand,
                                          uint64_t* __restrict__ ds, int steps, int total, Best& b) {
    const int lane = threadIdx.x & 31, warp = TEAM ? threadIdx.x >> 5 : 0, team = TEAM ? blockDim.x >> 5 : 1;
    const bool from_bound = warp == 0 && lane == 0, to_bound = warp == team - 1;
    const uint32_t hand_in = hand + (warp - 1) * 16 * COLS;  // (bytes: [2][G, V][COLS] a warp)
    const uint32_t hand_out = hand + warp * 16 * COLS;
    const int i0 = (tile * 32 + lane) * ROWS;
    int qc[ROWS], g[ROWS], z[ROWS];
    stripe_start<MODE>(q, m, i0, go, ge, qc, g, z);
    const int last = m - 1 - i0;
    int gdiag0 = first_column<MODE>(i0, go, ge) - go;  // G[i0][j - 1] of the step's first column
    int gin[COLS], vin[COLS], tc[COLS];  // the step's row above (G, V) and target letters
    int jn = 1 - lane * COLS;  // the first column of the lane's step (x - lane) COLS + 1, at x = 0
#pragma unroll
    for (int c = 0; c < COLS; ++c) {
        const int j = jn + c;
        tc[c] = j >= 1 && j <= n ? tg[j - 1] : 0;
        gin[c] = from_bound && j <= n ? bH[j] : 0;
        vin[c] = from_bound && j <= n ? bV[j] : 0;
    }
    for (int s = 0; s < total; ++s) {
        if (active && s >= 32 * warp && s < 32 * warp + steps) {  // the warp's step x = s - 32 warp
            const int j0 = jn;
            jn += COLS;
            int gout[COLS] = {}, vout[COLS] = {}, tn[COLS], gn[COLS], vn[COLS];  // (idle lanes shuffle zeros)
#pragma unroll
            for (int c = 0; c < COLS; ++c) {  // the next step's inputs, loaded ahead
                const int j = jn + c;
                const bool in = (unsigned)(j - 1) < (unsigned)n;
                tn[c] = in ? tg[j - 1] : 0;
                gn[c] = from_bound && in ? bH[j] : 0;
                vn[c] = from_bound && in ? bV[j] : 0;
            }
            if (warp > 0 && lane == 0) {  // written by warp - 1 at step s - 1
                const uint32_t at = hand_in + ((s - 1) & 1) * 8 * COLS;
#pragma unroll
                for (int c = 0; c < COLS; ++c) {
                    gin[c] = smem_at(at, 4 * c);
                    vin[c] = smem_at(at, 4 * (COLS + c));
                }
            }
            if ((unsigned)(j0 - 1) < (unsigned)n) {
#pragma unroll
                for (int c = 0; c < COLS; ++c) {
                    const int j = j0 + c;
                    const uint32_t row = smem_row(S, tc[c], K);
                    int gup = gin[c], vup = vin[c], gdiag = gdiag0;
                    gdiag0 = gup;
                    uint32_t key;
                    int hlast;
                    const uint64_t word =
                        stripe_column<MODE, TRACE, EDGE>(row, qc, g, z, gup, vup, gdiag, go, ge, last, key, hlast);
                    if (j <= n) best_update<MODE, EDGE>(b, key, hlast, i0, j, n);
                    gout[c] = gup;
                    vout[c] = vup;
                    if (TRACE) ds[((long long)(s - 32 * warp) * COLS + c) * 32] = word;
                    if (lane == 31 && j <= n) {
                        if (to_bound) {
                            bH[j] = gup, bV[j] = vup;
                        } else {
                            const uint32_t at = hand_out + (s & 1) * 8 * COLS;
                            smem_put(at + 4 * c, gup);
                            smem_put(at + 4 * (COLS + c), vup);
                        }
                    }
                }
            }
#pragma unroll
            for (int c = 0; c < COLS; ++c) {  // lane l's next step takes lane l - 1's columns of this one
                const int gs = __shfl_up_sync(FULL_MASK, gout[c], 1), vs = __shfl_up_sync(FULL_MASK, vout[c], 1);
                gin[c] = lane == 0 ? gn[c] : gs;
                vin[c] = lane == 0 ? vn[c] : vs;
                tc[c] = tn[c];
            }
        }
        if (TEAM) __syncthreads();
    }
    if (TEAM) __syncthreads();  // the boundary row, for warp 0's next round
    else __syncwarp();
}

// one team of warps per pair, a block each (blockDim.x = 32 x team): order[blockIdx.x] is its pair (-1:
// none), w_bound[] its boundary row (n + 1 ints of G and of V), w_dir[] its direction words (tiles *
// steps * COLS * 32); w_maxn is not read. Warp w takes tiles w, w + team, ... (32 stripes, 512 rows
// each), a round of team tiles at a time (long_tile). TEAM false: teams of one warp (blockDim.x = 32),
// the hand-over and the barriers compiled out. Dynamic shared memory: the matrix (K x K ints), then
// team x (4 COLS + 3) ints.
template <int MODE, bool TRACE, bool TEAM>
__global__ void __launch_bounds__(128, 4) dp_long(PAIRS_ARGS, const int* __restrict__ matrix, int K, int go, int ge,
                                               int* __restrict__ boundH, int* __restrict__ boundV,
                                               uint64_t* __restrict__ dir, int* __restrict__ out_score,
                                               int* __restrict__ out_i, int* __restrict__ out_j) {
    extern __shared__ int S[];
    load_matrix(S, matrix, K, go);
    const int w = blockIdx.x, warp = TEAM ? threadIdx.x >> 5 : 0, lane = threadIdx.x & 31,
              team = TEAM ? blockDim.x >> 5 : 1;
    if (w >= nthreads) return;
    const int p = order[w];
    if (p < 0) return;  // the whole block
    const uint32_t hand = smem_row(S, K, K);  // (after the matrix's K rows)
    int* ans = S + K * K + team * 4 * COLS;
    const int m = qlen[p], n = tlen[p];
    const unsigned char* __restrict__ q = codes + qoff[p];
    const unsigned char* __restrict__ tg = codes + toff[p];
    int* __restrict__ bH = boundH + w_bound[w];
    int* __restrict__ bV = boundV + w_bound[w];
    uint64_t* __restrict__ dr = dir + w_dir[w] + lane;
    long_row0<MODE>(bH, bV, n, go, ge, NEG_INF);
    const int steps = long_steps<false>(n), tiles = (m + 32 * ROWS - 1) / (32 * ROWS);
    const int total = steps + 32 * (team - 1);  // a round's steps
    const long long tile_words = (long long)steps * COLS * 32;
    Best b = best_start<MODE>(m, go, ge);
    for (int t0 = 0; t0 < tiles; t0 += team) {
        const int tile = t0 + warp;
        // a team's whole last round EDGE (one set of barriers; a tile without row m has no row past `last`)
        if (TEAM ? t0 + team >= tiles : tile == tiles - 1)
            long_tile<MODE, TRACE, true, TEAM>(S, K, q, tg, m, n, tile, !TEAM || tile < tiles, go, ge, bH, bV, hand,
                                               dr + tile * tile_words, steps, total, b);
        else
            long_tile<MODE, TRACE, false, TEAM>(S, K, q, tg, m, n, tile, tile < tiles, go, ge, bH, bV, hand,
                                                dr + tile * tile_words, steps, total, b);
    }
    team_answer<MODE>(m, tiles, b, ans, out_score, out_i, out_j, p);
}

// ---- dp_long16: dp_long in int16, two cells an instruction ----
// Hopper's DPX and VIADD instructions work on two int16 lanes of a word at once. dp_long16 runs dp_long's
// one-warp walk with 64 stripes a tile (1,024 rows): lane l holds stripes 2l (the low halves of its words)
// and 2l + 1 (the high halves), the second a step behind the first, so that it takes the row above from
// the first's outputs of the step before, in registers; lane l's first stripe takes its row above from
// lane l - 1's second, by shuffles. A pair goes here only where the host has proved that every value the
// walk computes for its real cells fits int16 (gpu_dp.fits16); no team; with CIGARs global and semi-global
// only (local's end cell would need each column's best row, not kept). Rows past m and columns past n
// take a padding letter that scores at most 0 against anything (the shared matrix's extra row and column
// of 0; with EQ, X): their cells then never score above a real cell, so local's answer is the maximum of
// every column of the tiles, unmasked.
// EQ: the matrix is M on its diagonal and X <= 0 elsewhere (match and mismatch; gpu_dp.equality_scores):
// a cell's score then comes from its letters' codes, shifted left by 10 bits and packed like the cells,
// without the shared matrix: ~(q ^ t) is -1 in a half whose letters are equal and at most -1025 elsewhere,
// so max(~(q ^ t) + M + go + 1, X + go) is S + go. The padding codes (EQ_QPAD, EQ_TPAD) equal no letter.

#ifndef NEG16
#define NEG16 (-32000)  // -infinity in an int16 lane (gpu_dp.NEG16, passed; fits16 keeps real values above it)
#endif
#define EQ_QPAD 31
#define EQ_TPAD 30

__device__ __forceinline__ uint32_t pack16(int lo, int hi) { return __byte_perm(lo, hi, 0x5410); }
__device__ __forceinline__ int low16(uint32_t x) { return (int)(short)(x & 0xffffu); }
__device__ __forceinline__ int high16(uint32_t x) { return (int)x >> 16; }

// the shared matrix with the padding letter: S[t * (K + 1) + q] + go, 0 + go in row and column K
__device__ __forceinline__ void load_matrix16(int* S, const int* __restrict__ matrix, int K, int go) {
    const int K1 = K + 1;
    for (int x = threadIdx.x; x < K1 * K1; x += blockDim.x) {
        const int t = x / K1, q = x % K1;
        S[x] = (t < K && q < K ? matrix[t * K + q] : 0) + go;
    }
    __syncthreads();
}

// dp_fill16's matrix (load_matrix16's entries) in 32 copies, one a lane, each in the lane's own bank: word
// (t * Q2 + q / 2) * 32 + lane holds entries (t, q) (low half, q even) and (t, q + 1), Q2 = (K + 2) / 2 words a
// letter t. A warp's 32 pairs look up 32 unrelated entries a cell; in one copy those fall on a bank several
// times over (Nsight Compute: the shared-memory pipe the bound of the protein set), here never.
__device__ __forceinline__ int lanes_q2(int K1) { return (K1 + 1) >> 1; }
__device__ __forceinline__ void load_matrix16_lanes(int* S, const int* __restrict__ matrix, int K, int go) {
    const int K1 = K + 1, Q2 = lanes_q2(K1);
    for (int x = threadIdx.x; x < K1 * Q2 * 32; x += blockDim.x) {
        const int t = (x >> 5) / Q2, q = 2 * ((x >> 5) % Q2);
        const int lo = (t < K && q < K ? matrix[t * K + q] : 0) + go;
        const int hi = (t < K && q + 1 < K ? matrix[t * K + q + 1] : 0) + go;
        S[x] = (int)pack16(lo, hi);
    }
    __syncthreads();
}
// the address of target letter t's entries in lane's copy, and query letter q's offset from it (read by
// smem_at<16>)
__device__ __forceinline__ uint32_t smem_row16(const int* S, int t, int K1, int lane) {
    return (uint32_t)__cvta_generic_to_shared(S) + (uint32_t)((t * lanes_q2(K1) * 32 + lane) * 4);
}
__device__ __forceinline__ int q_off16(int q) { return (q >> 1) * 128 + (q & 1) * 2; }

// stripe_column for the two stripes of a lane's words: column jL of the first (the row above gup, vup's
// low halves; rowL its target letter's matrix row) and jL - COLS16 of the second (high halves; rowH).
// EQ: rowL is the two target letters' codes, qL the two query letters', rowH and qH not read; eqs the
// packed M + go + 1 and X + go. LOCAL: hc, the column's highest H in each half. EDGE: hl, row `lastr` of
// the halves' stripes.
// TRACE: dw (zeroed by the caller), the column's direction bits, stripe_column's four a cell with its
// ties, shifted in as they come (row r's at bits 4 (3 - r % 4) of word r / 4: the first stripe's in the
// low half, the second's in the high half, sixteen a half, so none crosses into the other).
template <int MODE, bool EQ, bool EDGE, bool TRACE, bool LANES = false>
__device__ __forceinline__ void stripe_column16(uint32_t rowL, uint32_t rowH, const uint32_t (&qL)[ROWS],
                                                const uint32_t (&qH)[ROWS], uint32_t (&g)[ROWS],
                                                uint32_t (&z)[ROWS], uint32_t& gup, uint32_t& vup,
                                                uint32_t gdiag, uint32_t go2, uint32_t nge2, const uint2 eqs,
                                                int lastr, uint32_t& hc, uint32_t& hl, uint32_t (&dw)[4]) {
    hc = 0;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const uint32_t s = EQ      ? __viaddmax_s16x2(~(qL[r] ^ rowL), eqs.x, eqs.y)
                           : LANES ? pack16(smem_at<16>(rowL, qL[r]), smem_at<16>(rowH, qH[r]))
                                   : pack16(smem_at(rowL, qL[r]), smem_at(rowH, qH[r]));
        const uint32_t v = __viaddmax_s16x2(vup, nge2, gup);
        const uint32_t zz = __viaddmax_s16x2(z[r], nge2, g[r]);
        const uint32_t vz = __vmaxs2(v, zz);
        uint32_t h;
        if (TRACE) {  // each bit: min(x ^ y, 1) is 1 in a half where x != y (0x10001: 1 in both halves)
            const uint32_t d = __vadd2(gdiag, s);
            h = __vmaxs2(d, vz);
            uint32_t& w = dw[r >> 2];
            w = w * 2 + __vminu2(v ^ gup, 0x10001u);  // V extended (not opened from H above)
            w = w * 2 + __vminu2(zz ^ g[r], 0x10001u);  // Z extended
            w = w * 2 + __vminu2(vz ^ v, 0x10001u);  // H from Z rather than V
            w = w * 2 + __vminu2(h ^ d, 0x10001u);  // H not from the diagonal
            if (MODE == LOCAL) h = __vmaxs2(h, 0);  // (after the bits, as dp_fill's: an H of 0 starts the walk)
        } else {
            h = MODE == LOCAL ? __viaddmax_s16x2_relu(gdiag, s, vz) : __viaddmax_s16x2(gdiag, s, vz);
        }
        if (MODE == LOCAL) hc = __vmaxs2(hc, h);
        else if (EDGE && r == lastr) hl = h;
        gdiag = g[r];
        g[r] = __vsub2(h, go2);
        z[r] = zz;
        gup = g[r];
        vup = v;
    }
}

// the query letters of two stripes (rows i0 + 1 .. i0 + 2 ROWS; the padding letter past m) as
// stripe_column16 reads them: EQ, both stripes' codes shifted left by 10 in qL (qH not read); else the
// matrix row offsets (K1 ints a row; LANES: q_off16's) of the first stripe's in qL, the second's in qH
template <bool EQ, bool LANES = false>
__device__ __forceinline__ void double_letters(const unsigned char* __restrict__ q, int m, int i0, int K1,
                                               uint32_t (&qL)[ROWS], uint32_t (&qH)[ROWS]) {
    const int shift = EQ ? 10 : 0, qpad = EQ ? EQ_QPAD << 10 : K1 - 1;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int a = i0 + r < m ? q[i0 + r] << shift : qpad, c = i0 + ROWS + r < m ? q[i0 + ROWS + r] << shift : qpad;
        qL[r] = EQ ? pack16(a, c) : LANES ? q_off16(a) : a * 4;
        qH[r] = LANES ? q_off16(c) : c * 4;
    }
}

// column 0 of two stripes from row i0 + 1 (G = H - go; Z minus infinity), both, or (both false) the
// second's alone, the first's halves kept
template <int MODE>
__device__ __forceinline__ void double_column0(int i0, int go, int ge, bool both, uint32_t (&g)[ROWS],
                                               uint32_t (&z)[ROWS]) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int gh = first_column<MODE>(i0 + ROWS + r + 1, go, ge) - go;
        g[r] = pack16(both ? first_column<MODE>(i0 + r + 1, go, ge) - go : (int)g[r], gh);
        z[r] = both ? pack16(NEG16, NEG16) : pack16((int)z[r], NEG16);
    }
}

// G = H - go of the rows above two stripes from row i0 + 1, at column 0
template <int MODE>
__device__ __forceinline__ uint32_t double_gdiag(int i0, int go, int ge) {
    return pack16(first_column<MODE>(i0, go, ge) - go, first_column<MODE>(i0 + ROWS, go, ge) - go);
}

// EQ's packed scores: M + go + 1 and X + go in both halves (matrix: M on its diagonal, X elsewhere)
__device__ __forceinline__ uint2 eq_scores(const int* __restrict__ matrix, int go) {
    return make_uint2(pack16(matrix[0] + go + 1, matrix[0] + go + 1), pack16(matrix[1] + go, matrix[1] + go));
}

// one tile of dp_long16 (EDGE: the last, holding row m): lane l's stripes 64 tile + 2l and + 2l + 1; at
// step x the first computes COLS16 columns from (x - 2l) COLS16 + 1, the second the COLS16 before them.
// TRACE: ds, the lane's first direction entry of the tile, laid out [step][column][lane] (16 bytes each,
// stripe_column16's dw).
template <int MODE, bool EQ, bool EDGE, bool TRACE>
__device__ __forceinline__ void long16_tile(const int* S, int K1, const unsigned char* __restrict__ q,
                                            const unsigned char* __restrict__ tg, int m, int n, int tile, int go,
                                            int ge, int* __restrict__ bH, int* __restrict__ bV, int steps,
                                            const uint2 eqs, uint32_t& hbest, Best& b, uint4* __restrict__ ds) {
    const int lane = threadIdx.x & 31, pad = EQ ? EQ_TPAD << 10 : K1 - 1;
    const int shift = EQ ? 10 : 0;
    const int i0 = (tile * 64 + 2 * lane) * ROWS;  // the first stripe's; the second's is i0 + ROWS
    const uint32_t go2 = pack16(go, go), nge2 = pack16(-ge, -ge), neg2 = pack16(NEG16, NEG16);
    uint32_t qL[ROWS], qH[ROWS], g[ROWS], z[ROWS];
    double_letters<EQ>(q, m, i0, K1, qL, qH);
    const int lastL = m - 1 - i0;  // row m in the first stripe (0 .. 15) or the second (16 .. 31)
    const bool second = lastL >= ROWS;
    const int lastr = second ? lastL - ROWS : lastL;
    // the stripes' column 0 (the second stripe's first step's columns are 1 - COLS16 .. 0, not cells: its
    // state is set back after it)
    double_column0<MODE>(i0, go, ge, true, g, z);
    const uint32_t gdiag_start = double_gdiag<MODE>(i0, go, ge);
    uint32_t gdiag0 = gdiag_start;  // G of the row above, column before the step's first
    uint32_t gin[COLS16], vin[COLS16];  // the step's row above, packed
    int tL[COLS16], tH[COLS16];  // its target letters (the padding letter past n)
    int jn = 1 - 2 * lane * COLS16;
#pragma unroll
    for (int c = 0; c < COLS16; ++c) {
        const int j = jn + c;
        const bool in = (unsigned)(j - 1) < (unsigned)n;
        tL[c] = in ? tg[j - 1] << shift : pad;
        tH[c] = pad;
        gin[c] = pack16(lane == 0 && in ? bH[j] : NEG16, NEG16);
        vin[c] = pack16(lane == 0 && in ? bV[j] : NEG16, NEG16);
    }
    for (int s = 0; s < steps; ++s) {
        const int j0 = jn;
        jn += COLS16;
        uint32_t gout[COLS16], vout[COLS16];
        int tn[COLS16], gn[COLS16], vn[COLS16];
#pragma unroll
        for (int c = 0; c < COLS16; ++c) {  // the next step's inputs, loaded ahead
            const int j = jn + c;
            const bool in = (unsigned)(j - 1) < (unsigned)n;
            tn[c] = in ? tg[j - 1] << shift : pad;
            gn[c] = lane == 0 && in ? bH[j] : NEG16;
            vn[c] = lane == 0 && in ? bV[j] : NEG16;
            gout[c] = neg2, vout[c] = neg2;
        }
        if ((unsigned)(j0 - 1) < (unsigned)(n + COLS16)) {  // either stripe has a column
#pragma unroll
            for (int c = 0; c < COLS16; ++c) {
                uint32_t gup = gin[c], vup = vin[c], hc, hl = 0, dw[4] = {};
                const uint32_t gdiag = gdiag0;
                gdiag0 = gup;
                const uint32_t rowL = EQ ? pack16(tL[c], tH[c]) : smem_row(S, tL[c], K1);
                stripe_column16<MODE, EQ, EDGE, TRACE>(rowL, EQ ? 0 : smem_row(S, tH[c], K1), qL, qH, g, z, gup,
                                                       vup, gdiag, go2, nge2, eqs, lastr, hc, hl, dw);
                if (TRACE) ds[((long long)s * COLS16 + c) * 32] = make_uint4(dw[0], dw[1], dw[2], dw[3]);
                if (MODE == LOCAL) {
                    hbest = __vmaxs2(hbest, hc);
                } else if (EDGE) {
                    const int j = second ? j0 - COLS16 + c : j0 + c;
                    if ((unsigned)(j - 1) < (unsigned)n)
                        best_update<MODE, true>(b, 0, second ? high16(hl) : low16(hl), 0, j, n);
                }
                gout[c] = gup;
                vout[c] = vup;
                const int jh = j0 - COLS16 + c;
                if (lane == 31 && (unsigned)(jh - 1) < (unsigned)n) bH[jh] = high16(gup), bV[jh] = high16(vup);
            }
            if (j0 == 1) {  // the second stripe's columns were 1 - COLS16 .. 0: back to its column 0
                double_column0<MODE>(i0, go, ge, false, g, z);
                gdiag0 = __byte_perm(gdiag0, gdiag_start, 0x7610);
            }
        }
#pragma unroll
        for (int c = 0; c < COLS16; ++c) {  // the first stripe's row above from lane - 1's second; the second's from this lane's first
            const int gs = __shfl_up_sync(FULL_MASK, (int)gout[c], 1), vs = __shfl_up_sync(FULL_MASK, (int)vout[c], 1);
            gin[c] = lane == 0 ? pack16(gn[c], low16(gout[c])) : __byte_perm(gs, gout[c], 0x5432);
            vin[c] = lane == 0 ? pack16(vn[c], low16(vout[c])) : __byte_perm(vs, vout[c], 0x5432);
            tH[c] = tL[c];
            tL[c] = tn[c];
        }
    }
    __syncwarp();
}

// dp_long in int16 pairs of cells (long16_tile), a warp per pair (blockDim.x = 32), as dp_long's
// arguments (out_i, out_j: row m and its column, local 0, 0). TRACE (global and semi-global): w_dir[] the
// pair's direction words, tiles * steps * COLS16 * 32 entries of 16 bytes (two words each). Dynamic
// shared memory: (K + 1)^2 ints.
template <int MODE, bool EQ, bool TRACE>
__global__ void __launch_bounds__(32) dp_long16(PAIRS_ARGS, const int* __restrict__ matrix, int K, int go, int ge,
                                               int* __restrict__ boundH, int* __restrict__ boundV,
                                               uint64_t* __restrict__ dir, int* __restrict__ out_score,
                                               int* __restrict__ out_i, int* __restrict__ out_j) {
    static_assert(!(TRACE && MODE == LOCAL), "dp_long16 traces global and semi-global alignments");
    extern __shared__ int S[];
    load_matrix16(S, matrix, K, go);
    const int w = blockIdx.x, lane = threadIdx.x & 31;
    if (w >= nthreads) return;
    const int p = order[w];
    if (p < 0) return;
    const int m = qlen[p], n = tlen[p];
    const unsigned char* __restrict__ q = codes + qoff[p];
    const unsigned char* __restrict__ tg = codes + toff[p];
    int* __restrict__ bH = boundH + w_bound[w];
    int* __restrict__ bV = boundV + w_bound[w];
    long_row0<MODE>(bH, bV, n, go, ge, NEG16);
    const int steps = long_steps<true>(n), tiles = (m + 64 * ROWS - 1) / (64 * ROWS);
    const uint2 eqs = EQ ? eq_scores(matrix, go) : make_uint2(0, 0);
    uint32_t hbest = 0;  // local: the highest H in each half
    Best b = best_start<MODE>(m, go, ge);
    uint4* __restrict__ dr = reinterpret_cast<uint4*>(dir + w_dir[w]) + lane;
    const long long tile_entries = (long long)steps * COLS16 * 32;
    for (int tile = 0; tile < tiles; ++tile) {
        if (tile == tiles - 1)
            long16_tile<MODE, EQ, true, TRACE>(S, K + 1, q, tg, m, n, tile, go, ge, bH, bV, steps, eqs, hbest, b,
                                               dr + tile * tile_entries);
        else
            long16_tile<MODE, EQ, false, TRACE>(S, K + 1, q, tg, m, n, tile, go, ge, bH, bV, steps, eqs, hbest, b,
                                                dr + tile * tile_entries);
    }
    if (MODE == LOCAL) {
        int best = max(low16(hbest), high16(hbest));
        for (int k = 16; k > 0; k >>= 1) best = max(best, __shfl_xor_sync(FULL_MASK, best, k));
        if (lane == 0) out_score[p] = best, out_i[p] = 0, out_j[p] = 0;
    } else if (lane == ((m - 1) / ROWS) % 64 / 2) {
        out_score[p] = b.best, out_i[p] = m, out_j[p] = b.bj;
    }
}

// ---- dp_fill16: dp_fill in int16, two cells an instruction ----
// A thread a pair, as dp_fill (its arguments, warps and boundary rows; dir written with TRACE), for pairs
// whose values the host has proved fit int16 (gpu_dp.fits16). The query goes in double stripes of
// 2 ROWS rows: the first stripe in the low halves of the thread's words, the second in the high halves,
// a column behind, taking its row above from the first's last row of the column before, in registers
// (stripe_column16, as a lane of dp_long16 holds its two stripes). Step x computes column x of the first
// stripe and x - 1 of the second; the second's column 0 and the first's column n + 1 are no cells (the
// second's state is set back to its column 0 after step 1). Rows past m and column n + 1 take dp_long16's
// padding letter: local's answer is the maximum of every column, unmasked. LANES: the matrix a copy per lane
// (load_matrix16_lanes; lane: the thread's), else one copy (load_matrix16).
// TRACE: each step's direction words (stripe_column16's dw) at ds[(x - 1) * 32], 16 bytes; local's end cell
// into b as dp_fill finds it (the highest H, then the first stripe, column and row): per half, the first
// column whose highest H passes the best before this double stripe, and its first row of that H (found
// in the column's G, rarely: only where a lane's best rises); merged the first stripe's, then the second's.
// A padding cell never scores above the real cell it comes from, which comes before it in that order, so
// the strict comparisons never take one.
template <int MODE, bool EQ, bool EDGE, bool LANES, bool TRACE>
__device__ __forceinline__ void fill_double16(const int* S, int K1, const unsigned char* __restrict__ q,
                                              const unsigned char* __restrict__ tg, int m, int n, int i0, int go,
                                              int ge, int* __restrict__ bH, int* __restrict__ bV, const uint2 eqs,
                                              uint32_t& hbest, Best& b, int lane, uint4* __restrict__ ds) {
    const int shift = EQ ? 10 : 0, pad = EQ ? EQ_TPAD << 10 : K1 - 1;
    const uint32_t go2 = pack16(go, go), nge2 = pack16(-ge, -ge), neg2 = pack16(NEG16, NEG16);
    uint32_t qL[ROWS], qH[ROWS], g[ROWS], z[ROWS];
    double_letters<EQ, LANES>(q, m, i0, K1, qL, qH);
    double_column0<MODE>(i0, go, ge, true, g, z);
    const int lastL = m - 1 - i0;  // row m in the first stripe (0 .. 15) or the second (16 .. 31)
    const bool second = lastL >= ROWS;
    const int lastr = second ? lastL - ROWS : lastL;
    const uint32_t gdiag_start = double_gdiag<MODE>(i0, go, ge);
    uint32_t gdiag0 = gdiag_start, gout = neg2, vout = neg2;  // G of the row above, column before; the last row
    // (TRACE, local: the halves' best so far in this double stripe, from the best before it; their cells)
    const int before = (int)(b.bestkey >> 4);
    uint32_t sbest = pack16(before, before);
    int jL = 0, rL = 0, jH = 0, rH = 0;
    int tH = pad, tnext = tg[0] << shift, gnext = bH[32], vnext = bV[32];  // column 1's inputs, loaded ahead
#pragma unroll 2
    for (int x = 1; x <= n + 1; ++x) {
        const int tL = tnext;
        uint32_t gup = pack16(gnext, (int)gout), vup = pack16(vnext, (int)vout);
        if (x < n) tnext = tg[x] << shift, gnext = bH[(x + 1) * 32], vnext = bV[(x + 1) * 32];
        else tnext = pad, gnext = NEG16, vnext = NEG16;
        const uint32_t gdiag = gdiag0;
        gdiag0 = gup;
        uint32_t hc, hl = 0, dw[4] = {};
        const uint32_t rowL = EQ ? pack16(tL, tH) : LANES ? smem_row16(S, tL, K1, lane) : smem_row(S, tL, K1);
        const uint32_t rowH = EQ ? 0 : LANES ? smem_row16(S, tH, K1, lane) : smem_row(S, tH, K1);
        stripe_column16<MODE, EQ, EDGE, TRACE, LANES>(rowL, rowH, qL, qH, g, z, gup, vup, gdiag, go2, nge2, eqs,
                                                      lastr, hc, hl, dw);
        if (TRACE) ds[(long long)(x - 1) * 32] = make_uint4(dw[0], dw[1], dw[2], dw[3]);
        if (MODE == LOCAL && TRACE) {
            uint32_t up = __vcmpgts2(hc, sbest);  // 0xffff in a half whose column passes its best
            if (x == 1) up &= 0xffffu;  // (the second stripe's column 0)
            if (up) {
                const uint32_t want = __vsub2(hc, go2);  // the best H's G
                int fl = ROWS, fh = ROWS;
#pragma unroll
                for (int r = ROWS - 1; r >= 0; --r) {
                    const uint32_t e = __vcmpeq2(g[r], want) & up;
                    if (e & 0xffffu) fl = r;
                    if (e >> 16) fh = r;
                }
                if (up & 0xffffu) jL = x, rL = fl;
                if (up >> 16) jH = x - 1, rH = fh;
                sbest = (sbest & ~up) | (hc & up);
            }
        } else if (MODE == LOCAL) {
            hbest = __vmaxs2(hbest, hc);
        } else if (EDGE) {
            const int j = second ? x - 1 : x;
            if ((unsigned)(j - 1) < (unsigned)n) best_update<MODE, true>(b, 0, second ? high16(hl) : low16(hl), 0, j, n);
        }
        if (x > 1) bH[(x - 1) * 32] = high16(gup), bV[(x - 1) * 32] = high16(vup);
        gout = gup, vout = vup;
        tH = tL;
        if (x == 1) {  // the second stripe's step was column 0: back to its column 0
            double_column0<MODE>(i0, go, ge, false, g, z);
            gdiag0 = __byte_perm(gdiag0, gdiag_start, 0x7610);
        }
    }
    if (MODE == LOCAL && TRACE) {  // the first stripe's cell, then the second's (each only above the best so far)
        if (jL && low16(sbest) > (int)(b.bestkey >> 4))
            b.bestkey = (uint32_t)low16(sbest) * 16u + (15 - rL), b.bj = jL, b.i0b = i0;
        if (jH && high16(sbest) > (int)(b.bestkey >> 4))
            b.bestkey = (uint32_t)high16(sbest) * 16u + (15 - rH), b.bj = jH, b.i0b = i0 + ROWS;
    }
}

// dp_fill's pairs in int16 (fill_double16): out_score, and with scores only out_i, out_j as dp_long16's (row
// m and its column; local 0, 0). EQ as dp_long16's (no matrix read, no shared memory). Dynamic shared memory:
// LANES, (K + 1) * lanes_q2(K + 1) * 32 ints (load_matrix16_lanes), else (K + 1)^2 (load_matrix16).
// TRACE: out_i, out_j the end cell as dp_fill's; the directions of a warp's double stripe d, step x (1 .. maxn
// + 1), lane l at 16-byte entry (d (maxn + 1) + x - 1) 32 + l from dir + w_dir[w] (dp_trace's LAYOUT 3).
template <int MODE, bool EQ, bool LANES, bool TRACE>
__global__ void __launch_bounds__(128) dp_fill16(PAIRS_ARGS, const int* __restrict__ matrix, int K, int go, int ge,
                                                int* __restrict__ boundH, int* __restrict__ boundV,
                                                uint64_t* __restrict__ dir, int* __restrict__ out_score,
                                                int* __restrict__ out_i, int* __restrict__ out_j) {
    extern __shared__ int S[];
    if (!EQ && LANES) load_matrix16_lanes(S, matrix, K, go);
    if (!EQ && !LANES) load_matrix16(S, matrix, K, go);
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nthreads) return;
    const int p = order[t];
    if (p < 0) return;
    const int w = t >> 5, lane = t & 31;
    const int m = qlen[p], n = tlen[p];
    const unsigned char* __restrict__ q = codes + qoff[p];
    const unsigned char* __restrict__ tg = codes + toff[p];
    int* __restrict__ bH = boundH + w_bound[w] + lane;  // the row above the double stripe: G = H - go, and V
    int* __restrict__ bV = boundV + w_bound[w] + lane;
    row0<MODE>(bH, bV, n, go, ge, NEG16, 1, 1, 32);
    const uint2 eqs = EQ ? eq_scores(matrix, go) : make_uint2(0, 0);
    uint32_t hbest = 0;  // local: the highest H in each half
    Best b = best_start<MODE>(m, go, ge);
    uint4* __restrict__ dr = TRACE ? reinterpret_cast<uint4*>(dir + w_dir[w]) + lane : nullptr;
    const long long per = TRACE ? (long long)(w_maxn[w] + 1) * 32 : 0;  // a double stripe's entries
    const int edge = (m - 1) / (2 * ROWS) * (2 * ROWS);  // the last double stripe's first row
    for (int i0 = 0; i0 < edge; i0 += 2 * ROWS)
        fill_double16<MODE, EQ, false, LANES, TRACE>(S, K + 1, q, tg, m, n, i0, go, ge, bH, bV, eqs, hbest, b, lane,
                                                     dr + i0 / (2 * ROWS) * per);
    fill_double16<MODE, EQ, true, LANES, TRACE>(S, K + 1, q, tg, m, n, edge, go, ge, bH, bV, eqs, hbest, b, lane,
                                                dr + edge / (2 * ROWS) * per);
    if (MODE == LOCAL && TRACE) {
        best_end<MODE>(b, m, out_score[p], out_i[p], out_j[p]);
    } else if (MODE == LOCAL) {
        out_score[p] = max(low16(hbest), high16(hbest)), out_i[p] = 0, out_j[p] = 0;
    } else {
        out_score[p] = b.best, out_i[p] = m, out_j[p] = b.bj;
    }
}

// ---- dp_fill's launch plan, made on the device (gpu_dp.GpuDpEngine._plan) ----
// dp_keys: key[i] = qlen[p] << tbits | tlen[p] of pair p = idx[i] (use_idx 0: p = i), i < n, every length below
// 2^tbits and every key below 2^bits, the key reversed (2^bits - 1 - key) where invert (an ascending sort then
// gives the longest first). Sorted (stably, on its `bits` low bits only), the keys set pairs of like lengths side
// by side, so that a warp's 32 pairs need about the same room.
__global__ void dp_keys(const int* __restrict__ qlen, const int* __restrict__ tlen, const int* __restrict__ idx,
                        int use_idx, int n, int invert, int tbits, int bits, uint64_t* __restrict__ key) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int p = use_idx ? idx[i] : i;
    const uint64_t k = (uint64_t)(uint32_t)qlen[p] << tbits | (uint32_t)tlen[p];
    key[i] = invert ? ((1ull << bits) - 1ull) - k : k;
}

// dp_warps: a thread per warp w of the launch order: slots[32 w + l], the pair at sorted position s = 32 w +
// l (idx[sorted[s]], or sorted[s]; -1 from n on), and the warp's longest target maxn[w] and its longest
// query's stripes of ROWS rows, stripes[w]
__global__ void dp_warps(const int* __restrict__ qlen, const int* __restrict__ tlen, const int* __restrict__ idx,
                         int use_idx, const long long* __restrict__ sorted, int n, int nwarps,
                         int* __restrict__ slots, int* __restrict__ maxn, int* __restrict__ stripes) {
    const int w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= nwarps) return;
    int mt = 0, mq = 0;
    for (int l = 0; l < 32; ++l) {
        const int s = w * 32 + l;
        int p = -1;
        if (s < n) {
            const int i = (int)sorted[s];
            p = use_idx ? idx[i] : i;
            mt = max(mt, tlen[p]);
            mq = max(mq, qlen[p]);
        }
        slots[s] = p;
    }
    maxn[w] = mt;
    stripes[w] = (mq + ROWS - 1) / ROWS;
}

struct Runs {  // the CIGAR being written backwards, runs merged (write: this thread stores them)
    uint32_t* out;
    int count, op, len;
    bool write;
    __device__ void add(int o, int l) {
        if (o == op) {
            len += l;
            return;
        }
        if (len) {
            if (write) out[count] = (uint32_t)len << 4 | op;
            ++count;
        }
        op = o;
        len = l;
    }
};

// one stripe's direction bits of a 16-byte entry of dp_long16 or dp_fill16 (stripe_column16's dw; half 0: the
// first stripe's, 1: the second's) as dp_fill writes a column's (row r at bits 4 (15 - r))
__device__ __forceinline__ uint64_t half_column(const uint4 e, int half) {
    const int h = 16 * half;
    return (uint64_t)((e.x >> h) & 0xffffu) << 48 | (uint64_t)((e.y >> h) & 0xffffu) << 32 |
           ((e.z >> h) & 0xffffu) << 16 | ((e.w >> h) & 0xffffu);
}

// the long kernels' direction bits of stripe s (16 rows), column j, as dp_long writes them (row r at bits
// 4 (15 - r)); dr: the pair's words, steps: its tiles' steps
template <int LAYOUT>
__device__ __forceinline__ uint64_t long_column(const uint64_t* __restrict__ dr, int steps, int s, int j) {
    if (LAYOUT == 1) {
        return dr[(((long long)(s >> 5) * steps + (j - 1) / COLS + (s & 31)) * COLS + (j - 1) % COLS) * 32 + (s & 31)];
    }
    // dp_long16: tile s / 64, lane s % 64 / 2, its first or second stripe (s % 2: the half, one step later)
    const long long at = (((long long)(s >> 6) * steps + (j - 1) / COLS16 + (s & 63)) * COLS16 + (j - 1) % COLS16) * 32
                         + ((s & 63) >> 1);
    return half_column(reinterpret_cast<const uint4*>(dr)[at], s & 1);
}

// The directions of the pairs of dp_fill (LAYOUT 0) or dp_fill16 (3), a thread a pair, or of dp_long (1) or
// dp_long16 (2; global and semi-global), a warp a pair (w_dir[t]; blockDim.x a multiple of 32): its lanes hold a window
// of 32 columns of the walk's stripe, from its column leftwards (lane k column wj - k), loaded at once when
// the walk leaves it, so that a load's latency is paid once a window, not once a step; every lane walks,
// lane 0 writes.
// (LOCAL: the walk carries the score of the cell it is at, from the end's score, and stops at an H of 0.)
template <int MODE, int LAYOUT>
__global__ void dp_trace(PAIRS_ARGS, const int* __restrict__ matrix, int K, int go, int ge,
                         const uint64_t* __restrict__ dir, const int* __restrict__ end_score,
                         const int* __restrict__ end_i, const int* __restrict__ end_j,
                         const long long* __restrict__ op_off, uint32_t* __restrict__ ops,
                         int* __restrict__ out_count, int* __restrict__ out_qs, int* __restrict__ out_ts) {
    constexpr bool LONG = LAYOUT == 1 || LAYOUT == 2;
    const int g = blockIdx.x * blockDim.x + threadIdx.x, t = LONG ? g >> 5 : g, lane = g & 31;
    if (t >= nthreads) return;
    const int p = order[t];
    if (p < 0) return;
    const int w = LONG ? t : t >> 5;
    const int maxn = LONG ? 0 : w_maxn[w];
    const int steps = long_steps<LAYOUT == 2>(tlen[p]);
    const unsigned char* __restrict__ q = codes + qoff[p];
    const unsigned char* __restrict__ tg = codes + toff[p];
    const uint64_t* __restrict__ dr = dir + w_dir[w] + (LAYOUT == 0 ? lane : 0);
    int i = end_i[p], j = end_j[p], state = FROM_DIAG;  // the matrix the walk is in: H, V or Z
    int score = MODE == LOCAL ? end_score[p] : 0;
    int ws = -1, wj = 0;  // LONG: the window's stripe and right end; this lane's word, column wj - lane
    uint64_t mine = 0;
    Runs runs{ops + op_off[t], 0, 0, 0, !LONG || lane == 0};
    while (true) {
        if (i == 0 || j == 0) {  // the first row or column: what is left is one gap, or free
            if (MODE != LOCAL && i) runs.add(OP_I, i), i = 0;
            if (MODE == GLOBAL && j) runs.add(OP_D, j), j = 0;
            break;
        }
        const int r = (i - 1) % ROWS, s = (i - 1) / ROWS;
        int cell;  // stripe_column's bits
        if (LONG) {
            if (s != ws || j <= wj - 32) {  // (the walk never moves right)
                ws = s, wj = j;
                mine = j - lane >= 1 ? long_column<LAYOUT>(dr, steps, s, j - lane) : 0;
            }
            const uint32_t half = r < 8 ? (uint32_t)(mine >> 32) : (uint32_t)mine;
            cell = (int)(__shfl_sync(FULL_MASK, half, wj - j) >> (4 * (7 - (r & 7)))) & 15;
        } else if (LAYOUT == 3) {  // double stripe s / 2, its second stripe a step behind the first
            const long long at = ((long long)(s >> 1) * (maxn + 1) + j - 1 + (s & 1)) * 32 + lane;
            const uint4 e = reinterpret_cast<const uint4*>(dr)[at];
            cell = (int)(half_column(e, s & 1) >> (4 * (ROWS - 1 - r))) & 15;
        } else {
            cell = (int)(dr[((long long)s * maxn + (j - 1)) * 32] >> (4 * (ROWS - 1 - r))) & 15;
        }
        if (state == FROM_V) {
            runs.add(OP_I, 1);
            const bool opened = !(cell & 8);
            state = opened ? FROM_DIAG : FROM_V;
            if (MODE == LOCAL) score += opened ? go : ge;
            --i;
        } else if (state == FROM_Z) {
            runs.add(OP_D, 1);
            const bool opened = !(cell & 4);
            state = opened ? FROM_DIAG : FROM_Z;
            if (MODE == LOCAL) score += opened ? go : ge;
            --j;
        } else {
            if (MODE == LOCAL && score == 0) break;
            if (!(cell & 1)) {
                const int qa = q[i - 1], tb = tg[j - 1];
                runs.add(qa == tb ? OP_EQ : OP_X, 1);
                if (MODE == LOCAL) score -= __ldg(matrix + tb * K + qa);
                --i;
                --j;
            } else {
                state = cell & 2 ? FROM_Z : FROM_V;
            }
        }
    }
    runs.add(-1, 0);  // flush the last run
    if (!runs.write) return;
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
