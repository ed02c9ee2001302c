"""``main(argv)`` in-process on SQLite: every command's text and JSON output, quickly.

The subprocess tests (test_console_script.py) prove the same against the installed
script and PostgreSQL; these cover the many small cases without process start-up.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chongming_task import TaskStatus, Transition
from chongming_task.cli.commands import _run as run_command

from .conftest import MODULES, TASKS, Result

Invoke = Callable[..., Result]


@pytest.fixture
def dbfile(tmp_path: Path) -> str:
    return str(tmp_path / "t.db")


def test_help_and_version(invoke: Invoke) -> None:
    result = invoke("--help")
    assert result.code == 0
    assert "worker" in result.out
    assert "Exit codes" in result.out
    result = invoke("--version")
    assert result.code == 0
    assert result.out.startswith("chongming-task ")


def test_tasks_lists_definitions_with_parameters(invoke: Invoke) -> None:
    result = invoke("tasks", "--tasks", TASKS)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["NAME", "TAGS", "PARAMETERS", "DESCRIPTION"]
    assert any(line.startswith("add ") and "a: int, b: int = 1" in line for line in lines)
    document = invoke("tasks", "--tasks", TASKS, "--json").json()
    assert document["schema"] == "chongming-task.tasks.v1"
    names = [item["name"] for item in document["tasks"]]
    assert names == ["add", "chatty", "echo", "fail", "loop", "stubborn"]
    loop = document["tasks"][names.index("loop")]
    assert loop["tags"] == ["io", "slow"]
    assert loop["description"] == "Checkpoint in a loop until done or stopped; progress per step."


def test_tasks_from_register_function(invoke: Invoke) -> None:
    document = invoke("tasks", "--tasks", str(MODULES / "registered_tasks.py"), "--json").json()
    assert document["tasks"] == [
        {"name": "double", "tags": ["math"], "description": "Twice n.", "parameters": "n: int"}
    ]


def test_run_succeeds_with_exit_0_and_records_the_trajectory(invoke: Invoke, dbfile: str) -> None:
    result = invoke(
        "--db",
        dbfile,
        "run",
        "add",
        "--tasks",
        TASKS,
        "--task-id",
        "a1",
        "--arg",
        "a=2",
        "--arg",
        "b=3",
    )
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1] == "a1: succeeded, outcome 5"
    history = invoke("--db", dbfile, "history", "a1", "--json").json()
    path = [(item["from"], item["to"]) for item in history["transitions"]]
    assert path == [
        (None, "pending"),
        ("pending", "queued"),
        ("queued", "starting"),
        ("starting", "running"),
        ("running", "succeeded"),
    ]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_run_signal_during_submit_still_stops_the_task_cleanly(
    invoke: Invoke, dbfile: str, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    # The signal lands while submit() has not returned yet but the task already runs:
    # the window in which Python's default KeyboardInterrupt skipped the clean stop.
    submit = run_command._submit

    def submit_then_signal(controller: Any, request: Any) -> Any:
        run = submit(controller, request)
        running = threading.Event()

        def on_transition(item: Transition, _snapshot: object) -> None:
            if item.to_status is TaskStatus.RUNNING:
                running.set()

        run.add_listener(on_transition)
        assert running.is_set() or run.status is TaskStatus.RUNNING or running.wait(10)
        signal.raise_signal(sig)
        return run

    monkeypatch.setattr(run_command, "_submit", submit_then_signal)
    result = invoke("--db", dbfile, "run", "loop", "--tasks", TASKS, "--task-id", "w1")
    assert result.code == 3, result.err
    what = "SIGTERM" if sig is signal.SIGTERM else "interrupted"
    assert result.err.splitlines() == [f"{what}: stopping w1 cleanly (up to 30s)"]
    assert result.out.splitlines()[-1].startswith("w1: stopped")
    history = invoke("--db", dbfile, "history", "w1", "--json").json()
    path = [(item["from"], item["to"]) for item in history["transitions"]]
    assert path[-3:] == [("starting", "running"), ("running", "stopping"), ("stopping", "stopped")]


def test_run_of_a_failing_task_exits_3(invoke: Invoke, dbfile: str) -> None:
    result = invoke(
        "--db",
        dbfile,
        "run",
        "fail",
        "--tasks",
        TASKS,
        "--task-id",
        "f1",
        "--arg",
        "message=bad input",
        "--json",
    )
    assert result.code == 3
    document = result.json()
    assert document["schema"] == "chongming-task.run.v1"
    assert document["task"]["status"] == "failed"
    assert document["task"]["failure"]["kind"] == "exception"
    assert "bad input" in document["task"]["failure"]["message"]
    assert [t["to"] for t in document["transitions"]][-2:] == ["running", "failed"]
    status = invoke("--db", dbfile, "status", "f1")
    assert status.code == 0
    assert "failure:" in status.out
    assert "bad input" in status.out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["n=5"], {"n": [5, "int"]}),
        (["flag=true"], {"flag": [True, "bool"]}),
        (['s="5"'], {"s": ["5", "str"]}),
        (["x=2.5"], {"x": [2.5, "float"]}),
        (["nothing=null"], {"nothing": [None, "NoneType"]}),
        (["items=[1,2]"], {"items": [[1, 2], "list"]}),
        (["url=kafka://orders"], {"url": ["kafka://orders", "str"]}),
        (["empty="], {"empty": ["", "str"]}),
    ],
)
def test_arg_values_reach_the_task_as_parsed(
    invoke: Invoke, dbfile: str, args: list[str], expected: dict[str, object]
) -> None:
    argv = ["--db", dbfile, "run", "echo", "--tasks", TASKS, "--json"]
    for item in args:
        argv += ["--arg", item]
    result = invoke(*argv)
    assert result.code == 0, result.err
    assert result.json()["task"]["outcome"] == expected


def test_args_json_and_arg_combine(invoke: Invoke, dbfile: str) -> None:
    result = invoke(
        "--db",
        dbfile,
        "run",
        "echo",
        "--tasks",
        TASKS,
        "--json",
        "--args-json",
        '{"a": {"b": [1]}, "c": "x"}',
        "--arg",
        "d=1",
    )
    assert result.code == 0, result.err
    assert result.json()["task"]["outcome"] == {
        "a": [{"b": [1]}, "dict"],
        "c": ["x", "str"],
        "d": [1, "int"],
    }


def test_queries_text_and_json(invoke: Invoke, dbfile: str) -> None:
    for task_id, a in (("q1", 1), ("q2", 2)):
        assert (
            invoke(
                "--db",
                dbfile,
                "run",
                "add",
                "--tasks",
                TASKS,
                "--task-id",
                task_id,
                "--arg",
                f"a={a}",
                "--tag",
                "nightly",
                "--bucket-key",
                f"k{a}",
            ).code
            == 0
        )
    assert invoke("--db", dbfile, "run", "fail", "--tasks", TASKS, "--task-id", "q3").code == 3

    ps = invoke("--db", dbfile, "ps")
    assert ps.code == 0
    lines = ps.out.splitlines()
    header = "TASK_ID NAME STATUS ATTEMPT ELAPSED PROGRESS FAILURE BUCKET"
    assert " ".join(lines[0].split()) == header
    assert [line.split()[0] for line in lines[2:]] == ["q3", "q2", "q1"]  # newest first
    oldest_first = invoke("--db", dbfile, "ps", "--order", "created").out.splitlines()
    assert [line.split()[0] for line in oldest_first[2:]] == ["q1", "q2", "q3"]

    document = invoke("--db", dbfile, "ps", "--json", "--status", "succeeded").json()
    assert document["schema"] == "chongming-task.ps.v1"
    assert document["count"] == 2
    assert {task["task_id"] for task in document["tasks"]} == {"q1", "q2"}
    q1 = next(task for task in document["tasks"] if task["task_id"] == "q1")
    assert q1["tags"] == ["nightly"]
    assert (
        invoke("--db", dbfile, "ps", "--json", "--tag", "nightly", "--limit", "1").json()["count"]
        == 1
    )
    assert invoke("--db", dbfile, "ps", "--json", "--name", "fa").json()["count"] == 1
    newest = invoke("--db", dbfile, "ps", "--json", "--order=-created", "--limit", "1").json()
    assert [task["task_id"] for task in newest["tasks"]] == ["q3"]
    bucket = q1["bucket"]
    by_bucket = invoke("--db", dbfile, "ps", "--json", "--bucket", str(bucket)).json()
    assert "q1" in {task["task_id"] for task in by_bucket["tasks"]}

    status = invoke("--db", dbfile, "status", "q1", "--json").json()
    assert status["schema"] == "chongming-task.status.v1"
    assert status["task"]["outcome"] == 2
    assert status["task"]["bucket_key"] == "k1"

    stats = invoke("--db", dbfile, "stats", "--json").json()
    assert stats["counts"]["succeeded"] == 2
    assert stats["counts"]["failed"] == 1
    assert stats["total"] == 3
    assert stats["unfinished"] == 0
    assert set(stats["counts"]) == {
        "pending",
        "blocked",
        "queued",
        "starting",
        "running",
        "pausing",
        "paused",
        "retry_wait",
        "stopping",
        "succeeded",
        "failed",
        "stopped",
        "cancelled",
        "skipped",
        "lost",
    }
    text = invoke("--db", dbfile, "stats").out
    assert ["succeeded", "2"] in [line.split() for line in text.splitlines()]

    buckets = invoke("--db", dbfile, "buckets", "--json").json()
    assert buckets["num_buckets"] == 64
    assert sum(item["tasks"] for item in buckets["buckets"]) == 2
    assert all(item["owned"] for item in buckets["buckets"])

    watch = invoke("--db", dbfile, "ps", "--watch", "--count", "2", "--interval", "0.01", "--json")
    assert watch.code == 0
    assert len(watch.out.splitlines()) == 2  # one compact JSON document per refresh


def test_control_of_finished_task_fails_with_exit_1(invoke: Invoke, dbfile: str) -> None:
    assert (
        invoke(
            "--db", dbfile, "run", "add", "--tasks", TASKS, "--task-id", "d1", "--arg", "a=1"
        ).code
        == 0
    )
    for command in (["stop", "d1"], ["pause", "d1"], ["resume", "d1"]):
        result = invoke("--db", dbfile, *command)
        assert result.code == 1
        assert len(result.err_lines) == 1
        assert "already finished (succeeded)" in result.err


def test_prune_and_reconcile(invoke: Invoke, dbfile: str) -> None:
    for index in range(3):
        assert (
            invoke(
                "--db",
                dbfile,
                "run",
                "add",
                "--tasks",
                TASKS,
                "--task-id",
                f"p{index}",
                "--arg",
                "a=1",
            ).code
            == 0
        )
    dry = invoke("--db", dbfile, "reconcile", "--dry-run", "--json").json()
    assert dry == {
        "schema": "chongming-task.reconcile.v1",
        "dry_run": True,
        "lost": [],
        "adoptable": [],
        "skipped": [],
        "waiting": [],
    }
    pruned = invoke("--db", dbfile, "prune", "--keep-terminal", "1", "--json").json()
    assert pruned["removed"] == 2
    remaining = invoke("--db", dbfile, "ps", "--json").json()
    assert [task["task_id"] for task in remaining["tasks"]] == ["p2"]


def test_status_shows_the_last_log_lines_redacted(invoke: Invoke, dbfile: str) -> None:
    result = invoke(
        "--db",
        dbfile,
        "run",
        "chatty",
        "--tasks",
        TASKS,
        "--task-id",
        "c1",
        "--arg",
        "lines=12",
        "--arg",
        "secret=hunter2",
    )
    assert result.code == 0, result.err
    document = invoke("--db", dbfile, "status", "c1", "--json").json()
    logs = document["logs"]
    assert len(logs) == 10
    assert logs[0].endswith("INFO line 3")
    assert "hunter2" not in "".join(logs)
    assert "[REDACTED]" in logs[-1]
    text = invoke("--db", dbfile, "status", "c1").out
    assert "last 10 log line(s):" in text
    assert "line 11" in text


def test_submit_priority_orders_the_queued_tasks_workers_claim(invoke: Invoke, dbfile: str) -> None:
    """``submit --priority`` end to end: what a worker claims first is the highest
    priority, then the oldest (no worker runs here: the order is read from the claim)."""
    from datetime import timedelta

    from chongming_task.stores._sqlite import SqliteTaskStore

    for task_id, priority in (("low", None), ("mid", "3"), ("urgent", "9"), ("mid-later", "3")):
        options = ["--priority", priority] if priority is not None else []
        result = invoke(
            "--db", dbfile, "submit", "add", "--tasks", TASKS, "--task-id", task_id,
            "--arg", "a=1", *options,
        )  # fmt: skip
        assert result.code == 0, result.err
    refused = invoke(
        "--db", dbfile, "submit", "add", "--tasks", TASKS, "--arg", "a=1", "--priority", "high"
    )
    assert refused.code == 2
    assert "--priority" in refused.err
    with SqliteTaskStore(dbfile) as store:
        assert {s.task_id: s.status.value for s in store.query()} == dict.fromkeys(
            ("low", "mid", "urgent", "mid-later"), "queued"
        )
        lease_until = store.clock.now() + timedelta(seconds=30)
        claimed = store.claim_queued("worker-1", buckets=None, limit=10, lease_until=lease_until)
    assert [snapshot.task_id for snapshot in claimed] == ["urgent", "mid", "mid-later", "low"]
