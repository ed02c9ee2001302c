"""The controller's examples, including 11_best_practice on both stores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=110,
        env=env,
        check=False,
    )
    assert result.returncode == 0, f"{name} failed\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result.stdout


def test_best_practice_on_sqlite() -> None:
    env = {k: v for k, v in os.environ.items() if k != "CHONGMING_TEST_POSTGRES"}
    out = run_example("11_best_practice.py", env=env)
    assert "store: SQLite" in out
    assert out.rstrip().endswith("ok")


@pytest.mark.external_service
def test_best_practice_on_postgres(postgres_dsn: str) -> None:
    out = run_example("11_best_practice.py", "--dsn", postgres_dsn)
    assert "store: PostgreSQL" in out
    assert out.rstrip().endswith("ok")


@pytest.mark.parametrize("name", ["06_controller.py", "08_cross_process.py", "09_long_running.py"])
def test_controller_examples(name: str) -> None:
    assert run_example(name).rstrip().endswith("ok")
