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
