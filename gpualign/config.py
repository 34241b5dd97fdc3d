"""One frozen configuration object carries every setting through the program.

Conventions (also in README.md):
- A score is a penalty >= 0, lower is better. For the edit metric it is the
  Levenshtein distance; for the affine metric a mismatch costs x, a gap of
  length l costs o + l*e (WFA2-lib's convention), a match costs 0.
- SAM/PAF ``AS:i`` is the negative penalty.
- query = read = WFA "pattern"; target = reference = WFA "text".
- Character rule: sequences are compared case-insensitively. By default two
  equal characters match (N matches N, as in edlib and WFA2-lib). With
  ``n_mismatch`` every character other than A, C, G, T mismatches everything,
  itself included (SAM's NM rule). The rule applies alike to the score, the
  CIGAR =/X, NM and PAF columns.

General scoring (``Scoring``; the cpu-dp engine, parasail): with a match bonus, a substitution matrix,
a protein alphabet or a mode other than global, the result is a SCORE, higher is better: matches add
the bonus (or the matrix entry), a mismatch subtracts x, a gap of length L subtracts o + L*e (BLAST's
convention: BLAST's "-gapopen 11 -gapextend 1" is o = 11, e = 1). parasail charges open + (L-1)*extend:
it receives open = o + e, extend = e (``parasail_gaps``). Biopython's PairwiseAligner takes
open_gap_score = -(o + e), extend_gap_score = -e. SAM/PAF ``AS:i`` is then the score itself.
Local mode: an alignment whose best score is <= 0 is empty (score 0, no CIGAR).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from .errors import ConfigError

METRICS = ("edit", "affine")
# the largest match bonus, penalty or matrix score taken: parasail's 16-bit functions take the table as int16
# (a larger entry wraps, unflagged), and WFA2-lib's memory grows with the penalties (scores of 2^30 crash it)
SCORE_MAX = 10_000
DEVICES = ("auto", "cpu", "gpu")


@dataclass(frozen=True)
class Penalties:
    """Gap-affine penalties (match costs 0). WFA2-lib's defaults."""

    mismatch: int = 4
    gap_open: int = 6
    gap_extend: int = 2

    def validate(self) -> None:
        for flag, v in (("--mismatch", self.mismatch), ("--gap-open", self.gap_open), ("--gap-extend", self.gap_extend)):
            if v > SCORE_MAX:
                raise ConfigError(f"{flag} must be <= {SCORE_MAX} (got {v})")
        if self.mismatch <= 0:
            raise ConfigError(f"--mismatch must be > 0 (got {self.mismatch})")
        if self.gap_open < 0:
            raise ConfigError(f"--gap-open must be >= 0 (got {self.gap_open})")
        if self.gap_extend <= 0:
            raise ConfigError(f"--gap-extend must be > 0 (got {self.gap_extend})")


EDIT_PENALTIES = Penalties(mismatch=1, gap_open=0, gap_extend=1)

MODES = ("global", "local", "semi-global")
ALPHABETS = ("dna", "protein")
# DNA scoring accepts the nucleotides and the IUPAC codes; protein: 20 amino acids plus B Z X U O *
DNA_LETTERS = "ACGTURYKMSWBDHVN"
PROTEIN_LETTERS = "ACDEFGHIKLMNPQRSTVWYBZXUO*"
PROTEIN_DEFAULT_MATRIX = "BLOSUM62"
# cpu-dp CIGARs: parasail's traceback keeps about 2 bytes per cell (n*m) in memory, per worker
DP_TRACE_CELLS = 1 << 31


@dataclass(frozen=True)
class Scoring:
    """General scoring (parasail's model): the alignment mode, a match bonus or a substitution matrix
    (a name Biopython's substitution_matrices.load knows, or a file in that format), the alphabet, and
    the letter unknown characters become (None: they are an error). Gaps and the mismatch come from
    Penalties. The default (global, match 0, no matrix, DNA) is the WFA penalty model."""

    mode: str = "global"
    match: int = 0
    matrix: str | None = None
    alphabet: str = "dna"
    unknown: str | None = None

    @property
    def general(self) -> bool:
        """True when the WFA penalty model cannot serve: the cpu-dp engine runs and scores are scores."""
        return self.mode != "global" or self.match != 0 or self.matrix is not None or self.alphabet != "dna"

    @property
    def matrix_name(self) -> str | None:
        """The matrix to load: the one asked for, or BLOSUM62 for protein without one."""
        if self.matrix is None and self.alphabet == "protein":
            return PROTEIN_DEFAULT_MATRIX
        return self.matrix

    def validate(self, n_mismatch: bool) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"--mode must be one of {', '.join(MODES)} (got {self.mode!r})")
        if self.alphabet not in ALPHABETS:
            raise ConfigError(f"--alphabet must be one of {', '.join(ALPHABETS)} (got {self.alphabet!r})")
        if not 0 <= self.match <= SCORE_MAX:
            raise ConfigError(f"--match must be >= 0 and <= {SCORE_MAX} (got {self.match})")
        given = "--matrix" if self.matrix is not None else f"--alphabet protein (scored by {PROTEIN_DEFAULT_MATRIX})"
        if self.matrix_name is not None and self.match:
            raise ConfigError(f"--match and {given} exclude each other (the matrix holds the match scores)")
        if n_mismatch and self.matrix_name is not None:
            raise ConfigError(f"--n-mismatch applies to match/mismatch DNA scoring, not to {given}")
        if self.mode == "local" and not self.match and self.matrix_name is None:
            raise ConfigError("--mode local needs scores above 0 for matches: give --match M or --matrix "
                              "(with penalties alone every local alignment is empty)")
        if self.unknown is not None and (len(self.unknown) != 1 or not self.unknown.isprintable()):
            raise ConfigError(f"--unknown must be one character (got {self.unknown!r})")
        if self.unknown is not None and not self.general:
            raise ConfigError("--unknown applies to general scoring (--match, --matrix, --alphabet protein, "
                              "--mode local|semi-global), not to the edit or gap-affine metric's DNA rule")


MATRIX_GAPS = (11, 1)  # BLAST's defaults for BLOSUM62 (o + L*e): the preset gaps with a matrix


def preset_penalties(scoring: Scoring, mismatch: int | None, gap_open: int | None,
                     gap_extend: int | None, metric: str = "affine") -> Penalties:
    """Penalties from the flags given (None: not given) over the preset: WFA2-lib's 4/6/2, or gaps
    11/1 with a substitution matrix. An explicit flag always wins; the edit metric (unit costs) does not
    use them, nor a matrix -x, so such a flag is an error rather than ignored."""
    if metric == "edit":
        given = [f for f, v in (("-x", mismatch), ("-O", gap_open), ("-E", gap_extend)) if v is not None]
        if given:
            raise ConfigError(f"{'/'.join(given)} set affine penalties, which the edit metric (unit costs) does "
                              f"not use: add --metric affine, or leave {'them' if len(given) > 1 else 'it'} out")
    base = Penalties()
    if scoring.matrix_name is not None:
        if mismatch is not None:  # (the matrix holds the mismatch scores, as it holds the match scores)
            given = "--matrix" if scoring.matrix is not None else "--alphabet protein (scored by a matrix)"
            raise ConfigError(f"-x and {given} exclude each other (the matrix holds the mismatch scores)")
        base = replace(base, gap_open=MATRIX_GAPS[0], gap_extend=MATRIX_GAPS[1])
    given = {k: v for k, v in (("mismatch", mismatch), ("gap_open", gap_open), ("gap_extend", gap_extend))
             if v is not None}
    return replace(base, **given)


def default_batch_bases(scoring: Scoring, distance_only: bool, metric: str = "edit") -> int:
    """Bases per PairBatch unless given. 2^26 for general scoring's scores only (gpu-dp's work per batch,
    its launch plan and two waits for the device, paid half as often: 1M DNA pairs 150 x 300 scored 1.3
    times faster than in batches of 2^25; with CIGARs the kernels are longer and no faster so, and 100k
    proteins in two batches of 96k and 4k pairs barely overlap: docs/notes/benchmark-history.md). 2^26 for
    the affine metric: the affine engine's host work per batch is paid half as often (1M x 1 kbp at 10%,
    whole command ~12% faster with or without CIGARs, 4-23% a round; 1M x 150 bp alike: docs/benchmarks.md).
    Else 2^25 (eWFA: 1M x 150 bp no faster in batches of 2^26)."""
    if scoring.general:
        return 1 << 26 if distance_only else 1 << 25
    return 1 << 26 if metric == "affine" else 1 << 25


def default_metric(metric: str | None, scoring: Scoring) -> str:
    """--metric as given, else affine for a match bonus, a matrix or protein (they score with -x/-O/-E),
    else edit."""
    if metric is not None:
        return metric
    return "affine" if scoring.match or scoring.matrix_name else "edit"


@dataclass(frozen=True)
class AlignConfig:
    """Every alignment setting; engines read their parameters from here only."""

    metric: str = "edit"
    penalties: Penalties = field(default_factory=Penalties)
    distance_only: bool = False
    n_mismatch: bool = False
    device: str = "auto"
    threads: int = 0  # 0 = all cores
    batch_bases: int = 1 << 25  # bases per PairBatch (query + target)
    batch_pairs: int = 1 << 18  # pairs per PairBatch at most
    ends_free_target: bool = False  # semi-global: the query end to end, the target's ends free
    scoring: Scoring = field(default_factory=Scoring)  # general scoring (cpu-dp engine) when .general
    # on a GPU, `pairs` parses its (regular) input files there (io/fastx_device.py), `paf` lays out its sequences
    # there (io/paf_device.py)
    device_parse: bool = True

    def validate(self) -> "AlignConfig":
        if self.metric not in METRICS:
            raise ConfigError(f"--metric must be one of {', '.join(METRICS)} (got {self.metric!r})")
        check_device_threads(self.device, self.threads)
        if self.batch_bases <= 0 or self.batch_pairs <= 0:
            raise ConfigError("batch sizes must be > 0")
        if self.metric != "edit":  # the edit metric does not use them (EDIT_PENALTIES)
            self.penalties.validate()
        self.scoring.validate(self.n_mismatch)
        if self.metric == "edit" and (self.scoring.match or self.scoring.matrix_name):
            raise ConfigError("--match/--matrix/--alphabet protein score with -x/-O/-E: use --metric affine "
                              "(the default with them)")
        return self

    @property
    def general(self) -> bool:
        """General scoring (Scoring.general): results are scores, higher is better."""
        return self.scoring.general

    def parasail_gaps(self) -> tuple[int, int]:
        """(open, extend) for parasail, which charges open + (L-1)*extend: open = o + e, extend = e."""
        p = self.effective_penalties
        return p.gap_open + p.gap_extend, p.gap_extend

    @property
    def effective_penalties(self) -> Penalties:
        """The penalties the score is computed with (edit = x1, o0, e1)."""
        return EDIT_PENALTIES if self.metric == "edit" else self.penalties

    @property
    def n_threads(self) -> int:
        if self.threads:
            return self.threads
        return usable_cores()

    def with_(self, **kw) -> "AlignConfig":
        return replace(self, **kw)

    def to_pywfa_kwargs(self, long_pairs: bool = False) -> dict:
        """Every WFA2-lib attribute set explicitly: exact, end-to-end, no heuristic.

        long_pairs selects BiWFA (O(s) memory; faster than the default mode on long noisy reads, slower on
        short pairs). Ends-free alignment keeps the medium memory mode instead.
        """
        p = self.penalties
        if self.metric == "edit" and self.ends_free_target:
            # WFA2-lib's levenshtein ends-free backtrace can report a mismatch as a match (seen with
            # pywfa 0.6.0; caught by check_cigar): the same metric as linear gaps, x = 1, indel = 1
            distance, p = "linear", EDIT_PENALTIES
        else:
            distance = "levenshtein" if self.metric == "edit" else "affine"
        return dict(
            distance=distance,
            match=0,
            mismatch=p.mismatch,
            gap_opening=p.gap_open,
            gap_extension=p.gap_extend,
            scope="score" if self.distance_only else "full",
            span="ends-free" if self.ends_free_target else "end-to-end",
            pattern_begin_free=0,
            pattern_end_free=0,
            text_begin_free=0,  # set per pair to the target length when ends_free_target
            text_end_free=0,
            heuristic=None,
            memory_mode=("medium" if self.ends_free_target else "biwfa") if long_pairs else "high",
            max_steps=0,
            max_memory=0,
        )


SEARCH_RULES = ("default", "n_mismatch", "iupac")
STRANDS = ("both", "+", "-")


@dataclass(frozen=True)
class SearchConfig:
    """Settings of `gpualign search` (approximate pattern search, unit edit costs)."""

    k: int
    strand: str = "both"
    all_ends: bool = False  # one hit per end position, not one per run of end positions
    max_hits: int = 0  # per pattern, 0 = no limit
    rule: str = "default"  # character rule: default | n_mismatch | iupac (search/alphabet.py)
    force: bool = False  # allow k >= pattern length
    device: str = "auto"
    threads: int = 0  # 0 = all cores
    chunk_bases: int = 0  # text bases per chunk, 0 = the engine's choice

    def validate(self) -> "SearchConfig":
        if self.k < 0:
            raise ConfigError(f"-k must be >= 0 (got {self.k})")
        if self.k > 1023:
            raise ConfigError(f"-k must be <= 1023 (got {self.k})")
        if self.strand not in STRANDS:
            raise ConfigError(f"--strand must be one of {', '.join(STRANDS)} (got {self.strand!r})")
        if self.max_hits < 0:
            raise ConfigError(f"--max-hits-per-pattern must be >= 0 (got {self.max_hits})")
        if self.chunk_bases < 0:
            raise ConfigError(f"--chunk-bases must be >= 0 (0: the engine's choice; got {self.chunk_bases})")
        check_device_threads(self.device, self.threads)
        if self.rule not in SEARCH_RULES:
            raise ConfigError(f"unknown character rule {self.rule!r}")
        return self

    @property
    def n_threads(self) -> int:
        return self.threads or usable_cores()


def check_device_threads(device: str, threads: int) -> None:
    """The options every command shares."""
    if device not in DEVICES:
        raise ConfigError(f"--device must be one of {', '.join(DEVICES)} (got {device!r})")
    if threads < 0:
        raise ConfigError(f"--threads must be >= 0 (got {threads})")


def usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cap_threads(threads: int) -> tuple[int, str | None]:
    """The command line's -t capped at the usable cores (each is a CPU-bound process: more only take
    memory), and the notice saying so, or None."""
    cores = usable_cores()
    if threads > cores:
        return cores, f"-t {threads} is more than the {cores} usable cores: using {cores} processes"
    return threads, None
