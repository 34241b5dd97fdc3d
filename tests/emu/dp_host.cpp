// kernels/dp.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid, grid_y, block, args)
// with a kernel's name as gpu_dp names it and its arguments as CUDA takes them (an array of pointers to
// the values).
#include "cuda_host.h"

#include <string>

#include "dp.cu"

alignas(16) int S[1 << 12];  // dp.cu's shared memory (the matrix, K <= 32: 1,024 ints; dp_long's hand-over)
static const bool shared_named = (emu_shared_base = (const char*)S, true);

// every thread of the launch, one after another, each its own block of one thread
template <class... P>
static void serial(void (*kernel)(P...), int grid, int block, void** args) {
    blockDim.x = 1;
    for (int t = 0; t < grid * block; ++t) {
        blockIdx.x = t;
        threadIdx.x = 0;
        emu_call(kernel, args);
    }
}

// block by block, a block's threads as fibers (emu_run_block)
template <class... P>
static void blocks(void (*kernel)(P...), int grid, int block, void** args) {
    blockDim.x = block;
    for (int b = 0; b < grid; ++b) {
        blockIdx.x = b;
        emu_run_block([&] { emu_call(kernel, args); });
    }
}

extern "C" int emu_launch(const char* name_c, int grid, int grid_y, int block, void** args) {
    const std::string name(name_c);
    // dp_fill and dp_trace: threads alone; dp_long and dp_long16: whole blocks (a pair's team of warps); grid_y is 1
#define LAUNCH(K, M, T, HOW)                                 \
    if (name == #K "<" #M ", " #T ">") {                     \
        HOW(K<M, T>, grid, block, args);                     \
        return 0;                                            \
    }
#define ALL(K, HOW)                                                          \
    LAUNCH(K, 0, true, HOW) LAUNCH(K, 1, true, HOW) LAUNCH(K, 2, true, HOW)  \
    LAUNCH(K, 0, false, HOW) LAUNCH(K, 1, false, HOW) LAUNCH(K, 2, false, HOW)
    ALL(dp_fill, serial)
    ALL(dp_trace, serial)
#define LONG(M, T, TEAM)                                                 \
    if (name == "dp_long<" #M ", " #T ", " #TEAM ">") {                  \
        blocks(dp_long<M, T, TEAM>, grid, block, args);                  \
        return 0;                                                        \
    }
    LONG(0, true, false) LONG(1, true, false) LONG(2, true, false) LONG(0, false, false) LONG(1, false, false)
    LONG(2, false, false) LONG(0, true, true) LONG(1, true, true) LONG(2, true, true) LONG(0, false, true)
    LONG(1, false, true) LONG(2, false, true)
#define LONG16(M, EQ)                                          \
    if (name == "dp_long16<" #M ", " #EQ ">") {                \
        blocks(dp_long16<M, EQ>, grid, block, args);           \
        return 0;                                              \
    }
    LONG16(0, true) LONG16(1, true) LONG16(2, true) LONG16(0, false) LONG16(1, false) LONG16(2, false)
    if (name == "dp_gather") {
        serial(dp_gather, grid, block, args);
        return 0;
    }
    return 1;  // no such kernel
}
