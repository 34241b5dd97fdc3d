// kernels/dp.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid, grid_y, block, args)
// with a kernel's name as gpu_dp names it and its arguments as CUDA takes them (an array of pointers to
// the values).
#include "cuda_host.h"

#include <string>

#include "dp.cu"

alignas(16) int S[1 << 12];  // dp.cu's shared matrix (K <= 32: 1,024 ints)
static const bool shared_named = (emu_shared_base = (const char*)S, true);

// every thread of the launch, one after another, each its own block of one thread
template <class... P>
static void serial(void (*kernel)(P...), int threads, void** args) {
    blockDim.x = 1;
    for (int t = 0; t < threads; ++t) {
        blockIdx.x = t;
        threadIdx.x = 0;
        emu_call(kernel, args);
    }
}

// warp by warp, each block of one warp (its lanes: emu_run_block)
template <class... P>
static void warps(void (*kernel)(P...), int threads, void** args) {
    blockDim.x = 32;
    for (int w = 0; w < threads / 32; ++w) {
        blockIdx.x = w;
        emu_run_block([&] { emu_call(kernel, args); });
    }
}

extern "C" int emu_launch(const char* name_c, int grid, int grid_y, int block, void** args) {
    const std::string name(name_c);
    const int threads = grid * block;  // (grid_y: 1)
    // dp_fill and dp_trace: threads alone; dp_long: whole warps
#define LAUNCH(K, M, T, HOW)                                 \
    if (name == #K "<" #M ", " #T ">") {                     \
        HOW(K<M, T>, threads, args);                         \
        return 0;                                            \
    }
#define ALL(K, HOW)                                                          \
    LAUNCH(K, 0, true, HOW) LAUNCH(K, 1, true, HOW) LAUNCH(K, 2, true, HOW)  \
    LAUNCH(K, 0, false, HOW) LAUNCH(K, 1, false, HOW) LAUNCH(K, 2, false, HOW)
    ALL(dp_fill, serial)
    ALL(dp_trace, serial)
    ALL(dp_long, warps)
    if (name == "dp_gather") {
        serial(dp_gather, threads, args);
        return 0;
    }
    return 1;  // no such kernel
}
