// bp_long.cu -- exact edit distance between two very long strings by banded bit-parallel dynamic
// programming (Myers 1999 / Hyyro's multi-word form, as edlib uses on the CPU), run in strips on the GPU.
// Distance only. tests/bp_model.py is a plain-Python transcription of the same bookkeeping (without the
// pruning: tests/test_bp_long_emu.py runs the kernel itself on the CPU).
// The alignment path (gpualign/hirschberg.py, engines/gpu_long.BpSplitter) splits a level of pieces with
// three more entry points (after bp_long): bp_piece_codes writes every half's acode/bcode, bp_long_jobs
// runs every half (bp_long's strips, one ticket for all), bp_split_min turns their last columns into
// Hirschberg split rows.
//
// Entry point:
//   bp_long(acode, bcode, n, m, sigma, klo, khi, nstrips, nslots, slot_words, ring_shift, stream, tops, ticket,
//           result, col_out, cells, deal)
//     acode   uint8*  row symbols: acode[i-1] = code of A[i] (i = 1..n), padded with sigma to
//                     nstrips * 1024 entries
//     bcode   uint16* column symbols as byte offsets into a warp's match masks: bcode[BPAD + j - 1] =
//                     128 * code of B[j] (j = 1..m), padded with 128 * sigma: BPAD entries before,
//                     BPAD + 128 after
//     sigma   int     codes 0..sigma-1 are symbols present in both strings (equal codes match); sigma
//                     matches nothing (any other character, --n-mismatch wildcards); sigma <= 31
//     klo,khi int     the band: diagonals k = i - j with klo <= k <= khi are computed (see below)
//     nstrips int     ceil(n / 1024), or fewer with col_out (strips whose rows meet the band by column m)
//     nslots  int     the number of warps launched + 1
//     slot_words int  words per slot: 1 + the ring's words (see Slots)
//     ring_shift int  a slot's ring holds 1 << ring_shift words (16 columns each) and a strip waits for
//                     its reader before it overwrites one it reads; 31: the ring holds the whole strip (slot_words
//                     >= ceil((1024 + khi - klo) / 16) + 4) and nothing waits
//     stream  uint64* nslots * slot_words zeroed words; tops: 2 * nslots zeroed uint64
//     ticket  int*    one zeroed word (strips are taken in order from it)
//     result  int*    D[n][m] when the kernel ends (when row n lies in the last strip): a value >= it, the
//                     distance when that is <= U; INT_MAX when the last strip stopped (the distance is > U)
//     col_out int*    nullptr, or n + 1 entries: every strip that reaches column m writes D[i][m] of its
//                     rows i <= n there (the host meets two halves of a long problem in the middle): values
//                     >= D[i][m], equal on every optimal path of cost <= U; a stopped strip writes none
//     cells   uint64* nullptr, or one zeroed word: the DP cells the strips computed are added to it (columns
//                     to the end or the stop x 1024 rows a strip)
//     deal    int     0: each warp takes its next strip from ticket (any number of warps, resident or not); or
//                     the GPU's SMs: strip s goes to warp s mod W of the launch's W, numbered so that consecutive
//                     strips fall on consecutive blocks (one an SM while there are more SMs than blocks, as the
//                     hardware usually places a launch's blocks), then on each block's warps (one a scheduler),
//                     then on the SMs' next blocks: the few strips in flight of a narrow band are spread over the
//                     schedulers instead of piling onto some (a chain of strips runs at its slowest strip's pace).
//                     Every block must be resident at once (a strip waits on the warp before it); ticket then
//                     counts strips.
//     Launch: any number of warps (blocks of a multiple of 32 threads), dynamic shared memory
//     (sigma + 1) * 128 bytes per warp.
//
// Method: DP columns j = 1..m, rows i = 1..n, D[i][j] = edit distance of A[1..i] and B[1..j]. Each lane
// keeps the vertical deltas of 32 rows (Pv/Mv bit vectors) and advances them one column per step;
// a block's update takes the horizontal delta just above it (hin) and gives the one at its last row
// (hout) to the lane below. A strip is 32 lanes = 1024 rows, one warp, skewed: lane l works on
// column cs + x - l at step x, so hout passes down by two shuffles per step (its +1 and -1 words, read at
// bit 31: no shifts or masks to pack them). The strip's last lane
// streams its horizontal deltas (2 bits per column) into a slot that the strip below reads: word c
// (the strip's columns 16c .. 16c + 15) is (2 (producer strip + 1) + lap) << 32 | M bits << 16 | P
// bits, at ring entry c mod R, lap = (c / R) & 1; so a reader needs no fence, only a word whose tag is
// the one it expects (zeroed memory, an older strip's word or the last lap's never is).
// Each lane follows the score of its last row from the deltas it streams (popcounts per 32 steps);
// row n's score comes from its lane's last row less the vertical deltas below n.
// Band: given U >= the distance, a path through diagonal k costs at least |k| + |k - (n - m)|, so
// only klo = ceil((n - m - U) / 2) <= k <= khi = floor((n - m + U) / 2) can hold an optimal path
// (the host passes that band). A strip computes the columns where its rows meet the band. Outside
// the band values are those of real paths (a strip starts from "all vertical" deltas under the
// score handed down from the strip above, and takes hin = +1 once the strip above has ended), so
// every computed value is >= the true one and the result equals the distance whenever it is <= U;
// the host checks that and widens the band otherwise. Within the band a strip starts where the strip
// above hands its start down and may stop before its band ends (bp_strip: the cells that no path of
// cost <= U passes), with the same guarantee.
// Slots: strips are done with their slots in order (a strip's last column comes after its upper
// neighbour's, and a strip stops only after the strip above has stopped or ended), so when a warp
// takes strip s, strip s - (warps) is done and slot s % nslots is free again. Slot word 0
// is the reader's progress, (reader strip) << 32 | words it is done with, published once per 32 steps;
// the ring (R = 1 << ring_shift words) follows. A writer R words ahead of its reader waits (a reader
// not yet started has read nothing; one whose start is handed down reads from there: before that the
// writer writes less than a ring's words, then hands the start down). No strip waits
// forever when R >= 128 and R * (warps resident) >= a strip's words: a chain of waiting writers ends at
// the oldest strip in flight, R words per strip ahead of the newest, so it has written its whole stream
// and ends, and its warp takes the next strip; and a reader's first group never waits on a writer stopped
// at R (the writer waits on nothing before it hands the start down, and then at most a few words past
// it). Warps of the launch that are not resident hold no strip. The host keeps R * w >= 4 * words with w = the
// warps of one block per SM (resident once the launch runs alone: the other half's launch ends without
// it): ring memory ~ warps * R * 8 bytes, not warps * band / 2 (4.98 GB for 48 Mbp at 8.4% on an H200).
// Dealt strips (deal > 0): a warp takes strip s once its strip s - W (W = the warps launched) is done, so the
// same holds with every warp launched counted as resident, which all must be.
#include "common.cuh"

#define FULL_MASK 0xffffffffu
#define STRIP_ROWS 1024
#define BPAD 64   // symbols of padding before column 1 (lanes start up to 31 columns early)
#define AHEAD 8   // symbol loads are issued this many steps before their use
#ifndef BP_MIN_BLOCKS
#define BP_MIN_BLOCKS 1  // launch bounds: resident 128-thread blocks per SM asked of the register allocator
#endif                   // (capping registers at 72 or 64 for more warps per SM loses)

__device__ __forceinline__ unsigned long long ld_relaxed(const unsigned long long* p) {
#ifdef __CUDA_ARCH__
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else  // compiled for the CPU by the tests (tests/emu): the other warps take a turn first (spin waits end)
    emu_spin();
    return *(volatile const unsigned long long*)p;
#endif
}

__device__ __forceinline__ void st_relaxed(unsigned long long* p, unsigned long long v) {
#ifdef __CUDA_ARCH__
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    *(volatile unsigned long long*)p = v;
    emu_stored();
#endif
}

#define END_TAG 0x80000000u  // a stream word's tag bit: the writer stopped; its columns from this word on are +1

__device__ __forceinline__ unsigned long long wait_tag(const unsigned long long* p, unsigned long long v, unsigned tag) {
    while (((unsigned)(v >> 32) & ~END_TAG) != tag) v = ld_relaxed(p);
    return v;
}

__device__ __forceinline__ void strip_columns(int s, int m, int klo, int khi, int& cs, int& ce) {
    const long long r0 = (long long)s * STRIP_ROWS + 1;
    const long long a = r0 - khi, b = r0 + STRIP_ROWS - 1 - klo;
    cs = (int)(a < 1 ? 1 : a);
    ce = (int)(b > m ? m : b);
}

// Ring entry and tag of stream word c (see Slots); shift 31 never wraps (c < 2^31).
__device__ __forceinline__ int ring_pos(int c, int shift) { return c & (int)((1u << shift) - 1u); }
__device__ __forceinline__ unsigned ring_tag(unsigned base, int c, int shift) { return base + ((c >> shift) & 1); }

// The strip above's bottom-row deltas for the 32 columns from its stream index j0: loads issued early
// (issue), checked and assembled when needed (take, which then tells the writer how far it has read);
// +1 past the strip above's end (or without one).
struct StreamIn {
    const unsigned long long* in;  // the ring
    unsigned long long* done;      // the slot's progress word
    unsigned tag, me;              // the words' tag base (2 s), this strip
    int plen, shift;
    long long j0;
    unsigned long long w[3];

    __device__ __forceinline__ void issue(long long j) {
        j0 = j;
        if (in == nullptr || j0 >= plen) return;
        const int c0 = (int)(j0 >> 4), nch = (plen + 15) >> 4;
        w[0] = ld_relaxed(in + ring_pos(c0, shift));
        if (c0 + 1 < nch) w[1] = ld_relaxed(in + ring_pos(c0 + 1, shift));
        if ((j0 & 15) && c0 + 2 < nch) w[2] = ld_relaxed(in + ring_pos(c0 + 2, shift));
    }

    __device__ __forceinline__ uint2 take() {
        if (in == nullptr || j0 >= plen) return make_uint2(FULL_MASK, 0u);
        const int c0 = (int)(j0 >> 4), sh = (int)(j0 & 15), nch = (plen + 15) >> 4;
        unsigned long long p = 0, m = 0;
        for (int k = 0; k < 3; ++k) {
            if (c0 + k >= nch || (k == 2 && !sh)) break;
            const unsigned long long v = wait_tag(in + ring_pos(c0 + k, shift), w[k], ring_tag(tag, c0 + k, shift));
            if ((unsigned)(v >> 32) & END_TAG) {  // the writer stopped: its stream ends before this word
                plen = 16 * (c0 + k);
                break;
            }
            p |= (v & 0xffffull) << (16 * k);
            m |= ((v >> 16) & 0xffffull) << (16 * k);
        }
        // words before c0 + 2 are read (the next group starts there), their values in hand
        if (shift < 31) st_relaxed(done, (unsigned long long)me << 32 | (unsigned)(c0 + 2));
        unsigned P = (unsigned)(p >> sh), M = (unsigned)(m >> sh);
        const long long v = plen - j0;
        if (v <= 0) return make_uint2(FULL_MASK, 0u);
        if (v < 32) {
            const unsigned valid = (1u << v) - 1u;
            P = (P & valid) | ~valid;
            M &= valid;
        }
        return make_uint2(P, M);
    }
};

// The strip's own stream, written by lane 31: word c at ring entry c mod R, after waiting, when c >= lim,
// until the reader (strip + 1) is done with word c - R.
struct StreamOut {
    unsigned long long* ring;
    const unsigned long long* done;  // the slot's progress word
    unsigned tag, reader;            // the words' tag base (2 (s + 1)), the reading strip
    int shift, lim, next;            // lim: INT_MAX without a reader or a wrapping ring, or until the reader's
                                     // start is handed down; next: the next word

    __device__ __forceinline__ void put(unsigned payload, unsigned end = 0u) {
        const int c = next++;
        while (c >= lim) {
            const unsigned long long v = ld_relaxed(done);
            if ((unsigned)(v >> 32) == reader) lim = (int)(unsigned)v + (1 << shift);
        }
        st_relaxed(ring + ring_pos(c, shift), (unsigned long long)(ring_tag(tag, c, shift) | end) << 32 | payload);
    }
};

// Lane state of a strip.
struct Lane {
    unsigned Pv, Mv, eq, oP, oM, hp, hm;
    int score, rec;  // rec (lane 31): D on the last row at the next strip's first band column less one
    unsigned sym[AHEAD];  // byte offsets of the symbols' match masks (32-bit: no mask before each use)
};

// 32 steps x0 .. x0 + 31. EDGE: some lane is outside its columns (strip start and end) or lane 31
// hands down the score this group: steps are checked one by one.
template <bool EDGE>
__device__ __forceinline__ void group(Lane& L, const char* peq_l, const unsigned short* bptr, int x0, int lane, int len,
                                      uint2 cur, StreamOut& out, int tops_x) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const int x = x0 + i;
        const unsigned eq_n = *(const unsigned*)(peq_l + L.sym[(i + 1) & (AHEAD - 1)]);  // step x + 1's match mask
        L.sym[i & (AHEAD - 1)] = bptr[x + AHEAD];
        // hin from the lane above (its last row's horizontal deltas, two shuffles) or, in lane 0, the strip
        // above (cur.x / cur.y bit i): bit 31 of up_p is +1, of up_m -1; the bits below are not read
        unsigned up_p = __shfl_up_sync(FULL_MASK, L.hp, 1), up_m = __shfl_up_sync(FULL_MASK, L.hm, 1);
        if (lane == 0) {
            up_p = cur.x << (31 - i);
            up_m = cur.y << (31 - i);
        }
        const unsigned neg = up_m >> 31;
        const unsigned eq = L.eq, Pv = L.Pv, Mv = L.Mv;
        const unsigned xv = eq | Mv;
        const unsigned e = eq | neg;
        const unsigned xh = (((e & Pv) + Pv) ^ Pv) | e;
        unsigned ph = Mv | ~(xh | Pv);
        unsigned mh = Pv & xh;
        const unsigned ph2 = __funnelshift_l(up_p, ph, 1), mh2 = __funnelshift_l(up_m, mh, 1);  // (h << 1) | hin
        if (EDGE) {
            const bool act = (unsigned)(x - lane) < (unsigned)len;
            if (act) {
                L.Pv = mh2 | ~(xv | ph2);
                L.Mv = ph2 & xv;
            } else {
                ph = mh = 0u;
            }
        } else {
            L.Pv = mh2 | ~(xv | ph2);
            L.Mv = ph2 & xv;
        }
        L.hp = ph;
        L.hm = mh;
        L.eq = eq_n;
        L.oP = __funnelshift_l(ph, L.oP, 1);  // bit 0: this step's +1 on the last row (bit b: b steps ago)
        L.oM = __funnelshift_l(mh, L.oM, 1);  // bit 0: this step's -1
        if (EDGE && lane == 31 && x == tops_x) {  // the next strip's band starts a column on: steps x0 .. x
            const unsigned keep = FULL_MASK >> (31 - i);
            L.rec = L.score + __popc(L.oP & keep) - __popc(L.oM & keep);
        }
        if ((i & 15) == 14 && lane == 31 && x >= 46) {  // column indexes x - 46 .. x - 31 are complete: word
            if (((x - 46) >> 4) * 16 < len)  // (x - 46) / 16, its oldest column in bit 0
                out.put((__brev(L.oM) & 0xffff0000u) | (__brev(L.oP) >> 16));
        }
    }
    L.score += __popc(L.oP) - __popc(L.oM);
}

// The next strip's start, handed down by lane 31: its first column L (the next strip's first band column plus
// a multiple of 16) and top = D[r0 + 1023][L - 1], as two words tagged with the next strip (its tops slot).
__device__ __forceinline__ void hand_start(unsigned long long* tops_slot, unsigned long long tag, int ncs, int L,
                                           int top) {
    st_relaxed(tops_slot + 1, tag << 32 | (unsigned)(L - ncs));
    st_relaxed(tops_slot, tag << 32 | (unsigned)top);
}

// D on the last row at column c - nb, from its value at column c (L.score) and the last nb steps' deltas
// (oP / oM bit b: column c - b), 1 <= nb <= 32.
__device__ __forceinline__ int score_back(const Lane& L, int nb) {
    const unsigned keep = FULL_MASK >> (32 - nb);
    return L.score - __popc(L.oP & keep) + __popc(L.oM & keep);
}

// Strip s of one problem (the body of both entry points): the warp's lane, its match-mask words peq.
// Pruning (on top of the band): with U = khi - klo + 1 >= the bound the band was made from and kend = klo + khi
// = n - m of the whole problem (band() makes klo and khi so), a cell (i, j) with D[i][j] + |i - j - kend| > U
// lies on no path of cost <= U (|i - j - kend| is a lower bound of the cost from (i, j) to the end, also in the
// halves' and the Hirschberg pieces' reversed coordinates). A cell on an optimal path of cost <= U is computed
// exactly by induction along the path, so it is never taken for such a cell; the values D and |k - kend| change
// by at most 1 a row or a column, hence the margins below. Two cuts:
//  - where the next strip starts: lane 31 checks its last row every 32 columns from the next strip's first band
//    column on; at the first check that may hold a cell within U (margin 64: the 32 columns since the last
//    check), the next strip starts up to 15 columns before it (its band start plus a multiple of 16), or at its
//    band start (or this strip's start) when no check above U came first. Before that column every path into the
//    next strip passes the last row at a cell above U; the next strip starts from that row's value there, all
//    vertical below it. A strip that has written a ring's words without handing the start down hands it at once
//    (the reader then starts earlier than it could): no ring position is written twice before its reader reads;
//  - where a strip stops: every 32 steps, once the strip above has stopped left of lane 0's column, if every
//    lane's 32 rows are above U at its column (its last row's score less 31, and |k - kend| less 31, plus 2 for
//    the cell diagonally above lane l's first row, which is at most 2 below it: margin 64), every path into the
//    strip's columns further right passes a cell above U: lane 31's stream ends with an END word (the reader
//    takes +1 from there), and the strip's rows write no col_out (a last strip's result is INT_MAX).
__device__ __forceinline__ void bp_strip(int s, const unsigned char* __restrict__ acode,
                                         const unsigned short* __restrict__ bcode, int n, int m, int sigma, int klo,
                                         int khi, int nstrips, int nslots, int slot_words, int ring_shift,
                                         unsigned long long* stream, unsigned long long* tops, int* result,
                                         int* col_out, unsigned long long* cells, unsigned* peq, int lane) {
    const int r0 = s * STRIP_ROWS + 1;
    const int base = r0 + lane * 32;  // row of bit 0
    // match masks of this lane's rows, one word per symbol (and 0 for "matches nothing")
    __syncwarp();
    for (int c = 0; c <= sigma; ++c) peq[c * 32 + lane] = 0u;
    for (int b = 0; b < 32; ++b) {
        const int code = acode[base - 1 + b];
        if (code < sigma) peq[code * 32 + lane] |= 1u << b;
    }
    __syncwarp();
    int cs, ce;
    strip_columns(s, m, klo, khi, cs, ce);
    const int slot = s % nslots, pslot = (s + nslots - 1) % nslots;
    const bool last = s == nstrips - 1;
    const long long kend = (long long)klo + khi, over = (long long)khi - klo + 1 + 64;  // U + the margin
    // the strip's first column (from its band's cs on) and D[r0 - 1][start - 1]: column 0, or as handed down
    int top = r0 - 1, start = cs;
    if (cs > 1) {
        if (lane == 0) {
            top = (int)(unsigned)wait_tag(tops + 2 * pslot, 0ull, (unsigned)s);
            start = cs + (int)(unsigned)wait_tag(tops + 2 * pslot + 1, 0ull, (unsigned)s);
        }
        top = __shfl_sync(FULL_MASK, top, 0);
        start = __shfl_sync(FULL_MASK, start, 0);
    }
    const int len = ce - start + 1;  // >= 1: a handed start is within the strip above's columns, ce >= theirs
    StreamOut out;
    out.ring = stream + (size_t)slot * slot_words + 1;
    out.done = out.ring - 1;
    out.tag = 2u * (unsigned)(s + 1);
    out.reader = (unsigned)(s + 1);
    out.shift = ring_shift;
    out.next = (start - cs) >> 4;
    const int first = out.next;  // (the first word written)
    StreamIn sin;
    sin.in = nullptr;
    sin.tag = 2u * (unsigned)s;  // strip s - 1's words
    sin.me = (unsigned)s;
    sin.shift = ring_shift;
    sin.plen = 0;
    int delta = 0;
    if (s > 0) {
        int pcs, pce;
        strip_columns(s - 1, m, klo, khi, pcs, pce);
        sin.plen = pce - pcs + 1;
        delta = start - pcs;
        sin.done = stream + (size_t)pslot * slot_words;
        sin.in = sin.done + 1;
    }
    // the next strip: its band's first column ncs; lane 31 hands down where it starts and the score there
    const long long ncs_l = (long long)r0 + STRIP_ROWS - khi;
    const bool hands = !last && ncs_l > 1;
    const int ncs = hands ? (int)ncs_l : 0;
    const int tops_x = (hands && ncs - 1 >= start) ? (ncs - 1 - start) + 31 : -1;  // the step at column ncs - 1
    bool handed = !hands, dead = false;  // dead: lane 31's last check of the next strip's start was above U
    // a reader from column 1 has read nothing before it starts; one whose start is handed down reads from there
    out.lim = (last || ring_shift >= 31 || hands) ? 0x7fffffff : 1 << ring_shift;
    const unsigned long long tag_out = (unsigned long long)(s + 1);
    const long long row_last = (long long)r0 + STRIP_ROWS - 1;
    Lane L;
    L.Pv = FULL_MASK;
    L.Mv = 0u;
    L.oP = L.oM = L.hp = L.hm = 0u;
    L.score = top + 32 * (lane + 1);  // D[base + 31][start - 1] under the all-vertical start
    L.rec = 0;
    const int score0 = L.score;
    const char* peq_l = (const char*)(peq + lane);
    const unsigned short* bptr = bcode + BPAD + start - 1 - lane;  // bptr[x]: symbol of this lane's column at step x
#pragma unroll
    for (int k = 0; k < AHEAD; ++k) L.sym[k] = bptr[k];
    L.eq = *(const unsigned*)(peq_l + L.sym[0]);
    const int steps = len + 63;  // one extra group: lane 31 publishes its last words inside the loop
    if (lane == 0) sin.issue(delta);
    int stop = -1;  // the group after which the strip stopped
    for (int x0 = 0; x0 < steps; x0 += 32) {
        uint2 cur = make_uint2(0u, 0u);
        if (lane == 0) {
            cur = sin.take();
            sin.issue((long long)delta + x0 + 32);
        }
        const bool edge = x0 < 32 || x0 + 32 > len || (tops_x >= x0 && tops_x < x0 + 32);
        if (edge)
            group<true>(L, peq_l, bptr, x0, lane, len, cur, out, tops_x);
        else
            group<false>(L, peq_l, bptr, x0, lane, len, cur, out, tops_x);
        // lane l is at column start + x0 + 31 - l
        if (lane == 31 && !handed && x0 <= len - 1 && start + x0 >= ncs) {
            const int c = start + x0;
            long long h = row_last - c - kend;
            h = h < 0 ? -h : h;
            const bool lap = ring_shift < 31 && out.next - first + 4 >= (1 << ring_shift);  // (a ring written)
            if ((long long)L.score + h <= over || x0 + 32 > len - 1 || lap) {  // a cell within U?, the end near
                // columns before ncs - 1 are out of the band, those before start out of this strip's cut, and each
                // check above U clears its 32 columns on (start = ncs + a multiple of 16 when start > ncs)
                const int at = dead ? ncs + ((c - ncs) & ~15) : (start > ncs ? start : ncs);
                hand_start(tops + 2 * slot, tag_out, ncs, at, score_back(L, c - at + 1));
                handed = true;
                if (ring_shift < 31) out.lim = ((at - cs) >> 4) + (1 << ring_shift);
            } else {
                dead = true;
            }
        }
        if (s > 0 && x0 >= 32 && x0 + 32 < len) {
            bool off = lane != 0 || sin.plen <= delta + x0 + 31;  // the strip above stopped left of lane 0
            if (base <= n) {
                long long h = (long long)base + 31 - ((long long)start + x0 + 31 - lane) - kend;
                h = h < 0 ? -h : h;
                off = off && (long long)L.score + h > over;
            }
            if (__all_sync(FULL_MASK, off)) {
                stop = x0;
                break;
            }
        }
    }
    if (lane == 31 && !handed) {
        int at, sc;
        if (stop >= 0) {  // the stream ends at column c (the END word below); c >= ncs: this group's check was dead
            const int c = start + stop;
            at = c >= ncs ? ncs + ((c - ncs) & ~15) : ncs;
            sc = c >= ncs ? score_back(L, c - at + 1) : score_back(L, 1) + (ncs - c);
        } else if (ncs <= start) {  // (not reached: the checks hand it down when len >= 1, and a handed start lies
            at = start;               // within the strip above's columns, so len >= 1; were len 0, from here)
            sc = score0;
        } else {  // ncs within the last 32 columns (from L.rec), or (not reached) past them
            at = ncs;
            sc = ncs - 1 <= start + len - 1 ? L.rec : L.score + (ncs - start - len);
        }
        hand_start(tops + 2 * slot, tag_out, ncs, at, sc);
        if (at - cs >= 16 * out.next) out.next = (at - cs) >> 4;  // (stopped left of at: END where the reader looks)
    }
    if (cells != nullptr && lane == 0)  // the strip's columns (to its stop) x its rows
        atomicAdd(cells, (unsigned long long)(stop >= 0 ? stop + 32 : len) * STRIP_ROWS);
    if (stop >= 0) {
        if (lane == 31 && !last) out.put(0u, END_TAG);
        // the whole warp waits for it: lane 0 must not take the next ticket (the reader, perhaps) while lane 31
        // waits in put for that reader to read
        __syncwarp();
        if (last && n >= base && n < base + 32) *result = 0x7fffffff;  // above any bound (strings < 2^31)
        return;
    }
    if (last && n >= base && n < base + 32) {  // row n: this lane's last row less the deltas below n
        const int tb = n - base;
        const unsigned below = tb == 31 ? 0u : FULL_MASK << (tb + 1);
        *result = L.score - (__popc(L.Pv & below) - __popc(L.Mv & below));
    }
    if (col_out != nullptr && ce == m) {  // the whole last column: from the last row upwards
        int v = L.score;
        for (int b = 31; b >= 0; --b) {
            if (base + b <= n) col_out[base + b] = v;
            v -= (int)((L.Pv >> b) & 1u) - (int)((L.Mv >> b) & 1u);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128, BP_MIN_BLOCKS) bp_long(const unsigned char* __restrict__ acode,
                                   const unsigned short* __restrict__ bcode,
                                   int n, int m, int sigma, int klo, int khi, int nstrips, int nslots, int slot_words,
                                   int ring_shift, unsigned long long* stream, unsigned long long* tops, int* ticket,
                                   int* result, int* col_out, unsigned long long* cells, int deal) {
    extern __shared__ unsigned s_peq[];
    const int lane = threadIdx.x & 31;
    unsigned* peq = s_peq + (threadIdx.x >> 5) * (sigma + 1) * 32;
    if (deal > 0) {  // strips dealt, not taken: strip s to warp r = s mod W (see the header), every block resident
        const int nsm = (int)gridDim.x <= deal || gridDim.x % deal ? (int)gridDim.x : deal;
        const int wpb = blockDim.x >> 5, b = blockIdx.x;
        const int W = gridDim.x * wpb, r = b % nsm + nsm * ((int)(threadIdx.x >> 5) + wpb * (b / nsm));
        for (int s = r; s < nstrips; s += W) {
            if (lane == 0) atomicAdd(ticket, 1);  // (the host's progress)
            bp_strip(s, acode, bcode, n, m, sigma, klo, khi, nstrips, nslots, slot_words, ring_shift, stream, tops,
                     result, col_out, cells, peq, lane);
        }
        return;
    }
    for (;;) {
        int s = 0;
        if (lane == 0) s = atomicAdd(ticket, 1);
        s = __shfl_sync(FULL_MASK, s, 0);
        if (s >= nstrips) return;
        bp_strip(s, acode, bcode, n, m, sigma, klo, khi, nstrips, nslots, slot_words, ring_shift, stream, tops, result,
                 col_out, cells, peq, lane);
    }
}

// bp_long_jobs(jobs, first, rounds, sigma, ticket) -- many problems (one Hirschberg level's halves) in one
// launch: job p is row p of jobs (BP_JOB int64 words: acode, bcode, stream, tops, result, col_out as
// addresses, then n, m, klo, khi, nstrips, nslots, slot_words, ring_shift), each as bp_long's arguments, the jobs in
// decreasing nstrips. One ticket hands out the strips round by round: strip s of every job that has one
// (jobs 0, 1, ...), then strip s + 1's; first[s] = the tickets before round s (first[rounds] = all). So
// every job moves at once, and a strip's upper neighbour was taken before it, by a warp that is running:
// every wait ends. A job's ring needs min(nstrips, warps launched) + 1 slots (no more of its strips are in
// progress at once; they finish in order). Its ring must hold a whole strip (ring_shift 31): a strip's
// reader starts only after every other job's strip of its round. Launch as bp_long.
#define BP_JOB 14
extern "C" __global__ void __launch_bounds__(128, BP_MIN_BLOCKS) bp_long_jobs(const long long* __restrict__ jobs,
                                                                              const long long* __restrict__ first,
                                                                              int rounds, int sigma,
                                                                              unsigned long long* ticket) {
    extern __shared__ unsigned s_peq[];
    const int lane = threadIdx.x & 31;
    unsigned* peq = s_peq + (threadIdx.x >> 5) * (sigma + 1) * 32;
    for (;;) {
        long long g = 0;
        if (lane == 0) g = (long long)atomicAdd(ticket, 1ull);
        g = __shfl_sync(FULL_MASK, g, 0);
        if (g >= first[rounds]) return;
        int lo = 0, hi = rounds - 1;  // the round of ticket g: the last s with first[s] <= g
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (first[mid] <= g) lo = mid; else hi = mid - 1;
        }
        const long long* J = jobs + (size_t)(g - first[lo]) * BP_JOB;
        bp_strip(lo, (const unsigned char*)J[0], (const unsigned short*)J[1], (int)J[6], (int)J[7], sigma, (int)J[8],
                 (int)J[9], (int)J[10], (int)J[11], (int)J[12], (int)J[13], (unsigned long long*)J[2],
                 (unsigned long long*)J[3], (int*)J[4], (int*)J[5], nullptr, peq, lane);
    }
}

// bp_split_min(F, R, off, rows, npieces, best) -- Hirschberg's split of many pieces at once: piece p has a
// forward last column F[off[p] + r] (prefix rows r = 0..rows[p] against the left half of its columns) and a
// backward one R[off[p] + r] (the last r rows against the right half); best[p] = s << 32 | r for the least
// s = F[r] + R[rows[p] - r] (ties: the smallest r). best[] must hold ~0 before the launch: blocks combine
// by atomicMin. Grid: x strides the pieces, y a piece's rows (one long piece: many blocks in y); blocks of
// 256 (any size, a multiple of 32).
extern "C" __global__ void __launch_bounds__(256) bp_split_min(const int* __restrict__ F, const int* __restrict__ R,
                                                               const long long* __restrict__ off,
                                                               const int* __restrict__ rows, int npieces,
                                                               unsigned long long* __restrict__ best) {
    for (int p = blockIdx.x; p < npieces; p += gridDim.x) {
        const long long o = off[p];
        const int nr = rows[p];
        unsigned long long b = ~0ull;
        for (long long r = (long long)blockIdx.y * blockDim.x + threadIdx.x; r <= nr;
             r += (long long)gridDim.y * blockDim.x) {
            const unsigned long long s = (unsigned long long)((long long)F[o + r] + R[o + nr - r]);
            const unsigned long long key = s << 32 | (unsigned long long)r;
            b = key < b ? key : b;
        }
        for (int k = 16; k > 0; k >>= 1) {
            const unsigned long long other = __shfl_down_sync(FULL_MASK, b, k);
            b = other < b ? other : b;
        }
        if ((threadIdx.x & 31) == 0 && b != ~0ull) atomicMin(best + p, b);
    }
}

// bp_piece_codes(qc, tc, seg, nseg, total, pre, scale, fill, out, wide) -- the symbol buffers of many
// problems at once (bp_long_jobs' acode and bcode, one launch each): segment p of out is
// out[seg[p - 1] .. seg[p]) (seg[-1] = 0), with seg[nseg + p] = a source position, seg[2 nseg + p] = a count
// and seg[3 nseg + p] = flags (1: from tc, else qc; 2: reversed). Entry x of the segment holds
// scale * src[pos + y] (reversed: src[pos - y]) for y = x - pre in 0 .. count - 1, else fill. out: bytes
// (wide = 0) or uint16 (wide = 1). Any grid; blocks of 256.
extern "C" __global__ void __launch_bounds__(256) bp_piece_codes(const unsigned char* __restrict__ qc,
                                                                 const unsigned char* __restrict__ tc,
                                                                 const long long* __restrict__ seg, int nseg,
                                                                 long long total, int pre, int scale, int fill,
                                                                 void* out, int wide) {
    for (long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x; x < total;
         x += (long long)gridDim.x * blockDim.x) {
        int lo = 0, hi = nseg - 1;  // the first segment that ends after x
        while (lo < hi) {
            const int mid = (lo + hi) >> 1;
            if (seg[mid] > x) hi = mid; else lo = mid + 1;
        }
        const long long y = x - (lo ? seg[lo - 1] : 0) - pre;
        int v = fill;
        if (y >= 0 && y < seg[2 * nseg + lo]) {
            const long long f = seg[3 * nseg + lo], pos = seg[nseg + lo];
            v = scale * (f & 1 ? tc : qc)[f & 2 ? pos - y : pos + y];
        }
        if (wide)
            ((unsigned short*)out)[x] = (unsigned short)v;
        else
            ((unsigned char*)out)[x] = (unsigned char)v;
    }
}
