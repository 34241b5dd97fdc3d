"""`gpualign search`: every approximate occurrence of many patterns in a genome."""

from __future__ import annotations

import click

from ..config import SearchConfig
from .common import DEBUG, THREADS, check_paths, command_line, feedback, print_summary, run_guarded
from .usage import argument

EPILOG = ("Examples:\n\n"
          "  gpualign search guides.fa genome.fa.gz -k 3 -o hits.tsv\n\n"
          "  gpualign search primers.fa genome.fa -k 2 --strand both -o hits.bed\n\n"
          "  gpualign search guides.fa genome.fa -k 4 --gpus all -o hits.tsv\n\n"
          "Semantics: for a pattern P (strand '-': its reverse complement) and a text record T, D[j] is the "
          "least edit distance between P and any substring of T ending at j. By default each run of "
          "consecutive end positions with D <= k gives one hit, at its least D (the leftmost of those); "
          "--all-ends gives one hit per such end. Every hit carries an optimal alignment (start, end 0-based "
          "half-open, CIGAR =/X/I/D with I = pattern-only bases). Output: TSV (default), SAM/BAM, PAF, BED, "
          "sorted by record (text order), start, end, pattern, strand. Characters: case-insensitive; equal "
          "letters match (N matches N); --n-mismatch: only equal A/C/G/T match; --iupac: a pattern letter "
          "matches each base A/C/G/T it stands for and text letters other than A/C/G/T match nothing. "
          "Patterns: 1 to 1,024 bases. Names: TSV, PAF and BED take any pattern and record names, repeated "
          "or not; SAM/BAM refuse a pattern name that two patterns share (QNAME) and a record name that two "
          "records share (@SQ). --gpus: the text's chunks are scanned on this host's GPUs from this process; "
          "--scheduler/--cpu-workers: by Dask workers (the candidate end positions come back); the hits are "
          "aligned and written here, the same bytes as one process.")

# the distributed path (cluster.py): as for pairs, but only the text's candidate scan runs on the workers
GPUS = click.option("--gpus", help="Scan the text on this host's GPUs from this process: N, 'all' or device numbers "
                                   "(0,2); hits are aligned on the first.")
SCHEDULER = click.option("--scheduler", help="Scan the text on an existing Dask cluster (tcp://host:8786) whose workers have gpualign installed; this process reads, aligns the hits and writes.")
CPU_WORKERS = click.option("--cpu-workers", type=int, default=0, help="Scan the text on N local Dask CPU workers (the distributed path without a GPU).")


@argument("patterns", help="Patterns (FASTA/FASTQ, gz ok), 1 to 1,024 bases each.")
@argument("text", help="Text to search (FASTA, plain/gzip/bgzip; '-' = stdin).")
@click.option("-k", "--max-edits", "k", type=int, required=True, help="Most edits (substitutions, insertions, deletions) in a hit.")
@click.option("-o", "--output", default="-", help="Output file ('-' = stdout).")
@click.option("--format", "-f", "fmt", help="tsv|sam|bam|paf|bed (default: from -o's extension; TSV on stdout).")
@click.option("--strand", default="both", help="both|+|- (-: the pattern's reverse complement).")
@click.option("--all-ends", is_flag=True, help="One hit per end position with <= k edits, not one per locus.")
@click.option("--max-hits-per-pattern", "max_hits", type=int, default=0, help="Keep the first N hits of each pattern (0 = all; the summary names the patterns cut).")
@click.option("--n-mismatch", is_flag=True, help="Only equal A/C/G/T match (N matches nothing).")
@click.option("--iupac", is_flag=True, help="Pattern IUPAC letters match the bases they stand for.")
@click.option("--force", is_flag=True, help="Search even when k >= a pattern's length (it matches everywhere).")
@click.option("--device", default="auto", help="auto|cpu|gpu (auto falls back to the CPU with a notice).")
@THREADS
@click.option("--summary", help="Also write the summary as TSV to this file.")
@click.option("--quiet", "-q", is_flag=True, help="No notice, progress or summary on stderr.")
@DEBUG
@GPUS
@SCHEDULER
@CPU_WORKERS
@click.option("--chunk-bases", type=int, default=0, hidden=True)
def search(patterns, text, k, output, fmt, strand, all_ends, max_hits, n_mismatch, iupac, force, device, threads,
           summary, quiet, debug, gpus, scheduler, cpu_workers, chunk_bases) -> None:
    """All occurrences of patterns with <= k edits (TSV/SAM/BAM/PAF/BED)."""
    from ..cluster import ClusterSpec
    from ..errors import ConfigError
    from ..progress import Total, input_bases
    from ..search.run import run_search

    def body():
        check_paths([patterns, text], output, summary)
        if n_mismatch and iupac:
            raise ConfigError("--n-mismatch and --iupac cannot be combined")
        rule = "iupac" if iupac else "n_mismatch" if n_mismatch else "default"
        with feedback("search", threads, quiet, lambda: Total(bases=input_bases(text))) as (n_threads, notice, report):
            cfg = SearchConfig(k=k, strand=strand, all_ends=all_ends, max_hits=max_hits, rule=rule, force=force,
                               device=device, threads=n_threads, chunk_bases=chunk_bases)
            result = run_search(patterns, text, output, fmt, cfg, command_line(), notice, report,
                                ClusterSpec(gpus, scheduler, cpu_workers))
        print_summary(result, summary, quiet)

    run_guarded(body, debug, (patterns, text), quiet)
