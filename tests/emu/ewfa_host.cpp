// kernels/ewfa.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid, grid_y, block, args)
// with a kernel's name as engines/gpu_edit.py names it and its arguments as CUDA takes them (an array of pointers
// to the values).
#include "cuda_host.h"

#include <string>

#include "ewfa.cu"

alignas(16) int smem[1 << 16];  // the warps' wavefronts (gpu_edit.SMEM_TARGET bytes, or one warp's level above it)
static const bool shared_named = (emu_shared_base = (const char*)smem, true);

extern "C" int emu_launch(const char* name_c, int grid, int, int block, void** args) {
    const std::string name(name_c);
    if (name == "ewfa_align") return emu_blocks(ewfa_align, grid, block, args), 0;
    if (name == "book_level") return emu_blocks(book_level, grid, block, args), 0;
    if (name == "ewfa_cigar") return emu_serial(ewfa_cigar, grid, block, args), 0;
    if (name == "pack2") return emu_serial(pack2, grid, block, args), 0;
    if (name == "gather_slots") return emu_serial(gather_slots, grid, block, args), 0;
    if (name == "cigar_measure") return emu_serial(cigar_measure, grid, block, args), 0;
    if (name == "cigar_write") return emu_serial(cigar_write, grid, block, args), 0;
    return 1;  // no such kernel
}
