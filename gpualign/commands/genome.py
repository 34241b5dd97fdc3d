"""`gpualign genome`: exact edit distance between chromosome-scale strings."""

from __future__ import annotations

import time

import click

from ..config import AlignConfig
from ..errors import ConfigError
from .common import (CHAR_RULE, CPU_WORKERS, DEBUG, GPUS, SCHEDULER, THREADS, check_paths, command_line, feedback,
                     indexes, print_summary, run_guarded)
from .usage import argument

EPILOG = ("Examples:\n\n"
          "  gpualign genome chr21_human.fa chr21_chimp.fa --distance-only -o dist.tsv\n\n"
          "  gpualign genome chr21_human.fa chr21_chimp.fa -o aln.paf\n\n"
          "  gpualign genome asm1.fa.gz asm2.fa.gz --distance-only --query-record chr2 --target-record chr2\n\n"
          + CHAR_RULE)


@argument("query", help="FASTA/FASTQ (gz ok): one string per record.")
@argument("target", help="FASTA/FASTQ: record i is compared with query record i.")
@click.option("--distance-only", is_flag=True, help="The exact edit distance only (TSV), not the alignment.")
@click.option("-o", "--output", default="-", help="Output file: .paf, .sam, .bam or .tsv ('-' = stdout: PAF, or TSV with --distance-only).")
@click.option("--format", "-f", "fmt", help="paf|sam|bam|tsv (default: from the output name).")
@click.option("--query-record", help="Use only this query record (alone: with the target record of the same name, else the target's only record).")
@click.option("--target-record", help="Use only this target record (alone: with the query record of the same name, else the query's only record).")
@click.option("--n-mismatch", is_flag=True, help="N and IUPAC codes mismatch everything, N included.")
@click.option("--metric", "-m", default="edit", help="edit (unit costs: the only metric of genome).")
@click.option("--device", default="auto", help="auto|cpu|gpu.")
@click.option("--cpu-method", default="auto", help="CPU path: auto|wfa|edlib.")
@click.option("--no-prune", is_flag=True, hidden=True, help="GPU: plain wavefront, no diamond.")
@THREADS
@click.option("--summary", help="Also write the summary as TSV to this file.")
@click.option("--quiet", "-q", is_flag=True, help="No notice, progress or summary on stderr.")
@GPUS
@SCHEDULER
@CPU_WORKERS
@DEBUG
def genome(query, target, distance_only, output, fmt, query_record, target_record, n_mismatch, metric, device,
           cpu_method, no_prune, threads, summary, quiet, gpus, scheduler, cpu_workers, debug) -> None:
    """Exact edit distance and an optimal alignment (CIGAR) of chromosome-scale strings."""
    from ..cluster import ClusterSpec
    from ..genome import run_genome, summary as genome_summary

    def body():
        check_paths([query, target, *indexes(query, target)], output, summary)
        if metric != "edit":
            raise ConfigError(f"genome aligns with --metric edit only (got {metric!r}); use pairs for affine scoring")
        if cpu_method not in ("auto", "wfa", "edlib"):
            raise ConfigError(f"--cpu-method must be auto, wfa or edlib (got {cpu_method!r})")
        start = time.perf_counter()
        with feedback("genome", threads, quiet) as (n_threads, notice, report):
            cfg = AlignConfig(distance_only=distance_only, n_mismatch=n_mismatch, device=device, threads=n_threads)
            extra: list = []  # the device slots' or workers' rows
            stages: dict = {}  # seconds reading and writing
            results = run_genome(query, target, output, cfg, query_record, target_record, notice, report,
                                 not no_prune, cpu_method, fmt, command_line(), ClusterSpec(gpus, scheduler, cpu_workers),
                                 extra, stages)
        print_summary(genome_summary(results, time.perf_counter() - start, extra, stages), summary, quiet)

    run_guarded(body, debug, (query, target), quiet)
