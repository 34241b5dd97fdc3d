// kernels/dp.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid, grid_y, block, args)
// with a kernel's name as gpu_dp names it and its arguments as CUDA takes them (an array of pointers to
// the values).
#include "cuda_host.h"

#include <string>

#include "dp.cu"

alignas(16) int S[1 << 15];  // dp.cu's shared memory (the matrix, K <= 32: up to 33 x 33 ints, dp_fill16's 33 x 17
// x 32; dp_long's hand-over)
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


extern "C" int emu_launch(const char* name_c, int grid, int grid_y, int block, void** args) {
    const std::string name(name_c);
    // dp_fill, dp_fill16, dp_trace of their pairs, dp_gather and the plan's dp_keys and dp_warps: threads
    // alone; dp_long, dp_long16 and dp_trace of theirs: whole blocks (a pair's team of warps, or its warp);
    // grid_y is 1. A kernel's name is its instance spelled as here (gpu_dp's names).
#define RUN(HOW, ...)                            \
    if (name == #__VA_ARGS__) {                  \
        HOW(__VA_ARGS__, grid, block, args);     \
        return 0;                                \
    }
    RUN(serial, dp_fill<0, true>) RUN(serial, dp_fill<1, true>) RUN(serial, dp_fill<2, true>)
    RUN(serial, dp_fill<0, false>) RUN(serial, dp_fill<1, false>) RUN(serial, dp_fill<2, false>)
    RUN(serial, dp_trace<0, 0>) RUN(serial, dp_trace<1, 0>) RUN(serial, dp_trace<2, 0>)
    RUN(serial, dp_trace<0, 3>) RUN(serial, dp_trace<1, 3>) RUN(serial, dp_trace<2, 3>)
    RUN(emu_blocks, dp_trace<0, 1>) RUN(emu_blocks, dp_trace<1, 1>) RUN(emu_blocks, dp_trace<2, 1>)
    RUN(emu_blocks, dp_trace<0, 2>) RUN(emu_blocks, dp_trace<2, 2>)
    RUN(emu_blocks, dp_long<0, true, false>) RUN(emu_blocks, dp_long<1, true, false>) RUN(emu_blocks, dp_long<2, true, false>)
    RUN(emu_blocks, dp_long<0, true, true>) RUN(emu_blocks, dp_long<1, true, true>) RUN(emu_blocks, dp_long<2, true, true>)
    RUN(emu_blocks, dp_long<0, false, false>) RUN(emu_blocks, dp_long<1, false, false>) RUN(emu_blocks, dp_long<2, false, false>)
    RUN(emu_blocks, dp_long<0, false, true>) RUN(emu_blocks, dp_long<1, false, true>) RUN(emu_blocks, dp_long<2, false, true>)
    RUN(emu_blocks, dp_long16<0, true, false>) RUN(emu_blocks, dp_long16<1, true, false>) RUN(emu_blocks, dp_long16<2, true, false>)
    RUN(emu_blocks, dp_long16<0, false, false>) RUN(emu_blocks, dp_long16<1, false, false>) RUN(emu_blocks, dp_long16<2, false, false>)
    RUN(emu_blocks, dp_long16<0, true, true>) RUN(emu_blocks, dp_long16<2, true, true>)
    RUN(emu_blocks, dp_long16<0, false, true>) RUN(emu_blocks, dp_long16<2, false, true>)
    RUN(serial, dp_fill16<0, true, false, false>) RUN(serial, dp_fill16<1, true, false, false>)
    RUN(serial, dp_fill16<2, true, false, false>) RUN(serial, dp_fill16<0, false, false, false>)
    RUN(serial, dp_fill16<1, false, false, false>) RUN(serial, dp_fill16<2, false, false, false>)
    RUN(serial, dp_fill16<0, false, true, false>) RUN(serial, dp_fill16<1, false, true, false>)
    RUN(serial, dp_fill16<2, false, true, false>) RUN(serial, dp_fill16<0, true, false, true>)
    RUN(serial, dp_fill16<1, true, false, true>) RUN(serial, dp_fill16<2, true, false, true>)
    RUN(serial, dp_fill16<0, false, false, true>) RUN(serial, dp_fill16<1, false, false, true>)
    RUN(serial, dp_fill16<2, false, false, true>) RUN(serial, dp_fill16<0, false, true, true>)
    RUN(serial, dp_fill16<1, false, true, true>) RUN(serial, dp_fill16<2, false, true, true>)
    RUN(serial, dp_gather) RUN(serial, dp_keys) RUN(serial, dp_warps)
    return 1;  // no such kernel
}
