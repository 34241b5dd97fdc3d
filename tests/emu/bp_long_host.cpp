// kernels/bp_long.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid, grid_y, block,
// args). bp_long's and bp_long_jobs' strips wait on each other's stores (the rings): every warp of a launch runs
// in one block, its fibers taking turns at the shuffles and at the spin loads (emu_spin), whatever the grid asked.
#include "cuda_host.h"

#include <string>

#include "bp_long.cu"

unsigned s_peq[1 << 16];  // the warps' match masks ((sigma + 1) * 32 words each)
static const bool shared_named = (emu_shared_base = (const char*)s_peq, true);

extern "C" int emu_launch(const char* name_c, int grid, int grid_y, int block, void** args) {
    const std::string name(name_c);
    if (name == "bp_long") return emu_blocks(bp_long, 1, grid * block, args), 0;
    if (name == "bp_long_jobs") return emu_blocks(bp_long_jobs, 1, grid * block, args), 0;
    if (name == "bp_split_min") return emu_blocks_2d(bp_split_min, grid, grid_y, block, args), 0;
    if (name == "bp_piece_codes") return emu_serial(bp_piece_codes, grid, block, args), 0;
    return 1;  // no such kernel
}
