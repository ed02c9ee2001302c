"""The benchmark harness still runs (sizes and timings are not asserted: that is bench/'s job)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(240)
def test_bench_quick_smoke_run_writes_results(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--quick",
            "--only",
            "W2,W6",
            "--rounds",
            "1",
            "--postgres",
            "off",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=230,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "FAILED" not in result.stdout, result.stdout[-3000:]
    document = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    assert document, "latest.json is empty"
    assert (tmp_path / "latest.md").read_text(encoding="utf-8").strip()


@pytest.mark.timeout(60)
def test_the_floor_script_runs_and_reports_a_rate() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "floor.py"), "--tasks", "200", "--rounds", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("floor of W1 semantics: "), result.stdout
    assert "tasks/s median" in result.stdout


def test_a_baseline_round_that_raises_is_measured_once_more_and_reported() -> None:
    """A peer's rare flake does not take its numbers out of a run; ours are never retried."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from harness.core import Metric, Settings, Variant, Workload
        from harness.report import workload_markdown
        from harness.runner import run_workload
    finally:
        sys.path.remove(str(ROOT / "bench"))
    calls = {"peer": 0, "ours": 0}

    def peer() -> dict[str, float]:
        calls["peer"] += 1
        if calls["peer"] == 2:
            raise RuntimeError("cannot start a transaction within a transaction")
        return {"rate": 1.0}

    def ours() -> dict[str, float]:
        calls["ours"] += 1
        if calls["ours"] == 2:
            raise RuntimeError("a bug of ours")
        return {"rate": 2.0}

    class Flaky(Workload):
        key = "WX"
        title = "flaky peer"
        metrics = (Metric("rate", "1/s", True),)

        def variants(self, settings: Settings) -> list[Variant]:
            return [
                Variant("ours", "ours", ours),
                Variant("peer", "peer", peer, baseline=True),
            ]

    result = run_workload(Flaky(), Settings(rounds=3, warmup=0), log=lambda message: None)
    peer_result, ours_result = result.by_key("peer"), result.by_key("ours")
    assert peer_result is not None
    assert ours_result is not None
    assert peer_result.error is None
    assert peer_result.samples["rate"] == [1.0, 1.0, 1.0]  # the failed round, measured again
    assert len(peer_result.retried) == 1
    assert peer_result.retried[0].startswith(
        "RuntimeError: cannot start a transaction within a transaction"
    )
    assert ours_result.error is not None  # ours: reported, not retried
    assert "a bug of ours" in ours_result.error
    assert "measured once more" in "\n".join(workload_markdown(result))
