// wfa_affine.cu -- gap-affine wavefront alignment (WFA) of pairs of any length, one block per pair.
//
// Entry points (template instances, listed in gpualign/engines/gpu_affine.py):
//
//   wfa_affine<BT, EF, SMEM>(raw, list, nlist, qpos, qlen, tpos, tlen, fbeg, fend, fbmax, x, o, e,
//                            s_cap, ucap, kcap, ring, bt, slot_bt, score, kend, counter)
//     raw      uint32*  the batch's compare bytes (see common.cuh; byte compare only)
//     list     int32*   pair ids in the order blocks take them (longest first balances the load)
//     qpos/tpos uint32* byte offset of each pair's query/target; qlen/tlen int32*
//     x, o, e  penalties (mismatch, gap open, gap extend; a gap of length l costs o + l*e), already
//              divided by their common divisor: the score comes back in those units
//     s_cap    largest score tried; a pair whose score exceeds it gets score -1 ("exceeded")
//     ucap     per pair id, a smaller cap U (nullptr: s_cap for all): beyond it the pair is exceeded, and
//              cells that cannot end within U are pruned (the "diamond": |k - kend| <= (U - s) / e),
//              so a cap near the score roughly halves the cells
//     kcap     widest diagonal kept: kb(s) = min((s - o) / e, kcap) for s >= o + e, else 0
//              (a diagonal |k| costs at least o + |k| e, so |k| <= kb(s) holds every cell of score s;
//              a cell must also end within the cap, so kcap may be about half of (s_cap - o) / e: Plan)
//     fbeg/fend EF only (ends-free): per pair, the most target bases skipped free at the start / end;
//              fbmax >= every fbeg (rows are that much wider); nullptr and 0 end to end
//     ring     per resident block (RM + 2 RI) * (2 kcap + 3 + fbmax) wavefront cells, RM = max(x, o+e) + 1,
//              RI = e + 1: SMEM, int16 cells in dynamic shared memory (pairs up to 32,767 bases;
//              ring unused), else int32 cells in device memory
//     bt       BT only: per list entry slot_bt bytes, the backtrace rows of 4-bit cells (score s's row:
//              2 kb(s) + 1 + fbmax cells rounded up to even, from cell rowbase[s] = the rows before it)
//     score    out, per list entry (reduced units), -1 beyond s_cap
//     kend     out, per list entry: the diagonal the alignment ends on (m - n end to end)
//     counter  int32 work queue head, 0 at launch
//     Launch: any block size (multiple of 32), any grid (blocks take pairs from the queue).
//
//   wfa_affine_cigar(raw, list, nlist, qpos, qlen, tpos, tlen, fbeg, fend, fbmax, x, o, e, kcap, rowbase,
//                    bt, slot_bt, tok, tok_cap, cigar, cig_cap, score, kend, ncig, tspan)
//     One thread per list entry: walks the backtrace (path tokens in tok, tok_cap bytes per entry)
//     and writes the CIGAR at cigar + i * cig_cap (BAM codes, len << 4 | op; SAM orientation:
//     I = query-only, D = target-only); ncig[i] = ops written, -1 when the replay does not end at
//     (qlen, tlen) or a buffer was too small (never expected: reported as a failure); tspan (EF):
//     the aligned target span [tspan[2i], tspan[2i+1]).
//
// Method (Marco-Sola et al. 2021): for each score s and diagonal k = h - v (h: target offset,
// v: query offset) the furthest offset reached in each state:
//   D[s][k] = max(M[s-o-e][k-1], D[s-e][k-1]) + 1          (target-only gap)
//   I[s][k] = max(M[s-o-e][k+1], I[s-e][k+1])              (query-only gap)
//   M[s][k] = max(M[s-x][k] + 1, I[s][k], D[s][k]), then extended along matches,
// each candidate kept only inside the matrix (h <= tlen, v <= qlen). Each thread takes two adjacent
// diagonals per pass (one backtrace byte: no shuffle, half the loop and address work per cell), its
// seven ring cells addressed once per score and advanced each pass in shared memory (Cell), one
// barrier per score; a score's rows and bounds are made once a block, by the last thread during the
// score before (Step). The backtrace keeps, per cell, which candidate won (4 bits: bits 0-1 M's source
// X/I/D, bit 2 I extended, bit 3 D extended); a second kernel walks it back into path tokens and
// replays them forward, re-deriving the matches by extend.
#include "common.cuh"

#define NUL (-0x40000000)

__device__ __forceinline__ int kbound(int s, int o, int e, int kcap) {
    if (s < o + e) return 0;
    const int k = (s - o) / e;
    return k < kcap ? k : kcap;
}

// Backtrace cells are 4 bits, two per byte: cell i in the low (even i) or high (odd i) half of byte
// i / 2. Rows start at even cells.
__device__ __forceinline__ unsigned bt_cell(const unsigned char* bt, long long i) {
    return (bt[i >> 1] >> ((i & 1) << 2)) & 15u;
}

// Write the cells of a row from a warp: lane pairs (2j, 2j+1) hold cells (2j, 2j+1) of the same byte
// (the loop aligns each warp's first cell to an even index); the even lane stores the byte.
__device__ __forceinline__ void bt_store(unsigned char* bt, long long i, unsigned cell, bool store) {
    const unsigned next = __shfl_down_sync(0xffffffffu, cell, 1);
    if (store && !(i & 1)) bt[i >> 1] = (unsigned char)(cell | (next << 4));
}

// Extend-replay tokens (one byte each, written backwards by the walk).
enum { TOK_EXTEND = 0, TOK_X = 1, TOK_D = 2, TOK_I = 3 };

// Walk the backtrace of the pair that ended at (s, kend) and write its CIGAR; returns the op count,
// or -1 (walk or replay inconsistent, buffers too small). Ends-free (ef): the walk may end on any
// start diagonal k0 in [0, fbeg] (the target bases before k0 are skipped for free) and the path
// ends where the query does, at least m - fend target bases in; *t0 / *t1 get the target span.
__device__ int backtrace_cigar(const uint32_t* __restrict__ raw, uint32_t qp, int n, uint32_t tp, int m,
                               int s, int kend, bool ef, int fbeg, int fend, int x, int o, int e, int kcap,
                               int fbmax, const long long* __restrict__ rowbase, const unsigned char* bt,
                               unsigned char* tok, int tok_cap, uint32_t* __restrict__ out, int cap,
                               int* t0, int* t1) {
    int k = kend, comp = 0, nt = 0;
    for (;;) {
        if (nt + 2 > tok_cap || s < 0) return -1;
        if (comp == 0) {
            tok[nt++] = TOK_EXTEND;
            if (s == 0) {
                if (ef ? (k < 0 || k > fbeg) : k != 0) return -1;
                break;
            }
            const int src = bt_cell(bt, rowbase[s] + kbound(s, o, e, kcap) + k) & 3;
            if (src == 0) { tok[nt++] = TOK_X; s -= x; }
            else if (src == 3) return -1;
            else comp = src;  // 1: I, 2: D (same cell)
        } else {
            const unsigned b = bt_cell(bt, rowbase[s] + kbound(s, o, e, kcap) + k);
            const bool ext = comp == 1 ? (b >> 2) & 1 : (b >> 3) & 1;
            tok[nt++] = comp == 1 ? TOK_I : TOK_D;
            k += comp == 1 ? 1 : -1;
            if (ext) s -= e;
            else { s -= o + e; comp = 0; }
        }
    }
    CigarOut c{out, 0, -1, 0, cap};
    int v = 0, h = k;  // k: the start diagonal (0 end to end)
    *t0 = h;
    for (int j = nt - 1; j >= 0; j--) {
        const int t = tok[j];
        if (t == TOK_EXTEND) {
            const int room = (n - v) < (m - h) ? (n - v) : (m - h);
            const int l = room > 0 ? common_prefix_bytes8(raw, qp + v, tp + h, room) : 0;
            c.emit(7, l); v += l; h += l;
        } else if (t == TOK_X) { c.emit(8, 1); v++; h++; }
        else if (t == TOK_D) { c.emit(2, 1); h++; }
        else { c.emit(1, 1); v++; }
    }
    c.flush();
    *t1 = h;
    const bool end_ok = ef ? (h >= m - fend && h <= m && h - v == kend) : h == m;
    return (v == n && end_ok && c.n <= cap) ? c.n : -1;
}

// Rings in shared memory hold int16 cells (pairs up to 32,767 bases: half the memory per block);
// rings in device memory (longer pairs, or too wide for shared memory) hold int32 cells.
template <bool SMEM> struct Ring { typedef int T; static constexpr int NUL_CELL = NUL; };
template <> struct Ring<true> { typedef short T; static constexpr int NUL_CELL = -32768; };

// One cell of a ring row and its neighbours (Cell<SMEM>::at(row, k)): ld<D>() / st<D>(v) read / write
// diagonal k + D. In shared memory the cell is a 32-bit shared address and D an immediate offset, and
// advance(dk) moves it dk diagonals on (one add per row and thread per pass; the compiler otherwise
// re-derives the shared window's base per access); in device memory a pointer.
template <int V> struct Int { static constexpr int value = V; };
template <bool SMEM> struct Cell {
    int* p;
    __device__ __forceinline__ static Cell at(int* row, int k) { return Cell{row + k}; }
    template <int D> __device__ __forceinline__ int ld() const { return p[D]; }
    template <int D> __device__ __forceinline__ void st(int v) const { p[D] = v; }
};
template <> struct Cell<true> {
    unsigned a;
    __device__ __forceinline__ static Cell at(unsigned row, int k) { return Cell{row + 2u * (unsigned)k}; }
    template <int D> __device__ __forceinline__ int ld() const {
#ifdef __CUDA_ARCH__
        int v;
        asm volatile("ld.shared.s16 %0, [%1+%2];" : "=r"(v) : "r"(a), "n"(2 * D));
        return v;
#else  // compiled for the CPU by the tests (tests/emu)
        return emu_lds16(a + 2 * D);
#endif
    }
    template <int D> __device__ __forceinline__ void st(int v) const {
#ifdef __CUDA_ARCH__
        asm volatile("st.shared.b16 [%0+%1], %2;" ::"r"(a), "n"(2 * D), "h"((short)v) : "memory");
#else
        emu_sts16(a + 2 * D, v);
#endif
    }
    __device__ __forceinline__ void advance(int dk) { a += 2u * (unsigned)dk; }
};

// What every thread of a block needs of score s's step, made by one thread (StepPlan) the step before and
// read from shared memory by all: rows are cell offsets from M's row 0 (Mr); [plo, phi]: live (able to end
// within the cap), [clo, chi]: set NUL where not live; klo: the first cell of the block's first backtrace
// byte, at byte btb of the row's bytes. (affine_plan.BLOCK_SMEM counts sh_step.)
struct alignas(16) Step {
    int plo, phi, clo, chi, klo, mx, mg, ie, de, mo, io, dn;
    long long btb;
};

// The running state behind Step, one step after another (one thread's): s, the rows' ring indices, the
// widest diagonal kb and the diamond's half-width (U - s) / e with their remainders, the backtrace row's
// start. Score s's cells: [lo, hi] reachable inside the matrix, [plo, phi] also able to end within U (the
// diamond); cells up to `clear` outside the diamond (inside [lo, hi]) are set NUL, as the row's previous
// use (score s - RM or s - RI) may have computed them.
struct StepPlan {
    int s, rm, ri, q, qr, kb, r, rr;  // s % RM, s % RI, (s - o) / e and its remainder, (U - s) / e and its
    long long rb;                     // start of score s's backtrace row (rowbase[s] in gpu_affine.py)
    __device__ StepPlan(int U, int e) : s(0), rm(0), ri(0), q(0), qr(0), kb(0), r(U / e), rr(U % e), rb(0) {}
    __device__ void next(Step& st, int x, int o, int e, int kcap, int fbmax, int RM, int RI, int W, int n, int m,
                         int fb, int ke_lo, int ke_hi, int clear) {
        const int oe = o + e;
        s++;
        rb += (2 * kb + 2 + fbmax) & ~1;  // row widths rounded up to whole bytes
        if (++rm == RM) rm = 0;
        if (++ri == RI) ri = 0;
        if (rr == 0) { rr = e - 1; r--; } else rr--;
        if (s == oe) { q = 1; qr = 0; }
        else if (s > oe && ++qr == e) { qr = 0; q++; }
        kb = q < kcap ? q : kcap;
        const int lo = -kb > -n ? -kb : -n, hi = kb + fb < m ? kb + fb : m;
        st.plo = lo > ke_lo - r ? lo : ke_lo - r;
        st.phi = hi < ke_hi + r ? hi : ke_hi + r;
        st.clo = lo > st.plo - clear ? lo : st.plo - clear;
        st.chi = hi < st.phi + clear ? hi : st.phi + clear;
        int rx = rm - x, rg = rm - oe, re = ri - e;
        if (rx < 0) rx += RM;
        if (rg < 0) rg += RM;
        if (re < 0) re += RI;
        st.mx = rx * W, st.mg = rg * W, st.ie = (RM + re) * W, st.de = (RM + RI + re) * W;
        st.mo = rm * W, st.io = (RM + ri) * W, st.dn = (RM + RI + ri) * W;
        // each thread takes the cells k, k + 1 of one backtrace byte: rows start at even cells, so the
        // first k has rb + kb + k even
        st.klo = st.clo - (int)((rb + kb + st.clo) & 1);
        st.btb = (rb + kb + st.klo) >> 1;
    }
};

// Register cap: blocks of up to 1024 threads, at least WFA_AFFINE_MIN_BLOCKS of them per SM.
#ifndef WFA_AFFINE_MIN_BLOCKS
#define WFA_AFFINE_MIN_BLOCKS 1
#endif

template <bool BT, bool EF, bool SMEM>
__global__ void __launch_bounds__(1024, WFA_AFFINE_MIN_BLOCKS) wfa_affine(const uint32_t* __restrict__ raw, const int* __restrict__ list, int nlist,
                           const uint32_t* __restrict__ qpos, const int* __restrict__ qlen,
                           const uint32_t* __restrict__ tpos, const int* __restrict__ tlen,
                           const int* __restrict__ fbeg, const int* __restrict__ fend, int fbmax,
                           int x, int o, int e, int s_cap, const int* __restrict__ ucap, int kcap,
                           int* ring_g, unsigned char* bt_g, long long slot_bt,
                           int* __restrict__ score, int* __restrict__ kend, int* __restrict__ counter) {
    typedef typename Ring<SMEM>::T T;
    constexpr int NL = Ring<SMEM>::NUL_CELL;
    constexpr int NONE = 0x7fffffff;
    extern __shared__ short smem[];
    // sh_end[s % 2]: the least diagonal a cell of score s ends on (ends-free), NONE while none does. Two, because
    // a warp past score s's barrier may find score s + 1's end before a slower warp has read score s's
    BLOCK_SHARED int sh_it, sh_end[2];
    BLOCK_SHARED Step sh_step[2];  // score s's in sh_step[s % 2]
    const int W = 2 * kcap + 3 + fbmax;  // diagonals -kcap-1 .. kcap+1+fbmax: the outer two stay NUL
    const int oe = o + e;
    const int RM = (x > oe ? x : oe) + 1, RI = e + 1;
    const int ring_words = (RM + 2 * RI) * W;
    T* ring;
    if constexpr (SMEM) ring = smem;  // a __shared__ pointer: 32-bit shared-memory addressing
    else ring = ring_g + (long long)blockIdx.x * ring_words;
    T* const Mr = ring + kcap + 1;  // M's row r, diagonal k: Mr[r * W + k]; I's rows from row RM, D's from RM + RI
    // SMEM: the shared address of this thread's first cell of a pass in M's row 0, with klo = 0
    unsigned mr_t = 0;
    if constexpr (SMEM) mr_t = (unsigned)__cvta_generic_to_shared(Mr) + 4u * threadIdx.x;

    for (;;) {
        if (threadIdx.x == 0) { sh_it = atomicAdd(counter, 1); sh_end[0] = sh_end[1] = NONE; }
        // Every ring cell starts NUL. A row is rewritten over a range that contains the range of
        // its previous use (wavefronts only widen), so a read anywhere in the row gives the cell's
        // value or NUL: no bounds checks in the loop below.
        for (int j = threadIdx.x; j < ring_words; j += blockDim.x) ring[j] = (T)NL;
        __syncthreads();
        const int it = sh_it;
        if (it >= nlist) break;
        const int p = list[it];
        const int n = qlen[p], m = tlen[p];
        const uint32_t qp = qpos[p], tp = tpos[p];
        // ends-free: start diagonals 0..fb (v = 0, h = k), end anywhere v = n with h >= m - fe
        const int fb = EF ? (fbeg[p] < m ? fbeg[p] : m) : 0;
        const int fe = EF ? fend[p] : 0;
        // this pair's score cap and the diagonals it may end on: a cell of score s on diagonal k
        // needs at least e |k - kend| more, so only |k - kend| <= (U - s) / e can end within U
        const int U = ucap != nullptr && ucap[p] < s_cap ? ucap[p] : s_cap;
        const int ke_hi = m - n, ke_lo = EF ? m - n - fe : m - n;
        const int clear = (RM + e - 1) / e;  // a ring row's previous use reached at most this much wider
        unsigned char* bt = BT ? bt_g + (long long)it * slot_bt : nullptr;
        for (int k0 = 0; k0 <= fb; k0 += blockDim.x) {  // uniform trip count: whole warps shuffle
            const int k = k0 + (int)threadIdx.x;
            // start cells that cannot end within U stay NUL (the diamond below, at s = 0)
            if (k <= fb && k >= ke_lo - U / e && k <= ke_hi + U / e) {
                const int room = n < m - k ? n : m - k;
                const int h = k + common_prefix_bytes8(raw, qp, tp + k, room);
                Mr[k] = (T)h;
                if (h - k == n && h >= m - fe) atomicMin(&sh_end[0], k);
            }
            if (BT) bt_store(bt, k, 3u, k <= fb);
        }
        // the next step's Step, made while this one runs by the block's last thread: its warp has the fewest
        // cells of a step (a pass's cells go to the threads in order, and a step's last pass is part full)
        const bool planner = threadIdx.x == blockDim.x - 1;
        StepPlan plan(U, e);
        if (planner) plan.next(sh_step[1], x, o, e, kcap, fbmax, RM, RI, W, n, m, fb, ke_lo, ke_hi, clear);
        __syncthreads();
        int final_s = sh_end[0] != NONE ? 0 : -1, s = 0;
        while (final_s < 0 && s < U) {
            s++;
            const Step st = sh_step[s & 1];
            if (planner && s < U)
                plan.next(sh_step[(s + 1) & 1], x, o, e, kcap, fbmax, RM, RI, W, n, m, fb, ke_lo, ke_hi, clear);
            const int plo = st.plo, phi = st.phi, clo = st.clo, chi = st.chi;
            T* const Mo = Mr + st.mo;
            // one cell (k0 + D): computed where live, set NUL in the clear margin, else left alone;
            // returns its backtrace code (0 where not live). hmax = min(m, n + k): a candidate h is inside
            // the matrix iff 0 <= h <= hmax (D keeps v, I keeps h, X moves both): one unsigned compare each
            auto one = [&](auto Dc, int k0, const Cell<SMEM>& cx, const Cell<SMEM>& cg, const Cell<SMEM>& cie,
                           const Cell<SMEM>& cde, const Cell<SMEM>& cmo, const Cell<SMEM>& cio,
                           const Cell<SMEM>& cdo) -> unsigned {
                constexpr int D = decltype(Dc)::value;
                const int k = k0 + D;
                if (k >= plo && k <= phi) {
                    const int hmax = m < n + k ? m : n + k;
                    // target-only gap, from diagonal k - 1 (h + 1)
                    const int dm = cg.template ld<D - 1>(), dd = cde.template ld<D - 1>();
                    const int dext = dd > dm;
                    int d = (dext ? dd : dm) + 1;
                    if ((unsigned)d > (unsigned)hmax) d = NL;
                    // query-only gap, from diagonal k + 1 (v + 1)
                    const int im = cg.template ld<D + 1>(), ii = cie.template ld<D + 1>();
                    const int iext = ii > im;
                    int i = iext ? ii : im;
                    if ((unsigned)i > (unsigned)hmax) i = NL;
                    // mismatch, same diagonal
                    int mm = cx.template ld<D>() + 1, msrc = 0;
                    if ((unsigned)mm > (unsigned)hmax) { mm = NL; msrc = 3; }
                    if (i > mm) { mm = i; msrc = 1; }
                    if (d > mm) { mm = d; msrc = 2; }
                    // extend along matches, the first window's compare without a branch (a NUL cell reads
                    // at its diagonal's start, inside the pair, with no room: it stays NUL)
                    const int room = mm >= 0 ? hmax - mm : 0, hq = mm >= 0 ? mm : (k > 0 ? k : 0);
                    const uint32_t diff = window8(raw, qp - k + hq) ^ window8(raw, tp + hq);
                    int l = __clz(__brev(diff)) >> 3;  // 4 where the window matches
                    if (!diff && room > 4) l = 4 + common_prefix_bytes8(raw, qp - k + hq + 4, tp + hq + 4, room - 4);
                    mm += l < room ? l : room;
                    if (EF && mm == n + k && mm >= m - fe) atomicMin(&sh_end[s & 1], k);
                    cmo.template st<D>(mm); cio.template st<D>(i); cdo.template st<D>(d);
                    return (unsigned)(msrc | (iext << 2) | (dext << 3));
                }
                if (k >= clo && k <= chi) { cmo.template st<D>(NL); cio.template st<D>(NL); cdo.template st<D>(NL); }
                return 0u;
            };
            // each thread takes the cells k, k + 1 of one backtrace byte and stores that byte where one of
            // them may be live
            const int klo = st.klo;
            unsigned char* btp = BT ? bt + st.btb + threadIdx.x : nullptr;
            // the seven cells: in shared memory made once a step from the rows' offsets (one add each) and
            // advanced with k; device-memory rows are addressed again each pass (seven 64-bit pointers held
            // across the loop spill)
            const int k0 = klo + 2 * (int)threadIdx.x, dk = 2 * (int)blockDim.x;
            typedef Cell<SMEM> C;
            C cx, cg, cie, cde, cmo, cio, cdo;
            T *const Mx = Mr + st.mx, *const Mg = Mr + st.mg, *const Ie = Mr + st.ie, *const De = Mr + st.de;
            T *const Io = Mr + st.io, *const Do = Mr + st.dn;
            auto place = [&](int k) {  // device memory: the cells of diagonal k
                if constexpr (!SMEM) {
                    cx = C::at(Mx, k), cg = C::at(Mg, k), cie = C::at(Ie, k), cde = C::at(De, k);
                    cmo = C::at(Mo, k), cio = C::at(Io, k), cdo = C::at(Do, k);
                }
            };
            if constexpr (SMEM) {
                const unsigned b = mr_t + 2u * (unsigned)klo;
                cx = C{b + 2u * st.mx}, cg = C{b + 2u * st.mg}, cie = C{b + 2u * st.ie}, cde = C{b + 2u * st.de};
                cmo = C{b + 2u * st.mo}, cio = C{b + 2u * st.io}, cdo = C{b + 2u * st.dn};
            }
            for (int k = k0; k <= chi; k += dk) {
                place(k);
                const unsigned c0 = one(Int<0>(), k, cx, cg, cie, cde, cmo, cio, cdo);
                const unsigned c1 = one(Int<1>(), k, cx, cg, cie, cde, cmo, cio, cdo);
                if (BT && k >= plo - 1 && k <= phi) *btp = (unsigned char)(c0 | (c1 << 4));
                if (BT) btp += blockDim.x;
                if constexpr (SMEM) {
                    cx.advance(dk), cg.advance(dk), cie.advance(dk), cde.advance(dk);
                    cmo.advance(dk), cio.advance(dk), cdo.advance(dk);
                }
            }
            __syncthreads();
            // every thread reads the same cell or flag: the loop condition stays uniform
            if (EF ? sh_end[s & 1] != NONE : Mo[m - n] == m) final_s = s;
        }
        if (threadIdx.x == 0) {
            score[it] = final_s;
            kend[it] = EF ? sh_end[final_s & 1] : m - n;
        }
        __syncthreads();  // the rows, sh_it and sh_end are reused by the next pair
    }
}

// One thread per list entry with a score: the backtrace walk and CIGAR (see backtrace_cigar);
// tspan (ends-free only, else nullptr): the aligned target span [tspan[2i], tspan[2i+1]).
extern "C" __global__ void wfa_affine_cigar(const uint32_t* __restrict__ raw, const int* __restrict__ list, int nlist,
                                            const uint32_t* __restrict__ qpos, const int* __restrict__ qlen,
                                            const uint32_t* __restrict__ tpos, const int* __restrict__ tlen,
                                            const int* __restrict__ fbeg, const int* __restrict__ fend, int fbmax,
                                            int x, int o, int e, int kcap, const long long* __restrict__ rowbase,
                                            const unsigned char* __restrict__ bt_g, long long slot_bt,
                                            unsigned char* __restrict__ tok_g, int tok_cap,
                                            uint32_t* __restrict__ cigar, int cig_cap,
                                            const int* __restrict__ score, const int* __restrict__ kend,
                                            int* __restrict__ ncig, int* __restrict__ tspan) {
    for (int it = blockIdx.x * blockDim.x + threadIdx.x; it < nlist; it += gridDim.x * blockDim.x) {
        const int s = score[it];
        if (s < 0) { ncig[it] = 0; continue; }
        const int p = list[it];
        const bool ef = fbeg != nullptr;
        int t0, t1;
        ncig[it] = backtrace_cigar(raw, qpos[p], qlen[p], tpos[p], tlen[p], s, kend[it], ef, ef ? fbeg[p] : 0,
                                   ef ? fend[p] : 0, x, o, e, kcap, fbmax, rowbase,
                                   bt_g + (long long)it * slot_bt, tok_g + (long long)it * tok_cap, tok_cap,
                                   cigar + (long long)it * cig_cap, cig_cap, &t0, &t1);
        if (tspan) { tspan[2 * it] = t0; tspan[2 * it + 1] = t1; }
    }
}

#define WFA_AFFINE(B, F, S) template __global__ void __launch_bounds__(1024, WFA_AFFINE_MIN_BLOCKS) wfa_affine<B, F, S>(const uint32_t*, const int*, int, \
    const uint32_t*, const int*, const uint32_t*, const int*, const int*, const int*, int, int, int, int, int, \
    const int*, int, int*, unsigned char*, long long, int*, int*, int*);
WFA_AFFINE(true, false, true) WFA_AFFINE(false, false, true) WFA_AFFINE(true, true, true)
WFA_AFFINE(false, true, true) WFA_AFFINE(true, false, false) WFA_AFFINE(false, false, false)
WFA_AFFINE(true, true, false) WFA_AFFINE(false, true, false)
