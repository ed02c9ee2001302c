"""Open deviations from the guide found by this audit, as strict xfails.

Each test states what the guide says and fails today; when the behaviour is fixed the
test starts passing and ``xfail_strict`` turns that into a failure, so whoever fixes
it removes the marker. The reasons name the area that owns the fix.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Controller, SqliteTaskStore
from chongming_task.core.state_machine import StateMachine
from chongming_task.model import FailureKind
from chongming_task.policies import Timeout
from chongming_task.testing import FakeClock, wait_until

from .conftest import Gate, S


@pytest.mark.xfail(
    reason=(
        "runtime (supervisor): Timeout.start is only evaluated when the controller "
        "finally starts a queued run (docs/running.md), so a run starved in the queue "
        "never times out; guide §6 says start counts from submission and expiry ends it"
    ),
    strict=True,
)
def test_start_timeout_fires_while_the_run_waits_in_the_queue(gate: Gate) -> None:
    clock = FakeClock()
    controller = Controller(max_parallel=1, clock=clock)
    try:
        controller.register("gate", gate)
        controller.register("quick", lambda ctx: "ok")
        controller.submit("gate", task_id="busy")
        gate.wait_entered()
        waiting = controller.submit("quick", task_id="late", timeout=Timeout(start=30))
        clock.advance(31)  # the slot is still taken
        wait_until(lambda: waiting.done, timeout=1.0, message="late to time out in the queue")
        assert waiting.snapshot.failure is not None
        assert waiting.snapshot.failure.kind is FailureKind.TIMEOUT_START
    finally:
        gate.release.set()
        controller.close(timeout=5)


def test_cli_status_elapsed_of_a_running_task(tmp_path: Path) -> None:
    started = datetime.now(UTC) - timedelta(minutes=2)
    machine = StateMachine.create("long-1", "sync")
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    snapshot = machine.snapshot.replace(
        started_at=started,
        first_started_at=started,
        updated_at=started,
        lease_owner="worker-1",
        lease_until=datetime.now(UTC) + timedelta(minutes=5),
    )
    store = SqliteTaskStore(str(tmp_path / "tasks.db"))
    store.create(snapshot, machine.transitions)
    store.close()
    env: dict[str, Any] = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
    command = [sys.executable, "-m", "chongming_task.cli", "--db", "tasks.db"]
    ps = subprocess.run(
        [*command, "ps"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    status = subprocess.run(
        [*command, "status", "long-1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "2m00s" in ps.stdout
    elapsed = next(line for line in status.stdout.splitlines() if line.startswith("elapsed:"))
    assert elapsed.split()[-1].startswith("2m")
    assert S.RUNNING.value in status.stdout
