// myers_search.cu — approximate search: every end position j of a text where some pattern P matches a
// substring of the text ending at j with at most k edits (Sellers' semi-global edit distance,
// D[m][j] <= k), computed with Myers' bit-parallel column update (Hyyro's formulation, carries passed
// word to word for patterns longer than 32).
//
// Entry points (template instances, name expressions "search<W,SH,P>" with W the 32-bit words per pattern,
// SH = true when the block keeps its patterns' match masks in shared memory, P patterns per thread):
//   search<W,SH,P>(const uint8_t* text, const uint32_t* tile_warm, const uint32_t* tile_report,
//                  const uint32_t* tile_end, int n_tiles, const uint32_t* peq, int n_ps, int group,
//                  int k, unsigned long long* count, uint2* hits, unsigned long long cap)
//
// text     codes 0..15, one byte per base (A0 C1 G2 T3 N4, other IUPAC 5..14, 15 = padding, matching
//          nothing); 16-byte aligned; tiles start their scan at a multiple of 16.
// tiles    tile t scans [tile_warm[t], tile_end[t]) and reports end positions in
//          [tile_report[t], tile_end[t]); the warm-up tile_report - tile_warm must be >= 32*W + k - 1
//          (or reach the start of the text piece) so that every value <= k is exact.
// peq      uint32 [n_ps][W][16]: bit r of word w, entry c = pattern row 32*w + r matches text code c.
//          Patterns are aligned to the top of the last word: the 32*W - m rows below the pattern
//          match every code (a free prefix: row 32*W - m then has D = 0 everywhere, the boundary row of
//          Sellers' recurrence), so row m is bit 31 of word W-1 for every length.
// group    patterns per block (a power of two, P <= group <= P * blockDim.x); with L = group / P threads per
//          tile, thread t works on patterns blockIdx.y * group + P * (t % L) + 0 .. P - 1 and tile
//          blockIdx.x * (blockDim.x / L) + t / L. P = 2, 4 or 8 (W = 1, SH): a thread's patterns share the
//          text code, the mask address and 64- or 128-bit shared loads, and their updates interleave.
// hits     (text offset j, pattern << 10 | D) for every reported j with D <= k, appended at an atomic
//          counter; entries past cap are counted, not written (the caller runs the launch again with
//          a larger buffer).
// Hits are found without following row m column by column. One word (W = 1): every 8 columns the score is
// read off the vertical deltas, D[32][j] = popc(Pv) - popc(Mv) (row 0 is zero), and since D moves by at most
// 1 per column, the 8 columns after a checkpoint with D = a that end at D = b all hold D >= (a + b - 8) / 2:
// only when a + b <= 2k + 8 (one branch for the thread's patterns) is the stretch replayed from its saved
// state, column by column. The kernel is bound by issuing instructions (the logic and FMA pipes, each half
// rate, near their limits): this leaves a column the update's ten (myers_row0) and a share of the code and
// mask load.
// W > 1: the last row's delta bits are gathered, once per 16 columns the block's least score is bounded
// from them, and a block that may hold a value <= k is replayed from its bits.
// Launch: blockDim.x = 256 / 128 / 64 (see Python); dynamic shared memory = group * W * 16 * 4 bytes
// when SH. Limits: W <= 32 (m <= 1024), k <= 1023, n_ps < 2^22, text < 2^32 bytes per launch.

#ifdef __CUDACC_RTC__  // NVRTC (CuPy) has no C library headers
typedef unsigned int uint32_t;
typedef unsigned char uint8_t;
#else
#include <stdint.h>
#endif

// Tunable (the default measured fastest: docs/benchmarks.md)
#ifndef STRETCH  // W = 1: columns between two readings of the score (a divisor of 16; 0: as W > 1)
#define STRETCH 8
#endif

template <int W, bool SH>
__device__ __forceinline__ uint32_t eq_of(const uint32_t* __restrict__ src, int w, int c, int g, int group) {
    if (SH) return src[(w * 16 + c) * group + g];
    return __ldg(src + w * 16 + c);
}

__device__ __forceinline__ void emit(uint32_t j, int score, uint32_t report, uint32_t end, int ps,
                                     unsigned long long* count, uint2* hits, unsigned long long cap) {
    if (j >= report && j < end) {
        const unsigned long long at = atomicAdd(count, 1ull);  // (64 bits: a count past 2^32 does not wrap)
        if (at < cap) hits[at] = make_uint2(j, ((uint32_t)ps << 10) | (uint32_t)score);
    }
}

// One 32-bit word of a pattern through one text column (Myers / Hyyro): Pv, Mv the word's vertical deltas,
// eq its match mask, hp / hm the horizontal delta entering its first row (+1 / -1), replaced by the one
// leaving its last row; ph / mh: the word's horizontal deltas before the shift (bit 31: the last row's).
__device__ __forceinline__ void myers_word(uint32_t& Pv, uint32_t& Mv, uint32_t eq, uint32_t& hp, uint32_t& hm,
                                           uint32_t& ph, uint32_t& mh) {
    const uint32_t pv = Pv, mv = Mv;
    const uint32_t xv = eq | mv;
    eq |= hm;
    const uint32_t xh = (((eq & pv) + pv) ^ pv) | eq;
    ph = mv | ~(xh | pv);
    mh = pv & xh;
    const uint32_t ph2 = (ph << 1) | hp, mh2 = (mh << 1) | hm;
    Pv = mh2 | ~(xv | ph2);
    Mv = ph2 & xv;
    hp = ph >> 31;
    hm = mh >> 31;
}

// The same for one word whose first row follows the boundary row 0 (hp = hm = 0): ten operations, six of
// them logic. The shifts come before the last steps (ph << 1 = (mv << 1) | ~((xh << 1) | (pv << 1) | 1),
// mh << 1 = (xh << 1) & (pv << 1)) and, with two = 2 and one = 1 in registers the compiler cannot fold,
// they and the add run as IMAD on the FMA pipe (as constants, pv * 2 + 1 becomes LEA on the logic pipe).
__device__ __forceinline__ void myers_row0(uint32_t& Pv, uint32_t& Mv, uint32_t eq, uint32_t two, uint32_t one) {
    const uint32_t pv = Pv, mv = Mv;
    const uint32_t xh = (((eq & pv) + pv) ^ pv) | eq;
    const uint32_t xh2 = xh * two, pv2 = pv * two + one, mv2 = mv * two;
    const uint32_t ph2 = mv2 | ~(xh2 | pv2);
    Pv = (xh2 & pv2) | ~(ph2 | eq | mv);
    Mv = ph2 & (eq | mv);
}

// The code of column b (0..15, a compile-time constant) of a 16-byte block: one logic operation per column
// (bytes are codes 0..15, so the top byte needs no mask).
__device__ __forceinline__ int code_at(const uint32_t (&words)[4], int b) {
    const uint32_t w = words[b >> 2];
    if ((b & 3) == 0) return w & 15u;
    if ((b & 3) == 3) return w >> 24;
    return __byte_perm(w, 0u, 0x4440u | (b & 3));
}

// The masks of a thread's P patterns for one code (P = 2, 4, 8: adjacent in shared memory, 64- or 128-bit
// loads).
__device__ __forceinline__ void masks_of(const uint32_t* p, uint32_t (&eq)[2]) {
    const uint2 e = *reinterpret_cast<const uint2*>(p);
    eq[0] = e.x;
    eq[1] = e.y;
}
__device__ __forceinline__ void masks_of(const uint32_t* p, uint32_t (&eq)[4]) {
    const uint4 e = *reinterpret_cast<const uint4*>(p);
    eq[0] = e.x;
    eq[1] = e.y;
    eq[2] = e.z;
    eq[3] = e.w;
}
__device__ __forceinline__ void masks_of(const uint32_t* p, uint32_t (&eq)[8]) {
    const uint4 a = *reinterpret_cast<const uint4*>(p), b = *reinterpret_cast<const uint4*>(p + 4);
    eq[0] = a.x;
    eq[1] = a.y;
    eq[2] = a.z;
    eq[3] = a.w;
    eq[4] = b.x;
    eq[5] = b.y;
    eq[6] = b.z;
    eq[7] = b.w;
}
__device__ __forceinline__ void masks_of(const uint32_t* p, uint32_t (&eq)[1]) { eq[0] = *p; }

template <int W, bool SH, int P>
__global__ void search(const uint8_t* __restrict__ text, const uint32_t* __restrict__ tile_warm,
                       const uint32_t* __restrict__ tile_report, const uint32_t* __restrict__ tile_end,
                       int n_tiles, const uint32_t* __restrict__ peq, int n_ps, int group, int k,
                       unsigned long long* __restrict__ count, uint2* __restrict__ hits, unsigned long long cap) {
    static_assert(P == 1 || ((P == 2 || P == 4 || P == 8) && W == 1 && SH), "P > 1: one word, masks in shared memory");
    static_assert(STRETCH >= 0 && 16 % (STRETCH > 0 ? STRETCH : 1) == 0, "STRETCH: 0 or a divisor of 16");
    extern __shared__ __align__(16) uint32_t sh_peq[];  // 64- and 128-bit loads with P = 2, 4, 8
    const int lanes = group / P;  // threads per tile
    const int g = (threadIdx.x % lanes) * P;
    const int ps = blockIdx.y * group + g;
    const int tile = blockIdx.x * (blockDim.x / lanes) + threadIdx.x / lanes;
    if (SH) {  // the block's patterns' masks, laid out [w][c][g] so that lanes read distinct banks
        const int ps0 = blockIdx.y * group;
        for (int i = threadIdx.x; i < group * W * 16; i += blockDim.x) {
            const int gg = i % group, wc = i / group;
            sh_peq[i] = (ps0 + gg < n_ps) ? peq[(size_t)(ps0 + gg) * W * 16 + wc] : 0u;
        }
        __syncthreads();
    }
    if (tile >= n_tiles || ps >= n_ps) return;
    const uint32_t* src = SH ? sh_peq : peq + (size_t)ps * W * 16;

    uint32_t Pv[P][W], Mv[P][W];
    int score[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
        score[p] = 32 * W;  // D[32W][warm] with the start column D[i] = i
#pragma unroll
        for (int w = 0; w < W; ++w) {
            Pv[p][w] = 0xffffffffu;
            Mv[p][w] = 0u;
        }
    }
    const uint32_t report = tile_report[tile], end = tile_end[tile];
    const uint32_t stop = (end + 15u) & ~15u;
    const uint4* t4 = reinterpret_cast<const uint4*>(text);
    if constexpr (W == 1 && STRETCH > 0) {
        const uint32_t one = group > 0, two = one + one;  // 1 and 2 (group >= P): see myers_row0
        const char* row = reinterpret_cast<const char*>(SH ? src + g : src);  // the masks of code c at
        const int stride = SH ? 4 * group : 4;                               // row + c * stride bytes
        for (uint32_t base = tile_warm[tile]; base < stop; base += 16) {
            const uint4 v = t4[base >> 4];
            const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int s0 = 0; s0 < 16; s0 += STRETCH) {
                uint32_t Pv0[P], Mv0[P];  // the state before the stretch, for a replay
#pragma unroll
                for (int p = 0; p < P; ++p) {
                    Pv0[p] = Pv[p][0];
                    Mv0[p] = Mv[p][0];
                }
#pragma unroll
                for (int b = s0; b < s0 + STRETCH; ++b) {
                    const int c = code_at(words, b);
                    uint32_t eq[P];
                    masks_of(reinterpret_cast<const uint32_t*>(row + c * stride), eq);
#pragma unroll
                    for (int p = 0; p < P; ++p) myers_row0(Pv[p][0], Mv[p][0], eq[p], two, one);
                }
                int now[P], low = 1 << 30;
#pragma unroll
                for (int p = 0; p < P; ++p) {
                    now[p] = __popc(Pv[p][0]) - __popc(Mv[p][0]);
                    low = min(low, score[p] + now[p]);
                }
                if (low <= 2 * k + STRETCH) {  // one branch for the thread's patterns: rarely taken
#pragma unroll
                    for (int p = 0; p < P; ++p) {
                        if (score[p] + now[p] > 2 * k + STRETCH || ps + p >= n_ps) continue;
                        uint32_t pv = Pv0[p], mv = Mv0[p];  // a column may hold D <= k: replay
#pragma unroll 1
                        for (int b = s0; b < s0 + STRETCH; ++b) {
                            const int c = text[base + b];
                            myers_row0(pv, mv, reinterpret_cast<const uint32_t*>(row + c * stride)[p], two, one);
                            const int d = __popc(pv) - __popc(mv);
                            if (d <= k) emit(base + b, d, report, end, ps + p, count, hits, cap);
                        }
                    }
                }
#pragma unroll
                for (int p = 0; p < P; ++p) score[p] = now[p];
            }
        }
    } else {  // W > 1 (or STRETCH 0)
        for (uint32_t base = tile_warm[tile]; base < stop; base += 16) {
            const uint4 v = t4[base >> 4];
            const uint32_t words[4] = {v.x, v.y, v.z, v.w};
            uint32_t up[P], down[P];  // the last row's +1 / -1 deltas of this block, column b at bit 15 - b
#pragma unroll
            for (int p = 0; p < P; ++p) up[p] = down[p] = 0u;
#pragma unroll
            for (int b = 0; b < 16; ++b) {
                const int c = code_at(words, b);
                uint32_t hp[P], hm[P];  // horizontal delta entering the word: +1 / -1 (row 0: 0)
#pragma unroll
                for (int p = 0; p < P; ++p) hp[p] = hm[p] = 0u;
#pragma unroll
                for (int w = 0; w < W; ++w) {
                    uint32_t eq[P];
                    if (P > 1) masks_of(src + c * group + g, eq);  // (W = 1)
                    else eq[0] = eq_of<W, SH>(src, w, c, g, group);
#pragma unroll
                    for (int p = 0; p < P; ++p) {
                        uint32_t ph, mh;
                        myers_word(Pv[p][w], Mv[p][w], eq[p], hp[p], hm[p], ph, mh);
                        if (w == W - 1) {
                            up[p] = __funnelshift_l(ph, up[p], 1);
                            down[p] = __funnelshift_l(mh, down[p], 1);
                        }
                    }
                }
            }
#pragma unroll
            for (int p = 0; p < P; ++p) {
                if (score[p] - __popc(down[p]) <= k && ps + p < n_ps) {  // a column of the block may be <= k:
                    int s = score[p];                                   // replay its deltas
                    for (int b = 0; b < 16; ++b) {
                        s += (int)((up[p] >> (15 - b)) & 1u) - (int)((down[p] >> (15 - b)) & 1u);
                        if (s <= k) emit(base + b, s, report, end, ps + p, count, hits, cap);
                    }
                }
                score[p] += __popc(up[p]) - __popc(down[p]);
            }
        }
    }
}

// The seed filter (search/seeds.py): for one-word patterns of A/C/G/T, an alternative to scanning every
// column with every pattern. Each pattern-strand is cut into k + 1 pieces; an alignment with at most k edits
// leaves one piece whole, so every end position with D <= k lies in the window of a place where a piece
// occurs exactly: a piece at pattern offset o found at text offset t puts the alignment's start at
// t - o - k or later and its end before t - o + m + k.
//
// seeds<EMIT, SH>(text, sp, n_sp, n_ft, ft, piece_hi, q, offsets, entries, n_entries, cum, cap, cands): a
//   thread per filter tile, n_ft of them, over the text pieces' seed offsets [first, last) (sp: first[n_sp],
//   last[n_sp], then tile0[n_sp + 1], the pieces' first tiles), ft at a time: tile i of piece p (tile0[p] <=
//   i < tile0[p + 1]) takes the offsets t in [a, b) = [first[p] + (i - tile0[p]) * ft, min(a + ft, last[p])),
//   whose q codes from t on (all A/C/G/T) form the key of the pieces in entries[offsets[key] .. offsets[key + 1]):
//   strand << 8 | o << 3 | next, next the piece's code after its first q (4: the piece has only q).
//   EMIT false: cum[i] = the tile's candidates; true: cum = their inclusive sums, and candidate number
//   cum[i - 1] + r of tile i goes to cands[...] = (t, strand << 5 | o) if below cap. SH: the block copies
//   offsets and entries to shared memory first ((4^q + 1 + n_entries) * 4 bytes of it).
// seed_verify<SH>(text, cands, total, cap, piece_lo, piece_rep, piece_hi, n_pieces, peq, n_ps, lengths, k,
//             count, hits, hcap): per candidate (min(*total, cap) of them, in a grid-stride loop: the grid is
//   sized for the room, not for the candidates found, and each block copies the masks), the strand's Myers
//   column over text [max(piece_lo, t - o - k), min(piece_hi, t - o + m + k)) from Sellers' first column
//   (D[i] = i), every end with D <= k in [piece_rep, piece_hi) appended to hits as in search (an end found
//   from several windows comes back several times, the least D among them exact: the host keeps that one).
//   SH: the block copies the masks (n_ps * 64 bytes) to shared memory first (lanes gather the masks of 32
//   strands).
__device__ __forceinline__ const uint32_t* to_shared(const uint32_t* __restrict__ src, int n) {
    extern __shared__ __align__(16) uint32_t sh_peq[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) sh_peq[i] = src[i];
    __syncthreads();
    return sh_peq;
}

// The piece of filter tile `tile` (sp as seeds takes it) and the seed offsets [a, b) the tile takes.
__device__ __forceinline__ int tile_piece(const uint32_t* __restrict__ sp, int n_sp, int tile, int ft, uint32_t& a,
                                          uint32_t& b) {
    const uint32_t *first = sp, *last = sp + n_sp, *tile0 = sp + 2 * n_sp;
    int p = 0, up = n_sp;  // the piece: the last whose first tile is at or before this one
    while (up - p > 1) {
        const int mid = (p + up) >> 1;
        if (tile0[mid] <= (uint32_t)tile) p = mid;
        else up = mid;
    }
    a = first[p] + ((uint32_t)tile - tile0[p]) * (uint32_t)ft;
    b = min(a + (uint32_t)ft, last[p]);
    return p;
}

template <bool EMIT, bool SH>
__global__ void seeds(const uint8_t* __restrict__ text, const uint32_t* __restrict__ sp, int n_sp, int n_ft, int ft,
                      const uint32_t* __restrict__ piece_hi, int q, const uint32_t* __restrict__ offsets_g,
                      const uint32_t* __restrict__ entries_g, int n_entries, long long* __restrict__ cum,
                      unsigned long long cap, uint2* __restrict__ cands) {
    const uint32_t *offsets = offsets_g, *entries = entries_g;
    if (SH) {  // entries_g follows offsets_g in one device array: one copy
        const int n_off = (1 << (2 * q)) + 1;
        offsets = to_shared(offsets_g, n_off + n_entries);
        entries = offsets + n_off;
    }
    const int tile = blockIdx.x * blockDim.x + threadIdx.x;
    if (tile >= n_ft) return;
    uint32_t a, b;
    const uint32_t hi = piece_hi[tile_piece(sp, n_sp, tile, ft, a, b)];
    const uint32_t mask = (1u << (2 * q)) - 1u;
    uint32_t key = 0u;
    int run = 0;  // A/C/G/T codes in a row ending at x
    long long at = EMIT && tile > 0 ? cum[tile - 1] : 0;
    for (uint32_t x = a; x + 1 < b + q && x < hi; ++x) {
        const uint32_t c = text[x];
        run = c < 4u ? run + 1 : 0;
        key = ((key << 2) | (c & 3u)) & mask;
        if (run < q) continue;
        const uint32_t t = x + 1 - q, next = x + 1 < hi ? text[x + 1] : 15u;
        for (uint32_t e = offsets[key], stop = offsets[key + 1]; e < stop; ++e) {
            const uint32_t en = entries[e], want = en & 7u;
            if (want != 4u && want != next) continue;
            if (EMIT && (unsigned long long)at < cap) cands[at] = make_uint2(t, en >> 3);
            ++at;
        }
    }
    if (!EMIT) cum[tile] = at;
}

// Myers' column over text [a, b) for one one-word pattern-strand from Sellers' first column (D[i] = i), every
// end with D <= k in [rep, end) appended to hits. Its masks: eqs[c] (REG false: as given, in shared or global
// memory), or (REG) the masks of A, C, G, T from registers, selected without a branch (a warp's lanes read
// different codes), the other codes' from eqs. The score leaves m by at most one a column, so no column
// before a + m - k - 1 can hold D <= k.
template <bool REG>
__device__ __forceinline__ void verify_window(const uint8_t* __restrict__ text, uint32_t a, uint32_t b,
                                              const uint32_t* __restrict__ eqs, int m, int k, uint32_t rep,
                                              uint32_t end, uint32_t ps, unsigned long long* __restrict__ count,
                                              uint2* __restrict__ hits, unsigned long long hcap) {
    uint32_t Pv = ~0u << (32 - m), Mv = 0u;  // D[i] = i on the pattern's rows, 0 on the free rows below
    const uint4 mk = REG ? *reinterpret_cast<const uint4*>(eqs) : make_uint4(0u, 0u, 0u, 0u);
    const auto step = [&](uint32_t j) {
        const uint32_t c = text[j];
        uint32_t eq;
        if (REG) {
            const uint32_t lo = (c & 1u) ? mk.y : mk.x, hi = (c & 1u) ? mk.w : mk.z;
            eq = (c & 2u) ? hi : lo;
            if (c > 3u) eq = eqs[c];  // (N, IUPAC, PAD: rare)
        } else {
            eq = eqs[c];
        }
        myers_row0(Pv, Mv, eq, 2u, 1u);
    };
    // two loops, each as long in every lane of a warp (windows of one length): the checks do not diverge
    const uint32_t quiet = m > k + 1 ? min(b, a + (uint32_t)(m - k - 1)) : a;
    uint32_t j = a;
    for (; j < quiet; ++j) step(j);
    for (; j < b; ++j) {
        step(j);
        const int d = __popc(Pv) - __popc(Mv);
        if (d <= k) emit(j, d, rep, end, ps, count, hits, hcap);
    }
}

// The window of a piece at pattern offset o found at text offset t, within its text piece [lo, hi), verified.
template <bool REG>
__device__ __forceinline__ void verify_at(const uint8_t* __restrict__ text, uint32_t t, uint32_t ps, uint32_t o,
                                          uint32_t lo, uint32_t rep, uint32_t hi, const uint32_t* __restrict__ peq,
                                          const int* __restrict__ lengths, int k,
                                          unsigned long long* __restrict__ count, uint2* __restrict__ hits,
                                          unsigned long long hcap) {
    const int m = lengths[ps];
    const long long from = (long long)t - o - k, to = (long long)t - o + m + k;
    const uint32_t a = from > (long long)lo ? (uint32_t)from : lo;
    const uint32_t b = to < (long long)hi ? (uint32_t)to : hi;
    verify_window<REG>(text, a, b, peq + (size_t)ps * 16, m, k, rep, hi, ps, count, hits, hcap);
}

// seed_verify's work for one candidate.
__device__ __forceinline__ void verify_one(const uint8_t* __restrict__ text, uint2 cand,
                                           const uint32_t* __restrict__ piece_lo,
                                           const uint32_t* __restrict__ piece_rep,
                                           const uint32_t* __restrict__ piece_hi, int n_pieces,
                                           const uint32_t* __restrict__ peq, const int* __restrict__ lengths, int k,
                                           unsigned long long* __restrict__ count, uint2* __restrict__ hits,
                                           unsigned long long hcap) {
    const uint32_t t = cand.x;
    int lo = 0, up = n_pieces;  // the piece holding t: the last one starting at or before it
    while (up - lo > 1) {
        const int mid = (lo + up) >> 1;
        if (piece_lo[mid] <= t) lo = mid;
        else up = mid;
    }
    verify_at<false>(text, t, cand.y >> 5, cand.y & 31u, piece_lo[lo], piece_rep[lo], piece_hi[lo], peq, lengths, k,
                     count, hits, hcap);
}
template <bool SH>
__global__ void seed_verify(const uint8_t* __restrict__ text, const uint2* __restrict__ cands,
                            const long long* __restrict__ total, unsigned long long cap,
                            const uint32_t* __restrict__ piece_lo, const uint32_t* __restrict__ piece_rep,
                            const uint32_t* __restrict__ piece_hi, int n_pieces, const uint32_t* __restrict__ peq_g,
                            int n_ps, const int* __restrict__ lengths, int k, unsigned long long* __restrict__ count,
                            uint2* __restrict__ hits, unsigned long long hcap) {
    const unsigned long long found = (unsigned long long)*total, n = found < cap ? found : cap;
    if ((unsigned long long)blockIdx.x * blockDim.x >= n) return;  // (the whole block: before its barrier)
    const uint32_t* peq = SH ? to_shared(peq_g, n_ps * 16) : peq_g;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        verify_one(text, cands[i], piece_lo, piece_rep, piece_hi, n_pieces, peq, lengths, k, count, hits, hcap);
}

// seed_warps's lanes over the pieces of one key found at text offset t, each verifying its window.
__device__ __forceinline__ void verify_key(const uint8_t* __restrict__ text, uint32_t t,
                                           const uint32_t* __restrict__ off, const uint32_t* __restrict__ ent,
                                           uint32_t key, uint32_t lane, uint32_t lo,
                                           uint32_t rep, uint32_t hi, const uint32_t* __restrict__ peq,
                                           const int* __restrict__ lengths, int k,
                                           unsigned long long* __restrict__ count, uint2* __restrict__ hits,
                                           unsigned long long hcap) {
    for (uint32_t e = off[key] + lane, stop = off[key + 1]; e < stop; e += 32u) {
        const uint32_t en = ent[e];
        verify_at<true>(text, t, en >> 8, (en >> 3) & 31u, lo, rep, hi, peq, lengths, k, count, hits, hcap);
    }
}

// seed_warps(text, sp, n_sp, n_ft, ft, piece_lo, piece_rep, piece_hi, q, table, n_short, peq, lengths, k, count,
//            hits, hcap): the seed filter's dense form (many strands: hundreds of candidates per base), with no
//   candidates written. A warp per filter tile (n_ft of them, ft offsets each, sp as seeds takes it); at each
//   offset t its lanes take the pieces found there, 32 at a time, and verify each window as seed_verify does
//   (the masks of A/C/G/T from registers, peq read through L1). table: offsets [4^q + 1] then n_short entries
//   (strand << 8 | o << 3 | next, next unused here) of the pieces of q codes, keyed by them; then offsets
//   [4^(q + 1) + 1] and entries of the longer pieces, keyed by their first q + 1 codes: every entry a key
//   names is a candidate.
__global__ void seed_warps(const uint8_t* __restrict__ text, const uint32_t* __restrict__ sp, int n_sp, int n_ft,
                           int ft, const uint32_t* __restrict__ piece_lo, const uint32_t* __restrict__ piece_rep,
                           const uint32_t* __restrict__ piece_hi, int q, const uint32_t* __restrict__ table,
                           int n_short, const uint32_t* __restrict__ peq, const int* __restrict__ lengths, int k,
                           unsigned long long* __restrict__ count, uint2* __restrict__ hits, unsigned long long hcap) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (warp >= n_ft) return;  // (whole warps)
    const uint32_t lane = threadIdx.x & 31u;
    uint32_t a, b;
    const int p = tile_piece(sp, n_sp, (int)warp, ft, a, b);
    const uint32_t lo = piece_lo[p], rep = piece_rep[p], hi = piece_hi[p];
    const uint32_t* off_s = table;  // the pieces of q codes
    const uint32_t* ent_s = off_s + (1u << (2 * q)) + 1;
    const uint32_t* off_l = ent_s + n_short;  // the longer ones, by their first q + 1
    const uint32_t* ent_l = off_l + (1u << (2 * q + 2)) + 1;
    const uint32_t mask = (1u << (2 * q + 2)) - 1u;
    uint32_t key = 0u;  // the last q + 1 codes
    int run = 0;        // A/C/G/T codes in a row ending at x
    for (uint32_t x = a; x < b + q; ++x) {
        const uint32_t c = x < hi ? text[x] : 15u;
        const int before = run;  // (ending at x - 1)
        run = c < 4u ? run + 1 : 0;
        key = ((key << 2) | (c & 3u)) & mask;
        if (x < a + q) continue;
        const uint32_t t = x - q;  // q codes from t end at x - 1, q + 1 at x
        if (before >= q)
            verify_key(text, t, off_s, ent_s, key >> 2, lane, lo, rep, hi, peq, lengths, k, count, hits, hcap);
        if (run > q)
            verify_key(text, t, off_l, ent_l, key, lane, lo, rep, hi, peq, lengths, k, count, hits, hcap);
    }
}

#define SEEDS_INSTANCE(EMIT, SH) template __global__ void seeds<EMIT, SH>(const uint8_t*, const uint32_t*, int, int, int, const uint32_t*, int, const uint32_t*, const uint32_t*, int, long long*, unsigned long long, uint2*);
SEEDS_INSTANCE(false, false) SEEDS_INSTANCE(true, false) SEEDS_INSTANCE(false, true) SEEDS_INSTANCE(true, true)
#define VERIFY_INSTANCE(SH) template __global__ void seed_verify<SH>(const uint8_t*, const uint2*, const long long*, unsigned long long, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, const int*, int, unsigned long long*, uint2*, unsigned long long);
VERIFY_INSTANCE(false) VERIFY_INSTANCE(true)

// Instances: masks in shared memory up to 8 words, read through L1 beyond (larger W pad the pattern
// with free rows); one word also two, four and eight patterns per thread. gpualign/search/gpu.py lists
// the same.
template __global__ void search<1, true, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<1, true, 2>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<1, true, 4>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<1, true, 8>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<2, true, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<3, true, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<4, true, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<5, true, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<6, true, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<8, true, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<12, false, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<16, false, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<24, false, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
template __global__ void search<32, false, 1>(const uint8_t*, const uint32_t*, const uint32_t*, const uint32_t*, int, const uint32_t*, int, int, int, unsigned long long*, uint2*, unsigned long long);
