"""A lost attempt's body that finishes later is audited, and changes nothing.

Deterministic: the holder's lease renewals are blocked (a partition), a reconciler on
another store handle with a clock past every lease calls the task ``lost``, then the
body finishes. The holder's terminal write conflicts; the store keeps ``lost`` (same
version, same history) and the late result is in the task's audit. Every store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Controller, InMemoryTaskStore, SqliteTaskStore, TaskRun
from chongming_task.controller._late_results import LATE_RESULTS_KEY, MAX_LATE_RESULTS
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock, wait_until

from ._helpers import S, path

Handles = Callable[[], tuple[TaskStore, TaskStore]]


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.external_service)]
)
def handles(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Handles]:
    """Two handles on one store: the holder's and the reconciler's."""
    opened: list[TaskStore] = []

    def make() -> tuple[TaskStore, TaskStore]:
        if request.param == "memory":
            store: TaskStore = InMemoryTaskStore()
            pair = (store, store)
        elif request.param == "sqlite":
            pair = (SqliteTaskStore(tmp_path / "t.db"), SqliteTaskStore(tmp_path / "t.db"))
        else:
            from chongming_task import PostgresTaskStore

            dsn = request.getfixturevalue("postgres_dsn")
            pair = (PostgresTaskStore(dsn), PostgresTaskStore(dsn))
        opened.extend(pair)
        return pair

    yield make
    for store in opened:
        store.close()


def _partitioned(store: TaskStore) -> None:
    """Block the holder's lease renewals: they reach nothing."""

    def renew(owner: str, task_ids: Any, lease_until: datetime) -> int:
        return 0

    store.renew_leases = renew  # type: ignore[method-assign]


def _lose(other: TaskStore, task_id: str) -> None:
    """Another process, after every lease expired, reconciles: the task is lost."""
    later = FakeClock(start=datetime.now(UTC) + timedelta(hours=1))
    reconciler = Controller(store=other, clock=later, owner="reconciler")
    try:
        assert reconciler.reconcile().lost == (task_id,)
    finally:
        reconciler.close(close_store=False)


def _lost_while_running(
    handles: Handles, body: Callable[[Any], Any], task_id: str
) -> tuple[TaskStore, Controller, TaskRun]:
    """A partitioned holder runs ``body`` as ``task_id``; the other handle calls it lost.

    Returns the other handle, the holder's controller and the (still running) run.
    """
    store, other = handles()
    _partitioned(store)
    controller = Controller(store=store, owner="worker", lease_ttl=0.5)
    controller.register("job", body)
    run = controller.submit("job", task_id=task_id)
    wait_until(lambda: other.get(task_id).status is S.RUNNING, message="running")  # type: ignore[union-attr]
    _lose(other, task_id)
    return other, controller, run


def test_a_late_success_is_audited_and_the_status_stays_lost(handles: Handles) -> None:
    release = threading.Event()
    other, controller, run = _lost_while_running(
        handles, lambda ctx: {"rows": 7} if release.wait(30) else None, "t"
    )
    lost = other.get("t")
    assert lost is not None
    assert lost.status is S.LOST
    history = other.history("t")
    assert path(history) == ["pending", "queued", "starting", "running", "lost"]

    release.set()  # the partitioned body finishes after all
    assert run.wait(10).value == {"rows": 7}
    wait_until(
        lambda: LATE_RESULTS_KEY in other.get("t").metadata,  # type: ignore[union-attr]
        message="the late result recorded",
    )
    after = other.get("t")
    assert after is not None
    assert after.status is S.LOST  # what reconcile decided stands
    assert after.status_version == lost.status_version
    assert after.failure == lost.failure
    assert after.outcome is None
    assert other.history("t") == history  # nothing added to the trail
    (record,) = after.metadata[LATE_RESULTS_KEY]
    assert record["status"] == "succeeded"
    assert record["outcome"] == {"rows": 7}
    assert record["attempt"] == 1
    assert record["by"] == "worker"
    assert record["stored_status"] == "lost"
    assert record["stored_version"] == lost.status_version
    assert record["failure"] is None
    assert any(f.task_id == "t" for f in controller.persist_failures)
    assert not controller.pending_writes
    controller.close(close_store=False)


def test_a_late_failure_is_audited_too_and_records_stay_bounded(handles: Handles) -> None:
    release = threading.Event()

    def job(ctx: Any) -> None:
        release.wait(30)
        raise RuntimeError("disk full")

    other, controller, run = _lost_while_running(handles, job, "f")
    version = other.get("f").status_version  # type: ignore[union-attr]
    # Already full of older records: the newest replaces the oldest.
    stale = [{"status": "succeeded", "n": i} for i in range(MAX_LATE_RESULTS)]
    stored = other.get("f")
    assert stored is not None
    other.save(
        stored.replace(metadata={**stored.metadata, LATE_RESULTS_KEY: stale}),
        expect_version=version,
    )
    release.set()
    assert run.wait(10).status is S.FAILED
    wait_until(
        lambda: other.get("f").metadata[LATE_RESULTS_KEY][-1].get("status") == "failed",  # type: ignore[union-attr]
        message="the late failure recorded",
    )
    after = other.get("f")
    assert after is not None
    assert (after.status, after.status_version) == (S.LOST, version)
    records = after.metadata[LATE_RESULTS_KEY]
    assert isinstance(records, list)
    assert len(records) == MAX_LATE_RESULTS
    assert records[0] == stale[1]
    assert "disk full" in str(records[-1]["failure"])
    controller.close(close_store=False)


def test_status_shows_the_late_result(handles: Handles) -> None:
    from chongming_task.cli.commands._inspect_ import status_lines

    release = threading.Event()
    other, controller, run = _lost_while_running(handles, lambda ctx: release.wait(30) and 1, "s")
    release.set()
    run.wait(10)
    wait_until(lambda: LATE_RESULTS_KEY in other.get("s").metadata, message="recorded")  # type: ignore[union-attr]
    lines = dict(status_lines(other.get("s")))  # type: ignore[arg-type]
    assert lines["status"].startswith("lost")
    assert "ended succeeded" in lines["late result"]
    assert "on worker, after the store called it lost" in lines["late result"]
    controller.close(close_store=False)


def test_the_end_is_audited_after_an_earlier_write_was_given_up(handles: Handles) -> None:
    release = threading.Event()

    def job(ctx: Any) -> int:
        while not release.is_set():
            ctx.checkpoint()
            release.wait(0.005)
        return 3

    other, controller, run = _lost_while_running(handles, job, "p")
    history = other.history("p")
    controller.pause("p")  # its running -> pausing write conflicts and is given up
    wait_until(lambda: run.status is S.PAUSED, message="paused here")
    controller.resume("p")
    release.set()
    assert run.wait(10).value == 3
    wait_until(lambda: LATE_RESULTS_KEY in other.get("p").metadata, message="recorded")  # type: ignore[union-attr]
    after = other.get("p")
    assert after is not None
    assert after.status is S.LOST
    assert other.history("p") == history
    (record,) = after.metadata[LATE_RESULTS_KEY]
    assert (record["status"], record["outcome"]) == ("succeeded", 3)
    controller.close(close_store=False)
