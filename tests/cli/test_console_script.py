"""The installed ``chongming-task`` script in subprocesses, on SQLite and PostgreSQL.

Every command, the exit-code matrix, the argument rules end to end, a worker
controlled by stop/pause/resume from other processes, and SIGTERM/SIGINT handling.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from chongming_task.testing import wait_until

from .conftest import TASKS, Result, WorkerProcess, cli_argv, cli_env, peek_status

Cli = Callable[..., Result]
StartWorker = Callable[..., WorkerProcess]


def _status(cli: Cli, db: str, task_id: str) -> str | None:
    result = cli("--db", db, "status", task_id, "--json")
    if result.code != 0:
        return None
    task = result.json()["task"]
    return None if task is None else str(task["status"])


def _wait_status(cli: Cli, db: str, task_id: str, *statuses: str, timeout: float = 20) -> str:
    """Poll the store in this process (cheap) until the task is in one of ``statuses``."""
    found = wait_until(
        lambda: (status := peek_status(db, task_id)) in statuses and status,
        timeout=timeout,
        interval=0.02,
        message=f"{task_id} in {statuses}",
    )
    return str(found)


def _path(cli: Cli, db: str, task_id: str) -> list[tuple[str | None, str]]:
    history = cli("--db", db, "history", task_id, "--json").json()["transitions"]
    return [(item["from"], item["to"]) for item in history]


def test_run_and_every_query_command(cli: Cli, db: str) -> None:
    ok = cli(
        "--db",
        db,
        "run",
        "add",
        "--tasks",
        TASKS,
        "--task-id",
        "r1",
        "--arg",
        "a=40",
        "--arg",
        "b=2",
        "--tag",
        "demo",
        "--bucket-key",
        "tenant-A",
        "--priority",
        "5",
    )
    assert ok.code == 0, ok.err
    assert ok.out.splitlines()[-1] == "r1: succeeded, outcome 42"
    assert "queued -> starting" in ok.out  # plain progress lines off a terminal
    failed = cli("--db", db, "run", "fail", "--tasks", TASKS, "--task-id", "r2")
    assert failed.code == 3
    assert failed.out.splitlines()[-1].startswith("r2: failed, exception: RuntimeError: boom")

    ps = cli("--db", db, "ps", "--json").json()
    assert [(t["task_id"], t["status"]) for t in ps["tasks"]] == [
        ("r2", "failed"),  # newest first by default
        ("r1", "succeeded"),
    ]
    r1 = ps["tasks"][1]
    assert (r1["priority"], r1["tags"], r1["bucket_key"]) == (5, ["demo"], "tenant-A")
    assert cli("--db", db, "ps").out.splitlines()[3].split()[:3] == ["r1", "add", "succeeded"]
    assert cli("--db", db, "status", "r1").out.splitlines()[0].split() == ["task_id:", "r1"]
    assert _path(cli, db, "r2") == [
        (None, "pending"),
        ("pending", "queued"),
        ("queued", "starting"),
        ("starting", "running"),
        ("running", "failed"),
    ]
    history_text = cli("--db", db, "history", "r1").out.splitlines()
    assert history_text[0].split() == [
        "VERSION",
        "AT",
        "FROM",
        "TO",
        "TRIGGER",
        "ACTOR",
        "REASON",
        "ATTEMPT",
    ]
    stats = cli("--db", db, "stats", "--json").json()
    assert (stats["total"], stats["counts"]["succeeded"], stats["counts"]["failed"]) == (2, 1, 1)
    buckets = cli("--db", db, "buckets", "--json").json()
    assert buckets["buckets"] == [{"bucket": r1["bucket"], "tasks": 1, "owned": True}]
    assert cli("--db", db, "reconcile", "--dry-run").code == 0
    assert cli("--db", db, "prune", "--keep-terminal", "1").out.startswith("pruned 1 ")
    assert [t["task_id"] for t in cli("--db", db, "ps", "--json").json()["tasks"]] == ["r2"]


def test_tasks_by_dotted_module_name(cli: Cli) -> None:
    result = cli("tasks", "--tasks", "registered_tasks")  # on PYTHONPATH
    assert result.code == 0, result.err
    assert result.out.splitlines()[2].split()[:2] == ["double", "math"]


def test_env_fallbacks(cli: Cli, tmp_path: Path) -> None:
    env = {"CHONGMING_DB": str(tmp_path / "env.db"), "CHONGMING_TASKS": TASKS}
    assert cli("run", "add", "--arg", "a=1", "--task-id", "e1", env=env).code == 0
    assert (tmp_path / "env.db").exists()
    assert cli("ps", "--json", env=env).json()["count"] == 1
    assert cli("--db", str(tmp_path / "other.db"), "ps", env=env).code == 1  # flag wins


def test_global_options_after_the_subcommand(cli: Cli, tmp_path: Path) -> None:
    db = str(tmp_path / "after.db")
    assert cli("run", "add", "--tasks", TASKS, "--arg", "a=1", "--db", db).code == 0
    assert cli("ps", "--db", db, "--json").json()["count"] == 1


def test_worker_is_controlled_from_other_processes(
    cli: Cli, db: str, start_worker: StartWorker
) -> None:
    worker = start_worker(db, "--max-parallel", "3", "--owner", "w1", "--drain-timeout", "0")
    for task_id in ("a", "b", "c"):
        submitted = cli("--db", db, "submit", "loop", "--tasks", TASKS, "--task-id", task_id)
        assert (submitted.code, submitted.out.strip()) == (0, task_id)
    for task_id in ("a", "b", "c"):
        _wait_status(cli, db, task_id, "running")

    paused = cli("--db", db, "pause", "a")
    assert paused.code == 0  # requested from the holder, not confirmed yet: a success
    assert paused.out.startswith("pause of a requested from its holder w1; not confirmed yet")
    _wait_status(cli, db, "a", "paused")
    resumed = cli("--db", db, "resume", "a", "--wait", "10")
    assert (resumed.code, resumed.out.strip().endswith("now running")) == (0, True)
    stopped = cli("--db", db, "stop", "b", "--reason", "ops says so", "--wait", "10", "--json")
    assert stopped.code == 0
    assert stopped.json()["task"]["status"] == "stopped"
    history = cli("--db", db, "history", "b", "--json").json()["transitions"]
    stop_request = next(item for item in history if item["to"] == "stopping")
    assert stop_request["reason"] == "ops says so"
    assert stop_request["actor"].startswith("cli@")
    assert _path(cli, db, "a")[3:] == [
        ("starting", "running"),
        ("running", "pausing"),
        ("pausing", "paused"),
        ("paused", "running"),
    ]

    code = worker.terminate(signal.SIGTERM)
    assert code == 0, worker.output
    assert "SIGTERM: shutting down; claiming nothing more; 2 task(s) running" in worker.output
    assert "  a (loop): running -> stopped" in worker.output
    assert "  c (loop): running -> stopped" in worker.output
    for task_id in ("a", "b", "c"):
        assert _status(cli, db, task_id) == "stopped"
    assert _path(cli, db, "c")[-2:] == [("running", "stopping"), ("stopping", "stopped")]


def test_submitted_task_is_queued_visible_and_cancellable_before_a_worker(
    cli: Cli, db: str, start_worker: StartWorker
) -> None:
    for task_id in ("s1", "s2"):
        submitted = cli(
            "--db", db, "submit", "add", "--tasks", TASKS, "--task-id", task_id, "--arg", "a=1"
        )
        assert (submitted.code, submitted.out.strip()) == (0, task_id)
    status = cli("--db", db, "status", "s1", "--json")
    assert status.code == 0
    assert status.json()["task"]["status"] == "queued"
    listed = cli("--db", db, "ps", "--json").json()
    assert listed["count"] == 2
    assert {task["status"] for task in listed["tasks"]} == {"queued"}
    stop = cli("--db", db, "stop", "s2")
    assert stop.code == 0, stop.err
    assert _status(cli, db, "s2") == "stopped"
    assert _path(cli, db, "s2") == [(None, "pending"), ("pending", "queued"), ("queued", "stopped")]
    duplicate = cli(
        "--db", db, "submit", "add", "--tasks", TASKS, "--task-id", "s1", "--arg", "a=1"
    )
    assert duplicate.code == 1
    assert "already exists" in duplicate.err

    worker = start_worker(db)
    _wait_status(cli, db, "s1", "succeeded")
    assert _status(cli, db, "s2") == "stopped"  # cancelled before start: never run
    waited = cli("--db", db, "submit", "fail", "--tasks", TASKS, "--wait", "--timeout", "20")
    assert waited.code == 3
    assert waited.out.splitlines()[-1].endswith(": failed, exception: RuntimeError: boom")
    assert worker.terminate() == 0


def test_partitioned_workers_take_only_their_buckets(
    cli: Cli, db: str, start_worker: StartWorker
) -> None:
    from chongming_task.policies import BucketPolicy

    policy = BucketPolicy(num_buckets=8)
    low = next(f"k{i}" for i in range(100) if policy.bucket_for(f"k{i}") < 4)
    high = next(f"k{i}" for i in range(100) if policy.bucket_for(f"k{i}") >= 4)
    nodes = ("--num-buckets", "8")
    start_worker(db, "--owned-buckets", "0-3", "--owner", "low", *nodes)
    start_worker(db, "--owned-buckets", "4-7", "--owner", "high", *nodes)
    for task_id, key in (("t-low", low), ("t-high", high)):
        result = cli(
            "--db",
            db,
            *nodes,
            "submit",
            "add",
            "--tasks",
            TASKS,
            "--task-id",
            task_id,
            "--arg",
            "a=1",
            "--bucket-key",
            key,
        )
        assert result.code == 0, result.err
    for task_id, owner in (("t-low", "low"), ("t-high", "high")):
        _wait_status(cli, db, task_id, "succeeded")
        task = cli("--db", db, "status", task_id, "--json").json()["task"]
        assert task["owner"] == owner
    view = cli("--db", db, *nodes, "--owned-buckets", "0-3", "ps", "--json").json()
    assert [task["task_id"] for task in view["tasks"]] == ["t-low"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_run_interrupted_stops_the_task_cleanly(
    cli: Cli, tmp_path: Path, sig: signal.Signals
) -> None:
    db = str(tmp_path / "int.db")
    process = subprocess.Popen(
        cli_argv("--db", db, "run", "loop", "--tasks", TASKS, "--task-id", "fg"),
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_status(cli, db, "fg", "running")
        process.send_signal(sig)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 3, err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1
    assert out.splitlines()[-1].startswith("fg: stopped")
    assert _status(cli, db, "fg") == "stopped"
    assert _path(cli, db, "fg")[-2:] == [("running", "stopping"), ("stopping", "stopped")]


def test_sigterm_reports_a_task_that_does_not_stop_in_time(
    cli: Cli, tmp_path: Path, start_worker: StartWorker
) -> None:
    db = str(tmp_path / "stubborn.db")
    worker = start_worker(db, "--shutdown-timeout", "0.5", "--drain-timeout", "0")
    for name, task_id in (("stubborn", "s1"), ("loop", "l1")):
        assert cli("--db", db, "submit", name, "--tasks", TASKS, "--task-id", task_id).code == 0
        _wait_status(cli, db, task_id, "running")
    assert worker.terminate(signal.SIGTERM) == 1, worker.output
    assert "  s1 (stubborn): running -> lost  (did not stop within" in worker.output
    assert "  l1 (loop): running -> stopped" in worker.output
    assert "stopped 1, lost 1" in worker.output
    # Honest state: the stop was requested but never honoured and the worker is gone, so
    # the task is lost at once (not left "stopping" until a reconcile finds it).
    assert _status(cli, db, "s1") == "lost"
    assert _path(cli, db, "s1")[-1] == ("stopping", "lost")
    assert _status(cli, db, "l1") == "stopped"


def test_worker_serves_metrics(cli: Cli, tmp_path: Path, start_worker: StartWorker) -> None:
    import re
    import urllib.request

    db = str(tmp_path / "metrics.db")
    worker = start_worker(db, "--metrics-port", "0")
    match = re.search(r" metrics: (http://\S+/metrics)", worker.output)
    assert match is not None, worker.output
    done = cli("--db", db, "submit", "add", "--tasks", TASKS, "--arg", "a=1", "--wait")
    assert done.code == 0, done.err
    with urllib.request.urlopen(match.group(1), timeout=10) as response:
        text = response.read().decode()
    assert 'chongming_task_runs_total{final_status="succeeded",name="add"} 1.0' in text
    assert 'chongming_tasks{status="succeeded"} 1.0' in text
    assert worker.terminate() == 0


def test_worker_metrics_port_in_use(cli: Cli, tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli(
            "--db", str(tmp_path / "m.db"), "worker", "--tasks", TASKS, "--metrics-port", str(port)
        )
    assert result.code == 1
    assert len(result.err_lines) == 1
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.err


def test_a_new_worker_reconciles_what_a_killed_one_left(
    cli: Cli, tmp_path: Path, start_worker: StartWorker
) -> None:
    db = str(tmp_path / "crash.db")
    first = start_worker(db, "--lease-ttl", "0.5", "--owner", "first")
    assert cli("--db", db, "submit", "loop", "--tasks", TASKS, "--task-id", "k1").code == 0
    _wait_status(cli, db, "k1", "running")
    assert first.terminate(signal.SIGKILL) == -signal.SIGKILL
    wait_until(
        lambda: cli("--db", db, "reconcile", "--dry-run", "--json").json()["lost"] == ["k1"],
        timeout=10,
        message="k1's lease to expire",
    )
    second = start_worker(db, "--owner", "second")
    assert "reconciled: 1 (k1) lost" in second.output
    task = cli("--db", db, "status", "k1", "--json").json()["task"]
    assert (task["status"], task["failure"]["kind"]) == ("lost", "lost")
    assert _path(cli, db, "k1")[-1] == ("running", "lost")
    assert second.terminate() == 0
