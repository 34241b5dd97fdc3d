// cigar_text.cuh -- the CIGAR text kernels, in every engine's module (common.cuh) and in lines.cu's (gpu-dp's
// CIGARs, whose module has neither).
#pragma once
#ifdef __CUDACC_RTC__  // NVRTC has no C library headers
typedef unsigned int uint32_t;
#else
#include <stdint.h>
#endif

// CIGAR text on the device (what the writers would otherwise derive on the host, op by op).
// cigar_measure: per pair i (ops[off[i] ... off[i] + len[i]), packed len << 4 | op), the length of its
// text ("12=1X3I...") in text_len[i], and stats[5i ... 5i + 4] = bases in = ops, bases in X ops, bases in
// I ops, bases in D ops, I and D runs (gap opens). cigar_write: the text of pair i at out + text_off[i]
// (text_off: exclusive sum of text_len). One thread per pair, any grid.
__device__ __forceinline__ int decimal_digits(uint32_t v) {
    int d = 1;
    while (v >= 10) { v /= 10; d++; }
    return d;
}

extern "C" __global__ void cigar_measure(const uint32_t* __restrict__ ops, const long long* __restrict__ off,
                                         const long long* __restrict__ len, int n, long long* __restrict__ text_len,
                                         long long* __restrict__ stats) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        long long chars = 0, eq = 0, x = 0, ins = 0, del = 0, runs = 0;
        const long long a = off[i], b = a + len[i];
        for (long long j = a; j < b; j++) {
            const uint32_t v = ops[j], l = v >> 4, op = v & 15u;
            chars += decimal_digits(l) + 1;
            if (op == 7) eq += l;
            else if (op == 8) x += l;
            else if (op == 1) { ins += l; runs++; }
            else if (op == 2) { del += l; runs++; }
        }
        text_len[i] = chars;
        long long* s = stats + 5LL * i;
        s[0] = eq; s[1] = x; s[2] = ins; s[3] = del; s[4] = runs;
    }
}

extern "C" __global__ void cigar_write(const uint32_t* __restrict__ ops, const long long* __restrict__ off,
                                       const long long* __restrict__ len, int n,
                                       const long long* __restrict__ text_off, unsigned char* __restrict__ out) {
    const char codes[16] = {'M', 'I', 'D', 'N', 'S', 'H', 'P', '=', 'X', '?', '?', '?', '?', '?', '?', '?'};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned char* p = out + text_off[i];
        const long long a = off[i], b = a + len[i];
        for (long long j = a; j < b; j++) {
            const uint32_t v = ops[j];
            uint32_t l = v >> 4;
            const int d = decimal_digits(l);
            for (int k = d - 1; k >= 0; k--) { p[k] = (unsigned char)('0' + l % 10); l /= 10; }
            p[d] = (unsigned char)codes[v & 15u];
            p += d + 1;
        }
    }
}
