"""Run one workload: warm-up, then interleaved rounds over every available variant.

Rounds alternate direction (A B C, then C B A, ...): each side is measured right
next to the others, and no side always runs first after a pause or last after a
burst of garbage. A variant that raises ``Unavailable`` is reported as such; one that
raises anything else is reported with its error and dropped from later rounds, so a
single broken side never hides the numbers of the others.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core import Metric, Settings, Target, Unavailable, Variant, Workload
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
    seconds: float = 0.0
    """Time spent in measured rounds (the budget counts it)."""
    cut: str | None = None
    """Why this variant has fewer rounds than the others (time budget), if it has."""
    retried: list[str] = field(default_factory=list)
    """Errors of a baseline's rounds that were measured again (see ``run_workload``)."""

    def summary(self) -> dict[str, Summary]:
        """Per-metric median/min/max over the measured rounds."""
        return {name: Summary.of(vals) for name, vals in self.samples.items() if vals}

    def record(self, metrics: Mapping[str, float]) -> None:
        """Append one round's metrics."""
        for name, value in metrics.items():
            self.samples.setdefault(name, []).append(float(value))

    def to_json(self) -> dict[str, Any]:
        """Every field, raw samples included, so the parent's report equals the child's."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VariantResult:
        """The inverse of ``to_json`` (JSON keeps floats exact, lists come back as lists)."""
        return cls(
            key=data["key"],
            label=data["label"],
            baseline=bool(data["baseline"]),
            notes=data["notes"],
            unavailable=data.get("unavailable"),
            error=data.get("error"),
            samples={name: [float(v) for v in vals] for name, vals in data["samples"].items()},
            seconds=float(data["seconds"]),
            cut=data.get("cut"),
            retried=list(data.get("retried", [])),
        )


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
    error: str | None = None
    """Why the workload as a whole produced nothing (its child process failed), if so."""

    def by_key(self, key: str) -> VariantResult | None:
        """The result of variant ``key``, if it exists."""
        return next((v for v in self.variants if v.key == key), None)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form that a parent process turns back into this result.

        The workload travels as its description plus ``settings_notes()``: those notes
        are filled while the workload runs, so only the process that ran it knows them.
        Values JSON cannot hold are written as text, as latest.json has always done.
        """
        w = self.workload
        data = {
            "workload": {
                "key": w.key,
                "title": w.title,
                "description": w.description,
                "metrics": [dataclasses.asdict(m) for m in w.metrics],
                "targets": [dataclasses.asdict(t) for t in w.targets],
                "ratio_metrics": None if w.ratio_metrics is None else list(w.ratio_metrics),
                "settings_notes": dict(w.settings_notes()),
            },
            "variants": [v.to_json() for v in self.variants],
            "comparisons": [list(pair) for pair in self.comparisons],
            "rounds": self.rounds,
            "warmup": self.warmup,
            "seconds": self.seconds,
            "unavailable": self.unavailable,
            "quick": self.quick,
            "error": self.error,
        }
        # Through text once, so that what the parent reads is exactly what it gets here.
        loaded: dict[str, Any] = json.loads(json.dumps(data, default=str))
        return loaded

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkloadResult:
        """The inverse of ``to_json``; the workload comes back as a ``RecordedWorkload``."""
        return cls(
            workload=RecordedWorkload.from_json(data["workload"]),
            variants=[VariantResult.from_json(v) for v in data["variants"]],
            comparisons=[(str(o), str(b)) for o, b in data["comparisons"]],
            rounds=int(data["rounds"]),
            warmup=int(data["warmup"]),
            seconds=float(data["seconds"]),
            unavailable=data.get("unavailable"),
            quick=bool(data.get("quick", False)),
            error=data.get("error"),
        )


class RecordedWorkload(Workload):
    """A workload as another process ran it: its description and its settings notes.

    The report reads a workload's key, title, metrics, targets and the settings it used;
    this holds exactly those, so a result read back from a child process reports the
    same as the live object did. It cannot run (``variants`` raises).
    """

    def __init__(
        self,
        *,
        key: str,
        title: str,
        description: str,
        metrics: Sequence[Metric],
        targets: Sequence[Target],
        ratio_metrics: Sequence[str] | None,
        settings_notes: Mapping[str, object],
    ) -> None:
        self.key = key
        self.title = title
        self.description = description
        self.metrics = tuple(metrics)
        self.targets = tuple(targets)
        self.ratio_metrics = None if ratio_metrics is None else tuple(ratio_metrics)
        self._settings_notes = dict(settings_notes)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedWorkload:
        """Rebuild from the ``workload`` part of ``WorkloadResult.to_json``."""
        return cls(
            key=data["key"],
            title=data["title"],
            description=data["description"],
            metrics=[Metric(**m) for m in data["metrics"]],
            targets=[Target(**t) for t in data["targets"]],
            ratio_metrics=data.get("ratio_metrics"),
            settings_notes=data.get("settings_notes", {}),
        )

    def variants(self, settings: Settings) -> list[Variant]:
        """A recorded workload only reports; running it again would need the original."""
        raise TypeError(f"{self.key} was recorded by another process and cannot run here")

    def settings_notes(self) -> Mapping[str, object]:
        """The notes the workload had filled when its process finished."""
        return self._settings_notes


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
                if result.error or result.unavailable or result.cut:
                    continue
                if not measured and not variant.warmup:
                    continue
                if measured and _over_budget(result, settings, rounds):
                    done = len(next(iter(result.samples.values()), []))
                    result.cut = (
                        f"{done} of {rounds} rounds: {result.seconds:.0f} s measured, "
                        f"budget {settings.variant_budget_s:.0f} s per variant"
                    )
                    log(f"{workload.key} {variant.key}: stopped after {result.cut}")
                    continue
                gc.collect()
                t0 = time.perf_counter()
                measure = variant.measure
                if not measured and variant.warmup_measure is not None:
                    measure = variant.warmup_measure
                try:
                    metrics = _measure(measure, variant, result, workload.key, log)
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
                    result.seconds += time.perf_counter() - t0
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


def _measure(
    measure: Callable[[], Mapping[str, float]],
    variant: Variant,
    result: VariantResult,
    workload: str,
    log: Log,
) -> Mapping[str, float]:
    """One round; a baseline's round that raises is measured once more.

    A peer is third-party code run the way its users run it, and its rare flakes
    (Huey's shared SQLite connection once raised "cannot start a transaction within
    a transaction" in one round of twenty) should not take its numbers, and every
    ratio against it, out of a whole run. The error is kept and reported
    (``retried``). Our own variants are never retried: a failure of ours is a bug.
    """
    try:
        return measure()
    except Unavailable:
        raise
    except Exception as exc:
        if not variant.baseline or result.retried:
            raise
        result.retried.append(_describe(exc))
        log(f"{workload} {variant.key}: round failed ({result.retried[-1]}); measuring it again")
        gc.collect()
        return measure()


def _over_budget(result: VariantResult, settings: Settings, rounds: int) -> bool:
    """Whether another round would push ``result`` past the per-variant time budget.

    A variant always gets ``min_rounds``; after that, it stops when one more round
    (at its average cost so far) would exceed ``variant_budget_s``. The report says so.
    """
    done = len(next(iter(result.samples.values()), []))
    if done < settings.min_rounds or done >= rounds or done == 0:
        return False
    return result.seconds + result.seconds / done > settings.variant_budget_s


def _describe(exc: BaseException) -> str:
    """One line naming the error, plus where it came from (last frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"
