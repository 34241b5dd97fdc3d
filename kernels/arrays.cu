// arrays.cu -- the array operations the engines need between their own kernels (fill, iota, gather,
// scatter, byte translation and counts, reversal, prefix sums, stable radix sort), so that no engine
// asks CuPy for an elementwise, reduction, scan or sort kernel, which CuPy compiles on first use
// (seconds each on a fresh machine) instead of loading an image built ahead.
//
// Prefix sums and the radix sort work in tiles of TILE consecutive elements per block of THREADS
// threads (ITEMS consecutive elements per thread). Scan: scan_tiles writes each tile's sum,
// scan_top turns those sums into exclusive offsets (one block), scan_apply scans each tile and adds
// its offset. Radix sort, one pass per 8-bit digit: radix_hist counts each tile's digits into
// hist[digit * tiles + tile], an exclusive scan of hist gives each (digit, tile) its first output
// place, radix_scatter moves a tile's elements there in input order (stable: within a round of
// THREADS elements, a warp ranks equal digits by __match_any_sync, warps by shared counts).
#ifdef __CUDACC_RTC__  // NVRTC has no C library headers
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#define THREADS 256
#define ITEMS 16
#define TILE (THREADS * ITEMS)
#define WARPS (THREADS / 32)

template <typename T>
__global__ void fill(T* __restrict__ out, long long n, T value) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = value;
}

template <typename T>
__global__ void iota(T* __restrict__ out, long long n, T start, T step) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = start + (T)i * step;
}

// out[i] = src[idx[i]]
template <typename T>
__global__ void gather(const T* __restrict__ src, const long long* __restrict__ idx, long long n, T* __restrict__ out) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = src[idx[i]];
}

// dst[idx[i]] = values[i]
template <typename T>
__global__ void scatter(T* __restrict__ dst, const long long* __restrict__ idx, const T* __restrict__ values,
                        long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[idx[i]] = values[i];
}

// out[i] = table[in[i]] (a 256-entry table)
template <typename T>
__global__ void translate(const uint8_t* __restrict__ in, long long n, const T* __restrict__ table, T* __restrict__ out) {
    __shared__ T t[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) t[i] = table[i];
    __syncthreads();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = t[in[i]];
}

// out[i] = in[n - 1 - i]
template <typename T>
__global__ void reverse(const T* __restrict__ in, long long n, T* __restrict__ out) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = in[n - 1 - i];
}

// out[r * n + i] = (int)row_r[i] for the four rows a, b, c, d (a batch's int64 offsets and lengths as the
// engines stage them: gpu.staging.meta_rows)
extern "C" __global__ void narrow_rows(const long long* __restrict__ a, const long long* __restrict__ b,
                                       const long long* __restrict__ c, const long long* __restrict__ d, long long n,
                                       int* __restrict__ out) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < 4 * n; i += (long long)gridDim.x * blockDim.x) {
        long long r = i / n, j = i - r * n;
        const long long* row = r == 0 ? a : r == 1 ? b : r == 2 ? c : d;
        out[i] = (int)row[j];
    }
}

// counts[b] += how many bytes of in equal b (counts zeroed by the caller)
extern "C" __global__ void byte_counts(const uint8_t* __restrict__ in, long long n, unsigned long long* __restrict__ counts) {
    __shared__ unsigned int c[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) c[i] = 0;
    __syncthreads();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        atomicAdd(&c[in[i]], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        if (c[i]) atomicAdd(&counts[i], (unsigned long long)c[i]);
}

// -- prefix sums ---------------------------------------------------------------------------------------
// The block's exclusive prefix of v over its threads (THREADS of them); *total gets the block's sum.
__device__ __forceinline__ long long block_exclusive(long long v, long long* total) {
    __shared__ long long warp_sum[WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long x = v;
    for (int d = 1; d < 32; d <<= 1) {
        const long long y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
    }
    if (lane == 31) warp_sum[warp] = x;
    __syncthreads();
    long long before = 0, all = 0;
    for (int w = 0; w < WARPS; w++) {
        if (w < warp) before += warp_sum[w];
        all += warp_sum[w];
    }
    __syncthreads();  // warp_sum is read by every thread before a next call writes it
    *total = all;
    return before + x - v;
}

// v[k] = x[base + k] (0 from n on); returns their sum
__device__ __forceinline__ long long load_items(const long long* x, long long base, long long n, long long* v) {
    long long s = 0;
    for (int k = 0; k < ITEMS; k++) {
        v[k] = base + k < n ? x[base + k] : 0;
        s += v[k];
    }
    return s;
}

// sums[b] = the sum of tile b of x
extern "C" __global__ void scan_tiles(const long long* __restrict__ x, long long n, long long* __restrict__ sums) {
    const long long base = (long long)blockIdx.x * TILE + (long long)threadIdx.x * ITEMS;
    long long s = 0;
    for (int k = 0; k < ITEMS; k++)
        if (base + k < n) s += x[base + k];
    long long total;
    block_exclusive(s, &total);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// sums[0..tiles) -> their exclusive prefix sums, in place (one block)
extern "C" __global__ void scan_top(long long* __restrict__ sums, long long tiles) {
    long long carry = 0;
    for (long long start = 0; start < tiles; start += TILE) {
        const long long base = start + (long long)threadIdx.x * ITEMS;
        long long v[ITEMS];
        const long long s = load_items(sums, base, tiles, v);
        long long total;
        long long run = carry + block_exclusive(s, &total);
        for (int k = 0; k < ITEMS; k++) {
            if (base + k < tiles) sums[base + k] = run;
            run += v[k];
        }
        carry += total;
    }
}

// out = the prefix sums of x (inclusive, or exclusive when exclusive != 0), tile b starting from
// offsets[b]; out may be x
extern "C" __global__ void scan_apply(const long long* x, long long n, const long long* __restrict__ offsets,
                                      int exclusive, long long* out) {
    const long long base = (long long)blockIdx.x * TILE + (long long)threadIdx.x * ITEMS;
    long long v[ITEMS];
    const long long s = load_items(x, base, n, v);
    long long total;
    long long run = offsets[blockIdx.x] + block_exclusive(s, &total);
    for (int k = 0; k < ITEMS; k++) {
        if (!exclusive) run += v[k];
        if (base + k < n) out[base + k] = run;
        if (exclusive) run += v[k];
    }
}

// -- stable LSD radix sort of keys (and int64 values with them), 8 bits a pass ---------------------------
template <typename K>
__global__ void radix_hist(const K* __restrict__ keys, long long n, int shift, long long* __restrict__ hist) {
    __shared__ unsigned int c[256];
    c[threadIdx.x] = 0;  // (THREADS == 256)
    __syncthreads();
    const long long start = (long long)blockIdx.x * TILE;
    for (int r = 0; r < ITEMS; r++) {
        const long long i = start + r * THREADS + threadIdx.x;
        if (i < n) atomicAdd(&c[(unsigned)(keys[i] >> shift) & 255u], 1u);
    }
    __syncthreads();
    hist[(long long)threadIdx.x * gridDim.x + blockIdx.x] = c[threadIdx.x];
}

template <typename K>
__global__ void radix_scatter(const K* __restrict__ keys, const long long* __restrict__ values, long long n, int shift,
                              const long long* __restrict__ first, K* __restrict__ keys_out,
                              long long* __restrict__ values_out) {
    __shared__ long long at[256];
    __shared__ int counts[WARPS][256];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    at[threadIdx.x] = first[(long long)threadIdx.x * gridDim.x + blockIdx.x];
    const long long start = (long long)blockIdx.x * TILE;
    for (int r = 0; r < ITEMS; r++) {
        for (int w = 0; w < WARPS; w++) counts[w][threadIdx.x] = 0;
        __syncthreads();
        const long long i = start + r * THREADS + threadIdx.x;
        const bool valid = i < n;
        K key = 0;
        int digit = 256;  // past the end: a group of its own, not written
        if (valid) {
            key = keys[i];
            digit = (int)((unsigned)(key >> shift) & 255u);
        }
        const unsigned peers = __match_any_sync(0xffffffffu, digit);
        const int rank = __popc(peers & ((1u << lane) - 1u));
        if (valid && rank == 0) counts[warp][digit] = __popc(peers);
        __syncthreads();
        if (valid) {
            int before = rank;
            for (int w = 0; w < warp; w++) before += counts[w][digit];
            const long long dst = at[digit] + before;
            keys_out[dst] = key;
            values_out[dst] = values[i];
        }
        __syncthreads();
        int total = 0;
        for (int w = 0; w < WARPS; w++) total += counts[w][threadIdx.x];
        at[threadIdx.x] += total;
        __syncthreads();
    }
}
