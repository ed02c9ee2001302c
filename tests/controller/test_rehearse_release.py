"""``rehearse_release`` runs the release path on throwaway runs and changes nothing real."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from chongming_task import Controller, InMemoryTaskStore
from chongming_task.controller.rehearsal import REHEARSAL_ID, REHEARSALS, ReleaseRehearsal
from chongming_task.model import TaskSnapshot, Transition
from chongming_task.runtime.context import TaskContext
from chongming_task.stores.base import TaskStore
from chongming_task.stores.sqlite import SqliteTaskStore

from ._helpers import S


def _body(ctx: TaskContext) -> str:
    return ctx.task_id


def _stored(store: TaskStore, task_id: str) -> tuple[TaskSnapshot | None, list[Transition]]:
    return store.get(task_id), store.history(task_id)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_playing_changes_no_run_no_store_and_tells_no_subscriber(kind: str, tmp_path: Path) -> None:
    store: TaskStore = (
        InMemoryTaskStore() if kind == "memory" else SqliteTaskStore(str(tmp_path / "t.db"))
    )
    heard: list[Transition] = []
    with Controller(store=store, max_parallel=4, owner="node-a") as controller:
        controller.register("t", _body)
        controller.subscribe(lambda transition, snapshot: heard.append(transition))
        runs = [controller.submit("t", task_id=f"armed-{i}", blocked="armed") for i in range(2)]
        before = {run.task_id: (run.snapshot, run.transitions) for run in runs}
        stored_before = {run.task_id: _stored(store, run.task_id) for run in runs}
        assert controller._events.flush(timeout=5)  # the creations' events, delivered
        heard_before = list(heard)
        threads = threading.active_count()

        rehearsal = controller.rehearse_release([*before, "not-held-here"])
        plays = 0
        while rehearsal.play():
            plays += 1

        assert plays == REHEARSALS
        assert threading.active_count() == threads  # inline: no carrier, no timer thread
        for run in runs:
            assert run.status is S.BLOCKED
            assert (run.snapshot, run.transitions) == before[run.task_id]
            assert _stored(store, run.task_id) == stored_before[run.task_id]
        assert store.get(REHEARSAL_ID) is None
        assert controller._events.flush(timeout=5)
        assert heard == heard_before
        assert all(t.task_id != REHEARSAL_ID for t in heard)
        assert controller.run(REHEARSAL_ID) is None

        # The real release afterwards records the usual trajectory.
        assert controller.release_many(before, trigger="schedule:due") == {}
        for run in runs:
            assert run.wait(10).ok
            statuses = [t.to_status for t in store.history(run.task_id)]
            assert statuses[-5:] == [S.BLOCKED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    store.close()


def test_a_rehearsal_without_held_runs_plays_nothing() -> None:
    with Controller(store=InMemoryTaskStore(), max_parallel=2) as controller:
        rehearsal = controller.rehearse_release(["nobody"])
        assert rehearsal.left == 0
        assert rehearsal.play() is False


def test_the_rehearsal_encodes_through_the_store_hook_and_the_stored_form() -> None:
    """Each played transition goes through ``stored_form`` and ``rehearse_write``."""
    with Controller(store=InMemoryTaskStore(), max_parallel=2) as controller:
        controller.register("t", _body)
        run = controller.submit("t", task_id="armed", blocked="armed")
        forms: list[str] = []
        written: list[tuple[str, tuple[str, ...]]] = []

        def stored_form(snapshot: TaskSnapshot) -> TaskSnapshot:
            forms.append(snapshot.task_id)
            return snapshot

        def rehearse_write(snapshot: TaskSnapshot, transitions: tuple[Transition, ...]) -> None:
            written.append((snapshot.status.value, tuple(t.to_status.value for t in transitions)))

        rehearsal = ReleaseRehearsal(
            [run],
            stored_form=stored_form,
            rehearse_write=rehearse_write,  # type: ignore[arg-type]
            clock=controller.clock,
            count=1,
        )
        assert rehearsal.play() is True
        assert rehearsal.play() is False
        # The real run read once, then the throwaway run's release and start to its end.
        assert forms[0] == "armed"
        assert set(forms[1:]) == {REHEARSAL_ID}
        assert written == [
            ("blocked", ()),
            ("queued", ("queued",)),
            ("starting", ("starting",)),
            ("running", ("running",)),
            ("succeeded", ("succeeded",)),
        ]
        assert run.status is S.BLOCKED


def test_a_failing_rehearsal_is_logged_once_and_stops(caplog: pytest.LogCaptureFixture) -> None:
    with Controller(store=InMemoryTaskStore(), max_parallel=2) as controller:
        controller.register("t", _body)
        run = controller.submit("t", task_id="armed", blocked="armed")

        def broken(snapshot: TaskSnapshot) -> TaskSnapshot:
            raise RuntimeError("no encoding today")

        rehearsal = ReleaseRehearsal(
            [run], stored_form=broken, rehearse_write=None, clock=controller.clock
        )
        with caplog.at_level(logging.WARNING, logger="chongming_task.controller"):
            assert rehearsal.play() is False
            assert rehearsal.play() is False
        assert [r.message for r in caplog.records].count(
            "a release rehearsal failed; not rehearsing further"
        ) == 1
        assert run.status is S.BLOCKED
        assert controller.release_many(["armed"], trigger="schedule:due") == {}
        assert run.wait(10).ok


def test_the_sql_hook_encodes_and_writes_nothing(tmp_path: Path) -> None:
    store = SqliteTaskStore(str(tmp_path / "t.db"))
    with Controller(store=store, max_parallel=2) as controller:
        controller.register("t", _body)
        run = controller.submit("t", task_id="armed", blocked="armed")
        snapshot, history = _stored(store, "armed")
        assert snapshot is not None
        store.rehearse_write(run.snapshot.replace(priority=7), run.transitions)
        assert _stored(store, "armed") == (snapshot, history)
    store.close()
