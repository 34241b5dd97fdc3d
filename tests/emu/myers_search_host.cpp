// kernels/myers_search.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid,
// grid_y, block, args) with a kernel's name as search/gpu.py names it and its arguments as CUDA takes them
// (an array of pointers to the values). Blocks run one after another, a block's threads as fibers (they
// meet at the __syncthreads after the masks are loaded into shared memory).
#include "cuda_host.h"

#include <string>

#include "myers_search.cu"

alignas(16) uint32_t sh_peq[1 << 16];  // the kernel's shared masks: group * W * 16 words at most
static const bool shared_named = (emu_shared_base = (const char*)sh_peq, true);

extern "C" int emu_launch(const char* name_c, int grid, int grid_y, int block, void** args) {
    const std::string name(name_c);
#define LAUNCH(W, SH, P)                                        \
    if (name == "search<" #W ", " #SH ", " #P ">") {            \
        emu_blocks_2d(search<W, SH, P>, grid, grid_y, block, args);    \
        return 0;                                               \
    }
    LAUNCH(1, true, 1) LAUNCH(1, true, 2) LAUNCH(1, true, 4) LAUNCH(1, true, 8)
    LAUNCH(2, true, 1) LAUNCH(3, true, 1) LAUNCH(4, true, 1) LAUNCH(5, true, 1) LAUNCH(6, true, 1)
    LAUNCH(8, true, 1) LAUNCH(12, false, 1) LAUNCH(16, false, 1) LAUNCH(24, false, 1) LAUNCH(32, false, 1)
#define SEEDS(EMIT, SH)                                                    \
    if (name == "seeds<" #EMIT ", " #SH ">") return emu_blocks_2d(seeds<EMIT, SH>, grid, grid_y, block, args), 0;
    SEEDS(false, false) SEEDS(true, false) SEEDS(false, true) SEEDS(true, true)
    if (name == "seed_verify<false>") return emu_blocks_2d(seed_verify<false>, grid, grid_y, block, args), 0;
    if (name == "seed_verify<true>") return emu_blocks_2d(seed_verify<true>, grid, grid_y, block, args), 0;
    if (name == "seed_warps") return emu_blocks_2d(seed_warps, grid, grid_y, block, args), 0;
    return 1;  // no such kernel
}
