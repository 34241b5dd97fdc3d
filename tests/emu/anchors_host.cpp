// kernels/anchors.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid, grid_y, block,
// args) with a kernel's name as engines/gpu_anchors.py names it and its arguments as CUDA takes them.
#include "cuda_host.h"

#include <string>

#include "anchors.cu"

extern "C" int emu_launch(const char* name_c, int grid, int, int block, void** args) {
    const std::string name(name_c);
    if (name == "kmer_sample") return emu_blocks(kmer_sample, grid, block, args), 0;  // (a barrier: the table)
    if (name == "kmer_match") return emu_serial(kmer_match, grid, block, args), 0;
    return 1;  // no such kernel
}
