"""One write path: what the store says never depends on who listens.

Before, whether a controller's write was durable when a call returned depended on its
listeners: an inline subscriber made every write durable, a run listener turned the
"ride on the next run's commit" path off, and with neither a confirmed ``pause()``
read back as ``pausing`` from SQLite. Now every transition is stored before the call
that caused it returns, whoever listens, and before any subscriber hears of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chongming_task import Controller, SqliteTaskStore
from chongming_task._model import TaskSnapshot, Transition
from chongming_task.runtime._context import TaskContext
from chongming_task.stores._base import TaskStore
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import wait_until

from ._helpers import Gate, S, path

LISTENERS = ["nobody", "inline-subscriber", "threaded-subscriber", "run-listener"]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    opened: TaskStore = (
        InMemoryTaskStore() if request.param == "memory" else SqliteTaskStore(tmp_path / "t.db")
    )
    yield opened
    opened.close()


def _listen(controller: Controller, how: str, heard: Callable[[Transition], None]) -> None:
    def subscriber(transition: Transition, snapshot: TaskSnapshot) -> None:
        heard(transition)

    if how == "inline-subscriber":
        controller.subscribe(subscriber, inline=True)
    elif how == "threaded-subscriber":
        controller.subscribe(subscriber)


@pytest.mark.parametrize("how", LISTENERS)
def test_every_call_returns_with_its_effect_stored(store: TaskStore, gate: Gate, how: str) -> None:
    with Controller(store=store, max_parallel=1, pause_timeout=10) as controller:
        controller.register("hold", gate.hold)
        _listen(controller, how, lambda _: None)
        running = controller.submit("hold", task_id="a")
        waiting = controller.submit("hold", task_id="b")
        if how == "run-listener":
            for run in (running, waiting):
                run.add_listener(lambda transition, snapshot: None)
        assert store.get("b").status is S.QUEUED  # type: ignore[union-attr]
        assert controller.pause("b")
        assert store.get("b").status is S.PAUSED  # type: ignore[union-attr]
        assert controller.resume("b")
        assert store.get("b").status is S.QUEUED  # type: ignore[union-attr]
        wait_until(lambda: running.status is S.RUNNING, timeout=10, message="a runs")
        assert controller.pause("a")
        assert store.get("a").status is S.PAUSED  # type: ignore[union-attr]
        assert controller.resume("a")
        assert store.get("a").status is S.RUNNING  # type: ignore[union-attr]
        assert controller.stop("b", reason="not needed")
        assert store.get("b").status is S.STOPPED  # type: ignore[union-attr]
        gate.open()
        assert controller.wait("a", 10).ok
        assert store.get("a").status is S.SUCCEEDED  # type: ignore[union-attr]
        for run in (running, waiting):
            stored = store.history(run.task_id)
            assert [(t.version, t.to_status) for t in stored] == [
                (t.version, t.to_status) for t in run.transitions
            ]
        assert path(store.history("b")) == ["pending", "queued", "paused", "queued", "stopped"]


def test_a_subscriber_hears_a_transition_only_once_it_is_stored(store: TaskStore) -> None:
    seen: list[tuple[str, str | None]] = []

    def body(ctx: TaskContext) -> str:
        return "ok"

    def subscriber(transition: Transition, snapshot: TaskSnapshot) -> None:
        stored = store.get(transition.task_id)
        assert stored is not None
        assert stored.status_version >= transition.version
        seen.append((transition.to_status.value, stored.status.value))

    with Controller(store=store, max_parallel=2) as controller:
        controller.register("body", body)
        controller.subscribe(subscriber, inline=True)
        runs = [controller.submit("body") for _ in range(20)]
        for run in runs:
            assert run.wait(10).ok
    assert len(seen) == 20 * 5  # pending, queued, starting, running, succeeded each
