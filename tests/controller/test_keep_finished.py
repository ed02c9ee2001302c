"""``Controller(keep_finished=N)``: a long-lived controller's memory stays flat.

Without a limit a controller holds every run it ever ran until ``prune()`` (guide
§8.6). With one, the earliest-finished runs beyond it are forgotten by this process
only: the store keeps each task, its snapshot and its whole history, and the
controller answers for a forgotten task from the store.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Controller, SqliteTaskStore
from chongming_task.errors import ConfigurationError
from chongming_task.run import TaskRun
from chongming_task.states import TaskStatus as S
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import wait_until

DONE = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def double(ctx: Any, value: int) -> int:
    return value * 2


def _controller(store: Any, **options: Any) -> Controller:
    controller = Controller(store, max_parallel=2, **options)
    controller.register("double", double)
    return controller


@pytest.mark.parametrize("bad", [-1, True, 1.5, "10"])
def test_keep_finished_must_be_a_count(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"keep_finished must be .* got"):
        Controller(keep_finished=bad)  # type: ignore[arg-type]


def test_default_holds_every_finished_run_until_prune() -> None:
    with _controller(InMemoryTaskStore()) as controller:
        for value in range(5):
            controller.submit("double", value, task_id=f"t{value}").wait(timeout=10)
        assert [run.task_id for run in controller.runs()] == [f"t{v}" for v in range(5)]
        assert controller.keep_finished is None


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_earliest_finished_runs_are_forgotten_and_answered_from_the_store(
    kind: str, tmp_path: Path
) -> None:
    store: Any = InMemoryTaskStore() if kind == "memory" else SqliteTaskStore(tmp_path / "k.db")
    with store, _controller(store, keep_finished=2) as controller:
        for value in range(5):
            outcome = controller.submit("double", value, task_id=f"t{value}").wait(timeout=10)
            assert outcome.value == value * 2
        assert [run.task_id for run in controller.runs()] == ["t3", "t4"]
        assert controller.run("t0") is None
        # The store lost nothing: every task with its whole trajectory and result.
        for value in range(5):
            snapshot = controller.get(f"t{value}")
            assert snapshot is not None
            assert (snapshot.status, snapshot.outcome) == (S.SUCCEEDED, value * 2)
            assert [t.to_status for t in controller.history(f"t{value}")] == DONE
        # The controller answers for a forgotten task from the store.
        assert controller.wait("t0", timeout=5).value == 0
        assert controller.stop("t0") is True  # found and finished: nothing to do
        assert [t.to_status for t in controller.history("t0")] == DONE
        with pytest.raises(ConfigurationError, match="already exists"):
            controller.submit("double", 9, task_id="t0")
        assert controller.stats().by_status[S.SUCCEEDED] == 5


def test_zero_keeps_no_finished_run_but_handles_still_work() -> None:
    with _controller(InMemoryTaskStore(), keep_finished=0) as controller:
        run = controller.submit("double", 21, task_id="only")
        assert run.wait(timeout=10).value == 42
        assert controller.runs() == []
        assert [t.to_status for t in run.transitions] == DONE
        assert controller.wait("only", timeout=5).value == 42


def test_running_and_queued_runs_are_never_forgotten() -> None:
    gate = threading.Event()

    def held(ctx: Any) -> str:
        gate.wait(10)
        return "released"

    with _controller(InMemoryTaskStore(), keep_finished=0) as controller:
        controller.register("held", held)
        blocked = [controller.submit("held", task_id=f"h{i}") for i in range(3)]
        for value in range(3):
            controller.submit("double", value, task_id=f"d{value}")
        # Two slots are taken by held bodies; everything else waits in the queue.
        assert {run.task_id for run in controller.runs()} == {"h0", "h1", "h2", "d0", "d1", "d2"}
        gate.set()
        outcomes = [run.wait(timeout=10) for run in blocked]
        assert [o.value for o in outcomes] == ["released"] * 3
        controller.wait_all(timeout=10)
        assert controller.runs() == []
        assert [s.status for s in controller.list_tasks()] == [S.SUCCEEDED] * 6


def test_memory_of_forgotten_runs_is_released() -> None:
    """The controller holds no reference to a forgotten run: it is freed with the handle."""
    with _controller(InMemoryTaskStore(), keep_finished=1) as controller:
        for value in range(50):
            controller.submit("double", value, task_id=f"freed-{value}").wait(timeout=10)
        # A run's carrier thread may still be unwinding the frame that ran the last
        # forgotten one when its handle's wait() returns: released, not at once.
        wait_until(
            lambda: gc.collect() is not None and _live_runs("freed-") == ["freed-49"],
            message="every forgotten run collected, only the kept one alive",
        )


def _live_runs(prefix: str) -> list[str]:
    return sorted(
        obj.task_id
        for obj in gc.get_objects()
        # type(), not isinstance(): the latter asks a lazy proxy (Django's settings, when
        # its tests ran in this process) for __class__, which evaluates it.
        if type(obj) is TaskRun and obj.task_id.startswith(prefix)
    )


def add_upstream(ctx: Any) -> int:
    return sum(ctx.upstream.values())


def test_a_pipeline_gets_its_upstream_values_when_finished_nodes_are_forgotten() -> None:
    from chongming_task import Pipeline

    with _controller(InMemoryTaskStore(), keep_finished=0) as controller:
        controller.register("add_upstream", add_upstream)
        pipeline = Pipeline("sum")
        parts = [pipeline.node("double", n, node_id=f"part{n}") for n in range(3)]
        pipeline.node("add_upstream", node_id="total", depends_on=parts)
        outcome = controller.submit_pipeline(pipeline).wait(timeout=30)
        assert outcome.ok
        assert outcome.nodes["total"].value == 0 + 2 + 4
        total_id = outcome.nodes["total"].task_id
        assert [t.to_status for t in controller.history(total_id)] == [
            S.PENDING,
            S.BLOCKED,
            S.QUEUED,
            S.STARTING,
            S.RUNNING,
            S.SUCCEEDED,
        ]
        assert controller.runs() == []


def test_prune_after_forgetting_drops_from_the_store_and_the_remaining_memory() -> None:
    with _controller(InMemoryTaskStore(), keep_finished=3) as controller:
        for value in range(6):
            controller.submit("double", value, task_id=f"p{value}").wait(timeout=10)
        assert [run.task_id for run in controller.runs()] == ["p3", "p4", "p5"]
        assert controller.prune(keep_terminal=2) == 4
        assert [run.task_id for run in controller.runs()] == ["p4", "p5"]
        assert [s.task_id for s in controller.list_tasks(order="created")] == ["p4", "p5"]
        controller.submit("double", 6, task_id="p6").wait(timeout=10)
        assert [run.task_id for run in controller.runs()] == ["p4", "p5", "p6"]
        controller.submit("double", 7, task_id="p7").wait(timeout=10)
        assert [run.task_id for run in controller.runs()] == ["p5", "p6", "p7"]
