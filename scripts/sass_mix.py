#!/usr/bin/env python3
"""A kernel's instruction mix per step of an unrolled loop, from its SASS, and the throughput bound it implies.

The SASS comes from cuobjdump: the GPU machine's, or, where CUDA has nvcc alone, the wheels
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm unpacked (their nvidia/cu13/bin on PATH). Templates the engines
instantiate at run time are in the images `gpualign cache build --arch sm_90 --dir D` writes (D/*.cubin):
  nvcc -arch=sm_90 -cubin -std=c++17 -O3 -Ikernels -o bp_long.cubin kernels/bp_long.cu
  cuobjdump -sass bp_long.cubin > bp_long.sass
  python scripts/sass_mix.py bp_long.sass bp_long --marker SHFL --cells 1024
  python scripts/sass_mix.py dp.sass "dp_fill16<1, false>" --loops --cells 2048

--loops: the loop bodies (a backward branch and the instructions from its target, at least --min-body of them)
instead of marker runs; --cells is then the cells a warp computes per pass of the body (dp_fill16: a lane's 16
words of two cells, two columns a pass as `#pragma unroll 2` compiles it: 64 a lane, 2,048 a warp). A function
may be given by its demangled name without its arguments ("dp_fill16<1, false>"): c++filt must be on PATH.

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
    "alu": {"LOP3", "LOP", "SHF", "LEA", "ISETP", "IADD3", "SEL", "PRMT", "PLOP3", "FLO", "BREV", "IMNMX", "VIMNMX",
            "VIMNMX3", "VIADDMNMX"},  # (integer min/max and Hopper's DPX forms: counted as ALU, not measured)
    "fma": {"IMAD", "VIADD", "IADD", "IMUL"},
    "mem": {"LDS", "LDG", "STG", "STS", "SHFL", "LD", "ST", "LDC", "ULDC"},
    "popc": {"POPC"},
}
CLOCKS = {"alu": 2, "fma": 2, "popc": 4}  # per warp instruction on one sub-partition


def _demangled(name: str) -> str:
    import subprocess

    try:
        return subprocess.run(["c++filt", name], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return name


def listing(path: str, function: str) -> list[tuple[int, str, str]]:
    """(address, opcode, instruction text) of function's SASS: its mangled name, or its demangled name without
    the arguments ("dp_fill16<1, false>"); a name that matches several functions is an error."""
    out, on, found = [], False, set()
    for line in open(path):
        if "Function :" in line:
            name = line.split("Function :")[1].strip()
            bare = name if name == function else _demangled(name).split("(")[0]
            on = name == function or bare in (function, "void " + function)
            if on:
                found.add(name)
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+((?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)[^;]*);", line) if on else None
        if m:
            out.append((int(m.group(1), 16), m.group(3).split(".")[0], m.group(2)))
    if len(found) > 1:
        raise SystemExit(f"{path}: {function!r} names {len(found)} functions: give the mangled name")
    return out


def instructions(path: str, function: str) -> list[str]:
    return [op for _, op, _ in listing(path, function)]


def loops(code: list, min_body: int) -> list[tuple[int, int]]:
    """(first, last) indices of each loop body in code: a BRA back to an earlier address, at least min_body
    instructions from its target to it."""
    at = {addr: k for k, (addr, _, _) in enumerate(code)}
    found = []
    for k, (addr, op, text) in enumerate(code):
        target = re.search(r"0x([0-9a-f]+)\s*$", text) if op == "BRA" else None
        if target and int(target.group(1), 16) < addr and at.get(int(target.group(1), 16), k) <= k - min_body:
            found.append((at[int(target.group(1), 16)], k))
    return found


def _row(label, ops: list, passes: int, cells: float, sms: int, ghz: float) -> str:
    count = collections.Counter(ops)
    per = {p: sum(v for k, v in count.items() if k in names) / passes for p, names in PIPES.items()}
    total = len(ops) / passes
    clocks = max(total, *(CLOCKS[p] * per[p] for p in CLOCKS))
    bound = 4 * sms * ghz * 1e9 * cells / clocks
    return (f"{label}\t{passes}\t{total:.2f}\t{per['alu']:.2f}\t{per['fma']:.2f}\t{per['mem']:.2f}\t"
            f"{per['popc']:.2f}\t{clocks:.1f}\t{bound:.3g}")


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
    ap.add_argument("--loops", action="store_true", help="loop bodies (backward branches), not marker runs")
    ap.add_argument("--min-body", type=int, default=100, help="--loops: the fewest instructions a body has")
    a = ap.parse_args()
    code = listing(a.sass, a.function)
    if not code:
        raise SystemExit(f"{a.sass}: no function {a.function!r}")
    ops = [op for _, op, _ in code]
    print(f"{a.function}: {len(ops)} SASS instructions")
    if a.loops:
        print("body at\tpasses\tper pass\talu\tfma\tmem\tpopc\tclocks/pass\tbound (cells/s)")
        for first, last in loops(code, a.min_body):
            print(_row(f"{code[first][0]:#x}-{code[last][0]:#x}", ops[first:last + 1], 1, a.cells, a.sms, a.ghz))
        return
    at = [k for k, op in enumerate(ops) if op == a.marker]
    runs, cur = [], at[:1]
    for x, y in zip(at, at[1:]):
        if y - x < a.gap:
            cur.append(y)
        else:
            runs.append(cur)
            cur = [y]
    runs.append(cur)
    print("run at\tsteps\tper step\talu\tfma\tmem\tpopc\tclocks/step\tbound (cells/s)")
    for run in runs:
        if len(run) >= a.min_run:
            print(_row(run[0], ops[run[0]:run[-1]], len(run) - 1, a.cells, a.sms, a.ghz))


if __name__ == "__main__":
    main()
