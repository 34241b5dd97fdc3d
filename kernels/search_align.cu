// search_align.cu — one optimal alignment per search hit: a pattern (m codes) against its text window (the
// L = m + k codes ending at the hit's end, real text from column first, PAD before), the pattern whole and
// the text's start free, with the traceback preference of gpualign/search/hits.py's align (diagonal, then
// a pattern-only base I, then a text-only base D): the same numbers, so that GPU and CPU output are the
// same bytes.
//
// align_hits(const uint8_t* pattern, const uint8_t* window, const int* first, const uint8_t* miss, int n,
//            int m, int L, short* D, int* cost, int* start, int* n_runs, int* counts, uint32_t* cigar)
//
// pattern  [m][n] codes (hit-minor: a warp's loads are coalesced); window [L][n] codes
// miss     [16 pattern codes][16 text codes]: 1 where the pair does not match
// D        scratch, [(m + 1) * (L + 1)][n] int16: D[r][c] the least cost of pattern[0, r) against a text
//          stretch ending at window column c (D[0][c] = 0 from column first, BIG before)
// cost     D[m][L]; start: the window column where the alignment starts
// counts   [3][n]: mismatches, insertions (I), deletions (D)
// cigar    [n][m + L]: the CIGAR's runs (length << 4 | op, ops numbered as cigar.py's OPS "MIDNSHP=X"),
//          n_runs of them, first to last
// One thread per hit. Limits: BIG + m + L < 2^15 (the int16 costs; search's m <= 1024 and k <= 1023 keep it).

#ifdef __CUDACC_RTC__  // NVRTC (CuPy) has no C library headers
typedef unsigned int uint32_t;
typedef unsigned char uint8_t;
#else
#include <stdint.h>
#endif

#define BIG 16000  // hits.py's BIG: no alignment starts in this column
enum { OP_I = 1, OP_D = 2, OP_EQ = 7, OP_X = 8 };

// The traceback's step at (i, j): the op, by align's preference.
__device__ __forceinline__ int step_op(const short* __restrict__ D, const uint8_t* __restrict__ pattern,
                                       const uint8_t* __restrict__ window, const uint8_t* __restrict__ miss,
                                       int n, int h, int L, int i, int j) {
    const size_t row = (size_t)(L + 1) * n;
    const short cur = D[i * row + (size_t)j * n + h];
    if (j > 0) {
        const int sb = miss[pattern[(size_t)(i - 1) * n + h] * 16 + window[(size_t)(j - 1) * n + h]];
        if (D[(i - 1) * row + (size_t)(j - 1) * n + h] + sb == cur) return sb ? OP_X : OP_EQ;
    }
    if (D[(i - 1) * row + (size_t)j * n + h] + 1 == cur) return OP_I;
    return OP_D;
}

extern "C" __global__ void align_hits(const uint8_t* __restrict__ pattern, const uint8_t* __restrict__ window,
                                      const int* __restrict__ first, const uint8_t* __restrict__ miss, int n,
                                      int m, int L, short* __restrict__ D, int* __restrict__ cost,
                                      int* __restrict__ start, int* __restrict__ n_runs,
                                      int* __restrict__ counts, uint32_t* __restrict__ cigar) {
    const int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= n) return;
    const size_t row = (size_t)(L + 1) * n;
    for (int c = 0; c <= L; ++c) D[(size_t)c * n + h] = c >= first[h] ? 0 : BIG;
    for (int i = 1; i <= m; ++i) {
        const short* prev = D + (i - 1) * row + h;
        short* cur = D + i * row + h;
        const int p = pattern[(size_t)(i - 1) * n + h] * 16;
        short diag = prev[0], left = diag + 1;
        cur[0] = left;
        for (int c = 1; c <= L; ++c) {
            const short up = prev[(size_t)c * n];
            short v = min(diag + miss[p + window[(size_t)(c - 1) * n + h]], up + 1);
            v = min(v, left + 1);
            cur[(size_t)c * n] = v;
            left = v;
            diag = up;
        }
    }
    cost[h] = D[m * row + (size_t)L * n + h];
    // the walk twice: its runs counted, then written first to last
    int runs = 0, last = -1, x = 0, ins = 0, del = 0, i = m, j = L;
    while (i > 0) {
        const int op = step_op(D, pattern, window, miss, n, h, L, i, j);
        runs += op != last;
        last = op;
        x += op == OP_X;
        ins += op == OP_I;
        del += op == OP_D;
        i -= op != OP_D;
        j -= op != OP_I;
    }
    start[h] = j;
    n_runs[h] = runs;
    counts[h] = x;
    counts[n + h] = ins;
    counts[2 * n + h] = del;
    uint32_t* out = cigar + (size_t)h * (m + L) + runs;  // runs written backwards from the end
    int len = 0;
    last = -1;
    i = m;
    j = L;
    while (i > 0) {
        const int op = step_op(D, pattern, window, miss, n, h, L, i, j);
        if (op != last && last >= 0) *--out = ((uint32_t)len << 4) | (uint32_t)last, len = 0;
        last = op;
        ++len;
        i -= op != OP_D;
        j -= op != OP_I;
    }
    if (last >= 0) *--out = ((uint32_t)len << 4) | (uint32_t)last;
}
