"""The harness of the controller contract: stores, controllers, gated bodies, checks.

Like the store contract it imports no pytest: plain ``assert`` statements,
``setup_method``/``teardown_method`` (pytest) aliased to ``setUp``/``tearDown``
(unittest), and ``unittest.SkipTest`` for cases a backend cannot express.

Task bodies are deterministic: they hold on a ``threading.Event`` (checkpointing while
they wait, so a pause or a stop is honoured at once) until the case opens the gate.
Nothing sleeps a guessed amount; ``DEADLINE`` only bounds a case that is failing.
"""

from __future__ import annotations

import itertools
import threading
import unittest
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Final, NoReturn

from chongming_task._model import JSONValue, TaskSnapshot, Transition
from chongming_task.controller import Controller
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.run import TaskRun
from chongming_task.runtime import TaskContext
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore

__all__ = ["DEADLINE", "TICK", "ControllerHarness", "S", "trail_of"]

#: Failure bound of every wait (a body to begin, a pause to be confirmed, a run to end).
DEADLINE: Final = 10.0
#: How often a held body checkpoints while it waits for its gate.
TICK: Final = 0.002
#: Owner of the controller under test (written on its tasks, leases and commands).
OWNER: Final = "contract-controller"

S = TaskStatus

#: One history record as the contract compares it: what the brief of guide §8.9 says
#: the store keeps of a transition (order, edge and cause).
TrailEntry = tuple[int, TaskStatus | None, TaskStatus, str]


def trail_of(transitions: Iterable[Transition]) -> list[TrailEntry]:
    """``(version, from_status, to_status, trigger)`` of each record, in order."""
    return [(t.version, t.from_status, t.to_status, t.trigger) for t in transitions]


def _names(statuses: Collection[TaskStatus]) -> str:
    return "/".join(sorted(status.value for status in statuses))


class ControllerHarness:
    """Lifecycle, hooks, bodies and the shared assertions; the case mixins build on it."""

    # ------------------------------------------------------------ hooks

    def make_store(self, *args: Any, **kwargs: Any) -> TaskStore:
        """A store on the database under test (empty at the first call of a case).

        Called once per case for the controller under test, and again by the crash
        cases for the store of the "restarted" process: on a shared database the second
        call must open the same data.
        """
        raise NotImplementedError("subclass ControllerContract and implement make_store()")

    def make_second_store(self, *args: Any, **kwargs: Any) -> TaskStore | None:
        """Another instance/connection on the *same* database as ``make_store``.

        Every visibility check also reads through it. ``None`` (the default) reads
        through the main store again (right for in-process stores).
        """
        return None

    def store_factory(self) -> Callable[[], TaskStore] | None:
        """A picklable callable opening the same database in another process.

        Enables the crash cases (a child process pauses, then is killed). ``None``
        (the default) skips them: nobody outside this process sees an in-process store.
        """
        return None

    def skip(self, reason: str) -> NoReturn:
        """Skip the current case (``unittest.SkipTest``, which pytest honours too)."""
        raise unittest.SkipTest(reason)

    # ------------------------------------------------------------ lifecycle

    def setup_method(self, method: object = None) -> None:
        self._stores: list[TaskStore] = []
        self._controllers: list[Controller] = []
        self._main: TaskStore | None = None
        self._second: TaskStore | None = None
        self._observer: Controller | None = None
        self.gate = threading.Event()
        """Set it to let every held body return."""
        self._entered: dict[str, threading.Event] = {}
        self._entered_lock = threading.Lock()

    def teardown_method(self, method: object = None) -> None:
        self.close_all()

    def close_all(self) -> None:
        """Open the gate, close every controller, then every store. Idempotent.

        ``teardown_method`` calls it; call it earlier from a fixture that removes the
        database (a pytest fixture's teardown runs before ``teardown_method``), so the
        controllers' last writes still find it.
        """
        self.gate.set()  # never leave a body spinning after a failed case
        controllers, self._controllers = self._controllers, []
        stores, self._stores = self._stores, []
        self._main = self._second = self._observer = None
        try:
            for controller in controllers:
                controller.close(timeout=DEADLINE)
        finally:
            for store in stores:
                store.close()

    def setUp(self) -> None:  # unittest spelling
        self.setup_method(None)

    def tearDown(self) -> None:  # unittest spelling
        self.teardown_method(None)

    def adopt(self, store: TaskStore | None) -> TaskStore:
        """Close ``store`` at teardown (after every controller)."""
        assert store is not None, "the store hook returned None"
        self._stores.append(store)
        return store

    @property
    def store(self) -> TaskStore:
        """The store of the controller under test, made on first use."""
        if self._main is None:
            self._main = self.adopt(self.make_store())
        return self._main

    @property
    def second_store(self) -> TaskStore:
        """The second instance on the same database, or the main store."""
        if self._second is None:
            main = self.store
            second = self.make_second_store()
            self._second = main if second is None else self.adopt(second)
        return self._second

    @property
    def observer(self) -> Controller:
        """A query-only controller on the second store: another reader's view."""
        if self._observer is None:
            self._observer = self.track(Controller(self.second_store, owner="contract-observer"))
        return self._observer

    def track(self, controller: Controller) -> Controller:
        """Close ``controller`` at teardown (before the stores)."""
        self._controllers.append(controller)
        return controller

    # ------------------------------------------------------------ controllers and bodies

    def controller(self, *, max_parallel: int = 1) -> Controller:
        """A controller on :attr:`store` with the contract's bodies registered.

        ``hold`` waits for :attr:`gate` (checkpointing) and returns; ``boom`` raises;
        ``flaky`` raises in its first attempt and returns in its second (one retry, no
        backoff). Every body marks itself entered (see :meth:`wait_entered`).
        """
        controller = self.track(
            Controller(
                self.store,
                max_parallel=max_parallel,
                owner=OWNER,
                pause_timeout=DEADLINE,
                graceful_stop=DEADLINE,
            )
        )
        controller.register("hold", self._hold)
        controller.register("boom", self._boom)
        controller.register(
            "flaky", self._flaky, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0))
        )
        return controller

    def _entered_event(self, task_id: str) -> threading.Event:
        with self._entered_lock:
            return self._entered.setdefault(task_id, threading.Event())

    def _hold(self, ctx: TaskContext) -> JSONValue:
        self._entered_event(ctx.task_id).set()
        while not self.gate.wait(TICK):
            ctx.checkpoint()
        ctx.checkpoint()
        return "released"

    def _boom(self, ctx: TaskContext) -> JSONValue:
        self._entered_event(ctx.task_id).set()
        raise ValueError("contract: boom")

    def _flaky(self, ctx: TaskContext) -> JSONValue:
        first = not self._entered_event(ctx.task_id).is_set()
        self._entered_event(ctx.task_id).set()
        if first:
            raise ValueError("contract: the first attempt fails")
        return "second attempt"

    def wait_entered(self, task_id: str) -> None:
        """Wait until the body of ``task_id`` began (it then checkpoints until the gate)."""
        assert self._entered_event(task_id).wait(DEADLINE), (
            f"the body of {task_id} did not begin within {DEADLINE}s"
        )

    def pause_confirmed(self, controller: Controller, task_id: str) -> None:
        """``pause()`` and require the confirmation (a held body confirms at once)."""
        assert controller.pause(task_id, timeout=DEADLINE) is True, (
            f"pause({task_id!r}) was not confirmed within {DEADLINE}s"
            f" (the run is {_status_of(controller.run(task_id))})"
        )

    # ------------------------------------------------------------ read-your-writes

    def assert_visible(
        self, controller: Controller, after: str, expect: Mapping[str, Collection[TaskStatus]]
    ) -> None:
        """Right now, with no polling, every reader shows each task in an allowed status.

        Readers: ``get``, ``list_tasks()``, ``list_tasks(status=...)`` and ``stats()`` of
        ``controller`` and of a query-only controller on the second store; also the
        ``get`` of both stores directly. ``expect`` names every task the case made, so
        the per-status counts of ``stats()`` are bounded exactly.
        """
        views = [("controller", controller), ("second store", self.observer)]
        problems: list[str] = []
        for label, view in views:
            problems.extend(self._problems(label, view, expect))
        for label, store in (("store", self.store), ("second store", self.second_store)):
            for task_id, allowed in expect.items():
                snapshot = store.get(task_id)
                if snapshot is None or snapshot.status not in allowed:
                    problems.append(
                        f"{label}.get({task_id!r}) is {_described(snapshot)},"
                        f" expected {_names(allowed)}"
                    )
        assert not problems, f"right after {after}:\n  " + "\n  ".join(problems)

    @staticmethod
    def _problems(
        label: str, view: Controller, expect: Mapping[str, Collection[TaskStatus]]
    ) -> list[str]:
        problems: list[str] = []
        rows = {row.task_id: row for row in view.list_tasks()}
        for task_id, allowed in expect.items():
            got = view.get(task_id)
            if got is None or got.status not in allowed:
                problems.append(
                    f"{label}: get({task_id!r}) is {_described(got)}, expected {_names(allowed)}"
                )
            row = rows.get(task_id)
            if row is None or row.status not in allowed:
                problems.append(
                    f"{label}: list_tasks() shows {task_id!r} as {_described(row)},"
                    f" expected {_names(allowed)}"
                )
            filtered = {row.task_id for row in view.list_tasks(status=list(allowed))}
            if task_id not in filtered:
                problems.append(
                    f"{label}: list_tasks(status={_names(allowed)}) does not list {task_id!r}"
                )
        stats = view.stats()
        for status in TaskStatus:
            least = sum(1 for allowed in expect.values() if set(allowed) == {status})
            most = sum(1 for allowed in expect.values() if status in allowed)
            count = stats[status]
            if not least <= count <= most:
                wanted = str(least) if least == most else f"{least}..{most}"
                problems.append(f"{label}: stats().{status.value} is {count}, expected {wanted}")
        return problems

    # ------------------------------------------------------------ history and order

    def assert_trail(self, controller: Controller, run: TaskRun, after: str) -> None:
        """The stored history equals ``run.transitions`` and is in order, on both stores.

        Compared: version, from_status, to_status and trigger of every record. Order:
        the creation record (``None -> pending``, version 0) first, then versions
        consecutive from 1, each record leaving the status the previous one reached;
        the stored snapshot's ``status_version`` and ``status`` are the last record's.
        """
        task_id = run.task_id
        expected = trail_of(run.transitions)
        readers: Sequence[tuple[str, Callable[[str], list[Transition]]]] = (
            ("controller.history", controller.history),
            ("second store's history", self.second_store.history),
        )
        for label, history in readers:
            stored = trail_of(history(task_id))
            assert stored == expected, (
                f"right after {after}: {label}({task_id!r}) differs from run.transitions\n"
                f"  stored: {_trail_text(stored)}\n  run:    {_trail_text(expected)}"
            )
        for label, store in (("store", self.store), ("second store", self.second_store)):
            self.assert_ordered(store, task_id, after=f"{after} ({label})")

    @staticmethod
    def assert_ordered(store: TaskStore, task_id: str, *, after: str) -> list[Transition]:
        """Per-task order of the stored history and its agreement with the snapshot."""
        records = store.history(task_id)
        text = _trail_text(trail_of(records))
        assert records, f"right after {after}: no stored history for {task_id!r}"
        first = records[0]
        assert (first.from_status, first.to_status, first.version) == (None, S.PENDING, 0), (
            f"right after {after}: the first record of {task_id!r} is not the creation"
            f" record (None -> pending, version 0): {text}"
        )
        for previous, record in itertools.pairwise(records):
            assert record.version == previous.version + 1, (
                f"right after {after}: versions of {task_id!r} are not consecutive: {text}"
            )
            assert record.from_status == previous.to_status, (
                f"right after {after}: version {record.version} of {task_id!r} leaves"
                f" {_status_name(record.from_status)} but version {previous.version}"
                f" reached {previous.to_status.value}: {text}"
            )
        snapshot = store.get(task_id)
        assert snapshot is not None, f"right after {after}: {task_id!r} has history but no row"
        last = records[-1]
        assert (snapshot.status_version, snapshot.status) == (last.version, last.to_status), (
            f"right after {after}: the snapshot of {task_id!r} is {snapshot.status.value}"
            f" v{snapshot.status_version} but its last history record is"
            f" {last.to_status.value} v{last.version}: {text}"
        )
        return records


def _status_of(run: TaskRun | None) -> str:
    return "not held" if run is None else run.status.value


def _status_name(status: TaskStatus | None) -> str:
    return "None" if status is None else status.value


def _described(snapshot: TaskSnapshot | None) -> str:
    if snapshot is None:
        return "missing"
    return f"{snapshot.status.value} (v{snapshot.status_version})"


def _trail_text(trail: Sequence[TrailEntry]) -> str:
    steps = [f"v{v} {_status_name(a)}->{b.value} [{why}]" for v, a, b, why in trail]
    return ", ".join(steps) if steps else "(empty)"
