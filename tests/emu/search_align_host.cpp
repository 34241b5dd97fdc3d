// kernels/search_align.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid,
// grid_y, block, args), as tests/emu/__init__.py calls it. Threads are independent: each block's threads run
// one after another.
#include "cuda_host.h"

#include <string>

#include "search_align.cu"

extern "C" int emu_launch(const char* name_c, int grid, int grid_y, int block, void** args) {
    if (std::string(name_c) != "align_hits") return 1;  // no such kernel
    blockDim.x = block;
    for (int x = 0; x < grid; ++x) {
        blockIdx.x = x;
        for (int t = 0; t < block; ++t) {
            threadIdx.x = t;
            emu_call(align_hits, args);
        }
    }
    return 0;
}
