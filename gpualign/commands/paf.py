"""`gpualign paf`: exact re-alignment of minimap2's candidates."""

from __future__ import annotations

import click

from ..config import AlignConfig, Scoring, preset_penalties
from .common import (CHAR_RULE, CPU_WORKERS, DEBUG, GPUS, SCHEDULER, THREADS, check_paths, command_line, feedback,
                     indexes, print_summary, run_guarded)
from .usage import argument

EPILOG = ("Examples:\n\n"
          "  minimap2 ref.fa reads.fq > cands.paf && gpualign paf cands.paf reads.fq ref.fa -o out.paf\n\n"
          "  gpualign paf cands.paf reads.fa ref.fa --mode global -o out.bam\n\n"
          "Candidates may come in any order. Each read's candidates are ranked as minimap2 ranks its own: by "
          "the re-aligned score with a match reward (a longer alignment can outrank a shorter one with fewer "
          "edits; ties: the first in the PAF). The best is primary; one whose query range overlaps a better "
          "chosen one's by more than half the shorter range is secondary (SAM/BAM FLAG 256, MAPQ 0; PAF tp:A:S), "
          "the others supplementary (a chimeric read's parts: FLAG 2048 and SA:Z; PAF tp:A:P).\n\n" + CHAR_RULE)


@argument("candidates", help="PAF candidates (minimap2's 12 columns, any tags; '-' = stdin).")
@argument("query", help="Query reads (FASTA/FASTQ, plain, gzip or bgzip; '-' = stdin; gzip, bgzip FASTQ and stdin copied to a temporary file).")
@argument("target", help="Target FASTA (plain, gzip or bgzip; .fai built when missing, beside it or, on a read-only directory, in a temporary one; not stdin).")
@click.option("-o", "--output", default="-", help="Output paf/sam/bam ('-' = stdout, PAF).")
@click.option("--format", "-f", "fmt", help="paf|sam|bam (default: from -o).")
@click.option("--mode", default="ends-free", help="ends-free (pad the target window, free its ends) or global (the box end to end).")
@click.option("--target-pad", type=int, default=100, help="Bases added on both sides of the target window (ends-free).")
@click.option("--metric", "-m", default="affine", help="affine (default) or edit.")
@click.option("--mismatch", "-x", type=int, help="Affine mismatch penalty x (default 4).")
@click.option("--gap-open", "-O", type=int, help="Affine gap-open o: a gap of length l costs o+l*e (default 6).")
@click.option("--gap-extend", "-E", type=int, help="Affine gap-extend e (default 2).")
@click.option("--cs", is_flag=True, help="Add the cs:Z tag (short form) to PAF output.")
@click.option("--n-mismatch", is_flag=True, help="N and IUPAC codes mismatch everything.")
@click.option("--skip-bad", is_flag=True, help="Log bad candidates and go on instead of stopping.")
@click.option("--batch-bases", type=int, default=1 << 27, hidden=True)
@click.option("--host-parse", is_flag=True, help="Lay out the sequences on the host even when a GPU aligns (by default "
              "the GPU does, from the files' bytes).")
@THREADS
@click.option("--device", default="auto", help="auto|cpu|gpu.")
@click.option("--summary", help="Also write the summary as TSV here.")
@click.option("--quiet", "-q", is_flag=True, help="No notice, progress or summary on stderr.")
@GPUS
@SCHEDULER
@CPU_WORKERS
@DEBUG
def paf(candidates, query, target, output, fmt, mode, target_pad, metric, mismatch, gap_open, gap_extend, cs,
        n_mismatch, skip_bad, batch_bases, host_parse, threads, device, summary, quiet, gpus, scheduler, cpu_workers, debug) -> None:
    """Exact re-alignment of PAF candidates: recomputed coordinates, NM/AS/de/cg (and cs)."""
    from ..cluster import ClusterSpec
    from ..progress import Total, input_lines
    from ..realign import run_paf

    def body():
        check_paths([candidates, query, target, *indexes(query, target)], output, summary)
        with feedback("paf", threads, quiet, lambda: Total(records=input_lines(candidates))) as (n_threads, notice, report):
            penalties = preset_penalties(Scoring(), mismatch, gap_open, gap_extend, metric)
            cfg = AlignConfig(metric=metric, penalties=penalties,
                              n_mismatch=n_mismatch, device=device, threads=n_threads, batch_bases=batch_bases,
                              device_parse=not host_parse)
            result = run_paf(candidates, query, target, output, fmt, cfg, command_line(), mode, target_pad, cs,
                             skip_bad, notice, report, cluster=ClusterSpec(gpus, scheduler, cpu_workers))
        print_summary(result, summary, quiet)

    run_guarded(body, debug, (query, target), quiet)
