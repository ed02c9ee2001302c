"""Real processes: two schedulers on one SQLite file, and on one PostgreSQL schema.

Both scheduler processes read the same fake time from a file (``FileClock``), so the
test moves time by one second twenty times, waits until both processes have ticked at
each second, and then checks that each of the twenty firings ran exactly once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from _store_spec import open_store
from _workers import start_ready
from chongming_task._model import TaskSnapshot
from chongming_task.core._clock import SystemClock
from chongming_task.schedule import ScheduleAdmin
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery
from chongming_task.testing import wait_until

from .file_clock import FileClock

pytestmark = pytest.mark.timeout(120)

NODE = Path(__file__).with_name("proc_scheduler.py")
T0 = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)
FIRINGS = 20


class Node:
    """A ``proc_scheduler.py`` process."""

    def __init__(self, store_spec: str, owner: str, clock: str, work: Path) -> None:
        self.owner = owner
        argv = [sys.executable, str(NODE), store_spec, owner, clock, str(work)]
        self.process = start_ready(argv, owner)

    def finish(self, timeout: float = 60) -> dict[str, int]:
        stdout, stderr = self.process.communicate(timeout=timeout)
        assert self.process.returncode == 0, f"{self.owner} failed:\n{stdout}\n{stderr}"
        result: dict[str, int] = json.loads(stdout.strip().splitlines()[-1])
        return result

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=30)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[[str, str, str], Node]]:
    nodes: list[Node] = []

    def start(store_spec: str, owner: str, clock: str) -> Node:
        node = Node(store_spec, owner, clock, tmp_path)
        nodes.append(node)
        return node

    yield start
    (tmp_path / "stop").touch()
    for node in nodes:
        node.kill()


def acked(work: Path, owner: str, at: datetime) -> bool:
    try:
        return float((work / f"{owner}.ack").read_text()) >= at.timestamp()
    except (FileNotFoundError, ValueError):
        return False


def test_two_scheduler_processes_run_each_firing_exactly_once(
    store_spec: str, tmp_path: Path, spawn: Callable[[str, str, str], Node]
) -> None:
    clock_file = tmp_path / "clock"
    FileClock.write(clock_file, T0)
    nodes = [spawn(store_spec, owner, str(clock_file)) for owner in ("node-a", "node-b")]
    for second in range(1, FIRINGS + 1):
        now = T0 + timedelta(seconds=second)
        FileClock.write(clock_file, now)
        for node in nodes:
            wait_until(lambda: acked(tmp_path, node.owner, now), timeout=20)  # noqa: B023
    store = open_store(store_spec)
    try:
        query = TaskQuery(metadata_eq={"schedule": "beat"})

        def finished() -> list[TaskSnapshot]:
            found = store.query(query)
            return found if found and all(s.is_terminal for s in found) else []

        runs = wait_until(finished, timeout=30, message="every beat run to finish")
        (tmp_path / "stop").touch()
        counts = [node.finish() for node in nodes]
    finally:
        store.close()
    scheduled = sorted(s.metadata["scheduled_at"] for s in runs)
    expected = [(T0 + timedelta(seconds=n)).isoformat() for n in range(1, FIRINGS + 1)]
    assert scheduled == expected  # every second once: none missing, none twice
    assert {s.status for s in runs} == {TaskStatus.SUCCEEDED}
    assert {s.owner for s in runs} <= {"node-a", "node-b"}
    assert sum(c["won"] for c in counts) == FIRINGS
    # The processes raced for the same firings (how often depends on timing).
    assert sum(c["won"] + c["lost"] for c in counts) >= FIRINGS


def test_a_manual_run_requested_by_another_process_reports_its_result(
    store_spec: str, tmp_path: Path, spawn: Callable[[str, str, str], Node]
) -> None:
    node = spawn(store_spec, "node-real", "--real")
    store = open_store(store_spec)
    try:
        admin = ScheduleAdmin(store, clock=SystemClock(), actor="cli")
        command = admin.request_run("report", operator="alice", reason="month end")
        done = admin.wait_for_command(command.command_id, timeout=30)
        assert done.result["ok"] is True
        assert done.result["status"] == "succeeded"
        task = store.get(done.result["task_id"])
        assert task is not None
        assert task.outcome == "report for 2026-01"
        assert task.metadata["trigger"]["operator"] == "alice"
        assert [t.to_status.value for t in store.history(task.task_id)] == [
            "pending",
            "queued",
            "starting",
            "running",
            "succeeded",
        ]
        (tmp_path / "stop").touch()
        node.finish()
    finally:
        store.close()
