"""A crash right after a confirmed call keeps the call's effect.

A child process (``multiprocessing``, spawn) runs a controller on the database under
test, pauses a task until ``pause()`` returns True -- in place, a running body that
checkpoints, or while queued -- reports over a pipe and kills itself with SIGKILL on
the next line. A fresh store and controller in this process must then find the task
``paused``, with its trail in order, and ``reconcile()`` (run as if the child's lease
had long expired) must neither mark it lost nor treat it as anything but ``paused``:
the table of ``controller/_reconcile.py`` reports an expired non-occupying task as
``adoptable`` *unchanged*, so the status after reconcile is the one the pause wrote.

Needs ``store_factory()``: in-process stores (the in-memory store, SQLite
``:memory:``) are invisible to another process, and these cases skip for them.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable
from datetime import timedelta

from chongming_task.controller import Controller
from chongming_task.core import SystemClock
from chongming_task.stores._base import TaskStore
from chongming_task.testing._controller_contract._child import (
    CHILD_LEASE_TTL,
    TARGET,
    pause_then_die,
)
from chongming_task.testing._controller_contract._harness import ControllerHarness, S
from chongming_task.testing._fake_clock import FakeClock

__all__ = ["CrashCases"]

#: Real-time bound for the child to start (spawn imports the library), pause and report.
_CHILD_SECONDS = 60.0


class CrashCases(ControllerHarness):
    def test_crash_after_pause_in_place_keeps_it_paused(self) -> None:
        self._crash_after_pause("running")

    def test_crash_after_pause_while_queued_keeps_it_paused(self) -> None:
        self._crash_after_pause("queued")

    def _crash_after_pause(self, mode: str) -> None:
        factory = self.store_factory()
        if factory is None:
            self.skip("store_factory() is not provided: no other process sees this store")
        if not hasattr(signal, "SIGKILL"):
            self.skip("no SIGKILL on this platform")
        self._run_child(factory, mode)
        fresh = self.adopt(self.make_store())  # the restarted process's own store

        where = f"the child's pause({TARGET!r}) ({mode}) returned True and it was SIGKILLed"
        snapshot = fresh.get(TARGET)
        assert snapshot is not None, f"after {where}: the store has no {TARGET!r}"
        assert snapshot.status is S.PAUSED, (
            f"after {where}: the store says {snapshot.status.value} (v{snapshot.status_version})"
        )
        records = self.assert_ordered(fresh, TARGET, after=where)
        assert records[-1].to_status is S.PAUSED, f"after {where}: last record {records[-1]}"

        later = SystemClock().now() + timedelta(seconds=CHILD_LEASE_TTL * 4)
        recoverer = self.track(
            Controller(fresh, owner="contract-recoverer", clock=FakeClock(later))
        )
        report = recoverer.reconcile()
        assert TARGET not in report.lost, f"after {where}: reconcile marked it lost: {report}"
        assert TARGET not in report.skipped, f"after {where}: reconcile skipped it: {report}"
        after = recoverer.get(TARGET)
        assert after is not None, f"after {where} and reconcile(): {TARGET!r} is gone"
        assert after.status is S.PAUSED, (
            f"after {where} and reconcile() ({report}): the store says"
            f" {after.status.value}, not paused"
            + (" -- reported adoptable as if queued" if TARGET in report.adoptable else "")
        )

    @staticmethod
    def _run_child(factory: Callable[[], TaskStore], mode: str) -> None:
        context = multiprocessing.get_context("spawn")
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(
            target=pause_then_die, args=(factory, mode, sender), daemon=True, name="contract-child"
        )
        child.start()
        sender.close()
        try:
            assert receiver.poll(_CHILD_SECONDS), (
                f"the child did not report within {_CHILD_SECONDS}s (exit code {child.exitcode})"
            )
            kind, value = receiver.recv()
            child.join(_CHILD_SECONDS)
        finally:
            if child.is_alive():
                child.kill()
                child.join()
            receiver.close()
        exitcode = child.exitcode
        child.close()
        assert kind == "paused", f"the child failed before its pause was confirmed:\n{value}"
        assert exitcode == -signal.SIGKILL, f"the child was not killed by SIGKILL: {exitcode}"
