"""A node killed (SIGKILL) mid-firing under ``overlap="forbid"``: the next firing runs
on the survivor, and the store says what became of the dead node's run."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from _store_spec import open_store
from _workers import start_ready
from chongming_task._model import TaskSnapshot
from chongming_task.controller._reconcile import RECONCILE_TRIGGER
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from .file_clock import FileClock

pytestmark = pytest.mark.timeout(120)

NODE = Path(__file__).with_name("proc_forbid.py")
T0 = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)
FIRST = "slow@20260105T000100Z"
SECOND = "slow@20260105T000200Z"


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    (tmp_path / "stop").touch()
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


def spawn(
    started: list[subprocess.Popen[str]], spec: str, owner: str, work: Path, *extra: str
) -> subprocess.Popen[str]:
    argv = [sys.executable, str(NODE), spec, owner, str(work / "clock"), str(work), *extra]
    process = start_ready(argv, owner)
    started.append(process)
    return process


def tick_all(work: Path, when: datetime, *owners: str) -> None:
    FileClock.write(work / "clock", when)

    def acked(owner: str) -> bool:
        try:
            return float((work / f"{owner}.ack").read_text()) >= when.timestamp()
        except (FileNotFoundError, ValueError):
            return False

    for owner in owners:
        wait_until(lambda: acked(owner), timeout=30, message=f"{owner} to tick")  # noqa: B023


def test_a_node_killed_mid_firing_does_not_block_forbid_on_the_survivor(
    store_spec: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    FileClock.write(tmp_path / "clock", T0)
    victim = spawn(processes, store_spec, "victim", tmp_path, "--hang")
    store = open_store(store_spec)
    try:
        tick_all(tmp_path, T0 + timedelta(minutes=1), "victim")  # victim fires 00:01

        def running() -> TaskSnapshot | None:
            found = store.get(FIRST)
            return found if found is not None and found.status is TaskStatus.RUNNING else None

        first = wait_until(running, timeout=30, message="the victim's run to be running")
        assert first is not None
        assert first.owner == "victim"
        victim.send_signal(signal.SIGKILL)  # mid-run
        victim.wait(timeout=30)
        spawn(processes, store_spec, "survivor", tmp_path)
        # 00:02: the victim's lease (20 s, last renewed at 00:01 at the latest) expired.
        tick_all(tmp_path, T0 + timedelta(minutes=2), "survivor")

        def finished() -> TaskSnapshot | None:
            found = store.get(SECOND)
            return found if found is not None and found.is_terminal else None

        second = wait_until(finished, timeout=30, message="the 00:02 firing to finish")
        assert second is not None
        assert second.status is TaskStatus.SUCCEEDED  # not "skipped": previous run ...
        assert second.owner == "survivor"
        dead = store.get(FIRST)
        assert dead is not None
        assert dead.status is TaskStatus.LOST
        assert dead.failure is not None
        assert "victim" in dead.failure.message
        assert store.history(FIRST)[-1].trigger == RECONCILE_TRIGGER
    finally:
        store.close()
