// ewfa.cu -- edit-distance wavefront alignment of short pairs (eWFA), one warp per alignment.
//
// Entry points (listed in gpualign/engines/gpu_edit.py):
//
//   pack2 (common.cuh): the 2-bit codes of the batch
//
//   ewfa_align(E, bt_on, packed, raw, list, nlist, qpos, qlen, tpos, tlen, score, mode, bt)
//     E        int32    the level: most edits (a multiple of 16); bt_on int32: 1 = keep the ops (BT)
//     packed   uint32*  2-bit codes of the batch (pack2); raw: the bytes themselves (see common.cuh)
//     list     int32*   pair ids to align in this launch (nlist of them)
//     qpos/tpos uint32* byte offset of each pair's query/target; qlen/tlen int32*
//     score    int32*   out, per list entry: edit distance, or -1 when it exceeds E
//     mode     uint8*   out, per list entry: 2 when both sequences are ACGT-only (2-bit compare,
//                       16 bases per word), else 8 (byte compare: N, IUPAC, --n-mismatch codes)
//     bt       uint32*  out (BT only), per list entry W = E/16 words: the 2-bit edit ops of
//                       the path, op s at bits 2s..2s+1 of word s/16 (1 = X, 2 = D, 3 = I)
//     Launch: blockDim.x = 32 * warps, dynamic shared memory = warps * 4 * WORDS bytes, WORDS =
//     2D + 2DW with D = 2E + 3 and W = E/16 with BT (else 0), any grid (warps stride over the list).
//     |qlen - tlen| > E gives -1 at once. E and BT are arguments, not template parameters: one kernel
//     for every level, measured as fast as the eight instances it replaced (docs/benchmarks.md).
//
//   ewfa_cigar(packed, raw, list, nlist, qpos, qlen, tpos, tlen, score, mode, bt, W, stride, cigar, ncig)
//     One thread per list entry with score >= 0: replays the ops with extend and writes the
//     CIGAR (BAM op codes, len << 4 | op, SAM orientation: I = query-only, D = target-only)
//     at cigar[i * stride...] (a slot per entry: s edits make at most 2s + 1 runs, so stride =
//     2E + 1 always holds it); ncig[i] = number of ops, or -1 if the replay does not end at
//     (qlen, tlen) or overflows its slot (never expected: reported as a failure).
//
//   book_level, gather_slots (common.cuh): each level's results into per-pair arrays, and the
//   final CIGAR buffer in pair order.
//
// Method: wavefront W[s][k] = furthest target offset h on diagonal k = h - v with s edits.
// W[s][k] = max(W[s-1][k] + 1 (X), W[s-1][k-1] + 1 (D), W[s-1][k+1] (I)), each candidate kept
// only inside the DP matrix (h <= m, v <= n), then extended along matches. Only the last two
// wavefronts live in shared memory; each diagonal carries the ops of the path that reached it
// (piggybacked backtrace), so memory is O(E) words per alignment.
#include "common.cuh"

#define NEG (-0x40000000)


// One warp: do all bytes of seq[pos, pos + len) hold A, C, G or T?
__device__ __forceinline__ bool warp_all_acgt(const unsigned char* __restrict__ raw, uint32_t pos, int len, int lane) {
    bool ok = true;
    for (int i = lane; i < len; i += 32) {
        const unsigned char c = raw[pos + i];
        ok &= (c == 'A') | (c == 'C') | (c == 'G') | (c == 'T');
    }
    return __all_sync(0xffffffffu, ok);
}

// Align one pair with the whole warp; returns the score (or -1 beyond E) to every lane.
template <int BITS>
__device__ int warp_align(const int E, const bool BT, const uint32_t* __restrict__ seq, uint32_t qp, int n, uint32_t tp, int m,
                          int* offA, int* offB, uint32_t* btA, uint32_t* btB, uint32_t* __restrict__ bt_out,
                          int lane) {
    const int D = 2 * E + 3, W = BT ? E / 16 : 0;  // as ewfa_align's layout
    const int kf = m - n;
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
    if (BT && done) {
        for (int w = lane; w < W; w += 32) bt_out[w] = (s > 0 && w <= ((s - 1) >> 4)) ? btA[w * D + kf + E + 1] : 0u;
    }
    __syncwarp();
    return done ? s : -1;
}

extern "C" __global__ void ewfa_align(const int E, const int bt_on, const uint32_t* __restrict__ packed, const uint32_t* __restrict__ raw,
                           const int* __restrict__ list, int nlist,
                           const uint32_t* __restrict__ qpos, const int* __restrict__ qlen,
                           const uint32_t* __restrict__ tpos, const int* __restrict__ tlen,
                           int* __restrict__ score, unsigned char* __restrict__ mode, uint32_t* __restrict__ bt) {
    const bool BT = bt_on != 0;
    // per warp: two wavefronts of D diagonals (-E-1..E+1, index k + E + 1) and, with BT, W words of ops each
    const int D = 2 * E + 3, W = BT ? E / 16 : 0, WORDS = 2 * D + 2 * D * W;
    extern __shared__ int smem[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    int* base = smem + warp * WORDS;
    uint32_t* bt0 = reinterpret_cast<uint32_t*>(base + 2 * D);  // [W][D], word-major: no bank conflicts
    const int warps_total = gridDim.x * (blockDim.x >> 5);
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(raw);

    for (int it = blockIdx.x * (blockDim.x >> 5) + warp; it < nlist; it += warps_total) {
        const int p = list[it];
        const int n = qlen[p], m = tlen[p];
        const uint32_t qp = qpos[p], tp = tpos[p];
        const int kf = m - n;
        int s = -1;
        bool two_bit = false;
        if (kf <= E && kf >= -E) {
            two_bit = warp_all_acgt(bytes, qp, n, lane) && warp_all_acgt(bytes, tp, m, lane);
            uint32_t* out = bt + (unsigned long long)it * (W ? W : 1);
            s = two_bit ? warp_align<2>(E, BT, packed, qp, n, tp, m, base, base + D, bt0, bt0 + W * D, out, lane)
                        : warp_align<8>(E, BT, raw, qp, n, tp, m, base, base + D, bt0, bt0 + W * D, out, lane);
        }
        if (lane == 0) { score[it] = s; mode[it] = two_bit ? 2 : 8; }
    }
}

template <int BITS>
__device__ void replay(const uint32_t* __restrict__ seq, uint32_t qp, int n, uint32_t tp, int m, int s,
                       const uint32_t* __restrict__ ops, uint32_t* __restrict__ out, int cap, int* __restrict__ nout) {
    CigarOut c{out, 0, -1, 0, cap};
    int v = 0, h = 0;
    int l = common_prefix<BITS>(seq, qp, tp, n < m ? n : m);
    c.emit(7, l); v += l; h += l;
    for (int j = 0; j < s; j++) {
        const uint32_t op = (ops[j >> 4] >> (2 * (j & 15))) & 3u;
        if (op == 1) { c.emit(8, 1); v++; h++; }
        else if (op == 2) { c.emit(2, 1); h++; }
        else { c.emit(1, 1); v++; }
        const int room = (n - v) < (m - h) ? (n - v) : (m - h);
        l = room > 0 ? common_prefix<BITS>(seq, qp + v, tp + h, room) : 0;
        c.emit(7, l); v += l; h += l;
    }
    c.flush();
    *nout = (v == n && h == m && c.n <= cap) ? c.n : -1;
}

extern "C" __global__ void ewfa_cigar(const uint32_t* __restrict__ packed, const uint32_t* __restrict__ raw,
                           const int* __restrict__ list, int nlist,
                           const uint32_t* __restrict__ qpos, const int* __restrict__ qlen,
                           const uint32_t* __restrict__ tpos, const int* __restrict__ tlen,
                           const int* __restrict__ score, const unsigned char* __restrict__ mode,
                           const uint32_t* __restrict__ bt, int W, int stride, uint32_t* __restrict__ cigar,
                           int* __restrict__ ncig) {
    for (int it = blockIdx.x * blockDim.x + threadIdx.x; it < nlist; it += gridDim.x * blockDim.x) {
        const int s = score[it];
        if (s < 0) { ncig[it] = 0; continue; }
        const int p = list[it];
        const uint32_t* ops = bt + (unsigned long long)it * W;
        uint32_t* out = cigar + (unsigned long long)it * stride;
        if (mode[it] == 2) replay<2>(packed, qpos[p], qlen[p], tpos[p], tlen[p], s, ops, out, stride, ncig + it);
        else replay<8>(raw, qpos[p], qlen[p], tpos[p], tlen[p], s, ops, out, stride, ncig + it);
    }
}
