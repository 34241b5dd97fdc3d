// The CUDA C that kernels/*.cu use, for the CPU: the tests compile a kernel file with g++ against this
// header (tests/emu) and run its kernels on numpy arrays, so that CI (no GPU) checks what they compute
// against the oracles. A launch runs its threads one after another; a kernel that talks across a warp
// (shuffles, __syncwarp) runs its 32 lanes as fibers that take turns between those calls.
// Not emulated: timing, memory ordering between warps, atomics, NVRTC.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

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
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }

template <class T>
inline T __ldg(const T* p) { return *p; }

// Hopper's DPX instructions and the funnel shift, as the CUDA Math API defines them
inline int __viaddmax_s32(int a, int b, int c) { return max(a + b, c); }
inline int __viaddmax_s32_relu(int a, int b, int c) { return max(max(a + b, c), 0); }
inline int __vimax3_s32(int a, int b, int c) { return max(max(a, b), c); }
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) << (shift & 31) >> 32);
}

// shared memory: the kernel file's `extern __shared__` array, which the including file defines and
// names here (emu_shared_base)
inline const char* emu_shared_base = nullptr;
inline std::size_t __cvta_generic_to_shared(const void* p) { return (std::size_t)((const char*)p - emu_shared_base); }
inline int emu_lds(uint32_t addr) { return *(const int*)(emu_shared_base + addr); }

// A warp: its 32 lanes as fibers (ucontext) on one thread, run in turn from lane 0 to 31, each until its
// next meeting point (a shuffle, __syncwarp) or its end; every lane passes the same meeting points (the
// kernels' warp-wide calls are not inside lane-dependent branches), so one round is one meeting.
struct EmuWarp {
    ucontext_t main, lane[32];
    long long slot[32];
    void meet() { swapcontext(&lane[threadIdx.x & 31], &main); }
    template <class T>
    T exchange(T v, int src) {
        slot[threadIdx.x & 31] = (long long)v;
        meet();
        const T out = (T)slot[src];
        meet();
        return out;
    }
};
inline EmuWarp* emu_warp = nullptr;

// run(l) as lanes 0-31 of one warp (blockIdx, blockDim set by the caller)
template <class F>
inline void emu_run_warp(F&& run) {
    static thread_local F* body;
    static thread_local bool done[32];
    body = &run;
    EmuWarp warp;
    emu_warp = &warp;
    std::vector<std::vector<char>> stacks(32, std::vector<char>(1 << 18));
    for (int l = 0; l < 32; ++l) {
        done[l] = false;
        getcontext(&warp.lane[l]);
        warp.lane[l].uc_stack.ss_sp = stacks[l].data();
        warp.lane[l].uc_stack.ss_size = stacks[l].size();
        warp.lane[l].uc_link = &warp.main;
        makecontext(&warp.lane[l], (void (*)())+[] {
            const int l = threadIdx.x & 31;
            (*body)(l);
            done[l] = true;
        }, 0);
    }
    for (bool left = true; left;) {
        left = false;
        for (int l = 0; l < 32; ++l) {
            if (done[l]) continue;
            threadIdx.x = l;
            swapcontext(&warp.main, &warp.lane[l]);
            left = left || !done[l];
        }
    }
    emu_warp = nullptr;
}

inline void __syncwarp(unsigned = 0xffffffffu) {
    if (emu_warp) emu_warp->meet();
}
inline void __syncthreads() { __syncwarp(); }  // blocks of one warp, or threads run alone
template <class T>
inline T __shfl_up_sync(unsigned, T v, int delta) {
    const int lane = threadIdx.x & 31;
    return emu_warp->exchange(v, lane >= delta ? lane - delta : lane);
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask) {
    return emu_warp->exchange(v, (threadIdx.x & 31) ^ mask);
}
