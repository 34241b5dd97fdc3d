// kernels/wfa_affine.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid, grid_y,
// block, args) with a kernel's name as engines/gpu_affine.py names it and its arguments as CUDA takes them (an
// array of pointers to the values).
#include "cuda_host.h"

#include <string>

#include "wfa_affine.cu"

alignas(16) short smem[1 << 17];  // the int16 rings (affine_plan.SMEM_RING_MAX bytes at most)
static const bool shared_named = (emu_shared_base = (const char*)smem, true);

extern "C" int emu_launch(const char* name_c, int grid, int, int block, void** args) {
    const std::string name(name_c);
    // wfa_affine<BT, EF, SMEM>: whole blocks (a pair's wavefront across the block's threads, a barrier a score)
#define RUN(B, F, S)                                                \
    if (name == "wfa_affine<" #B ", " #F ", " #S ">") {             \
        emu_blocks(wfa_affine<B, F, S>, grid, block, args);             \
        return 0;                                                   \
    }
    RUN(true, false, true) RUN(false, false, true) RUN(true, true, true) RUN(false, true, true)
    RUN(true, false, false) RUN(false, false, false) RUN(true, true, false) RUN(false, true, false)
    if (name == "wfa_affine_cigar") return emu_serial(wfa_affine_cigar, grid, block, args), 0;
    if (name == "gather_ops") return emu_serial(gather_ops, grid, block, args), 0;
    if (name == "cigar_measure") return emu_serial(cigar_measure, grid, block, args), 0;
    if (name == "cigar_write") return emu_serial(cigar_write, grid, block, args), 0;
    return 1;  // no such kernel
}
