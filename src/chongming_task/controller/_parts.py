"""The parts of one controller, built once from its options, and the paths between them.

``Controller`` is the façade; this is its composition root. Each part knows only its
own concern (see the table in ``controller/_controller.py``); what crosses parts lives
here: the one write path every transition takes (:meth:`Parts.on_transition`), which
tasks keep a lease (:meth:`Parts.held_ids`), and the order of shutting down
(:meth:`Parts.close`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from chongming_task._model import TaskSnapshot, Transition
from chongming_task._validation import check_seconds, check_timeout
from chongming_task.controller._commands import CommandPoller
from chongming_task.controller._control import control_task
from chongming_task.controller._dispatch import Dispatcher
from chongming_task.controller._events import EventBus
from chongming_task.controller._internal import ControllerInternals
from chongming_task.controller._leases import LeaseKeeper
from chongming_task.controller._options import ControllerOptions
from chongming_task.controller._reconcile import ReconcileReport, reconcile
from chongming_task.controller._registry import TaskRegistry
from chongming_task.controller._submission import Submission
from chongming_task.controller._waiting import outcome_of, wait_for_runs, wait_in_store
from chongming_task.controller._writethrough import WriteThrough
from chongming_task.run import TaskOutcome
from chongming_task.runtime.executors import ASYNCIO, LOOP
from chongming_task.stores._base import TaskStore

if TYPE_CHECKING:
    from chongming_task._explain import Explanation

__all__ = ["Parts"]

log = logging.getLogger("chongming_task.controller")

#: Real seconds ``close()`` waits for the drivers of its async runs to leave the shared
#: event loop (they end right after their last write) before it stops the loop.
CLOSE_LOOP_WAIT: Final = 1.0


class Parts:
    """Every part of one controller, wired together.

    Args:
        options: The controller's checked settings.
        store: The store every part writes to and reads from; ``None``: a private
            ``InMemoryTaskStore``, which ``close()`` closes.
        bucket_for: A new task's bucket under the node's *current* ownership (it
            changes during a bucket handoff), refusing one the node does not own.
    """

    def __init__(
        self,
        options: ControllerOptions,
        store: TaskStore | None,
        *,
        bucket_for: Callable[[str | None], int | None],
    ) -> None:
        clock, owner, ttl = options.clock, options.owner, options.lease_ttl
        self.options = options
        self.owns_store = store is None
        if store is None:
            from chongming_task.stores._memory import InMemoryTaskStore

            store = InMemoryTaskStore(clock=clock)
        self.store: TaskStore = store
        self.registry = TaskRegistry()
        self.dispatch = Dispatcher(
            max_parallel=options.concurrency.max_parallel,
            limits=options.concurrency.limits,
            max_parallel_per_bucket=options.max_parallel_per_bucket,
            keep_finished=options.keep_finished,
        )
        self.events = EventBus(name=f"chongming-events[{owner}]")
        self.writes = WriteThrough(store, clock=clock, owner=owner, lease_ttl=ttl)
        self.leases = LeaseKeeper(
            store=store,
            clock=clock,
            owner=owner,
            lease_ttl=ttl,
            held=self.held_ids,
            active=self.dispatch.active_snapshots,
            lease_until=self.writes.lease_until,
            on_failure=self.writes.record,
        )
        self.poller = CommandPoller(
            store=store,
            owner=owner,
            lookup=self.dispatch.get,
            interval=options.command_poll_interval,
            lease=max(ttl, options.pause_timeout * 2),
            pause_timeout=options.pause_timeout,
            on_failure=self.writes.record,
            clock=clock,
        )
        self.submission = Submission(
            options=options,
            registry=self.registry,
            dispatch=self.dispatch,
            writes=self.writes,
            events=self.events,
            listener=self.on_transition,  # one bound method: runs compare it by identity
            bucket_for=bucket_for,
            started=self.start_background,
            closed=lambda: self.closed,
        )
        self.plumbing = ControllerInternals(
            submission=self.submission, dispatch=self.dispatch, owner=owner
        )
        self._lock = threading.Lock()
        self.closed = False
        if options.owned_buckets is not None:
            # A node with declared buckets serves commands from the start (§8.14): a
            # stop for one of its queued tasks must not wait for its first submission.
            self.poller.start()

    def on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """The one write path: store the transition, then announce it, then account.

        Stored before anyone hears of it (subscribers, ``wait()``, another process),
        announced before the ledger frees a slot (an inline subscriber hears a run's
        end before any thread can start another run in its place).

        When the write fails, the task is not failed (guide §8.9) and the call that
        caused the transition still returns: the failure is in ``persist_failures``,
        the write is pending (``pending_writes``) and retried until the store takes
        it. The announcement follows the write *attempt* either way, so subscribers
        hear the truth even while the store is behind.
        """
        self.writes.write(transition, snapshot)
        self.events.publish(transition, snapshot)
        if self.dispatch.on_transition(transition):
            self.dispatch.pump()
        if transition.to_status.is_terminal:
            for task_id in self.dispatch.forget_finished():
                self.writes.forget(task_id)

    def held_ids(self) -> list[str]:
        """The tasks whose lease this controller keeps: the live runs, and those whose
        write is pending (the store still shows them unfinished)."""
        pending = self.writes.pending_ids()
        live = self.dispatch.live_ids()
        return list(dict.fromkeys([*live, *pending])) if pending else live

    def start_background(self) -> None:
        self.leases.start()
        self.poller.start()

    # ------------------------------------------------------------ held here, or elsewhere

    def control(self, task_id: str, action: str, reason: str | None, wait: float | None) -> bool:
        """``stop``/``pause``/``resume`` of ``Controller``, through the one control path.

        A run held here is controlled in place (a pause waits ``wait``, by default
        ``pause_timeout``, for its confirmation); a task nobody holds at once, by a
        guarded write; another process's task by a command for its holder. ``pause``
        is ``True`` only when confirmed (never for a command); ``stop``/``resume``
        when found and accepted.
        """
        done = control_task(
            self.store,
            task_id,
            action,
            actor=self.options.owner,
            clock=self.options.clock,
            reason=reason,
            held=self.dispatch.get,
            pause_timeout=self.options.pause_timeout if wait is None else wait,
        )
        return done.confirmed if action == "pause" else done.accepted

    def wait(self, task_id: str, timeout: float | None) -> TaskOutcome:
        """The outcome of the held run, else of the stored task (polled)."""
        run = self.dispatch.get(task_id)
        if run is not None:
            return run.wait(timeout)
        interval = self.options.command_poll_interval
        return outcome_of(wait_in_store(self.store, task_id, timeout=timeout, interval=interval))

    def get(self, task_id: str) -> TaskSnapshot | None:
        """The snapshot of ``task_id`` waiting to be written if its write is pending (the
        truth, not the store's stale record), else the store's."""
        pending = self.writes.pending_snapshot(task_id)
        return pending if pending is not None else self.store.get(task_id)

    def explain(self, task_id: str) -> Explanation:
        """``Controller.explain``: with the admission facts of a held run."""
        from chongming_task.controller import _explaining as explaining

        run = self.dispatch.get(task_id)
        return explaining.explain_task(
            self.store,
            self.get(task_id),
            run,
            self.dispatch.admission_facts(task_id) if run is not None else None,
            task_id=task_id,
            registry=self.registry,
            now=self.options.clock.now(),
        )

    def reconcile(self, buckets: frozenset[int] | None, *, dry_run: bool) -> ReconcileReport:
        """``Controller.reconcile`` over ``buckets`` (``None``: all), sparing the held tasks.

        Without subscribers (when the call starts) nobody is told, so the store need not
        read the snapshots after the transitions; with them, SQLite hands over snapshots
        that decode only when a subscriber reads more than the task's id and name.
        """
        return reconcile(
            self.store,
            clock=self.options.clock,
            actor=self.options.owner,
            buckets=buckets,
            held=self.held_ids(),
            dry_run=dry_run,
            on_lost=self.events.publish if self.events.has_subscribers else None,
        )

    def stop_all(self, reason: str | None) -> int:
        """Stop every live run; returns the requests issued.

        Runs that hold no slot (queued, blocked, waiting to retry) are stopped first:
        stopping a running one frees its slot, and a queued task admitted into it just
        before its own stop would start only to be stopped.
        """
        runs = sorted(self.dispatch.live_runs(), key=lambda run: run.status.occupies_slot)
        return sum(1 for run in runs if run.stop(reason, actor=self.options.owner))

    def prune(self, keep_terminal: int) -> int:
        """Drop the oldest terminal tasks beyond ``keep_terminal``, in the store and here."""
        removed = self.store.prune(keep_terminal)
        terminal = self.dispatch.terminal_ids()
        for task_id in terminal[: max(0, len(terminal) - keep_terminal)]:
            self.dispatch.drop(task_id)
            self.writes.forget(task_id)
        return removed

    def close(
        self, *, reason: str | None, timeout: float | None, close_store: bool, flush_timeout: float
    ) -> int:
        """``Controller.close``: stop, wait, flush, then the threads and the store, once."""
        check_timeout(timeout)
        check_seconds(flush_timeout, "flush_timeout", allow_zero=True)
        with self._lock:
            already = self.closed
            self.closed = True
        issued = 0
        if not already:
            self.dispatch.close()
            issued = self.stop_all(reason)
            runs = self.dispatch.runs()
            try:
                wait_for_runs(runs, timeout)
            except TimeoutError as exc:
                log.warning("close(): %s", exc)
            # The shared event loop of async def tasks ends with its last user (the
            # drivers of this controller's runs finish right after their last write).
            ran_async = any(run.executor.name == ASYNCIO.name for run in runs)
            LOOP.stop_if_idle(wait=CLOSE_LOOP_WAIT if ran_async else 0.0)
            self._flush(flush_timeout)
            self.poller.request_stop()
            self.leases.stop()
            self.events.close()
        if close_store or self.owns_store:
            self.store.close()  # also wakes the poller out of wait_for_commands
        if not already:
            self.poller.stop(timeout=self.options.command_poll_interval + 1.0)
        return issued

    def _flush(self, timeout: float) -> None:
        """Retry pending writes for at most ``timeout``; log what stays unwritten."""
        try:
            unwritten = self.writes.flush(timeout) if self.writes.pending_ids() else []
        finally:
            self.writes.stop()
        for item in unwritten:
            log.error(
                "close(): task %s is %s (version %d) but the store still holds version %s "
                "after %d failed attempt(s) (%s); it is left to reconcile (lost)",
                item.task_id,
                item.status,
                item.version,
                item.stored_version,
                item.attempts,
                item.last_error,
                extra={"task_id": item.task_id},
            )
