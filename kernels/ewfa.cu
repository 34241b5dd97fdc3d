// ewfa.cu -- edit-distance wavefront alignment of short pairs (eWFA), one warp per alignment.
//
// Entry points (template instances, listed in gpualign/engines/gpu_edit.py):
//
//   pack2(const uint32_t* raw, uint32_t* packed, int nwords)
//     raw: case-folded bytes (ACGT only where 2-bit mode is used), as words; packed[j] holds
//     the 2-bit codes of bytes 16j..16j+15. One thread per output word.
//
//   ewfa_align<E, BITS, BT>(seq, list, nlist, qpos, qlen, tpos, tlen, score, bt)
//     seq      uint32*  symbols (BITS = 2 packed, BITS = 8 raw bytes), see common.cuh
//     list     int32*   pair ids to align in this launch (nlist of them)
//     qpos/tpos uint32* symbol position of each pair's query/target; qlen/tlen int32*
//     score    int32*   out, per list entry: edit distance, or -1 when it exceeds E
//     bt       uint32*  out (BT only), per list entry W = E/16 words: the 2-bit edit ops of
//                       the path, op s at bits 2s..2s+1 of word s/16 (1 = X, 2 = D, 3 = I)
//     Launch: blockDim.x = 32 * warps, dynamic shared memory = warps * warp_smem_bytes(E, BT),
//     any grid (warps stride over the list). Limits: |qlen - tlen| <= E is checked (else -1).
//
//   ewfa_cigar<BITS>(seq, list, nlist, qpos, qlen, tpos, tlen, score, bt, W, cig_off, cigar, ncig)
//     One thread per list entry with score >= 0: replays the ops with extend and writes the
//     CIGAR (BAM op codes, len << 4 | op, SAM orientation: I = query-only, D = target-only)
//     at cigar[cig_off[i]...] (room for 2 * score + 1 ops); ncig[i] = number of ops, or -1 if
//     the replay does not end at (qlen, tlen) (never expected: reported as a failure).
//
// Method: wavefront W[s][k] = furthest target offset h on diagonal k = h - v with s edits.
// W[s][k] = max(W[s-1][k] + 1 (X), W[s-1][k-1] + 1 (D), W[s-1][k+1] (I)), each candidate kept
// only inside the DP matrix (h <= m, v <= n), then extended along matches. Only the last two
// wavefronts live in shared memory; each diagonal carries the ops of the path that reached it
// (piggybacked backtrace), so memory is O(E) words per alignment.
#include "common.cuh"

#define NEG (-0x40000000)

extern "C" __global__ void pack2(const uint32_t* __restrict__ raw, uint32_t* __restrict__ packed, int nwords) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < nwords; j += gridDim.x * blockDim.x) {
        uint32_t out = 0;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const uint32_t w = raw[4 * j + q];
#pragma unroll
            for (int b = 0; b < 4; b++) out |= ((w >> (8 * b + 1)) & 3u) << (2 * (4 * q + b));
        }
        packed[j] = out;
    }
}

template <int E, bool BT>
struct WarpSmem {
    static constexpr int D = 2 * E + 3;          // diagonals -E-1..E+1, index k + E + 1
    static constexpr int W = BT ? E / 16 : 0;    // backtrace words per diagonal
    static constexpr int WORDS = 2 * D + 2 * D * W;
};

template <int E, int BITS, bool BT>
__global__ void ewfa_align(const uint32_t* __restrict__ seq, const int* __restrict__ list, int nlist,
                           const uint32_t* __restrict__ qpos, const int* __restrict__ qlen,
                           const uint32_t* __restrict__ tpos, const int* __restrict__ tlen,
                           int* __restrict__ score, uint32_t* __restrict__ bt) {
    using L = WarpSmem<E, BT>;
    constexpr int D = L::D, W = L::W;
    extern __shared__ int smem[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    int* base = smem + warp * L::WORDS;
    int* offA = base;
    int* offB = base + D;
    uint32_t* btA = reinterpret_cast<uint32_t*>(base + 2 * D);  // [W][D], word-major: no bank conflicts
    uint32_t* btB = btA + W * D;
    const int warps_total = gridDim.x * (blockDim.x >> 5);

    for (int it = blockIdx.x * (blockDim.x >> 5) + warp; it < nlist; it += warps_total) {
        const int p = list[it];
        const int n = qlen[p], m = tlen[p];
        const uint32_t qp = qpos[p], tp = tpos[p];
        const int kf = m - n;
        if (kf > E || kf < -E) {
            if (lane == 0) score[it] = -1;
            continue;
        }
        for (int i = lane; i < D; i += 32) { offA[i] = NEG; offB[i] = NEG; }
        __syncwarp();
        if (lane == 0) offA[E + 1] = common_prefix<BITS>(seq, qp, tp, n < m ? n : m);
        __syncwarp();
        int s = 0;
        bool done = (kf == 0 && offA[E + 1] == m);
        while (!done && s < E) {
            s++;
            const int lo = -s > -n ? -s : -n;
            const int hi = s < m ? s : m;
            const int cw = (s - 1) >> 4;
            const uint32_t shift = 2 * ((s - 1) & 15);
            for (int k = lo + lane; k <= hi; k += 32) {
                const int i = k + E + 1;
                const int hx = offA[i] + 1, hd = offA[i - 1] + 1, hn = offA[i + 1];
                int best = NEG, src = i;
                uint32_t op = 0;
                if (hx >= 0 && hx <= m && hx - k <= n) { best = hx; src = i; op = 1; }
                if (hd >= 0 && hd <= m && hd - k <= n && hd > best) { best = hd; src = i - 1; op = 2; }
                if (hn >= 0 && hn <= m && hn - k <= n && hn > best) { best = hn; src = i + 1; op = 3; }
                if (best >= 0) {
                    const int v = best - k;
                    const int room = (n - v) < (m - best) ? (n - v) : (m - best);
                    best += common_prefix<BITS>(seq, qp + v, tp + best, room);
                    if (BT) {
                        for (int w = 0; w < cw; w++) btB[w * D + i] = btA[w * D + src];
                        const uint32_t prev = shift ? btA[cw * D + src] : 0u;
                        btB[cw * D + i] = prev | (op << shift);
                    }
                }
                offB[i] = best;
            }
            __syncwarp();
            done = (offB[kf + E + 1] == m);
            int* t = offA; offA = offB; offB = t;
            uint32_t* u = btA; btA = btB; btB = u;
            __syncwarp();
        }
        if (lane == 0) score[it] = done ? s : -1;
        if (BT && done) {
            for (int w = lane; w < W; w += 32) bt[(unsigned long long)it * W + w] = (w <= ((s - 1) >> 4) && s > 0) ? btA[w * D + kf + E + 1] : 0u;
        }
        __syncwarp();
        // both buffers are re-initialised for the next pair; keep pointer parity deterministic
        offA = base; offB = base + D;
        btA = reinterpret_cast<uint32_t*>(base + 2 * D); btB = btA + W * D;
    }
}

struct CigarOut {
    uint32_t* out;
    int n, cur_op, cur_len;
    __device__ void emit(int op, int len) {
        if (len <= 0) return;
        if (op == cur_op) { cur_len += len; return; }
        if (cur_len) out[n++] = ((uint32_t)cur_len << 4) | cur_op;
        cur_op = op; cur_len = len;
    }
    __device__ void flush() { if (cur_len) out[n++] = ((uint32_t)cur_len << 4) | cur_op; cur_len = 0; }
};

template <int BITS>
__global__ void ewfa_cigar(const uint32_t* __restrict__ seq, const int* __restrict__ list, int nlist,
                           const uint32_t* __restrict__ qpos, const int* __restrict__ qlen,
                           const uint32_t* __restrict__ tpos, const int* __restrict__ tlen,
                           const int* __restrict__ score, const uint32_t* __restrict__ bt, int W,
                           const long long* __restrict__ cig_off, uint32_t* __restrict__ cigar,
                           int* __restrict__ ncig) {
    for (int it = blockIdx.x * blockDim.x + threadIdx.x; it < nlist; it += gridDim.x * blockDim.x) {
        const int s = score[it];
        if (s < 0) { ncig[it] = 0; continue; }
        const int p = list[it];
        const int n = qlen[p], m = tlen[p];
        const uint32_t qp = qpos[p], tp = tpos[p];
        CigarOut c{cigar + cig_off[it], 0, -1, 0};
        int v = 0, h = 0;
        int l = common_prefix<BITS>(seq, qp, tp, n < m ? n : m);
        c.emit(7, l); v += l; h += l;
        for (int j = 0; j < s; j++) {
            const uint32_t op = (bt[(unsigned long long)it * W + (j >> 4)] >> (2 * (j & 15))) & 3u;
            if (op == 1) { c.emit(8, 1); v++; h++; }
            else if (op == 2) { c.emit(2, 1); h++; }
            else { c.emit(1, 1); v++; }
            const int room = (n - v) < (m - h) ? (n - v) : (m - h);
            l = room > 0 ? common_prefix<BITS>(seq, qp + v, tp + h, room) : 0;
            c.emit(7, l); v += l; h += l;
        }
        c.flush();
        ncig[it] = (v == n && h == m) ? c.n : -1;
    }
}

// Explicit instances: what gpu_edit.py asks for by name, and what a bare nvcc build checks.
#define EWFA_ALIGN(E, B, T) template __global__ void ewfa_align<E, B, T>(const uint32_t*, const int*, int, \
    const uint32_t*, const int*, const uint32_t*, const int*, int*, uint32_t*);
#define EWFA_BOTH(E, T) EWFA_ALIGN(E, 2, T) EWFA_ALIGN(E, 8, T)
EWFA_BOTH(32, true) EWFA_BOTH(64, true) EWFA_BOTH(128, true)
EWFA_BOTH(32, false) EWFA_BOTH(64, false) EWFA_BOTH(128, false) EWFA_BOTH(256, false) EWFA_BOTH(512, false)
#define EWFA_CIGAR(B) template __global__ void ewfa_cigar<B>(const uint32_t*, const int*, int, const uint32_t*, \
    const int*, const uint32_t*, const int*, const int*, const uint32_t*, int, const long long*, uint32_t*, int*);
EWFA_CIGAR(2) EWFA_CIGAR(8)
