// kernels/lines.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid, grid_y, block,
// args) with a kernel's name as gpualign/text_device.py names it. No barrier: threads run one after another.
#include "cuda_host.h"

#include <string>

#include "lines.cu"

extern "C" int emu_launch(const char* name_c, int grid, int, int block, void** args) {
    const std::string name(name_c);
    if (name == "line_lengths") return emu_serial(line_lengths, grid, block, args), 0;
    if (name == "line_write") return emu_serial(line_write, grid, block, args), 0;
    if (name == "paf_lengths") return emu_serial(paf_lengths, grid, block, args), 0;
    if (name == "paf_write") return emu_serial(paf_write, grid, block, args), 0;
    if (name == "sam_lengths") return emu_serial(sam_lengths, grid, block, args), 0;
    if (name == "sam_write") return emu_serial(sam_write, grid, block, args), 0;
    if (name == "cigar_measure") return emu_serial(cigar_measure, grid, block, args), 0;
    if (name == "cigar_write") return emu_serial(cigar_write, grid, block, args), 0;
    return 1;  // no such kernel
}
