"""Run one workload: warm-up, then interleaved rounds over every available variant.

Rounds alternate direction (A B C, then C B A, ...): each side is measured right
next to the others, and no side always runs first after a pause or last after a
burst of garbage. A variant that raises ``Unavailable`` is reported as such; one that
raises anything else is reported with its error and dropped from later rounds, so a
single broken side never hides the numbers of the others.
"""

from __future__ import annotations

import gc
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from harness.core import Settings, Unavailable, Variant, Workload
from harness.stats import Summary


@dataclass
class VariantResult:
    """What happened to one variant across all rounds."""

    key: str
    label: str
    baseline: bool
    notes: str
    unavailable: str | None = None
    error: str | None = None
    samples: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Summary]:
        """Per-metric median/min/max over the measured rounds."""
        return {name: Summary.of(vals) for name, vals in self.samples.items() if vals}

    def record(self, metrics: Mapping[str, float]) -> None:
        """Append one round's metrics."""
        for name, value in metrics.items():
            self.samples.setdefault(name, []).append(float(value))


@dataclass
class WorkloadResult:
    """Everything the report needs about one workload."""

    workload: Workload
    variants: list[VariantResult]
    comparisons: list[tuple[str, str]]
    rounds: int
    warmup: int
    seconds: float
    unavailable: str | None = None
    quick: bool = False

    def by_key(self, key: str) -> VariantResult | None:
        """The result of variant ``key``, if it exists."""
        return next((v for v in self.variants if v.key == key), None)


Log = Callable[[str], None]


def stderr_log(message: str) -> None:
    """Progress goes to stderr so stdout stays the final table."""
    print(message, file=sys.stderr, flush=True)


def _call(fn: Callable[[], object] | None) -> None:
    if fn is not None:
        fn()


def _fmt(metrics: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:.4g}" for k, v in metrics.items())


def run_workload(workload: Workload, settings: Settings, log: Log = stderr_log) -> WorkloadResult:
    """Measure every available variant of ``workload`` in interleaved rounds."""
    started = time.perf_counter()
    rounds, warmup = workload.rounds(settings), workload.warmup(settings)
    try:
        variants = workload.variants(settings)
    except Unavailable as exc:
        log(f"{workload.key}: not available yet ({exc})")
        return WorkloadResult(
            workload, [], [], rounds, warmup, 0.0, unavailable=str(exc), quick=settings.quick
        )
    results = {
        v.key: VariantResult(v.key, v.label, v.baseline, v.notes, unavailable=v.unavailable)
        for v in variants
    }
    active: list[Variant] = []
    for variant in variants:
        result = results[variant.key]
        if variant.unavailable is not None:
            log(f"{workload.key} {variant.key}: not available yet ({variant.unavailable})")
            continue
        try:
            _call(variant.setup)
        except Unavailable as exc:
            result.unavailable = str(exc)
            log(f"{workload.key} {variant.key}: not available yet ({exc})")
            continue
        except Exception as exc:
            result.error = _describe(exc)
            log(f"{workload.key} {variant.key}: setup failed: {result.error}")
            continue
        active.append(variant)

    try:
        for index in range(warmup + rounds):
            measured = index >= warmup
            order = active if index % 2 == 0 else list(reversed(active))
            for variant in order:
                result = results[variant.key]
                if result.error or result.unavailable:
                    continue
                gc.collect()
                try:
                    metrics = variant.measure()
                except Unavailable as exc:
                    result.unavailable = str(exc)
                    log(f"{workload.key} {variant.key}: not available yet ({exc})")
                    continue
                except Exception as exc:
                    result.error = _describe(exc)
                    log(f"{workload.key} {variant.key}: FAILED: {result.error}")
                    continue
                phase = f"round {index - warmup + 1}/{rounds}" if measured else "warm-up"
                log(f"{workload.key} {phase} {variant.key}: {_fmt(metrics)}")
                if measured:
                    result.record(metrics)
    finally:
        for variant in active:
            try:
                _call(variant.teardown)
            except Exception as exc:
                log(f"{workload.key} {variant.key}: teardown failed: {_describe(exc)}")
    return WorkloadResult(
        workload=workload,
        variants=list(results.values()),
        comparisons=workload.comparisons(variants),
        rounds=rounds,
        warmup=warmup,
        seconds=time.perf_counter() - started,
        quick=settings.quick,
    )


def _describe(exc: BaseException) -> str:
    """One line naming the error, plus where it came from (last frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"
