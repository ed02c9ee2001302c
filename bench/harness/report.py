"""Turn workload results into the JSON record, the Markdown table and target verdicts.

Ratios are always *ours ÷ baseline* of the same metric's median, measured in the same
run. Whether a ratio above 1 is good depends on the metric (throughput: yes; time or
latency: no); the table says which next to each ratio.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core import Metric, Target
from harness.runner import VariantResult, WorkloadResult


@dataclass(frozen=True)
class Verdict:
    """The outcome of one target."""

    target: Target
    status: str  # "met" | "missed" | "n/a"
    measured: str
    wanted: str

    def to_dict(self) -> dict[str, object]:
        """JSON form; ``definition`` lets a reader re-check the target on other medians
        (bench/ab.py does, on the medians of several runs)."""
        t = self.target
        return {
            "target": t.text,
            "status": self.status,
            "measured": self.measured,
            "wanted": self.wanted,
            "definition": {
                "variant": t.variant,
                "metric": t.metric,
                "op": t.op,
                "threshold": t.threshold,
                "baseline": t.baseline,
                "factor": t.factor,
            },
        }


def _median(result: WorkloadResult, key: str, metric: str) -> float | None:
    variant = result.by_key(key)
    if variant is None:
        return None
    summary = variant.summary().get(metric)
    return summary.median if summary else None


def evaluate(result: WorkloadResult, target: Target) -> Verdict:
    """Check ``target`` against the medians of ``result`` (only indicative in --quick)."""
    verdict = _evaluate(result, target)
    if result.quick and verdict.status in ("met", "missed"):
        return Verdict(target, f"{verdict.status} (smoke sizes)", verdict.measured, verdict.wanted)
    return verdict


def _evaluate(result: WorkloadResult, target: Target) -> Verdict:
    value = _median(result, target.variant, target.metric)
    if target.baseline is not None:
        base = _median(result, target.baseline, target.metric)
        wanted = f"{target.op} {target.factor:g}x {target.baseline}"
        if value is None or base is None or base == 0:
            return Verdict(target, "n/a", "not measured", wanted)
        ratio = value / base
        ok = ratio >= target.factor if target.op == ">=" else ratio <= target.factor
        measured = f"{ratio:.2f}x ({_num(value)} vs {_num(base)} {target.metric})"
        return Verdict(target, "met" if ok else "missed", measured, wanted)
    assert target.threshold is not None
    wanted = f"{target.op} {_num(target.threshold)} {target.metric}"
    if value is None:
        return Verdict(target, "n/a", "not measured", wanted)
    ok = value >= target.threshold if target.op == ">=" else value <= target.threshold
    return Verdict(target, "met" if ok else "missed", f"{_num(value)} {target.metric}", wanted)


def comparisons(result: WorkloadResult) -> list[dict[str, Any]]:
    """Every (ours, baseline) ratio for every metric both sides measured."""
    out: list[dict[str, Any]] = []
    for ours_key, base_key in result.comparisons:
        ours, base = result.by_key(ours_key), result.by_key(base_key)
        if ours is None or base is None:
            continue
        o_sum, b_sum = ours.summary(), base.summary()
        wanted = result.workload.ratio_metrics
        for metric in result.workload.metrics:
            if wanted is not None and metric.name not in wanted:
                continue
            if metric.name in o_sum and metric.name in b_sum and b_sum[metric.name].median:
                out.append(
                    {
                        "ours": ours_key,
                        "baseline": base_key,
                        "metric": metric.name,
                        "ratio": o_sum[metric.name].median / b_sum[metric.name].median,
                        "higher_is_better": metric.higher_is_better,
                    }
                )
    return out


def workload_json(result: WorkloadResult) -> dict[str, Any]:
    """The machine-readable record of one workload."""
    w = result.workload
    return {
        "key": w.key,
        "title": w.title,
        "description": w.description,
        "unavailable": result.unavailable,
        "error": result.error,
        "rounds": result.rounds,
        "warmup_rounds": result.warmup,
        "seconds": round(result.seconds, 3),
        "metrics": [
            {"name": m.name, "unit": m.unit, "higher_is_better": m.higher_is_better}
            for m in w.metrics
        ],
        "variants": [_variant_json(v) for v in result.variants],
        "comparisons": comparisons(result),
        "targets": [evaluate(result, t).to_dict() for t in w.targets],
        "settings": dict(w.settings_notes()),
    }


def _variant_json(v: VariantResult) -> dict[str, Any]:
    return {
        "key": v.key,
        "label": v.label,
        "baseline": v.baseline,
        "notes": v.notes,
        "status": _status(v),
        "reason": v.unavailable or v.error,
        "rounds": len(next(iter(v.samples.values()), [])),
        "rounds_cut": v.cut,
        "retried_after": v.retried,
        "metrics": {name: s.to_dict() for name, s in v.summary().items()},
    }


def _status(v: VariantResult) -> str:
    if v.unavailable:
        return "not available yet"
    if v.error:
        return "failed"
    return "ok" if v.samples else "no data"


def _num(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _cell(v: VariantResult, metric: Metric) -> str:
    s = v.summary().get(metric.name)
    if s is None:
        return "-"
    return f"{_num(s.median)} ({_num(s.min)}–{_num(s.max)})"


def workload_markdown(result: WorkloadResult) -> list[str]:
    """Markdown lines for one workload: variants table, ratios and target verdicts."""
    w = result.workload
    lines = [f"### {w.key} — {w.title}", ""]
    if result.unavailable:
        return [*lines, f"Not available yet ({result.unavailable}).", ""]
    if result.error:
        head, _, tail = result.error.partition("\n")
        lines.append(f"**FAILED**: {head}")
        if tail.strip():
            lines += ["", "```text", tail.strip("\n"), "```"]
        return [*lines, ""]
    lines.append(
        f"{w.description} Median (min–max) of {result.rounds} rounds"
        + (f" after {result.warmup} warm-up round(s) where useful" if result.warmup else "")
        + ", variants interleaved."
    )
    lines.append("")
    headers = ["variant", *(m.header for m in w.metrics)]
    lines += [_row(headers), _row(["---"] * len(headers))]
    cuts: list[str] = []
    retries: list[str] = []
    for v in result.variants:
        label = f"{v.label}{' *(baseline)*' if v.baseline else ''}"
        if v.cut:
            cuts.append(f"- {v.key}: {v.cut}")
            label += " †"
        retries += [f"- {v.key}: {_escape(error)}" for error in v.retried]
        if v.unavailable or v.error:
            reason = v.unavailable or v.error or ""
            note = "not available yet" if v.unavailable else "FAILED"
            lines.append(_row([label, f"{note}: {_escape(reason)}", *[""] * (len(headers) - 2)]))
        else:
            lines.append(_row([label, *(_cell(v, m) for m in w.metrics)]))
    if cuts:
        lines += ["", "† fewer rounds than the others (per-variant time budget):", "", *cuts]
    if retries:
        lines += ["", "Baseline rounds that raised and were measured once more:", "", *retries]
    ratios = comparisons(result)
    if ratios:
        lines += ["", "Ratios (ours ÷ baseline, medians of the same run):", ""]
        lines += [_row(["ours", "baseline", "metric", "ratio"]), _row(["---"] * 4)]
        for c in ratios:
            better = "higher is better" if c["higher_is_better"] else "lower is better"
            lines.append(
                _row([c["ours"], c["baseline"], c["metric"], f"{c['ratio']:.2f}x ({better})"])
            )
    verdicts = [evaluate(result, t) for t in w.targets]
    if verdicts:
        lines += ["", _row(["target", "wanted", "measured", "verdict"]), _row(["---"] * 4)]
        for d in verdicts:
            mark = f"**{d.status}**" if d.status != "n/a" else "not measured"
            lines.append(_row([d.target.text, d.wanted, d.measured, mark]))
    return [*lines, ""]


def document(header: Mapping[str, Any], results: Sequence[WorkloadResult]) -> str:
    """The whole latest.md: context, then one section per workload, then all targets."""
    lines = ["# Benchmark results", ""]
    for key, value in header.items():
        lines.append(f"- **{key}**: {value}")
    lines.append("")
    for result in results:
        lines += workload_markdown(result)
    lines += ["## All targets", "", _row(["target", "measured", "verdict"]), _row(["---"] * 3)]
    for result in results:
        for target in result.workload.targets:
            d = evaluate(result, target)
            lines.append(_row([d.target.text, d.measured, d.status]))
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_escape(c) for c in cells) + " |"
