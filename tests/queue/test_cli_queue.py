"""The CLI on work-queue tasks: ``reconcile`` does not call unclaimed queued work adoptable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from chongming_task import Client, SqliteTaskStore


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
    return subprocess.run(
        [sys.executable, "-m", "chongming_task.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env={**env, "NO_COLOR": "1"},
        timeout=60,
        check=False,
    )


def test_reconcile_reports_queued_work_as_waiting_not_adoptable(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with SqliteTaskStore(db) as store:
        handle = Client(store).enqueue("job", task_id="job-1")
    result = cli(db, "reconcile", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["adoptable"], report["waiting"], report["lost"]) == ([], ["job-1"], [])
    text = cli(db, "reconcile")
    assert "0 task(s) adoptable" in text.stdout
    assert "1 queued task(s) waiting for a worker owning their bucket" in text.stdout
    with SqliteTaskStore(db) as store:
        assert store.get(handle.task_id).status.value == "queued"  # type: ignore[union-attr]
