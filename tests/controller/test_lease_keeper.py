"""The lease keeper keeps every failed renewal, but logs a repeated failure only once.

A store that went away (closed under a live controller, a database that is down)
fails the same way on every tick. Each failure is still kept and counted (the
controller's ``persist_failures``, the Prometheus counter); only the log stays
readable: the first failure of a streak is a warning, the repeats are debug, and the
first success after the streak says so once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest

from chongming_task._model import TaskSnapshot
from chongming_task.controller._leases import LeaseKeeper
from chongming_task.errors import StoreError
from chongming_task.testing import FakeClock


class _FlakyRenewals:
    """Only what the keeper calls: ``renew_leases`` fails while ``down``."""

    def __init__(self) -> None:
        self.down = True
        self.renewed: list[tuple[str, list[str]]] = []

    def renew_leases(self, owner: str, task_ids: Sequence[str], until: datetime) -> int:
        if self.down:
            raise StoreError("the store is closed")
        self.renewed.append((owner, list(task_ids)))
        return len(task_ids)


def _keeper(store: _FlakyRenewals, failures: list[tuple[str, bool]]) -> LeaseKeeper:
    clock = FakeClock()

    def on_failure(
        task_id: str | None, operation: str, error: BaseException, *, quiet: bool = False
    ) -> None:
        failures.append((operation, quiet))

    def no_snapshots() -> list[TaskSnapshot]:
        return []

    return LeaseKeeper(
        store=store,  # type: ignore[arg-type]
        clock=clock,
        owner="node-a",
        lease_ttl=30.0,
        held=lambda: ["t1", "t2"],
        active=no_snapshots,
        lease_until=lambda: clock.now() + timedelta(seconds=30),
        on_failure=on_failure,
    )


def test_a_failure_streak_is_kept_whole_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    store = _FlakyRenewals()
    failures: list[tuple[str, bool]] = []
    keeper = _keeper(store, failures)
    caplog.set_level(logging.INFO, logger="chongming_task.controller")
    for _ in range(4):
        keeper.run_once(renew=True)
    # Every failure reaches the sink; all but the first are marked quiet.
    assert failures == [
        ("renew_leases", False),
        ("renew_leases", True),
        ("renew_leases", True),
        ("renew_leases", True),
    ]
    store.down = False
    keeper.run_once(renew=True)
    assert store.renewed == [("node-a", ["t1", "t2"])]
    recovered = [r for r in caplog.records if "works again" in r.getMessage()]
    assert len(recovered) == 1
    assert "after 4 failed attempt(s)" in recovered[0].getMessage()
    # A new failure after the recovery is news again.
    store.down = True
    keeper.run_once(renew=True)
    assert failures[-1] == ("renew_leases", False)


def test_a_different_error_is_not_quiet() -> None:
    store = _FlakyRenewals()
    failures: list[tuple[str, bool]] = []
    keeper = _keeper(store, failures)
    keeper.run_once(renew=True)

    def other_error(owner: str, task_ids: Sequence[str], until: datetime) -> int:
        raise StoreError("database is locked")

    store.renew_leases = other_error  # type: ignore[method-assign]
    keeper.run_once(renew=True)
    keeper.run_once(renew=True)
    assert failures == [
        ("renew_leases", False),
        ("renew_leases", False),
        ("renew_leases", True),
    ]


def test_a_controller_counts_quiet_failures_but_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from chongming_task import Controller, InMemoryTaskStore

    store = InMemoryTaskStore()
    controller = Controller(store=store, owner="node-b")
    caplog.set_level(logging.DEBUG, logger="chongming_task.controller")
    error = StoreError("the store is closed")
    controller._writes.record(None, "renew_leases", error)
    controller._writes.record(None, "renew_leases", error, quiet=True)
    controller._writes.record(None, "renew_leases", error, quiet=True)
    assert len(controller.persist_failures) == 3
    levels = [r.levelno for r in caplog.records if "renew_leases failed" in r.getMessage()]
    assert levels == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    controller.close()
