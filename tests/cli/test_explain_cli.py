"""``explain``, ``tasks --checkpoints`` and ``lint`` from the command line.

The tasks run in this test's process under a controller; the CLI (``main`` called
in-process) opens the database on its own, as another process would.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from chongming_task import Controller
from chongming_task.policies import ConcurrencyPolicy
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock, wait_until

from .conftest import Result

PATIENCE = 10.0

MODULE = """
import threading

from chongming_task import task
from chongming_task.policies import Timeout

GATE = threading.Event()
STEP = threading.Semaphore(0)
REACHED = threading.Semaphore(0)


@task(tags={"gpu"})
def train(ctx, n: int = 0):
    while not GATE.is_set():
        ctx.checkpoint()
        GATE.wait(0.005)


@task(timeout=Timeout(idle=30))
def slow(ctx, steps: int = 3):
    for _ in range(steps):
        assert STEP.acquire(timeout=10)
        ctx.checkpoint()
        REACHED.release()
"""

LINTED = """
import time

from chongming_task import task


@task
def careful(ctx, items: int = 3):
    for _ in range(items):
        ctx.checkpoint()
        time.sleep(0.01)
    while not ctx.is_stop_requested:
        time.sleep(0.01)


@task
def careless(ctx):
    for item in range(10):  # chongming: short-loop
        print(item)
    while True:
        time.sleep(1)
"""


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"explain_cli_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def open_store(db: str, clock: FakeClock | None = None) -> TaskStore:
    from chongming_task.cli._session import is_postgres_url

    store: TaskStore
    if is_postgres_url(db):
        from chongming_task.stores._postgres import PostgresTaskStore

        store = PostgresTaskStore(db)
    else:
        from chongming_task.stores._sqlite import SqliteTaskStore

        store = SqliteTaskStore(db)
    if clock is not None:
        store.clock = clock
    return store


def test_explain_names_the_holder_of_a_full_named_limit(
    db: str, tmp_path: Path, invoke: Callable[..., Result]
) -> None:
    path = tmp_path / "limited.py"
    path.write_text(MODULE)
    tasks = load(path)
    policy = ConcurrencyPolicy(max_parallel=4, limits={"gpu": 1})
    with (
        open_store(db) as store,
        Controller(store, concurrency=policy, owner="node-1") as controller,
    ):
        controller.register_module(tasks)
        controller.submit("train", task_id="a")
        controller.submit("train", task_id="b")
        wait_until(
            lambda: controller.get("a").status is TaskStatus.RUNNING,  # type: ignore[union-attr]
            timeout=PATIENCE,
        )
        try:
            result = invoke("--db", db, "explain", "b", "--json")
            assert result.code == 0, result.err
            doc = result.json()
            assert doc["schema"] == "chongming-task.explain.v1"
            assert (doc["task_id"], doc["status"], doc["source"]) == ("b", "queued", "store")
            held, position = doc["reasons"]
            assert held["kind"] == "held_by"
            assert held["owner"] == "node-1"
            assert held["running"] == ["a"]
            assert held["sharing_tags"] == {"gpu": ["a"]}
            assert position["kind"] == "queue_position"
            assert position["position"] == 1
            text = invoke("--db", db, "explain", "b")
            assert text.code == 0
            assert text.out.splitlines()[0] == "b: queued (explained from the store)"
            assert "with tag 'gpu': a" in text.out
        finally:
            tasks.GATE.set()
        controller.wait_all(PATIENCE)
    missing = invoke("--db", db, "explain", "nope")
    assert missing.code == 1
    assert "unknown task id 'nope'" in missing.err


def test_tasks_checkpoints_warns_when_a_stop_would_miss_the_window(
    db: str, tmp_path: Path, invoke: Callable[..., Result]
) -> None:
    path = tmp_path / "gappy.py"
    path.write_text(MODULE)
    tasks = load(path)
    clock = FakeClock()
    with open_store(db, clock) as store, Controller(store, clock=clock) as controller:
        controller.register_module(tasks)
        controller.submit("slow", task_id="s")

        def step() -> None:
            tasks.STEP.release()
            assert tasks.REACHED.acquire(timeout=PATIENCE)

        step()
        for _ in range(2):
            clock.advance(2)  # a 2 s gap between checkpoints, no real waiting
            step()
        controller.wait("s", PATIENCE)
    result = invoke(
        "--db", db, "tasks", "--tasks", str(path), "--checkpoints", "--graceful-stop", "1"
    )
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    slow = next(line for line in lines if line.startswith("slow"))
    assert "STOP MAY MISS" in slow
    train = next(line for line in lines if line.startswith("train"))
    assert "no runs" in train
    assert any(
        line.startswith("warning: a stop would likely not land in the 1s graceful window")
        for line in lines
    )
    doc = invoke(
        "--db", db, "tasks", "--tasks", str(path), "--checkpoints", "--graceful-stop", "1", "--json"
    ).json()
    assert doc["schema"] == "chongming-task.tasks-checkpoints.v1"
    by_name = {item["name"]: item for item in doc["tasks"]}
    verdict = by_name["slow"]["checkpoints"]
    assert (verdict["gaps"], verdict["p99"], verdict["max"]) == (4, 2.0, 2.0)
    assert verdict["stop_warning"] is True
    assert verdict["idle_warning"] is False  # idle=30 is far above 2 s
    assert by_name["train"]["checkpoints"] is None
    wide = invoke("--db", db, "tasks", "--tasks", str(path), "--checkpoints", "--json").json()
    assert {item["name"]: item for item in wide["tasks"]}["slow"]["checkpoints"][
        "stop_warning"
    ] is False  # the default 5 s window holds a 2 s gap


def test_lint_flags_a_loop_without_a_checkpoint_and_not_one_with(
    tmp_path: Path, invoke: Callable[..., Result]
) -> None:
    path = tmp_path / "linted.py"
    path.write_text(LINTED)
    result = invoke("lint", "--tasks", str(path))
    assert result.code == 1
    line = LINTED.splitlines().index("    while True:") + 1
    assert result.out.splitlines()[0].startswith(f"{path}:{line}: task 'careless': this while")
    assert "no checkpoint()" in result.out
    assert result.out.splitlines()[-1] == "1 loop(s) without a checkpoint in 1 of 2 task(s)"
    doc = invoke("lint", "--tasks", str(path), "--json").json()
    assert doc["clean"] is False
    assert [(f["task"], f["line"], f["loop"]) for f in doc["findings"]] == [
        ("careless", line, "while")
    ]
    clean = tmp_path / "clean.py"
    clean.write_text(LINTED.split("@task\ndef careless", maxsplit=1)[0])
    ok = invoke("lint", "--tasks", str(clean))
    assert ok.code == 0, ok.out
    assert ok.out.strip() == "no loop without a checkpoint in 1 task(s)"
    assert invoke("lint").code == 2  # no --tasks: a usage error


def test_lint_follows_the_context_into_helpers(tmp_path: Path) -> None:
    from chongming_task._checkpoint_lint import lint_function

    path = tmp_path / "helpers.py"
    path.write_text(
        "def step(ctx, item):\n"
        "    ctx.checkpoint()\n"
        "\n"
        "def body(context, items):\n"
        "    for item in items:\n"
        "        step(context, item)\n"
        "    for item in items:\n"
        "        def inner():\n"
        "            context.checkpoint()\n"
        "        inner()\n"
        "    async def later():\n"
        "        while True:\n"
        "            pass\n"
    )
    module = load(path)
    findings = lint_function("body", module.body)
    # A helper given the context may checkpoint; a nested function's checkpoint does not
    # run in the loop that defines it; a nested function's loop is its own business.
    assert [(f.line, f.loop) for f in findings] == [(7, "for")]
    assert lint_function("builtin", len) == []
