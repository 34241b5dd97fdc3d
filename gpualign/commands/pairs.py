"""`gpualign pairs`: record i of one file against record i of another."""

from __future__ import annotations

import click

from ..config import AlignConfig, Scoring, default_batch_bases, default_metric, preset_penalties
from ..errors import ConfigError
from .common import (CHAR_RULE, CPU_WORKERS, DEBUG, GPUS, SCHEDULER, THREADS, check_paths, command_line, feedback,
                     print_summary, run_guarded, stderr_console)
from .usage import argument

EPILOG = ("Examples:\n\n"
          "  gpualign pairs reads.fa refs.fa > out.paf\n\n"
          "  gpualign pairs a.fq.gz b.fa.gz --metric affine -o out.bam\n\n"
          "  zcat a.fa.gz | gpualign pairs - b.fa --distance-only --format tsv\n\n"
          "  gpualign pairs reads.fa refs.fa --mode local --match 2 -x 3 -O 5 -E 2 -f tsv\n\n"
          "  gpualign pairs p.fa q.fa --alphabet protein --matrix BLOSUM62 -O 11 -E 1 --mode local\n\n"
          "General scoring (--mode local|semi-global, --match, --matrix, --alphabet protein) runs on gpu-dp "
          "(cpu-dp without a GPU) and reports SCORES, higher is better: +match (or the matrix entry), "
          "-x per mismatch, -(o + L*e) per gap of length L (BLAST's convention). " + CHAR_RULE)


@argument("query", help="Queries (FASTA/FASTQ, gz ok; '-' = stdin).")
@argument("target", help="Targets: record i is aligned with query record i.")
@click.option("-o", "--output", default="-", help="Output file ('-' = stdout).")
@click.option("--format", "-f", "fmt", help="paf|sam|bam|tsv (default: from -o's extension; PAF on stdout, TSV with --distance-only).")
@click.option("--metric", "-m", help="edit (Levenshtein) or affine (default: edit; affine with --match/--matrix/protein).")
@click.option("--mode", default="global", help="global | local | semi-global (query end to end, target ends free).")
@click.option("--match", type=int, default=0, help="Match bonus M >= 0 (general scoring: results are scores, higher is better).")
@click.option("--matrix", help="Substitution matrix: a name Biopython knows (BLOSUM62, PAM250, NUC.4.4) or a file in that "
              "format (rows: the target's letters, columns: the query's).")
@click.option("--alphabet", default="dna", help="dna | protein (20 amino acids + B Z X U O *; BLOSUM62 unless --matrix).")
@click.option("--unknown", help="Score characters the matrix lacks as this letter (default: an error; general "
                                "scoring only).")
@click.option("--mismatch", "-x", type=int, help="Affine mismatch penalty x (default 4).")
@click.option("--gap-open", "-O", type=int, help="Affine gap-open o: a gap of length l costs o+l*e (default 6; 11 with a matrix).")
@click.option("--gap-extend", "-E", type=int, help="Affine gap-extend e (default 2; 1 with a matrix).")
@click.option("--distance-only", is_flag=True, help="Score only, no CIGAR (faster).")
@click.option("--n-mismatch", is_flag=True, help="N and IUPAC codes mismatch everything, N included.")
@THREADS
@click.option("--device", default="auto", help="auto|cpu|gpu (auto falls back to the CPU with a notice).")
@click.option("--summary", help="Also write the summary as TSV to this file.")
@click.option("--verify", type=float, default=0.0,
              help="Score a random FRACTION of the pairs again with a library that aligns none of them (edlib for "
                   "edit, parasail for affine, Biopython for general scoring), check their CIGARs, and report the "
                   "share whose score agrees and whose CIGAR passes (recall).")
@click.option("--quiet", "-q", is_flag=True, help="No notice, progress or summary on stderr.")
@DEBUG
@GPUS
@SCHEDULER
@CPU_WORKERS
@click.option("--host-parse", is_flag=True, help="Parse the inputs on the host even when a GPU aligns (by default plain FASTA/FASTQ files are parsed on the GPU).")
@click.option("--batch-bases", type=int, hidden=True)
def pairs(query, target, output, fmt, metric, mode, match, matrix, alphabet, unknown, mismatch, gap_open, gap_extend,
          distance_only, n_mismatch, threads, device, summary, verify, quiet, debug, gpus, scheduler, cpu_workers,
          host_parse, batch_bases) -> None:
    """Align record i of QUERY with record i of TARGET (exact; global unless --mode): PAF/SAM/BAM/TSV."""
    from ..cluster import ClusterSpec
    from ..pipeline import run_pairs
    from ..progress import Total, input_bases

    def body():
        check_paths([query, target, matrix], output, summary)
        if not 0.0 <= verify <= 1.0:
            raise ConfigError(f"--verify must be a fraction in [0, 1] (got {verify})")
        sc = Scoring(mode=mode, match=match, matrix=matrix, alphabet=alphabet, unknown=unknown)
        with feedback("pairs", threads, quiet, lambda: Total(bases=input_bases(query, target))) as (n_threads, notice, report):
            sc.validate(n_mismatch)  # (its errors first: '--mode local --match 0 -x 4' is about local mode)
            chosen = default_metric(metric, sc)
            cfg = AlignConfig(metric=chosen, penalties=preset_penalties(sc, mismatch, gap_open, gap_extend, chosen),
                              scoring=sc, distance_only=distance_only, n_mismatch=n_mismatch, device=device,
                              threads=n_threads, device_parse=not host_parse,
                              batch_bases=(default_batch_bases(sc, distance_only, chosen) if batch_bases is None
                                           else batch_bases))
            result = run_pairs(query, target, output, fmt, cfg, command_line(), report, notice, verify,
                               ClusterSpec(gpus, scheduler, cpu_workers))
        print_summary(result, summary, quiet)
        if result.failed and not quiet:
            stderr_console().print(f"gpualign: warning: {result.failed} pair(s) failed; the first: "
                                   f"{result.first_failure} (each one's reason: SAM's zr:Z tag; PAF leaves failed "
                                   "pairs out)", markup=False, soft_wrap=True)

    run_guarded(body, debug, (query, target), quiet)
