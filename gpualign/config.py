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
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from .errors import ConfigError

METRICS = ("edit", "affine")
DEVICES = ("auto", "cpu", "gpu")


@dataclass(frozen=True)
class Penalties:
    """Gap-affine penalties (match costs 0). WFA2-lib's defaults."""

    mismatch: int = 4
    gap_open: int = 6
    gap_extend: int = 2

    def validate(self) -> None:
        if self.mismatch <= 0:
            raise ConfigError(f"--mismatch must be > 0 (got {self.mismatch})")
        if self.gap_open < 0:
            raise ConfigError(f"--gap-open must be >= 0 (got {self.gap_open})")
        if self.gap_extend <= 0:
            raise ConfigError(f"--gap-extend must be > 0 (got {self.gap_extend})")


EDIT_PENALTIES = Penalties(mismatch=1, gap_open=0, gap_extend=1)


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

    def validate(self) -> "AlignConfig":
        if self.metric not in METRICS:
            raise ConfigError(f"--metric must be one of {', '.join(METRICS)} (got {self.metric!r})")
        if self.device not in DEVICES:
            raise ConfigError(f"--device must be one of {', '.join(DEVICES)} (got {self.device!r})")
        if self.threads < 0:
            raise ConfigError(f"--threads must be >= 0 (got {self.threads})")
        if self.batch_bases <= 0 or self.batch_pairs <= 0:
            raise ConfigError("batch sizes must be > 0")
        if self.metric != "edit":  # the edit metric does not use them (EDIT_PENALTIES)
            self.penalties.validate()
        return self

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
        if self.device not in DEVICES:
            raise ConfigError(f"--device must be one of {', '.join(DEVICES)} (got {self.device!r})")
        if self.threads < 0:
            raise ConfigError(f"--threads must be >= 0 (got {self.threads})")
        if self.rule not in SEARCH_RULES:
            raise ConfigError(f"unknown character rule {self.rule!r}")
        return self

    @property
    def n_threads(self) -> int:
        return AlignConfig(threads=self.threads).n_threads


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
