"""`gpualign paf`: exact re-alignment of minimap2's candidates."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..config import AlignConfig, Scoring, preset_penalties
from .common import (CHAR_RULE, CpuWorkers, Debug, Gpus, Scheduler, Threads, _print_summary, _run, command_line,
                     feedback)

EPILOG = ("Examples:\n\n"
          "  minimap2 ref.fa reads.fq > cands.paf && gpualign paf cands.paf reads.fq ref.fa -o out.paf\n\n"
          "  gpualign paf cands.paf reads.fa ref.fa --mode global -o out.bam\n\n"
          "Candidates may come in any order. One primary record per read: the candidate with the best "
          "re-aligned score (highest AS:i; ties: the first in the PAF), the others secondary (SAM/BAM FLAG 256; "
          "PAF tp:A:S, the primary tp:A:P, where the candidate carries tp).\n\n" + CHAR_RULE)


def paf(
    candidates: Annotated[str, typer.Argument(help="PAF candidates (minimap2's 12 columns, any tags; '-' = stdin).")],
    query: Annotated[str, typer.Argument(help="Query reads (FASTA/FASTQ, plain, gzip or bgzip; '-' = stdin; gzip, "
                                              "bgzip FASTQ and stdin copied to a temporary file).")],
    target: Annotated[str, typer.Argument(help="Target FASTA (plain, gzip or bgzip; .fai built when missing, beside "
                                               "it or, on a read-only directory, in a temporary one; not stdin).")],
    output: Annotated[str, typer.Option("-o", "--output", help="Output paf/sam/bam ('-' = stdout, PAF).")] = "-",
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="paf|sam|bam (default: from -o).")] = None,
    mode: Annotated[str, typer.Option("--mode", help="ends-free (pad the target window, free its ends) or global (the box end to end).")] = "ends-free",
    target_pad: Annotated[int, typer.Option("--target-pad", help="Bases added on both sides of the target window (ends-free).")] = 100,
    metric: Annotated[str, typer.Option("--metric", "-m", help="affine (default) or edit.")] = "affine",
    mismatch: Annotated[Optional[int], typer.Option("--mismatch", "-x", help="Affine mismatch penalty x (default 4).")] = None,
    gap_open: Annotated[Optional[int], typer.Option("--gap-open", "-O", help="Affine gap-open o: a gap of length l costs o+l*e (default 6).")] = None,
    gap_extend: Annotated[Optional[int], typer.Option("--gap-extend", "-E", help="Affine gap-extend e (default 2).")] = None,
    cs: Annotated[bool, typer.Option("--cs", help="Add the cs:Z tag (short form) to PAF output.")] = False,
    n_mismatch: Annotated[bool, typer.Option("--n-mismatch", help="N and IUPAC codes mismatch everything.")] = False,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Log bad candidates and go on instead of stopping.")] = False,
    # candidates are long: batches 4x larger than pairs' amortise each batch's levels and launches
    batch_bases: Annotated[int, typer.Option("--batch-bases", hidden=True)] = 1 << 27,
    threads: Threads = 0,
    device: Annotated[str, typer.Option("--device", help="auto|cpu|gpu.")] = "auto",
    summary: Annotated[Optional[str], typer.Option("--summary", help="Also write the summary as TSV here.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No notice, progress or summary on stderr.")] = False,
    gpus: Gpus = None,
    scheduler: Scheduler = None,
    cpu_workers: CpuWorkers = 0,
    debug: Debug = False,
) -> None:
    """Exact re-alignment of PAF candidates: recomputed coordinates, NM/AS/de/cg (and cs)."""
    from ..cluster import ClusterSpec
    from ..progress import Total, input_lines
    from ..realign import run_paf

    def body():
        with feedback("paf", threads, quiet, lambda: Total(records=input_lines(candidates))) as (n_threads, notice, report):
            penalties = preset_penalties(Scoring(), mismatch, gap_open, gap_extend, metric)
            cfg = AlignConfig(metric=metric, penalties=penalties,
                              n_mismatch=n_mismatch, device=device, threads=n_threads, batch_bases=batch_bases)
            result = run_paf(candidates, query, target, output, fmt, cfg, command_line(), mode, target_pad, cs,
                             skip_bad, notice, report, cluster=ClusterSpec(gpus, scheduler, cpu_workers))
        _print_summary(result, summary, quiet)

    _run(body, debug)
