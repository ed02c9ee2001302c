"""Every runnable example under examples/ runs to completion and exits 0.

Examples are documentation that executes: each one asserts what it shows, so a
green run here means the docs still tell the truth. Modules that only define tasks
for other examples (``*_tasks.py``, ``_*.py``) are not scripts and are skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _scripts() -> list[Path]:
    return sorted(
        path
        for path in EXAMPLES.glob("*.py")
        if not path.name.startswith("_") and not path.name.endswith("_tasks.py")
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("script", _scripts(), ids=lambda path: path.name)
def test_example_runs(script: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLES), env.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert result.returncode == 0, (
        f"{script.name} exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
    )
    assert "Traceback" not in result.stderr, result.stderr[-4000:]
