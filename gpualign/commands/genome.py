"""`gpualign genome`: exact edit distance between chromosome-scale strings."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from ..config import AlignConfig
from ..errors import ConfigError
from .common import CHAR_RULE, CpuWorkers, Debug, Gpus, Scheduler, Threads, _print_summary, _run, command_line, feedback

EPILOG = ("Examples:\n\n"
          "  gpualign genome chr21_human.fa chr21_chimp.fa --distance-only -o dist.tsv\n\n"
          "  gpualign genome chr21_human.fa chr21_chimp.fa -o aln.paf\n\n"
          "  gpualign genome asm1.fa.gz asm2.fa.gz --distance-only --query-record chr2 --target-record chr2\n\n"
          + CHAR_RULE)


def genome(
    query: Annotated[str, typer.Argument(help="FASTA/FASTQ (gz ok): one string per record.")],
    target: Annotated[str, typer.Argument(help="FASTA/FASTQ: record i is compared with query record i.")],
    distance_only: Annotated[bool, typer.Option("--distance-only", help="The exact edit distance only (TSV), not the alignment.")] = False,
    output: Annotated[str, typer.Option("-o", "--output", help="Output file: .paf, .sam, .bam or .tsv ('-' = stdout: PAF, or TSV with --distance-only).")] = "-",
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="paf|sam|bam|tsv (default: from the output name).")] = None,
    query_record: Annotated[Optional[str], typer.Option("--query-record", help="Use only this query record (alone: with the target record of the same name, else the target's only record).")] = None,
    target_record: Annotated[Optional[str], typer.Option("--target-record", help="Use only this target record (alone: with the query record of the same name, else the query's only record).")] = None,
    n_mismatch: Annotated[bool, typer.Option("--n-mismatch", help="N and IUPAC codes mismatch everything, N included.")] = False,
    metric: Annotated[str, typer.Option("--metric", "-m", help="edit (unit costs: the only metric of genome).")] = "edit",
    device: Annotated[str, typer.Option("--device", help="auto|cpu|gpu.")] = "auto",
    cpu_method: Annotated[str, typer.Option("--cpu-method", help="CPU path: auto|wfa|edlib.")] = "auto",
    no_prune: Annotated[bool, typer.Option("--no-prune", hidden=True, help="GPU: plain wavefront, no diamond.")] = False,
    threads: Threads = 0,
    summary: Annotated[Optional[str], typer.Option("--summary", help="Also write the summary as TSV to this file.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No notice, progress or summary on stderr.")] = False,
    gpus: Gpus = None,
    scheduler: Scheduler = None,
    cpu_workers: CpuWorkers = 0,
    debug: Debug = False,
) -> None:
    """Exact edit distance and an optimal alignment (CIGAR) of chromosome-scale strings."""
    from ..cluster import ClusterSpec
    from ..genome import run_genome, summary as genome_summary

    def body():
        if metric != "edit":
            raise ConfigError(f"genome aligns with --metric edit only (got {metric!r}); use pairs for affine scoring")
        if cpu_method not in ("auto", "wfa", "edlib"):
            raise ConfigError(f"--cpu-method must be auto, wfa or edlib (got {cpu_method!r})")
        start = time.perf_counter()
        with feedback("genome", threads, quiet) as (n_threads, notice, report):
            cfg = AlignConfig(distance_only=distance_only, n_mismatch=n_mismatch, device=device, threads=n_threads)
            results = run_genome(query, target, output, cfg, query_record, target_record, notice, report,
                                 not no_prune, cpu_method, fmt, command_line(), ClusterSpec(gpus, scheduler, cpu_workers))
        _print_summary(genome_summary(results, time.perf_counter() - start), summary, quiet)

    _run(body, debug)
