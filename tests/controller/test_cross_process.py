"""Guide §8.9 with real OS processes: A runs tasks, B watches and controls them.

Both stores: two processes on one SQLite file, and on one PostgreSQL schema.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _store_spec import open_store
from chongming_task import Controller
from chongming_task.states import TaskStatus
from chongming_task.stores._base import Command, TaskStore
from chongming_task.testing import wait_until

from ._helpers import path

pytestmark = pytest.mark.timeout(120)

S = TaskStatus
WORKER = Path(__file__).with_name("proc_worker.py")


class Worker:
    """A ``proc_worker.py`` process."""

    def __init__(self, store_spec: str, owner: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), store_spec, owner, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self, timeout: float = 60) -> str:
        stdout, stderr = self.process.communicate(timeout=timeout)
        assert self.process.returncode == 0, f"worker failed:\n{stdout}\n{stderr}"
        return stdout

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=30)


@pytest.fixture
def spawn() -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def start(store_spec: str, owner: str, *args: str) -> Worker:
        worker = Worker(store_spec, owner, *args)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.kill()


def record_commands(store: TaskStore) -> list[Command]:
    """Wrap ``store.submit_command`` to keep every command this process writes."""
    written: list[Command] = []
    original = store.submit_command

    def submit(command: Command) -> Command:
        stored = original(command)
        written.append(stored)
        return stored

    store.submit_command = submit  # type: ignore[method-assign]
    return written


def status_of(store: TaskStore, task_id: str) -> TaskStatus | None:
    snapshot = store.get(task_id)
    return None if snapshot is None else snapshot.status


def test_one_process_runs_another_watches_and_controls(
    store_spec: str, spawn: Callable[..., Worker]
) -> None:
    worker = spawn(store_spec, "worker-1", "--running", "3")
    with open_store(store_spec) as store:
        console = Controller(store=store, owner="ops-console")
        written = record_commands(store)
        try:
            wait_until(
                lambda: all(status_of(store, f"job-{i}") is S.RUNNING for i in (1, 2, 3)),
                timeout=30,
                message="the worker's three tasks running",
            )
        except TimeoutError as exc:  # say what the store and the worker show
            statuses = {f"job-{i}": status_of(store, f"job-{i}") for i in (1, 2, 3)}
            if worker.process.poll() is None:
                worker.process.kill()
            out, err = worker.process.communicate(timeout=30)
            raise AssertionError(
                f"{exc}; store: {statuses}; worker exit {worker.process.returncode}, "
                f"stdout: {out!r}, stderr: {err[-3000:]!r}"
            ) from exc
        # A query-only controller sees them, though it holds none, and polls nothing.
        tasks = console.list_tasks()
        assert [(s.task_id, s.owner) for s in tasks] == [
            ("job-1", "worker-1"),
            ("job-2", "worker-1"),
            ("job-3", "worker-1"),
        ]
        assert console.runs() == []
        assert not [t for t in threading.enumerate() if "ops-console" in t.name]
        assert console.stats().running == 3

        # stop: accepted at once, applied by the holder.
        assert console.stop("job-1", reason="运维停止") is True
        wait_until(lambda: status_of(store, "job-1") is S.STOPPED, timeout=30)
        history = console.history("job-1")
        assert path(history) == ["pending", "queued", "starting", "running", "stopping", "stopped"]
        assert (history[4].actor, history[4].reason) == ("ops-console", "运维停止")

        # pause: unconfirmed across processes (False), observable through get().
        assert console.pause("job-2") is False
        wait_until(lambda: status_of(store, "job-2") is S.PAUSED, timeout=30)
        assert console.resume("job-2") is True
        wait_until(lambda: status_of(store, "job-2") is S.RUNNING, timeout=30)

        # A second console whose poller runs (it submitted a task of its own) still
        # never takes the worker's commands.
        busy = Controller(store=store, owner="ops-busy")
        busy.register("noop", lambda ctx: None)
        busy.submit("noop", task_id="busy-own").wait(30)
        assert [t for t in threading.enumerate() if t.name == "chongming-commands[ops-busy]"]
        assert busy.stop("job-2", reason="done") is True
        assert busy.stop("job-3") is True
        wait_until(
            lambda: (
                status_of(store, "job-2") is S.STOPPED and status_of(store, "job-3") is S.STOPPED
            ),
            timeout=30,
        )
        assert path(console.history("job-2")) == [
            "pending",
            "queued",
            "starting",
            "running",
            "pausing",
            "paused",
            "running",
            "stopping",
            "stopped",
        ]

        assert len(written) == 5  # stop, pause, resume, stop, stop
        for command in written:
            stored = wait_until(
                # mypy infers no type for a lambda with a default argument:
                lambda command=command: (  # type: ignore[misc]
                    (c := store.get_command(command.command_id)) is not None
                    and c.status == "completed"
                    and c
                ),
                timeout=30,
            )
            assert isinstance(stored, Command)
            assert stored.target_owner == "worker-1"
            assert stored.claimed_by == "worker-1"
            assert stored.claims == 1
            assert stored.result == {"applied": True}
        assert console.stop("job-1") is True  # finished: found, nothing to send
        assert len(written) == 5
        assert worker.finish().split()[-3:] == ["job-1=stopped", "job-2=stopped", "job-3=stopped"]
        busy.close()
        console.close()


def test_a_node_with_owned_buckets_polls_from_construction(store_spec: str) -> None:
    with open_store(store_spec) as store:
        node = Controller(store=store, owner="node-a", owned_buckets=range(0, 16))
        assert [t for t in threading.enumerate() if t.name == "chongming-commands[node-a]"]
        console = Controller(store=store, owner="console")
        assert not [t for t in threading.enumerate() if "[console]" in t.name]
        node.close()
        console.close()
