#!/usr/bin/env python3
"""A kernel's instruction mix per step of an unrolled loop, from its SASS, and the throughput bound it implies.

The SASS comes from cuobjdump: the GPU machine's, or, where CUDA has nvcc alone, the wheels
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm unpacked (their nvidia/cu13/bin on PATH). Templates the engines
instantiate at run time are in the images `gpualign cache build --arch sm_90 --dir D` writes (D/*.cubin):
  nvcc -arch=sm_90 -cubin -std=c++17 -O3 -Ikernels -o bp_long.cubin kernels/bp_long.cu
  cuobjdump -sass bp_long.cubin > bp_long.sass
  python scripts/sass_mix.py bp_long.sass bp_long --marker SHFL --cells 1024

A "step" is what one marker instruction stands for (bp_long: one SHFL.UP per step, in which a warp advances its
1,024 rows by one column: --cells 1024). Runs of at least --min-run markers less than --gap instructions
apart are the unrolled loop bodies found; for each: SASS instructions per step by pipe (Hopper: ALU = LOP3,
SHF, LEA, ISETP, IADD3, SEL, PRMT, PLOP3; FMA = IMAD, VIADD; memory and shuffles; POPC), the clocks a step
takes on one SM sub-partition (one instruction issued per clock; the ALU and FMA pipes take 2 clocks per warp
instruction, 16 lanes each; POPC 4), and the cells per second that bound gives on --sms SMs at --ghz.
Static counts of the compiled loop, not executed counts (Nsight Compute's): code outside the runs (a strip's
hand-off every 32 steps, its edges) is not in them."""

from __future__ import annotations

import argparse
import collections
import re

PIPES = {
    "alu": {"LOP3", "LOP", "SHF", "LEA", "ISETP", "IADD3", "SEL", "PRMT", "PLOP3", "FLO", "BREV"},
    "fma": {"IMAD", "VIADD", "IADD", "IMUL"},
    "mem": {"LDS", "LDG", "STG", "STS", "SHFL", "LD", "ST", "LDC", "ULDC"},
    "popc": {"POPC"},
}
CLOCKS = {"alu": 2, "fma": 2, "popc": 4}  # per warp instruction on one sub-partition


def instructions(path: str, function: str) -> list[str]:
    ops, on = [], False
    for line in open(path):
        if "Function :" in line:
            on = line.split("Function :")[1].strip() == function
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line) if on else None
        if m:
            ops.append(m.group(2).split(".")[0])
    return ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass")
    ap.add_argument("function")
    ap.add_argument("--marker", default="SHFL", help="the instruction each step has once")
    ap.add_argument("--cells", type=float, default=1024, help="DP cells a warp computes per step")
    ap.add_argument("--gap", type=int, default=80)
    ap.add_argument("--min-run", type=int, default=16)
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--ghz", type=float, default=1.98)
    a = ap.parse_args()
    ops = instructions(a.sass, a.function)
    if not ops:
        raise SystemExit(f"{a.sass}: no function {a.function!r}")
    at = [k for k, op in enumerate(ops) if op == a.marker]
    runs, cur = [], at[:1]
    for x, y in zip(at, at[1:]):
        if y - x < a.gap:
            cur.append(y)
        else:
            runs.append(cur)
            cur = [y]
    runs.append(cur)
    print(f"{a.function}: {len(ops)} SASS instructions")
    print("run at\tsteps\tper step\talu\tfma\tmem\tpopc\tclocks/step\tbound (cells/s)")
    for run in runs:
        if len(run) < a.min_run:
            continue
        steps = len(run) - 1
        count = collections.Counter(ops[run[0]:run[-1]])
        per = {p: sum(v for k, v in count.items() if k in names) / steps for p, names in PIPES.items()}
        total = (run[-1] - run[0]) / steps
        clocks = max(total, *(CLOCKS[p] * per[p] for p in CLOCKS))
        bound = 4 * a.sms * a.ghz * 1e9 * a.cells / clocks
        print(f"{run[0]}\t{steps}\t{total:.2f}\t{per['alu']:.2f}\t{per['fma']:.2f}\t{per['mem']:.2f}\t"
              f"{per['popc']:.2f}\t{clocks:.1f}\t{bound:.3g}")


if __name__ == "__main__":
    main()
