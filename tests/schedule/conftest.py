"""A deterministic scheduling harness: FakeClock, in-memory store, controller, scheduler."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from chongming_task import Controller
from chongming_task._model import TaskSnapshot
from chongming_task.schedule._scheduler import Scheduler
from chongming_task.schedule._ticks import TickReport
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import FakeClock, wait_until

T0 = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday, 00:00 UTC


class Harness:
    """One store and clock; any number of controller+scheduler nodes on them."""

    def __init__(self, store: Callable[[FakeClock], TaskStore] | None = None) -> None:
        self.clock = FakeClock(T0)
        self.store = InMemoryTaskStore(clock=self.clock) if store is None else store(self.clock)
        self.controllers: list[Controller] = []
        self.schedulers: list[Scheduler] = []

    def node(
        self,
        tasks: dict[str, Callable[..., Any]],
        *,
        owner: str = "node-a",
        **scheduler_options: Any,
    ) -> Scheduler:
        controller_options = {
            key: scheduler_options.pop(key)
            for key in ("owned_buckets", "num_buckets", "max_parallel")
            if key in scheduler_options
        }
        controller = Controller(self.store, clock=self.clock, owner=owner, **controller_options)
        for name, fn in tasks.items():
            controller.register(name, fn)
        scheduler = Scheduler(controller, **scheduler_options)
        self.controllers.append(controller)
        self.schedulers.append(scheduler)
        return scheduler

    def step(self, seconds: float, *schedulers: Scheduler, settle: bool = True) -> list[TickReport]:
        """Advance the clock, then tick every given scheduler (default: all) once.

        With ``settle`` (the default) it waits, in real time, until the runs fired
        by these ticks have finished: fake time must not fly past a run that a
        thread has not even started yet, or its max runtime would expire.
        """
        self.clock.advance(seconds)
        reports = [s.tick() for s in schedulers or self.schedulers]
        if settle:
            for report in reports:
                for task_id in report.fired:
                    self.settled(task_id)
        return reports

    def runs(self, schedule: str) -> list[TaskSnapshot]:
        from chongming_task.stores._base import TaskQuery

        return self.store.query(TaskQuery(metadata_eq={"schedule": schedule}))

    def settled(self, task_id: str, timeout: float = 5.0) -> TaskSnapshot:
        """Wait (real time) until ``task_id`` is terminal in the store."""

        def done() -> TaskSnapshot | None:
            snapshot = self.store.get(task_id)
            return snapshot if snapshot is not None and snapshot.is_terminal else None

        snapshot = wait_until(done, timeout=timeout, message=f"{task_id} to finish")
        assert snapshot is not None
        return snapshot

    def status(self, task_id: str, status: TaskStatus, timeout: float = 5.0) -> TaskSnapshot:
        def reached() -> TaskSnapshot | None:
            snapshot = self.store.get(task_id)
            return snapshot if snapshot is not None and snapshot.status is status else None

        snapshot = wait_until(reached, timeout=timeout, message=f"{task_id} to be {status.value}")
        assert snapshot is not None
        return snapshot

    def path(self, task_id: str) -> list[str]:
        """The stored trajectory: ``["pending", "queued", ...]``."""
        return [t.to_status.value for t in self.store.history(task_id)]

    def close(self) -> None:
        for scheduler in self.schedulers:
            scheduler.close()
        # A controller's command poller waits on the FakeClock: keep time moving while
        # the controllers close, or each close would sit out its join timeout.
        closers = [
            threading.Thread(target=controller.close, kwargs={"timeout": 5})
            for controller in self.controllers
        ]
        for closer in closers:
            closer.start()
        while alive := [closer for closer in closers if closer.is_alive()]:
            self.clock.advance(1)
            alive[0].join(0.002)  # real time for the poller threads to notice
        self.store.close()


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    try:
        yield h
    finally:
        h.close()
