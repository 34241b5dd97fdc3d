// The CUDA C that kernels/dp.cu, myers_search.cu, search_align.cu, bp_long.cu and others use, for the CPU: the
// a kernel file with g++ against this header (tests/emu) and run its kernels on numpy arrays, so that CI (no GPU)
// checks what they compute against the oracles. A launch runs its blocks one after another; a block's
// threads run one after another too, or, where the kernel has block- or warp-wide calls (__syncthreads,
// shuffles), as fibers that take turns at those calls (emu_run_block).
// Not emulated: timing, threads running at once (atomics are plain adds), NVRTC.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include <setjmp.h>
#include <ucontext.h>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__
#define __launch_bounds__(...)

struct emu_dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline thread_local emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }

template <class T>
inline T __ldg(const T* p) { return *p; }

// Hopper's DPX instructions and the funnel shift, as the CUDA Math API defines them
inline int __viaddmax_s32(int a, int b, int c) { return max(a + b, c); }
inline int __viaddmax_s32_relu(int a, int b, int c) { return max(max(a + b, c), 0); }
// two int16 lanes of a word (wrapping, as the instructions do)
inline unsigned emu_pair(int lo, int hi) { return (unsigned)(lo & 0xffff) | (unsigned)(hi & 0xffff) << 16; }
inline int emu_lo(unsigned x) { return (short)(x & 0xffff); }
inline int emu_hi(unsigned x) { return (short)(x >> 16); }
inline unsigned __viaddmax_s16x2(unsigned a, unsigned b, unsigned c) {
    return emu_pair(max((short)(emu_lo(a) + emu_lo(b)), emu_lo(c)), max((short)(emu_hi(a) + emu_hi(b)), emu_hi(c)));
}
inline unsigned __viaddmax_s16x2_relu(unsigned a, unsigned b, unsigned c) {
    return emu_pair(max(max((short)(emu_lo(a) + emu_lo(b)), emu_lo(c)), 0),
                    max(max((short)(emu_hi(a) + emu_hi(b)), emu_hi(c)), 0));
}
inline unsigned __vmaxs2(unsigned a, unsigned b) { return emu_pair(max(emu_lo(a), emu_lo(b)), max(emu_hi(a), emu_hi(b))); }
inline unsigned __vsub2(unsigned a, unsigned b) { return emu_pair(emu_lo(a) - emu_lo(b), emu_hi(a) - emu_hi(b)); }
inline unsigned __vadd2(unsigned a, unsigned b) { return emu_pair(emu_lo(a) + emu_lo(b), emu_hi(a) + emu_hi(b)); }
inline unsigned __vcmpgts2(unsigned a, unsigned b) {  // 0xffff in a half where a > b (signed)
    return (emu_lo(a) > emu_lo(b) ? 0xffffu : 0u) | (emu_hi(a) > emu_hi(b) ? 0xffff0000u : 0u);
}
inline unsigned __vcmpeq2(unsigned a, unsigned b) {
    return ((a & 0xffffu) == (b & 0xffffu) ? 0xffffu : 0u) | ((a >> 16) == (b >> 16) ? 0xffff0000u : 0u);
}
inline unsigned __vminu2(unsigned a, unsigned b) {
    return std::min(a & 0xffffu, b & 0xffffu) | std::min(a >> 16, b >> 16) << 16;
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) >> (shift & 31));
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) << (shift & 31) >> 32);
}

// shared memory: the kernel file's `extern __shared__` array, which the including file defines and
// names here (emu_shared_base)
inline const char* emu_shared_base = nullptr;
inline std::size_t __cvta_generic_to_shared(const void* p) { return (std::size_t)((const char*)p - emu_shared_base); }
inline int emu_lds(uint32_t addr) { return *(const int*)(emu_shared_base + addr); }
inline int emu_lds16(uint32_t addr) { return *(const short*)(emu_shared_base + addr); }
inline void emu_sts(uint32_t addr, int v) { *(int*)(emu_shared_base + addr) = v; }
inline void emu_sts16(uint32_t addr, int v) { *(short*)(emu_shared_base + addr) = (short)v; }
// a kernel's own `__shared__` variables (BLOCK_SHARED in the kernel files): one for every fiber of a block, as
// blocks run one after another
#define BLOCK_SHARED static

// A block: its threads as fibers on one thread, taking turns. A thread runs until it waits at a barrier
// (__syncthreads for the block; __syncwarp and each shuffle for its warp), or ends; a barrier opens when
// every thread of the block or warp that has not ended has reached it (as on the GPU, where exited threads
// no longer count), so warps may meet the block's barriers between different shuffles. A fiber starts on
// its own stack through makecontext; after that the turns are taken by _setjmp/_longjmp, which save no
// signal mask: swapcontext's two system calls a switch made the shuffle-heavy kernels' runs several times
// slower. (-U_FORTIFY_SOURCE in tests/emu: the checked longjmp refuses a jump to another stack.)
struct EmuJump {
    jmp_buf at;
};
struct EmuBlock {
    EmuJump main;
    std::vector<EmuJump> thread;
    std::vector<long long> slot;  // a shuffle's values, by thread
    const std::vector<char>* done;
    struct Barrier {
        int arrived = 0;
        unsigned gen = 0;
    } block, warp[32];
    int alive(int first, int count) const {
        int a = 0;
        for (int t = first; t < first + count; ++t) a += !(*done)[t];
        return a;
    }
    long long arrivals = 0;  // (emu_run_block's check that its threads go on)
    void yield() {  // back to emu_run_block's loop, which resumes this thread at its next turn
        if (!_setjmp(thread[threadIdx.x].at)) _longjmp(main.at, 1);
    }
    void wait(Barrier& b, int first, int count) {
        const unsigned gen = b.gen;
        ++b.arrived;
        ++arrivals;
        while (b.gen == gen) {
            if (b.arrived >= alive(first, count)) {
                b.arrived = 0;
                ++b.gen;
                break;
            }
            yield();
        }
    }
    void sync_block() { wait(block, 0, (int)thread.size()); }
    void sync_warp() {
        const int w = threadIdx.x / 32;
        wait(warp[w], 32 * w, std::min(32, (int)thread.size() - 32 * w));
    }
    template <class T>
    T exchange(T v, int src) {  // src: a lane of the caller's warp
        slot[threadIdx.x] = (long long)v;
        sync_warp();
        const T out = (T)slot[(threadIdx.x & ~31u) + src];
        sync_warp();
        return out;
    }
};
inline EmuBlock* emu_block = nullptr;

// run() as each of blockDim.x threads of one block (blockIdx, blockDim set by the caller)
template <class F>
inline void emu_run_block(F&& run) {
    static thread_local F* body;
    static thread_local std::vector<char> done;
    static thread_local std::vector<std::vector<char>> stacks;
    const int n = (int)blockDim.x;
    body = &run;
    EmuBlock block;
    block.thread.resize(n);
    block.slot.resize(n);
    block.done = &done;
    emu_block = &block;
    done.assign(n, 0);
    if ((int)stacks.size() < n) stacks.resize(n, std::vector<char>(1 << 17));
    std::vector<ucontext_t> start(n);  // each thread's first turn (its stack, its entry)
    std::vector<char> started(n, 0);
    ucontext_t caller;
    for (int t = 0; t < n; ++t) {
        getcontext(&start[t]);
        start[t].uc_stack.ss_sp = stacks[t].data();
        start[t].uc_stack.ss_size = stacks[t].size();
        start[t].uc_link = nullptr;  // (a thread never returns from its entry: it jumps back, done)
        makecontext(&start[t], (void (*)())+[] {
            (*body)();
            done[threadIdx.x] = 1;
            _longjmp(emu_block->main.at, 1);
        }, 0);
    }
    for (bool left = true; left;) {
        left = false;
        const long long before = block.arrivals;
        int ended = 0;
        for (int t = 0; t < n; ++t) {
            if (done[t]) continue;
            threadIdx.x = t;
            if (!_setjmp(block.main.at)) {  // (back here when thread t yields or ends)
                if (started[t]) _longjmp(block.thread[t].at, 1);
                started[t] = 1;
                swapcontext(&caller, &start[t]);
            }
            left = left || !done[t];
            ended += done[t];
        }
        if (left && !ended && block.arrivals == before) {  // every live thread waits: none can go on
            std::fprintf(stderr, "emu: block %u: its threads wait at barriers that cannot open\n", blockIdx.x);
            std::abort();
        }
    }
    emu_block = nullptr;
}

inline void __syncthreads() {
    if (emu_block) emu_block->sync_block();
}
// a load that a spin wait repeats (kernels/bp_long.cu's ring words): the other threads take a turn first, and
// the turn counts as going on (a block whose threads wait for each other's stores is not stuck), unless
// EMU_SPINS of them pass without a store (emu_stored: the stores they wait for), which ends the run: a
// deadlock, which would spin forever
#define EMU_SPINS 1000000LL
inline long long emu_spins = 0;
inline void emu_stored() { emu_spins = 0; }
inline void emu_spin() {
    if (emu_block) {
        if (++emu_spins > EMU_SPINS) {
            std::fprintf(stderr, "emu: block %u: %lld spin waits and no store: a deadlock\n", blockIdx.x, EMU_SPINS);
            std::abort();
        }
        ++emu_block->arrivals;
        emu_block->yield();
    }
}
inline void __syncwarp(unsigned = 0xffffffffu) {
    if (emu_block) emu_block->sync_warp();
}
template <class T>
inline T __shfl_up_sync(unsigned, T v, int delta) {
    const int lane = threadIdx.x & 31;
    return emu_block->exchange(v, lane >= delta ? lane - delta : lane);
}
template <class T>
inline T __shfl_down_sync(unsigned, T v, int delta) {
    const int lane = threadIdx.x & 31;
    return emu_block->exchange(v, lane + delta < 32 ? lane + delta : lane);
}
template <class T>
inline T __shfl_sync(unsigned, T v, int src) {
    return emu_block->exchange(v, src & 31);
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask) {
    return emu_block->exchange(v, (threadIdx.x & 31) ^ mask);
}

// a warp's votes: with fibers (emu_run_block) the lanes that have not ended, each lane's bit exchanged; a thread
// running alone (emu_serial) is a warp of one
inline unsigned __activemask() {
    if (!emu_block) return 1u << (threadIdx.x & 31);
    const int w = threadIdx.x & ~31u;
    unsigned mask = 0;
    for (int t = w; t < w + 32 && t < (int)emu_block->thread.size(); ++t) mask |= (*emu_block->done)[t] ? 0u : 1u << (t - w);
    return mask;
}
inline unsigned __ballot_sync(unsigned, bool p) {
    if (!emu_block) return p ? 1u << (threadIdx.x & 31) : 0u;
    const unsigned live = __activemask();
    const int w = threadIdx.x & ~31u;
    emu_block->slot[threadIdx.x] = p;
    emu_block->sync_warp();
    unsigned mask = 0;
    for (int t = 0; t < 32; ++t) mask |= ((live >> t) & 1u) && emu_block->slot[w + t] ? 1u << t : 0u;
    emu_block->sync_warp();
    return mask;
}
inline bool __all_sync(unsigned m, bool p) { return __ballot_sync(m, !p) == 0; }
inline bool __any_sync(unsigned m, bool p) { return __ballot_sync(m, p) != 0; }

// a kernel called with its arguments as CUDA takes them: an array of pointers to the values
template <class... P, std::size_t... I>
inline void emu_call(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(args[I])...);
}
template <class... P>
inline void emu_call(void (*kernel)(P...), void** args) {
    emu_call(kernel, args, std::index_sequence_for<P...>{});
}

// a kernel none of whose threads meets another at a barrier: every thread of every block, one after another
template <class... P>
inline void emu_serial(void (*kernel)(P...), int grid, int block, void** args) {
    blockDim.x = block;
    gridDim.x = grid;
    for (int b = 0; b < grid; ++b)
        for (int t = 0; t < block; ++t) {
            blockIdx.x = b;
            threadIdx.x = t;
            emu_call(kernel, args);
        }
}

// every block, one after another, its threads as fibers (emu_run_block): kernels whose threads meet at barriers,
// votes or shuffles
// (a grid of grid x grid_y blocks: emu_blocks_2d)
template <class... P>
inline void emu_blocks_2d(void (*kernel)(P...), int grid, int grid_y, int block, void** args) {
    blockDim.x = block;
    gridDim.x = grid;
    gridDim.y = grid_y;
    for (int y = 0; y < grid_y; ++y)
        for (int x = 0; x < grid; ++x) {
            blockIdx.x = x;
            blockIdx.y = y;
            emu_run_block([&] { emu_call(kernel, args); });
        }
    gridDim.y = blockIdx.y = 0;
}
template <class... P>
inline void emu_blocks(void (*kernel)(P...), int grid, int block, void** args) {
    emu_blocks_2d(kernel, grid, 1, block, args);
}

// the rest of what myers_search.cu uses
#define __align__(n) __attribute__((aligned(n)))
struct uint2 {
    unsigned x, y;
};
struct __attribute__((aligned(16))) uint4 {
    unsigned x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {  // CUDA's default mode
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {  // (one thread runs at a time)
    const unsigned old = *p;
    *p = old + v;
    return old;
}
inline int atomicAdd(int* p, int v) {
    const int old = *p;
    *p = old + v;
    return old;
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    const unsigned long long old = *p;
    *p = old + v;
    return old;
}
inline int atomicMin(int* p, int v) {
    const int old = *p;
    if (v < old) *p = v;
    return old;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    const unsigned long long old = *p;
    if (v < old) *p = v;
    return old;
}
