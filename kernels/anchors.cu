// anchors.cu -- exact 16-mer anchors of two long strings on the device (gpualign/long_bound.py has the
// method and its numpy version; engines/gpu_anchors.py runs these).
//
// kmer_sample: the 16-mers of s that hold only A/C/G/T (code[] < 4: 2-bit codes, the first base in
// the highest bits) and whose hash (code * 0x9E3779B1) has its top SAMPLE_BITS bits zero; with
// codes == 0 it only counts them (into *count), else it also appends (code, position) at slots taken
// from *count (in no particular order: the caller sorts by code).
// kmer_match: per 16-mer of the query (sorted by code) that occurs once in it, a binary search in the
// target's (sorted by code); one that occurs once there too appends the anchor (query position,
// target position) at a slot taken from *count.
#ifdef __CUDACC_RTC__
typedef unsigned char uint8_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#define K 16
#define SAMPLE_BITS 3
#ifndef BLOCK_SHARED  // a kernel's own shared variables (tests/emu/cuda_host.h defines it for the CPU)
#define BLOCK_SHARED __shared__
#endif

extern "C" __global__ void kmer_sample(const uint8_t* __restrict__ s, long long n, const uint8_t* __restrict__ code,
                                       unsigned long long* __restrict__ count, uint32_t* __restrict__ codes,
                                       long long* __restrict__ pos) {
    BLOCK_SHARED uint8_t c2[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) c2[i] = code[i];
    __syncthreads();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i + K <= n;
         i += (long long)gridDim.x * blockDim.x) {
        uint32_t c = 0;
        bool ok = true;
        for (int j = 0; j < K; j++) {
            const uint32_t b = c2[s[i + j]];
            ok &= b < 4;
            c = c << 2 | (b & 3u);
        }
        if (!ok || (c * 0x9E3779B1u) >> (32 - SAMPLE_BITS)) continue;
        const unsigned long long at = atomicAdd(count, 1ull);
        if (codes) {
            codes[at] = c;
            pos[at] = i;
        }
    }
}

extern "C" __global__ void kmer_match(const uint32_t* __restrict__ cq, const long long* __restrict__ pq, long long nq,
                                      const uint32_t* __restrict__ ct, const long long* __restrict__ pt, long long nt,
                                      unsigned long long* __restrict__ count, uint32_t* __restrict__ aq,
                                      long long* __restrict__ at) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nq; i += (long long)gridDim.x * blockDim.x) {
        const uint32_t c = cq[i];
        if ((i > 0 && cq[i - 1] == c) || (i + 1 < nq && cq[i + 1] == c)) continue;
        long long lo = 0, hi = nt;  // the first target code >= c
        while (lo < hi) {
            const long long mid = (lo + hi) >> 1;
            if (ct[mid] < c) lo = mid + 1; else hi = mid;
        }
        if (lo == nt || ct[lo] != c || (lo + 1 < nt && ct[lo + 1] == c)) continue;
        const unsigned long long slot = atomicAdd(count, 1ull);
        aq[slot] = (uint32_t)pq[i];
        at[slot] = pt[lo];
    }
}
