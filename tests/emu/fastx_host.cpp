// kernels/fastx.cu for the CPU (cuda_host.h), behind one C entry point: emu_launch(name, grid, grid_y,
// block, args) with a kernel's name as io/fastx_device.py names it and its arguments as CUDA takes them (an
// array of pointers to the values). No kernel of the file meets at a barrier: threads run one after another.
#include "cuda_host.h"

#include <string>

#include "fastx.cu"

extern "C" int emu_launch(const char* name_c, int grid, int, int block, void** args) {
    const std::string name(name_c);
    if (name == "nl_count") return emu_serial(nl_count, grid, block, args), 0;
    if (name == "nl_emit") return emu_serial(nl_emit, grid, block, args), 0;
    if (name == "fastx_records") return emu_serial(fastx_records, grid, block, args), 0;
    if (name == "fastx_compact") return emu_serial(fastx_compact, grid, block, args), 0;
    if (name == "fasta_windows") return emu_serial(fasta_windows, grid, block, args), 0;
    return 1;  // no such kernel
}
