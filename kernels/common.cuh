// common.cuh -- sequence access shared by the gpualign kernels.
//
// Sequences live in one buffer of 32-bit words holding symbols of BITS bits,
// least significant first: BITS = 8 is the raw (case-folded) byte buffer
// itself, BITS = 2 is its 2-bit packing (A=0 C=1 T=2 G=3, bits 1-2 of the
// ASCII code). A symbol position is the byte offset in the raw buffer, for
// both encodings. Buffers carry two spare words at the end, so a window read
// at the last symbol stays in bounds.
#pragma once
#ifdef __CUDACC_RTC__  // NVRTC (CuPy) has no C library headers
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif
#ifndef BLOCK_SHARED  // a kernel's own shared variables (tests/emu/cuda_host.h defines it for the CPU)
#define BLOCK_SHARED __shared__
#endif

template <int BITS>
__device__ __forceinline__ uint32_t load_window(const uint32_t* __restrict__ w, uint32_t pos) {
    constexpr int S = 32 / BITS;  // symbols per word
    const uint32_t word = pos / S;
    const uint32_t shift = (pos % S) * BITS;
    return __funnelshift_r(w[word], w[word + 1], shift);
}

// Length of the common prefix of sequences at symbol positions a and b, at most maxlen.
template <int BITS>
__device__ __forceinline__ int common_prefix(const uint32_t* __restrict__ w, uint32_t a, uint32_t b, int maxlen) {
    constexpr int S = 32 / BITS;
    int l = 0;
    while (l < maxlen) {
        const uint32_t x = load_window<BITS>(w, a + l) ^ load_window<BITS>(w, b + l);
        if (x) {
            l += (__ffs(x) - 1) / BITS;
            break;
        }
        l += S;
    }
    return l < maxlen ? l : maxlen;
}

// Bytes pos .. pos + 3 as one word: the funnel shift takes its shift modulo 32, so pos << 3 is
// (pos % 4) * 8 and the word index is pos / 4 (the cheapest address arithmetic).
__device__ __forceinline__ uint32_t window8(const uint32_t* __restrict__ w, uint32_t pos) {
    const uint32_t* p = w + (pos >> 2);
    return __funnelshift_r(p[0], p[1], pos << 3);
}

// Byte sequences only (BITS = 8), 8 bytes per step: common prefix length at byte positions a and b,
// at most maxlen. Reads up to 3 words past a window start (the buffers' padding covers it).
__device__ __forceinline__ int common_prefix_bytes8(const uint32_t* __restrict__ w, uint32_t a, uint32_t b, int maxlen) {
    int l = 0;
    while (l < maxlen) {
        const uint32_t* pa = w + ((a + l) >> 2);
        const uint32_t* pb = w + ((b + l) >> 2);
        const uint32_t sa = (a + l) << 3, sb = (b + l) << 3;
        const uint32_t a1 = pa[1], b1 = pb[1];
        const uint32_t lo = __funnelshift_r(pa[0], a1, sa) ^ __funnelshift_r(pb[0], b1, sb);
        const uint32_t hi = __funnelshift_r(a1, pa[2], sa) ^ __funnelshift_r(b1, pb[2], sb);
        if (lo | hi) {
            l += lo ? (__ffs(lo) - 1) >> 3 : 4 + ((__ffs(hi) - 1) >> 3);
            break;
        }
        l += 8;
    }
    return l < maxlen ? l : maxlen;
}

// The same, cheaper when most calls stop within 4 bytes (cells off the alignment's diagonals): a
// first 4-byte window (two loads and one funnel shift per side), then 8 bytes per step.
__device__ __forceinline__ int common_prefix_bytes4_8(const uint32_t* __restrict__ w, uint32_t a, uint32_t b,
                                                      int maxlen) {
    const uint32_t x = window8(w, a) ^ window8(w, b);
    if (x) {
        const int l = (__ffs(x) - 1) >> 3;
        return l < maxlen ? l : maxlen;
    }
    return maxlen <= 4 ? maxlen : 4 + common_prefix_bytes8(w, a + 4, b + 4, maxlen - 4);
}

// Run-length CIGAR writer (BAM op codes, len << 4 | op); with out == nullptr it only counts the
// ops, and it never writes beyond cap ops (n > cap afterwards says the buffer was too small).
struct CigarOut {
    uint32_t* out;
    int n, cur_op, cur_len, cap;
    __device__ void put() { if (out && n < cap) out[n] = ((uint32_t)cur_len << 4) | cur_op; n++; }
    __device__ void emit(int op, int len) {
        if (len <= 0) return;
        if (op == cur_op) { cur_len += len; return; }
        if (cur_len) put();
        cur_op = op; cur_len = len;
    }
    __device__ void flush() { if (cur_len) put(); cur_len = 0; }
};

// Copy each pair's ops from src[src_off[i]...] to dst[dst_off[i]...] (cnt[i] of them): the final
// CIGAR buffer in pair order, assembled on the device from the levels' buffers.
extern "C" __global__ void gather_ops(const uint32_t* __restrict__ src, const long long* __restrict__ src_off,
                                      const int* __restrict__ cnt, const long long* __restrict__ dst_off,
                                      uint32_t* __restrict__ dst, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const long long a = src_off[i], b = dst_off[i];
        for (int j = 0; j < cnt[i]; j++) dst[b + j] = src[a + j];
    }
}

// book_level: one kernel level's results for its list of pair ids, booked per pair on the device.
// Entry i (pair p = list[i]) with score[i] >= 0 is done: out_score[p] = score[i], out_status[p] = ok
// (failed where ncig[i] < 0), out_len[p] = ncig[i] ops found at slot i (stride ops apart) of the level's
// buffer, out_src[p] = level << SLOT_SHIFT | i * stride. Others (score < 0) are appended to next.
// counts[0] += entries appended, counts[1] / counts[2] += entries done with mode 2 / other (mode may be
// null: all in counts[1]); ncig null: score only (lengths 0). The order within next varies from run to run;
// only which pairs go there matters. One thread per entry, any grid.
#define SLOT_SHIFT 40
__device__ __forceinline__ int warp_append(bool mine, int* counter) {
    const unsigned act = __activemask();
    const unsigned votes = __ballot_sync(act, mine);
    const int lane = threadIdx.x & 31, leader = __ffs(act) - 1;
    int base = 0;
    if (lane == leader && votes) base = atomicAdd(counter, __popc(votes));
    base = __shfl_sync(act, base, leader);
    return base + __popc(votes & ((1u << lane) - 1u));
}

extern "C" __global__ void book_level(const int* __restrict__ list, int nlist, const int* __restrict__ score,
                                      const unsigned char* __restrict__ mode, const int* __restrict__ ncig,
                                      int stride, int level, int ok, int failed,
                                      int* __restrict__ out_score, unsigned char* __restrict__ out_status,
                                      long long* __restrict__ out_len, long long* __restrict__ out_src,
                                      int* __restrict__ next, int* __restrict__ counts) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nlist; i += gridDim.x * blockDim.x) {
        const int p = list[i], s = score[i];
        const bool two_bit = mode == nullptr || mode[i] == 2;
        const int at = warp_append(s < 0, counts);
        warp_append(s >= 0 && two_bit, counts + 1);
        warp_append(s >= 0 && !two_bit, counts + 2);
        if (s < 0) { next[at] = p; continue; }
        const int c = ncig ? ncig[i] : 0;
        out_score[p] = s;
        out_status[p] = (unsigned char)(c < 0 ? failed : ok);
        out_len[p] = c < 0 ? 0 : c;
        out_src[p] = ((long long)level << SLOT_SHIFT) | ((long long)i * stride);
    }
}

// gather_slots: pair i's len[i] ops from level buffer b<level> (level = src[i] >> SLOT_SHIFT, 0..3) at
// the offset in src's low bits, to dst[dst_off[i]...]: the final CIGAR buffer in pair order. One thread
// per pair, any grid.
extern "C" __global__ void gather_slots(const uint32_t* b0, const uint32_t* b1, const uint32_t* b2, const uint32_t* b3,
                                        const long long* __restrict__ src, const long long* __restrict__ len,
                                        const long long* __restrict__ dst_off, uint32_t* __restrict__ dst, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const long long s = src[i], b = dst_off[i];
        const int level = (int)(s >> SLOT_SHIFT);
        const uint32_t* buf = level == 0 ? b0 : level == 1 ? b1 : level == 2 ? b2 : b3;
        const uint32_t* from = buf + (s & ((1LL << SLOT_SHIFT) - 1));
        for (long long j = 0; j < len[i]; j++) dst[b + j] = from[j];
    }
}

// pack2(raw, packed, nwords): raw holds case-folded bytes (ACGT only where the 2-bit codes are used)
// as words; packed[j] gets the 2-bit codes (bits 1-2 of each byte: A 0, C 1, T 2, G 3) of bytes
// 16j..16j+15, symbol i at bits 2i..2i+1. One thread per output word, any grid.
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

#include "cigar_text.cuh"  // cigar_measure, cigar_write
