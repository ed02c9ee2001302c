"""The store contract suite: what "a store" means, as runnable cases (guide §8.7).

One contract per part of a store (``chongming_task.stores._base``), so a backend runs
exactly the parts it implements:

==========================  ========================================================
``TaskRecordStoreContract``  the task part: snapshots, queries, history, side channel,
                             lost marking, concurrent writers (every store)
``CommandStoreContract``     commands: claims under a lease, fencing, waits
``ScheduleStoreContract``    schedule records and exactly-once firing claims
``QueueStoreContract``       the work queue, global limits and the worker registry
                             (its cases skip on a store that is no ``QueueStore``)
``StoreContract``            all of them: what a ``TaskStore`` passes
==========================  ========================================================

Subclass one and implement ``make_store()``; every ``test_*`` method then checks one
promise of ``docs/store-guide.md`` against your backend::

    from chongming_task.testing.store_contract import StoreContract


    class TestMyStore(StoreContract):
        def make_store(self):
            return MyStore(...)

A backend with only the task part subclasses ``TaskRecordStoreContract`` instead.

It is a plain class with ``assert`` statements and no pytest import, so it runs under
pytest (``setup_method``/``teardown_method``) and unittest (mix in ``TestCase``;
``setUp``/``tearDown`` are provided). The built-in stores run ``StoreContract``.

Hooks (all optional except ``make_store``):

``make_store(clock=...)``
    A fresh, empty store. If it accepts ``clock``, it receives the suite's
    ``FakeClock``; otherwise the clock is assigned to ``store.clock`` afterwards, so
    stores must read ``self.clock`` at call time (leases, timestamps, waits).
``make_second_store()``
    A second connection to the same backing store, for visibility and races across
    connections.
``store_factory()``
    A picklable callable opening the same backing store in another process; enables
    the cross-process cases (two writers, claims, firings). Without it they skip.
``corrupt_status(store, task_id)``
    Write an unknown status behind the API; enables the corrupted-row case.
``open_connections(store)``
    Connections still held; teardown asserts 0 after ``close()``. Defaults to a
    ``store.open_connections`` attribute when there is one.
"""

from __future__ import annotations

from chongming_task.testing._store_contract import WatchedClock, assert_same_json
from chongming_task.testing._store_contract.commands import CommandCases
from chongming_task.testing._store_contract.global_limits import GlobalLimitCases
from chongming_task.testing._store_contract.lost import LostCases
from chongming_task.testing._store_contract.queries import QueryCases
from chongming_task.testing._store_contract.races import (
    CommandRaceCases,
    ScheduleRaceCases,
    TaskRaceCases,
)
from chongming_task.testing._store_contract.schedules import ScheduleCases
from chongming_task.testing._store_contract.snapshots import SnapshotCases
from chongming_task.testing._store_contract.trail import TrailCases

__all__ = [
    "CommandStoreContract",
    "QueueStoreContract",
    "ScheduleStoreContract",
    "StoreContract",
    "TaskRecordStoreContract",
    "WatchedClock",
    "assert_same_json",
]


class TaskRecordStoreContract(SnapshotCases, QueryCases, LostCases, TrailCases, TaskRaceCases):
    """The task part (``TaskRecordStore``); subclass it and implement ``make_store()``."""


class CommandStoreContract(CommandCases, CommandRaceCases):
    """Commands (``CommandStore``); ``make_store()`` returns a store with the task part too."""


class ScheduleStoreContract(ScheduleCases, ScheduleRaceCases):
    """Schedule records and firing claims (``ScheduleStore``)."""


class QueueStoreContract(GlobalLimitCases):
    """The work queue (``QueueStore``), global limits included where declared."""


class StoreContract(
    TaskRecordStoreContract, CommandStoreContract, ScheduleStoreContract, QueueStoreContract
):
    """Every contract case; subclass it and implement ``make_store()``."""
