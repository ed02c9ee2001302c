"""Guide §4.5 and §8.10 shell samples, run with the real ``chongming-task`` script.

Each command runs in a subprocess exactly as the guide writes it, with ``myapp.tasks``
adapted to this package's ``guide_tasks`` module (on ``PYTHONPATH``) and ``tasks.db``
in a temp directory, or the PostgreSQL URL for the PostgreSQL variant.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task import SqliteTaskStore
from chongming_task.core.state_machine import StateMachine
from chongming_task.testing import wait_until

from .conftest import PATIENCE, Backend, S

HERE = Path(__file__).resolve().parent
SCRIPT = Path(sys.executable).with_name("chongming-task")


@dataclass
class Result:
    code: int
    out: str
    err: str


def argv(*args: str) -> list[str]:
    if SCRIPT.exists():
        return [str(SCRIPT), *args]
    return [sys.executable, "-m", "chongming_task.cli", *args]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env["NO_COLOR"] = "1"
    return env


class Shell:
    """Runs ``chongming-task`` with the guide's arguments against one database."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.background: list[subprocess.Popen[str]] = []

    def args(self, line: list[str]) -> list[str]:
        # The guide writes ``--db tasks.db``: the PostgreSQL variant passes its URL.
        return [self.backend.url if arg == "tasks.db" else arg for arg in line]

    def __call__(self, *line: str) -> Result:
        done = subprocess.run(
            argv(*self.args(list(line))),
            check=False,
            cwd=self.backend.directory,
            env=environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def start(self, *line: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            argv(*self.args(list(line))),
            cwd=self.backend.directory,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.background.append(process)
        return process

    def finish(self, process: subprocess.Popen[str]) -> Result:
        out, err = process.communicate(timeout=PATIENCE * 3)
        return Result(process.returncode, out, err)

    def close(self) -> None:
        for process in self.background:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=PATIENCE)


@pytest.fixture
def shell(backend: Backend) -> Iterator[Shell]:
    s = Shell(backend)
    yield s
    s.close()


def wait_for_status(backend: Backend, task_id: str, status: S) -> None:
    store = backend.open()
    wait_until(
        lambda: (s := store.get(task_id)) is not None and s.status is status,
        timeout=PATIENCE * 3,
        message=f"{task_id} to be {status.value}",
    )


# ---------------------------------------------------------------- §4.5


def test_s4_5_start_status_stop_from_the_shell(shell: Shell, backend: Backend) -> None:
    run = shell.start(
        "--db", "tasks.db", "--num-buckets", "64", "--owned-buckets", "0-15",
        "run", "--tasks", "guide_tasks", "worker", "--arg", "source=kafka://orders",
        "--task-id", "orders-worker", "--bucket-key", "orders",
    )  # fmt: skip
    wait_for_status(backend, "orders-worker", S.RUNNING)

    status = shell("--db", "tasks.db", "--owned-buckets", "0-15", "status", "orders-worker")
    stop = shell(
        "--db", "tasks.db", "--owned-buckets", "0-15",
        "stop", "orders-worker", "--reason", "发布窗口",
    )  # fmt: skip

    assert (status.code, stop.code) == (0, 0), (status.err, stop.err)
    assert "running" in status.out
    assert "bucket:    13 (key 'orders')" in status.out
    assert "orders-worker" in stop.out
    ended = shell.finish(run)
    assert ended.code == 0, ended.err  # the worker returned: succeeded
    assert "orders-worker: succeeded" in ended.out
    snapshot = backend.open().get("orders-worker")
    assert snapshot is not None
    assert snapshot.status is S.SUCCEEDED
    assert isinstance(snapshot.outcome, int)
    history = backend.open().history("orders-worker")
    assert [t.to_status for t in history] == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.SUCCEEDED,
    ]  # fmt: skip
    assert history[4].reason == "发布窗口"


def test_s4_5_bucket_key_is_required_when_buckets_are_owned(shell: Shell, backend: Backend) -> None:
    refused = shell(
        "--db", "tasks.db", "--num-buckets", "64", "--owned-buckets", "0-15",
        "run", "--tasks", "guide_tasks", "worker", "--arg", "source=kafka://orders",
        "--task-id", "orders-worker",
    )  # fmt: skip
    assert refused.code == 1  # a well-formed command that fails (§8.10)
    assert "bucket" in refused.err
    assert backend.open().get("orders-worker") is None  # refused at submission


def test_s4_5_ctrl_c_stops_the_task_cleanly(shell: Shell, backend: Backend) -> None:
    run = shell.start(
        "--db", "tasks.db", "run", "--tasks", "guide_tasks", "demo", "--task-id", "demo-1",
    )  # fmt: skip
    wait_for_status(backend, "demo-1", S.RUNNING)
    run.send_signal(signal.SIGINT)
    ended = shell.finish(run)
    assert ended.code == 3  # the command handled it; the task did not succeed
    snapshot = backend.open().get("demo-1")
    assert snapshot is not None
    assert snapshot.status is S.STOPPED  # not left "running" in the store


# ---------------------------------------------------------------- §8.10


def test_s8_10_console_commands(shell: Shell, backend: Backend) -> None:
    run = shell.start(
        "--db", "tasks.db", "run", "--tasks", "guide_tasks", "demo", "--task-id", "demo-1"
    )
    wait_for_status(backend, "demo-1", S.RUNNING)

    ps = shell("--db", "tasks.db", "ps")
    status = shell("--db", "tasks.db", "status", "demo-1")
    pause = shell("--db", "tasks.db", "pause", "demo-1")
    wait_for_status(backend, "demo-1", S.PAUSED)
    resume = shell("--db", "tasks.db", "resume", "demo-1")
    wait_for_status(backend, "demo-1", S.RUNNING)
    stop = shell("--db", "tasks.db", "stop", "demo-1", "--reason", "发布窗口")

    for result in (ps, status, pause, resume, stop):
        assert result.code == 0, result.err
    assert "demo-1" in ps.out
    assert "running" in ps.out
    assert "not confirmed yet" in pause.out  # across processes a pause is only requested
    ended = shell.finish(run)
    assert ended.code == 3  # command fine, task stopped: the scripts' branch
    assert "demo-1: stopped" in ended.out
    history = shell("--db", "tasks.db", "history", "demo-1")
    stats = shell("--db", "tasks.db", "stats")
    buckets = shell("--db", "tasks.db", "buckets")
    assert (history.code, stats.code, buckets.code) == (0, 0, 0)
    assert "发布窗口" in history.out
    assert "stopped" in stats.out


def test_s8_10_tasks_come_from_register_and_names_only(shell: Shell) -> None:
    listed = shell("--db", "tasks.db", "tasks", "--tasks", "guide_tasks")
    assert listed.code == 0, listed.err
    names = [line.split()[0] for line in listed.out.splitlines()[2:]]
    assert names == ["broken", "demo", "worker"]  # register(controller), not every @task
    unknown = shell("--db", "tasks.db", "run", "--tasks", "guide_tasks", "resize")
    assert unknown.code == 1  # "command failed": not a usage error (§8.10)
    assert "resize" in unknown.err


def test_s8_10_exit_codes(shell: Shell) -> None:
    failed = shell("--db", "tasks.db", "run", "--tasks", "guide_tasks", "broken", "--task-id", "b1")
    assert failed.code == 3  # the command worked, the task did not succeed
    missing = shell("--db", "tasks.db", "status", "nope")
    assert missing.code == 1  # the command failed
    assert "nope" in missing.err
    ok = shell("--db", "tasks.db", "status", "b1")
    assert ok.code == 0
    assert "failed" in ok.out


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
    # Two minutes plus however long the two processes took to start on a loaded host.
    assert re.search(r"\b2m\d\ds\b", ps.stdout), ps.stdout
    elapsed = next(line for line in status.stdout.splitlines() if line.startswith("elapsed:"))
    assert elapsed.split()[-1].startswith("2m")
    assert S.RUNNING.value in status.stdout
