"""The vocabulary of the harness: metrics, variants, workloads, targets and settings.

A *workload* is one question (W1 throughput, W2 latency, ...). It offers *variants*:
our library on some store, and the baselines a user would pick instead. Every variant
returns a flat ``{metric: value}`` mapping per measurement; the runner interleaves the
variants round by round so that machine noise (a neighbour's burst, a thermal step)
hits every side alike, which is what makes the ratios honest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal


class Unavailable(Exception):
    """A variant (or workload) cannot run here yet; the message says why.

    Raised when a feature of our library has not landed, a peer is not installed or
    PostgreSQL is not reachable. The harness prints "not available yet (reason)"
    instead of failing, so it works from the first day of the project.
    """


@dataclass(frozen=True)
class Metric:
    """One reported number of a variant."""

    name: str
    unit: str
    higher_is_better: bool
    label: str = ""

    @property
    def header(self) -> str:
        """Column header used in the Markdown table."""
        return f"{self.label or self.name} ({self.unit})"


@dataclass
class Variant:
    """One side of a comparison: ours on some store, or a baseline.

    ``measure`` performs one complete measurement (set-up outside the timed section is
    fine) and returns the metrics. ``setup``/``teardown`` run once around all rounds.
    """

    key: str
    label: str
    measure: Callable[[], Mapping[str, float]]
    baseline: bool = False
    unavailable: str | None = None
    setup: Callable[[], None] | None = None
    teardown: Callable[[], None] | None = None
    notes: str = ""
    warmup: bool = True
    """False where a warm-up buys nothing (a fresh process or file every round)."""
    warmup_measure: Callable[[], Mapping[str, float]] | None = None
    """A lighter measurement for the warm-up (imports, caches), if ``measure`` is long."""


@dataclass(frozen=True)
class Target:
    """A goal, checked against medians; printed as met / missed.

    Either an absolute ``threshold`` or ``factor`` x the same metric of ``baseline``.
    """

    text: str
    variant: str
    metric: str
    op: Literal["<=", ">="]
    threshold: float | None = None
    baseline: str | None = None
    factor: float = 1.0


@dataclass(frozen=True)
class Settings:
    """Sizes and round counts; ``--quick`` shrinks them for a smoke run."""

    quick: bool = False
    rounds: int = 5
    warmup: int = 1
    postgres_dsn: str | None = None
    w1_tasks: int = 2000
    w2_samples: int = 200
    w3_seconds_per_round: float = 4.0
    w3_rounds: int = 5
    w4_stops: int = 100
    """Stops per round of the thread variants (W4's p50 target is read on these)."""
    w4_process_stops: int = 20
    """Stops per round of the process and cross-process variants (a spawn each)."""
    w5_big: int = 1_000_000
    w5_reconcile: int = 100_000
    w5_memory: int = 100_000
    w5_queries: int = 20
    w6_tasks: int = 500
    variant_budget_s: float = 60.0
    """Measured seconds one variant may take; past it (after ``min_rounds``) it stops."""
    min_rounds: int = 3
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def quick_settings(cls, postgres_dsn: str | None) -> Settings:
        """A run that exercises every code path in well under a minute."""
        return cls(
            quick=True,
            rounds=2,
            warmup=1,
            postgres_dsn=postgres_dsn,
            w1_tasks=200,
            w2_samples=40,
            w3_seconds_per_round=2.0,
            w3_rounds=1,
            w4_stops=10,
            w4_process_stops=3,
            w5_big=20_000,
            w5_reconcile=5_000,
            w5_memory=10_000,
            w5_queries=5,
            w6_tasks=100,
            variant_budget_s=8.0,
            min_rounds=1,
        )


class Workload:
    """Base class of a workload; subclasses fill the class attributes and variants()."""

    key: str = ""
    title: str = ""
    description: str = ""
    metrics: Sequence[Metric] = ()
    targets: Sequence[Target] = ()
    #: Metrics that get a ratio row (default: all); W1 reports tasks/s, not also seconds.
    ratio_metrics: Sequence[str] | None = None

    def rounds(self, settings: Settings) -> int:
        """Measured rounds per variant (after the warm-up)."""
        return settings.rounds

    def warmup(self, settings: Settings) -> int:
        """Discarded rounds per variant before measuring."""
        return settings.warmup

    def variants(self, settings: Settings) -> list[Variant]:
        """Every side of this workload, available or not."""
        raise NotImplementedError

    def comparisons(self, variants: Sequence[Variant]) -> list[tuple[str, str]]:
        """(ours, baseline) pairs to report ratios for: every ours x every baseline."""
        ours = [v.key for v in variants if not v.baseline]
        bases = [v.key for v in variants if v.baseline]
        return [(o, b) for o in ours for b in bases]

    def settings_notes(self) -> Mapping[str, object]:
        """Durability and tuning settings this workload used (filled while running)."""
        return {}
