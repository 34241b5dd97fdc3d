#!/usr/bin/env python3
"""Nsight Compute's figures for the kernels table (docs/benchmarks.md, 'Kernels: bound and fraction reached'):
per kernel launch, its time, grid, registers, SM / memory / DRAM throughput (% of peak), issue slots busy,
warps resident, the busiest pipes and the stall reasons that cost the most cycles, from the raw page of a report.

On the GPU machine (ncu there; --clock-control none leaves the clocks alone), e.g. search's seed filter:
  ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy \\
      --section LaunchStats --section WarpStateStats --section SchedulerStats -k regex:seed_warps \\
      --launch-skip 2 --launch-count 1 -o seeds python3 -m gpualign search pb.fa genome.fa -k 4 -o x.sam -q
  ncu --import seeds.ncu-rep --csv --page raw > seeds.csv
  python scripts/ncu_summary.py seeds.csv [--longest]

Skip the first launches of a kernel (--launch-skip): an engine's first are often small (eWFA's and gpu-dp's
distance samples, a batch's first level) and bound by their size, not by the kernel. --longest: of each
kernel, its longest launch only."""

from __future__ import annotations

import argparse
import csv
import os
import re

PIPE = (re.compile(r"sm__inst_executed_pipe_(\w+?)\.avg\.pct_of_peak_sustained_active"),
        re.compile(r"sm__pipe_(\w+?)_cycles_active\.avg\.pct_of_peak_sustained_active"))
STALL = (re.compile(r"smsp__average_warp_latency_issue_stalled_(\w+)\.ratio"),
         re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio"))
FIELDS = (("SM", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
          ("memory", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
          ("DRAM", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
          ("issue", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
          ("warps", "sm__warps_active.avg.pct_of_peak_sustained_active"))


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def launches(path: str) -> list[dict]:
    """Each launch of a raw-page CSV as {metric: text}, with the units row's units under 'units'."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    if len(rows) < 3:
        return []
    head, units = rows[0], rows[1]
    return [dict(zip(head, r), units=dict(zip(head, units))) for r in rows[2:]]


def top(launch: dict, patterns, label) -> list[tuple[float, str]]:
    out = []
    for key, text in launch.items():
        for k, pat in enumerate(patterns):
            m = pat.fullmatch(key) if isinstance(key, str) else None
            v = number(text) if m and isinstance(text, str) else None
            if v:
                out.append((v, label(m.group(1), k)))
    return sorted(out, reverse=True)


def show(launch: dict) -> str:
    name = launch.get("Kernel Name", "?").split("(")[0]
    time = number(launch.get("gpu__time_duration.sum", ""))
    unit = launch["units"].get("gpu__time_duration.sum", "")
    figures = ", ".join(f"{label} {v:.1f}%" for label, key in FIELDS
                        if (v := number(launch.get(key, ""))) is not None)
    pipes = top(launch, PIPE, lambda p, k: p + ("" if k == 0 else " (cycles)"))
    stalls = top(launch, STALL, lambda s, k: s)
    return (f"{name}: {time if time is not None else '?'} {unit}, grid {launch.get('launch__grid_size', '?')} x "
            f"{launch.get('launch__block_size', '?')}, {launch.get('launch__registers_per_thread', '?')} registers\n"
            f"    {figures}\n"
            f"    pipes (% of peak): {', '.join(f'{n} {v:.1f}' for v, n in pipes[:6])}\n"
            f"    warp cycles per issued instruction, by stall reason: {', '.join(f'{n} {v:.2f}' for v, n in stalls[:6])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="ncu --import REPORT --csv --page raw > FILE")
    ap.add_argument("--longest", action="store_true", help="each kernel's longest launch only")
    a = ap.parse_args()
    for path in a.csv:
        got = launches(path)
        print(f"== {os.path.basename(path)}: {len(got)} launches")
        if a.longest:
            best: dict = {}
            for x in got:
                k = x.get("Kernel Name", "?")
                if k not in best or (number(x.get("gpu__time_duration.sum", "")) or 0) > (
                        number(best[k].get("gpu__time_duration.sum", "")) or 0):
                    best[k] = x
            got = list(best.values())
        for x in got:
            print(show(x))


if __name__ == "__main__":
    main()
