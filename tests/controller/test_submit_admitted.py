"""A task admitted at submission is created already ``starting``, and only then launched.

``Controller.submit`` takes a run that finds a free slot (and nobody waiting) to
``starting`` before the store has it, so creation, ``queued`` and ``starting`` are
one write. These tests pin what that must never change: the body runs only after the
store shows ``starting``, a waiting task is never overtaken, a refused submission
leaves nothing running and no slot taken, and the trail keeps every record in order.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Controller, SqliteTaskStore
from chongming_task.errors import ConfigurationError
from chongming_task.runtime._context import TaskContext
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until

from ._helpers import Gate, S, path


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with SqliteTaskStore(tmp_path / "tasks.db") as opened:
        yield opened


def test_an_uncontended_submit_is_stored_starting_before_the_body_runs(store: TaskStore) -> None:
    seen: list[str] = []

    def body(ctx: TaskContext) -> str:
        # What the store shows at the moment the body begins.
        stored = store.get(ctx.task_id)
        assert stored is not None
        seen.append(stored.status.value)
        return "done"

    created: list[tuple[str, list[str]]] = []
    original_create = store.create

    def spy(snapshot: Any, transitions: Any = ()) -> None:
        created.append((snapshot.status.value, path(transitions)))
        original_create(snapshot, transitions)

    store.create = spy  # type: ignore[method-assign]
    with Controller(store=store, max_parallel=1) as controller:
        controller.register("body", body)
        run = controller.submit("body", task_id="t1")
        assert run.wait(10).value == "done"
    # One write for the creation, the queueing and the admission.
    assert created == [("starting", ["pending", "queued", "starting"])]
    assert seen
    assert seen[0] in ("starting", "running")
    assert path(store.history("t1")) == ["pending", "queued", "starting", "running", "succeeded"]
    assert path(run.transitions) == path(store.history("t1"))
    versions = [t.version for t in store.history("t1")]
    assert versions == list(range(len(versions)))


def test_a_waiting_task_is_not_overtaken(store: TaskStore, gate: Gate) -> None:
    with Controller(store=store, max_parallel=1) as controller:
        controller.register("hold", gate.hold)
        first = controller.submit("hold", task_id="first")
        wait_until(lambda: first.status is S.RUNNING, message="first running")
        second = controller.submit("hold", task_id="second", priority=1)
        third = controller.submit("hold", task_id="third", priority=5)
        # The slot is taken: both are created queued and stay queued.
        stored_second, stored_third = store.get("second"), store.get("third")
        assert stored_second is not None
        assert stored_second.status is S.QUEUED
        assert stored_third is not None
        assert stored_third.status is S.QUEUED
        order: list[str] = []
        lock = threading.Lock()

        def record(run: Any) -> None:
            with lock:
                order.append(run.task_id)

        second.add_done_callback(record)
        third.add_done_callback(record)
        gate.open()
        assert first.wait(10).ok
        assert second.wait(10).ok
        assert third.wait(10).ok
    assert order == ["third", "second"]  # priority decides, not who came last
    assert path(store.history("second"))[:3] == ["pending", "queued", "starting"]


def test_a_duplicate_id_refused_by_the_store_runs_nothing_and_frees_the_slot(
    store: TaskStore,
) -> None:
    calls: list[str] = []

    def body(ctx: TaskContext) -> None:
        calls.append(ctx.task_id)

    with Controller(store=store, max_parallel=1, owner="node-a") as first:
        first.register("body", body)
        assert first.submit("body", task_id="dup").wait(10).ok
    calls.clear()
    with Controller(store=store, max_parallel=1, owner="node-b") as second:
        second.register("body", body)
        with pytest.raises(ConfigurationError, match="already exists"):
            second.submit("body", task_id="dup")
        assert second.active_count == 0
        assert second.runs() == []
        # The slot came back: the next submission starts at once and succeeds.
        assert second.submit("body", task_id="next").wait(10).ok
    assert calls == ["next"]
    # The existing task's trail is untouched by the refused submission.
    assert path(store.history("dup")) == ["pending", "queued", "starting", "running", "succeeded"]
