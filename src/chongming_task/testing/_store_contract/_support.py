"""The harness of the store contract: store lifecycle, hooks, and data builders.

Kept free of pytest so the suite runs under any runner: plain ``assert`` statements,
``setup_method``/``teardown_method`` (pytest) aliased to ``setUp``/``tearDown``
(unittest), and ``unittest.SkipTest`` for cases a backend cannot express (pytest
reports it as a skip).
"""

from __future__ import annotations

import inspect
import itertools
import unittest
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, NoReturn

from chongming_task._model import Failure, FailureKind, Progress, TaskSnapshot, Transition
from chongming_task.states import TaskStatus
from chongming_task.stores._base import (
    Command,
    CommandStore,
    QueueStore,
    ScheduleStore,
    TaskRecordStore,
)
from chongming_task.testing._fake_clock import FakeClock
from chongming_task.testing._store_contract._checks import (
    WatchedClock,
    assert_same_json,
    assert_snapshot_equal,
    by_id,
    raises,
)

__all__ = [
    "ContractHarness",
    "WatchedClock",
    "as_commands",
    "as_schedules",
    "assert_same_json",
    "assert_snapshot_equal",
    "by_id",
    "raises",
]

#: Where the contract's FakeClock starts. Fixed, so failures reproduce exactly.
START: datetime = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
#: Two non-UTC offsets: a store that normalises to UTC must still compare equal, and a
#: store that keeps the original offset must keep it exactly.
TZ_PLUS_8 = timezone(timedelta(hours=8))
TZ_MINUS_3_30 = timezone(-timedelta(hours=3, minutes=30))


def as_commands(store: TaskRecordStore) -> CommandStore:
    """``store`` as a ``CommandStore``; a command case fails on a store without commands."""
    assert isinstance(store, CommandStore), (
        f"{type(store).__name__} does not implement CommandStore: run only the "
        "contracts of the parts it implements (TaskRecordStoreContract...)"
    )
    return store


def as_schedules(store: TaskRecordStore) -> ScheduleStore:
    """``store`` as a ``ScheduleStore`` (see :func:`as_commands`)."""
    assert isinstance(store, ScheduleStore), (
        f"{type(store).__name__} does not implement ScheduleStore: run only the "
        "contracts of the parts it implements (TaskRecordStoreContract...)"
    )
    return store


class ContractHarness:
    """Lifecycle and hooks; the test mixins build on it.

    Subclasses implement :meth:`make_store` and may override the optional hooks.
    """

    clock: FakeClock

    # ------------------------------------------------------------ hooks

    # The hooks take ``*args, **kwargs`` so that overrides with or without a ``clock``
    # parameter are both valid overrides for type checkers.

    def make_store(self, *args: Any, **kwargs: Any) -> TaskRecordStore:
        """A fresh, empty store. May accept a ``clock`` keyword argument to receive the
        suite's ``FakeClock`` at construction; otherwise it is assigned to ``store.clock``."""
        raise NotImplementedError("subclass StoreContract and implement make_store()")

    def make_second_store(self, *args: Any, **kwargs: Any) -> TaskRecordStore | None:
        """Another connection to the *same* backing store as the last ``make_store``.

        Used to check visibility and races across connections. ``None`` (the default)
        runs those checks on the one store.
        """
        return None

    def store_factory(self) -> Callable[[], TaskRecordStore] | None:
        """A picklable callable that opens the same backing store in another process.

        Enables the cross-process cases (exactly-one-winner saves, claims, firings).
        ``None`` (the default) skips them: in-process stores cannot be shared.
        """
        return None

    # ``store: Any``: an override names its own store class (``store: SqliteTaskStore``,
    # or ``TaskStore`` as written before the parts were split), which a parameter
    # typed with the base class would refuse.

    def corrupt_status(self, store: Any, task_id: str) -> None:
        """Write an unknown status into the stored row of ``task_id`` (behind the API).

        The default skips the corrupted-row case; SQL backends implement it with a
        raw UPDATE.
        """
        self.skip("corrupt_status() is not implemented for this store")

    def open_connections(self, store: Any) -> int | None:
        """Connections ``store`` holds; must be 0 after ``close()``. ``None``: unknown."""
        value = getattr(store, "open_connections", None)
        return value if isinstance(value, int) else None

    def skip(self, reason: str) -> NoReturn:
        """Skip the current case (``unittest.SkipTest``, which pytest honours too)."""
        raise unittest.SkipTest(reason)

    # ------------------------------------------------------------ lifecycle

    def setup_method(self, method: object = None) -> None:
        self.clock = FakeClock(START)
        self._stores: list[TaskRecordStore] = []
        self._main: TaskRecordStore | None = None
        self._ids = itertools.count(1)

    @property
    def store(self) -> TaskRecordStore:
        """The store under test, made on first use (so pytest fixtures have run)."""
        if self._main is None:
            self._main = self._adopt(self._call_factory(self.make_store))
        return self._main

    @property
    def commands(self) -> CommandStore:
        """The store under test as a ``CommandStore`` (:func:`as_commands`)."""
        return as_commands(self.store)

    @property
    def schedules(self) -> ScheduleStore:
        """The store under test as a ``ScheduleStore`` (:func:`as_schedules`)."""
        return as_schedules(self.store)

    @property
    def queue(self) -> QueueStore:
        """The store under test as a ``QueueStore``; the case skips on a store without
        the work queue (optional: a ``TaskStore`` need not have it)."""
        store = self.store
        if not isinstance(store, QueueStore):
            self.skip(f"{type(store).__name__} has no work queue (QueueStore)")
        return store

    def teardown_method(self, method: object = None) -> None:
        stores, self._stores, self._main = self._stores, [], None
        for store in stores:
            store.close()
            store.close()  # idempotent
        for store in stores:
            leaked = self.open_connections(store)
            assert leaked in (None, 0), f"{store!r} still holds {leaked} connection(s) after close"

    def setUp(self) -> None:  # unittest spelling
        self.setup_method(None)

    def tearDown(self) -> None:  # unittest spelling
        self.teardown_method(None)

    def _call_factory(
        self, factory: Callable[..., TaskRecordStore | None]
    ) -> TaskRecordStore | None:
        try:
            accepts_clock = "clock" in inspect.signature(factory).parameters
        except (TypeError, ValueError):
            accepts_clock = False
        return factory(clock=self.clock) if accepts_clock else factory()

    def _adopt(self, store: TaskRecordStore | None) -> TaskRecordStore:
        assert store is not None, "make_store() returned None"
        store.clock = self.clock
        self._stores.append(store)
        return store

    def second_store(self) -> TaskRecordStore:
        """The second connection if the subclass offers one, else the main store."""
        main = self.store
        second = self._call_factory(self.make_second_store)
        return main if second is None else self._adopt(second)

    def process_factory(self) -> Callable[[], TaskRecordStore]:
        factory = self.store_factory()
        if factory is None:
            self.skip("store_factory() is not provided: no cross-process cases")
        return factory

    @contextmanager
    def real_time(self, *stores: TaskRecordStore) -> Iterator[WatchedClock]:
        """Run a block on a real clock (for waits that cross connections or processes)."""
        clock = WatchedClock()
        targets = stores or (self.store,)
        for store in targets:
            store.clock = clock
        try:
            yield clock
        finally:
            for store in targets:
                store.clock = self.clock

    # ------------------------------------------------------------ data builders

    def snapshot(self, task_id: str | None = None, **changes: Any) -> TaskSnapshot:
        """A pending snapshot; each call is created one second after the previous one."""
        number = next(self._ids)
        created = START + timedelta(seconds=number)
        fields: dict[str, Any] = {
            "task_id": task_id if task_id is not None else f"task-{number}",
            "name": "job",
            "status": TaskStatus.PENDING,
            "status_version": 0,
            "created_at": created,
            "updated_at": created,
        }
        fields.update(changes)
        return TaskSnapshot(**fields)

    def created(self, task_id: str | None = None, **changes: Any) -> TaskSnapshot:
        """``snapshot(...)`` stored with ``create``."""
        snap = self.snapshot(task_id, **changes)
        self.store.create(snap)
        return snap

    @staticmethod
    def transition(
        task_id: str, version: int, to: TaskStatus, source: TaskStatus | None = None, **kw: Any
    ) -> Transition:
        return Transition(
            task_id=task_id,
            from_status=source,
            to_status=to,
            trigger=kw.pop("trigger", "contract:test"),
            version=version,
            at=kw.pop("at", START + timedelta(seconds=version)),
            **kw,
        )

    def rich_snapshot(self, task_id: str) -> TaskSnapshot:
        """Every field set, with non-UTC offsets, unicode and nested JSON."""
        base = datetime(2026, 3, 1, 20, 0, 0, 123456, tzinfo=TZ_PLUS_8)
        return TaskSnapshot(
            task_id=task_id,
            name="同步.租户-A",
            status=TaskStatus.RUNNING,
            status_version=7,
            created_at=base,
            updated_at=base + timedelta(seconds=42, microseconds=7),
            label="标签 «quoted» 'x' \"y\"",
            attempt=2,
            max_attempts=5,
            queued_at=base + timedelta(seconds=1),
            started_at=(base + timedelta(seconds=30)).astimezone(TZ_MINUS_3_30),
            first_started_at=base + timedelta(seconds=2),
            finished_at=None,
            progress=Progress(done=120.5, total=500, unit="行", message="处理中… ☃"),
            last_heartbeat_at=(base + timedelta(seconds=40)).astimezone(TZ_MINUS_3_30),
            lease_owner="host-α:4242",
            lease_until=base + timedelta(seconds=70),
            failure=Failure(
                kind=FailureKind.EXCEPTION,
                message="上一轮失败: boom",
                retryable=True,
                exception_type="builtins.ValueError",
                traceback='Traceback (most recent call last):\n  File "x.py", line 1\n',
            ),
            outcome={
                "rows": 12345678901234567890,
                "ratio": 0.1,
                "huge": 1e300,
                "tiny": 1.5e-7,
                "whole_float": 1e16,
                "flags": [True, False, None],
                "nested": {"深": {"层": ["值", 1, 2.5, {"empty": {}}]}, "list": []},
                "text": 'line1\nline2\t"quoted" \\ backslash 🚀',
            },
            tags=frozenset({"io", "租户", "with space", "50%_off"}),
            bucket=7,
            bucket_key="tenant-A",
            priority=-3,
            owner="worker-1",
            pid=31337,
            metadata={
                "schedule": "nightly",
                "pipeline": "etl",
                "trace": {"id": "abc", "sampled": True, "depth": 3},
                "note": "注释",
            },
        )

    def command(self, target: str = "task-x", **changes: Any) -> Command:
        fields: dict[str, Any] = {
            "kind": "task",
            "target": target,
            "action": "stop",
            "issued_by": "ops",
            "issued_at": self.clock.now(),
            "payload": {"reason": "maintenance"},
        }
        fields.update(changes)
        return Command.new(**fields)
