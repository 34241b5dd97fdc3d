"""Command line: parse -> AlignConfig -> pipeline; GpualignError -> one line on stderr.

Exit codes: 0 success, 1 runtime/input error, 2 bad options, 130 Ctrl-C,
141 broken pipe (quietly).
"""

from __future__ import annotations

import errno
import os
import shlex
import sys
from typing import Annotated, Optional

import typer

from . import __version__, interrupt, progress
from .config import AlignConfig, Penalties, cap_threads
from .errors import ConfigError, GpualignError

CHAR_RULE = ("Sequences are compared case-insensitively. By default two equal characters match "
             "(N matches N, as in edlib and WFA2-lib); with --n-mismatch every character other than "
             "A/C/G/T mismatches everything, itself included (SAM's NM rule). The rule applies to the "
             "score, the CIGAR =/X, NM and the PAF columns alike.")

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Exact pairwise DNA alignment and edit distance (GPU when present, else CPU).")


def _version(value: bool) -> None:
    if value:
        print(f"gpualign {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    pass


def _stderr():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _print_summary(summary, path: Optional[str], quiet: bool) -> None:
    rows = summary.rows()
    if path:
        with open(path, "w") as fh:
            fh.write("key\tvalue\n" + "".join(f"{k}\t{v}\n" for k, v in rows))
    if quiet:
        return
    from rich.table import Table

    table = Table(title="gpualign summary", show_header=False, box=None)
    for k, v in rows:
        table.add_row(k, v)
    _stderr().print(table)


def _run(body, debug: bool) -> None:
    """Run body() and turn every failure into a one-line message and an exit code."""
    try:
        interrupt.guard(body)  # a signal: workers and temporary files gone, `interrupted`, 130/143/129
    except GpualignError as e:
        if debug:
            raise
        _stderr().print(f"[bold red]error:[/] {e}", markup=True, soft_wrap=True)
        raise typer.Exit(e.exit_code)
    except KeyboardInterrupt:
        raise typer.Exit(130)
    except (BrokenPipeError, OSError) as e:
        if isinstance(e, BrokenPipeError) or getattr(e, "errno", None) == errno.EPIPE:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(141)
        if debug:
            raise
        _stderr().print(f"error: {e}", markup=False, soft_wrap=True)
        raise typer.Exit(1)


@app.command(short_help="Align record i of one file with record i of another.", epilog="Examples:\n\n"
             "  gpualign pairs reads.fa refs.fa > out.paf\n\n"
             "  gpualign pairs a.fq.gz b.fa.gz --metric affine -o out.bam\n\n"
             "  zcat a.fa.gz | gpualign pairs - b.fa --distance-only --format tsv\n\n" + CHAR_RULE)
def pairs(
    query: Annotated[str, typer.Argument(help="Queries (FASTA/FASTQ, gz ok; '-' = stdin).")],
    target: Annotated[str, typer.Argument(help="Targets: record i is aligned with query record i.")],
    output: Annotated[str, typer.Option("-o", "--output", help="Output file ('-' = stdout).")] = "-",
    fmt: Annotated[Optional[str], typer.Option("--format", "-f",
                   help="paf|sam|bam|tsv (default: from -o's extension; PAF on stdout, TSV with --distance-only).")] = None,
    metric: Annotated[str, typer.Option("--metric", "-m", help="edit (Levenshtein) or affine.")] = "edit",
    mismatch: Annotated[int, typer.Option("--mismatch", "-x", help="Affine mismatch penalty x.")] = 4,
    gap_open: Annotated[int, typer.Option("--gap-open", "-O", help="Affine gap-open o (a gap of length l costs o+l*e).")] = 6,
    gap_extend: Annotated[int, typer.Option("--gap-extend", "-E", help="Affine gap-extend e.")] = 2,
    distance_only: Annotated[bool, typer.Option("--distance-only", help="Score only, no CIGAR (faster).")] = False,
    n_mismatch: Annotated[bool, typer.Option("--n-mismatch", help="N and IUPAC codes mismatch everything, N included.")] = False,
    threads: Annotated[int, typer.Option("--threads", "-t", help="CPU worker processes (0 = all cores).")] = 0,
    device: Annotated[str, typer.Option("--device", help="auto|cpu|gpu (auto falls back to the CPU with a notice).")] = "auto",
    summary: Annotated[Optional[str], typer.Option("--summary", help="Also write the summary as TSV to this file.")] = None,
    verify: Annotated[float, typer.Option("--verify", help="Re-align this fraction of pairs with the CPU engine (WFA2-lib) and report the share that is optimal (recall).")] = 0.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No notice, progress or summary on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    batch_bases: Annotated[int, typer.Option("--batch-bases", hidden=True)] = 1 << 25,
) -> None:
    """Align record i of QUERY with record i of TARGET (global, exact): PAF/SAM/BAM/TSV."""
    from .pipeline import run_pairs

    def body():
        if not 0.0 <= verify <= 1.0:
            raise ConfigError(f"--verify must be a fraction in [0, 1] (got {verify})")
        n_threads, capped = cap_threads(threads)
        cfg = AlignConfig(metric=metric, penalties=Penalties(mismatch, gap_open, gap_extend),
                          distance_only=distance_only, n_mismatch=n_mismatch, device=device, threads=n_threads,
                          batch_bases=batch_bases)
        err = _stderr()
        notice = None if quiet else (lambda text: err.print(f"gpualign: {text}", markup=False, soft_wrap=True))
        if capped and notice:
            notice(capped)
        command_line = "gpualign " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        with progress.records(err, "pairs", quiet) as report:  # rich on a terminal, else a line every 10 s
            result = run_pairs(query, target, output, fmt, cfg, command_line, report, notice, verify)
        _print_summary(result, summary, quiet)
        if result.failed and not quiet:
            err.print(f"gpualign: warning: {result.failed} pair(s) failed (see zr:Z / status)", markup=False)

    _run(body, debug)


@app.command(name="paf", short_help="Re-align PAF candidates (minimap2) exactly.", epilog="Examples:\n\n"
             "  minimap2 ref.fa reads.fq > cands.paf && gpualign paf cands.paf reads.fq ref.fa -o out.paf\n\n"
             "  gpualign paf cands.paf reads.fa ref.fa --mode global -o out.bam\n\n" + CHAR_RULE)
def paf_cmd(
    candidates: Annotated[str, typer.Argument(help="PAF candidates (minimap2's 12 columns, any tags; '-' = stdin).")],
    query: Annotated[str, typer.Argument(help="Query reads (FASTA/FASTQ, gz ok; '-' = stdin, then streamed: the "
                                              "PAF must list candidates in the reads' order).")],
    target: Annotated[str, typer.Argument(help="Target FASTA (plain or bgzip; .fai built when missing; not stdin).")],
    output: Annotated[str, typer.Option("-o", "--output", help="Output paf/sam/bam ('-' = stdout, PAF).")] = "-",
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="paf|sam|bam (default: from -o).")] = None,
    mode: Annotated[str, typer.Option("--mode", help="ends-free (pad the target window, free its ends) or global (the box end to end).")] = "ends-free",
    target_pad: Annotated[int, typer.Option("--target-pad", help="Bases added on both sides of the target window (ends-free).")] = 100,
    metric: Annotated[str, typer.Option("--metric", "-m", help="affine (default) or edit.")] = "affine",
    mismatch: Annotated[int, typer.Option("--mismatch", "-x", help="Affine mismatch penalty x.")] = 4,
    gap_open: Annotated[int, typer.Option("--gap-open", "-O", help="Affine gap-open o (a gap of length l costs o+l*e).")] = 6,
    gap_extend: Annotated[int, typer.Option("--gap-extend", "-E", help="Affine gap-extend e.")] = 2,
    cs: Annotated[bool, typer.Option("--cs", help="Add the cs:Z tag (short form) to PAF output.")] = False,
    n_mismatch: Annotated[bool, typer.Option("--n-mismatch", help="N and IUPAC codes mismatch everything.")] = False,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Log bad candidates and go on instead of stopping.")] = False,
    # candidates are long: batches 4x larger than pairs' amortise each batch's levels and launches
    # (H100, 60,000 HiFi / 20,000 ONT candidates: 4.7 / 5.6 s against 7.8 / 12.9 s at 2^25)
    batch_bases: Annotated[int, typer.Option("--batch-bases", hidden=True)] = 1 << 27,
    threads: Annotated[int, typer.Option("--threads", "-t", help="CPU worker processes (0 = all cores).")] = 0,
    device: Annotated[str, typer.Option("--device", help="auto|cpu|gpu.")] = "auto",
    summary: Annotated[Optional[str], typer.Option("--summary", help="Also write the summary as TSV here.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No notice, progress or summary on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Exact re-alignment of PAF candidates: recomputed coordinates, NM/AS/de/cg (and cs)."""
    from .realign import run_paf

    def body():
        n_threads, capped = cap_threads(threads)
        cfg = AlignConfig(metric=metric, penalties=Penalties(mismatch, gap_open, gap_extend), n_mismatch=n_mismatch,
                          device=device, threads=n_threads, batch_bases=batch_bases)
        err = _stderr()
        notice = None if quiet else (lambda text: err.print(f"gpualign: {text}", markup=False, soft_wrap=True))
        if capped and notice:
            notice(capped)
        command_line = "gpualign " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        with progress.records(err, "paf", quiet) as report:  # rich on a terminal, else a line every 10 s
            result = run_paf(candidates, query, target, output, fmt, cfg, command_line, mode, target_pad, cs,
                             skip_bad, notice, report)
        _print_summary(result, summary, quiet)

    _run(body, debug)


@app.command(short_help="Edit distance of chromosome-scale strings.", epilog="Examples:\n\n"
             "  gpualign genome chr21_human.fa chr21_chimp.fa --distance-only -o dist.tsv\n\n"
             "  gpualign genome asm1.fa.gz asm2.fa.gz --distance-only --query-record chr2 --target-record chr2\n\n"
             + CHAR_RULE)
def genome(
    query: Annotated[str, typer.Argument(help="FASTA/FASTQ (gz ok): one string per record.")],
    target: Annotated[str, typer.Argument(help="FASTA/FASTQ: record i is compared with query record i.")],
    distance_only: Annotated[bool, typer.Option("--distance-only", help="Required: exact edit distance only.")] = False,
    output: Annotated[str, typer.Option("-o", "--output", help="TSV output ('-' = stdout).")] = "-",
    query_record: Annotated[Optional[str], typer.Option("--query-record", help="Use only this query record.")] = None,
    target_record: Annotated[Optional[str], typer.Option("--target-record", help="Use only this target record.")] = None,
    n_mismatch: Annotated[bool, typer.Option("--n-mismatch", help="N and IUPAC codes mismatch everything, N included.")] = False,
    device: Annotated[str, typer.Option("--device", help="auto|cpu|gpu.")] = "auto",
    cpu_method: Annotated[str, typer.Option("--cpu-method", help="CPU path: auto|wfa|edlib.")] = "auto",
    no_prune: Annotated[bool, typer.Option("--no-prune", hidden=True, help="GPU: plain wavefront, no diamond.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No notice or progress on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Exact Levenshtein distance between chromosome-scale strings (TSV: distance, identity, time, CUPS)."""
    from .genome import run_genome

    def body():
        if cpu_method not in ("auto", "wfa", "edlib"):
            raise ConfigError(f"--cpu-method must be auto, wfa or edlib (got {cpu_method!r})")
        cfg = AlignConfig(distance_only=distance_only, n_mismatch=n_mismatch, device=device)
        err = _stderr()
        notice = None if quiet else (lambda text: err.print(f"gpualign: {text}", markup=False, soft_wrap=True))
        with progress.genome(err, quiet) as report:  # rich on a terminal, else a line every 10 s
            run_genome(query, target, output, cfg, query_record, target_record, notice, report, not no_prune,
                       cpu_method)

    _run(body, debug)


def main() -> None:
    """The `gpualign` command. Every command has committed or removed its output (and closed its worker
    processes) when the app returns, so the process ends there, without the interpreter's teardown
    (every object collected, cupy's and multiprocessing's exit handlers): H100, a 20-candidate paf run
    2.31-2.35 s -> 2.08 s. What remains after it is the driver releasing the CUDA context (~0.4 s after
    a 50,000-candidate paf run, with ~40 GB of device workspace)."""
    interrupt.install()
    interrupt.phase("start")
    try:
        app(prog_name="gpualign")
        code = 0
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:  # a signal outside a command's body (option parsing)
        code = 130
    if interrupt.signalled():
        interrupt.finish()
    quick_exit(code)


def quick_exit(code) -> None:
    """End the process now with code (SystemExit's: None is 0, text is printed and 1), stdout and stderr
    flushed; a reader that has gone away (a closed pipe) makes it 141."""
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    code = 0 if code is None else int(code)
    for fh in (sys.stdout, sys.stderr):
        try:
            fh.flush()
        except BrokenPipeError:
            code = code or 141
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
