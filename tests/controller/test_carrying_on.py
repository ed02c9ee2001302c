"""The thread that finished a run carries the next one, unless anything could wait on it.

After a run's end frees its slot, the controller starts the next queued run once the
finished run's delivery is over; when nothing but the controller listens to the
finished run, the carrier thread that ran it keeps the next run for itself instead of
waking another thread and parking. Anything that could wait for the next run from
inside the finished one (a done callback, another listener) makes the controller
start it on another thread, as before, so nothing can wait on itself.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Controller, InMemoryTaskStore, SqliteTaskStore
from chongming_task.runtime.context import TaskContext
from chongming_task.runtime.executors.carriers import SHARED
from chongming_task.stores.base import SnapshotWrite, TaskStore

from ._helpers import Gate, S, path


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    """Both write paths: direct writes, and the batching one (a run's end rides along)."""
    if request.param == "memory":
        yield InMemoryTaskStore()
        return
    with SqliteTaskStore(tmp_path / "tasks.db") as opened:
        yield opened


def _recording(threads: dict[str, int]) -> Any:
    def body(ctx: TaskContext) -> str:
        threads[ctx.task_id] = threading.get_ident()
        return ctx.task_id

    return body


def test_queued_runs_are_carried_by_the_thread_that_freed_the_slot(
    gate: Gate, store: TaskStore
) -> None:
    threads: dict[str, int] = {}
    with Controller(store=store, max_parallel=1) as controller:
        controller.register("hold", gate.hold)
        controller.register("record", _recording(threads))
        first = controller.submit("hold", task_id="first")
        queued = [controller.submit("record", task_id=f"next-{i}") for i in range(4)]
        assert all(run.status is S.QUEUED for run in queued)
        started_before = SHARED.started
        gate.open()
        assert first.wait(10).ok
        for run in queued:
            assert run.wait(10).ok
        # One thread carried all four, one after the other; no thread was started.
        assert len(set(threads.values())) == 1
        assert SHARED.started == started_before
        for run in queued:
            assert path(run.transitions) == [
                "pending",
                "queued",
                "starting",
                "running",
                "succeeded",
            ]


def test_a_done_callback_waiting_for_the_next_run_is_not_stuck_behind_it(
    gate: Gate, store: TaskStore
) -> None:
    threads: dict[str, int] = {}
    seen: list[Any] = []
    with Controller(store=store, max_parallel=1) as controller:
        controller.register("hold", gate.hold)
        controller.register("record", _recording(threads))
        first = controller.submit("hold", task_id="first")
        second = controller.submit("record", task_id="second")
        # The callback runs on the first run's thread and waits for the second run:
        # the second must start elsewhere (and before the callback returns).
        first.add_done_callback(lambda run: seen.append(second.wait(10)))
        first_thread: list[int] = []
        first.add_done_callback(lambda run: first_thread.append(threading.get_ident()))
        gate.open()
        assert first.wait(10).ok
        assert second.wait(10).value == "second"
    assert len(seen) == 1
    assert seen[0].ok
    assert threads["second"] != first_thread[0]


def test_a_done_callback_may_submit_and_wait(gate: Gate, store: TaskStore) -> None:
    outcomes: list[Any] = []
    with Controller(store=store, max_parallel=1) as controller:
        controller.register("hold", gate.hold)
        controller.register("record", _recording({}))

        def follow_up(run: Any) -> None:
            outcomes.append(controller.submit("record", task_id="follow-up").wait(10))

        first = controller.submit("hold", task_id="first")
        first.add_done_callback(follow_up)
        gate.open()
        assert first.wait(10).ok
    assert len(outcomes) == 1
    assert outcomes[0].value == "follow-up"


def test_a_runs_end_and_the_next_runs_start_share_one_commit(gate: Gate, tmp_path: Path) -> None:
    """On a batching store the end of a run is queued, and the ``-> starting`` of the run
    its thread carries next (a durable write) stores both in one commit; ``wait()`` still
    returns only once the store has the terminal state."""
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        batches: list[list[tuple[str, str]]] = []
        save_many = store.save_many

        def spy(writes: Sequence[SnapshotWrite]) -> Any:
            batches.append([(w.snapshot.task_id, w.snapshot.status.value) for w in writes])
            return save_many(writes)

        store.save_many = spy  # type: ignore[method-assign]
        with Controller(store=store, max_parallel=1) as controller:
            controller.register("hold", gate.hold)
            controller.register("record", _recording({}))
            first = controller.submit("hold", task_id="first")
            queued = [controller.submit("record", task_id=f"next-{i}") for i in range(3)]
            gate.open()
            for run in (first, *queued):
                outcome = run.wait(10)
                assert outcome.ok
                stored = store.get(run.task_id)
                assert stored is not None
                assert stored.status is S.SUCCEEDED  # durable before wait() returned
            ids = ["first", "next-0", "next-1", "next-2"]
            for ended, started in itertools.pairwise(ids):
                together = [
                    batch
                    for batch in batches
                    if (ended, "succeeded") in batch and (started, "starting") in batch
                ]
                assert together, f"{ended}'s end and {started}'s start in one commit: {batches}"
            for task_id in ids:
                assert path(store.history(task_id)) == [
                    "pending",
                    "queued",
                    "starting",
                    "running",
                    "succeeded",
                ]


def test_a_done_callback_added_while_the_run_ends_may_wait_for_the_carried_run(
    gate: Gate, tmp_path: Path
) -> None:
    """The controller chose to carry the next run on this thread (nobody else listened),
    then a done callback that waits for that run was added before the end was
    delivered: the carried run must start on another thread, not wait behind it."""
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        outcomes: list[Any] = []
        runs: dict[str, Any] = {}
        save_many = store.save_many

        def late_callback(writes: Sequence[SnapshotWrite]) -> Any:
            starting = [w.snapshot.task_id for w in writes if w.snapshot.status is S.STARTING]
            if "second" in starting and not outcomes:
                # The start of the carried run is being stored: the first run's end is
                # decided but not delivered yet. A callback added now waits for it.
                runs["first"].add_done_callback(
                    lambda run: outcomes.append(runs["second"].wait(10))
                )
            return save_many(writes)

        store.save_many = late_callback  # type: ignore[method-assign]
        with Controller(store=store, max_parallel=1) as controller:
            controller.register("hold", gate.hold)
            controller.register("record", _recording({}))
            runs["first"] = controller.submit("hold", task_id="first")
            runs["second"] = controller.submit("record", task_id="second")
            gate.open()
            assert runs["first"].wait(10).ok
            assert runs["second"].wait(10).value == "second"
        assert len(outcomes) == 1
        assert outcomes[0].ok  # the callback's wait ended with the run, not a timeout
        assert path(runs["second"].transitions) == [
            "pending",
            "queued",
            "starting",
            "running",
            "succeeded",
        ]


def test_with_nothing_queued_a_run_is_stored_ended_before_its_slot_is_given_back(
    tmp_path: Path,
) -> None:
    """Only a run that a queued run will replace at once lends its end to the next
    commit; otherwise whoever sees the slot free finds the run ended in the store."""
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        with Controller(store=store, max_parallel=1) as controller:
            controller.register("record", _recording({}))
            dispatch = controller._dispatch
            on_transition = dispatch.on_transition
            seen: list[str | None] = []

            def spy(transition: Any) -> bool:
                if transition.to_status.is_terminal:
                    stored = store.get(transition.task_id)
                    seen.append(None if stored is None else stored.status.value)
                return on_transition(transition)

            dispatch.on_transition = spy  # type: ignore[method-assign]
            for task_id in ("one", "two"):
                run = controller.submit("record", task_id=task_id)
                assert run.wait(10).value == task_id
        assert seen == ["succeeded", "succeeded"]
