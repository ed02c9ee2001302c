"""N scheduler processes on one store, one of them SIGKILLed halfway: every firing
runs exactly once (0 duplicates, 0 misses)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from _store_spec import open_store
from _workers import start_ready
from chongming_task._model import TaskSnapshot
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery
from chongming_task.testing import wait_until

from ._checks import check_store
from .conftest import SCALE, record

pytestmark = pytest.mark.timeout(240)

NODE = Path(__file__).resolve().parents[1] / "schedule" / "proc_scheduler.py"
T0 = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)


def _set_time(path: Path, when: datetime) -> None:
    """The shared fake time the scheduler processes read (``tests/schedule/file_clock``)."""
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(repr(when.timestamp()))
    os.replace(scratch, path)


def _start(store_spec: str, owner: str, clock: Path, work: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    argv = [sys.executable, str(NODE), store_spec, owner, str(clock), str(work)]
    return start_ready(argv, owner, env=env)


def _acked(work: Path, owner: str, at: datetime) -> bool:
    try:
        return float((work / f"{owner}.ack").read_text()) >= at.timestamp()
    except (FileNotFoundError, ValueError):
        return False


def test_schedulers_with_one_killed_fire_exactly_once(store_spec: str, tmp_path: Path) -> None:
    firings = 30 * SCALE
    owners = ["node-a", "node-b", "node-c"]
    clock = tmp_path / "clock"
    _set_time(clock, T0)
    nodes = {owner: _start(store_spec, owner, clock, tmp_path) for owner in owners}
    killed = "node-b"
    try:
        for second in range(1, firings + 1):
            now = T0 + timedelta(seconds=second)
            _set_time(clock, now)
            if second == firings // 2:  # killed while it decides this second
                os.kill(nodes[killed].pid, signal.SIGKILL)
                nodes[killed].communicate(timeout=30)
            for owner, process in nodes.items():
                if process.poll() is None:
                    wait_until(lambda: _acked(tmp_path, owner, now), timeout=30)  # noqa: B023
        store = open_store(store_spec)
        try:
            query = TaskQuery(metadata_eq={"schedule": "beat"})

            def settled() -> list[TaskSnapshot]:
                found = store.query(query)
                done = [s for s in found if s.is_terminal or s.owner == killed]
                return found if found and len(done) == len(found) else []

            runs = wait_until(settled, timeout=60, message="every beat run to settle")
            check_store(store, [s.task_id for s in runs])
        finally:
            store.close()
        (tmp_path / "stop").touch()
        for owner, process in nodes.items():
            if owner != killed:
                out, err = process.communicate(timeout=60)
                assert process.returncode == 0, err
                json.loads(out.strip().splitlines()[-1])
    finally:
        (tmp_path / "stop").touch()
        for process in nodes.values():
            if process.poll() is None:
                process.kill()
                process.communicate(timeout=30)
    scheduled = Counter(s.metadata["scheduled_at"] for s in runs)
    expected = {(T0 + timedelta(seconds=n)).isoformat() for n in range(1, firings + 1)}
    duplicates = sum(count - 1 for count in scheduled.values() if count > 1)
    missed = len(expected - set(scheduled))
    assert duplicates == 0
    assert missed == 0
    # The killed node's in-flight run (if any) is its own; every other one succeeded.
    survivors = [s for s in runs if s.owner != killed]
    assert {s.status for s in survivors} <= {TaskStatus.SUCCEEDED}
    record(
        scheduler_firings=firings,
        scheduler_kills=1,
        scheduler_duplicates=duplicates,
        scheduler_misses=missed,
    )
