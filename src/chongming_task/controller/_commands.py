"""Cross-process control: the poller that applies the commands addressed to us (§8.9).

A controller that does not hold a task cannot touch its ``TaskRun``; the one control
path (``controller/_control.py``) writes a *command* addressed to the task's holder
instead. The holder's poller claims commands under a lease (a crashed claimant's
commands become claimable again), applies each through the same ``TaskRun`` methods a
local call would use, and completes it with a result. A command addressed to another
holder is never claimed (the store's claim rule).

A task command addressed to nobody (``target_owner`` unset) is written by no current
code path, only by older versions for a task nobody held. Handing it back would get
it claimed again on every poll, forever; instead the first poller that claims it
settles it through the one control path (a guarded write if the task is still
unheld, a command for its holder if a worker took it since) and completes it.

The poller claims only the actions it applies (``ACTIONS``): a command of another
action is never held up by it. Unknown actions are refused when issued
(``check_action``), since no poller will ever claim them.

One thread per controller. It starts at the first submission, or at construction
for a node that declares ``owned_buckets`` (§8.14); a query-only controller never
polls, so it can never take someone else's commands.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from chongming_task._consumer import KEEP, CommandConsumer, Complete, Outcome
from chongming_task._service import BackgroundService
from chongming_task.controller._control import ACTIONS, Controllable, control_task
from chongming_task.core import Clock, SystemClock
from chongming_task.stores._base import Command, CommandStore, TaskStore

__all__ = ["CommandListener", "CommandPoller"]

log = logging.getLogger("chongming_task.controller")

#: ``fn(command, applied_at)``: told of every command applied here (command latency).
CommandListener = Callable[[Command, datetime], None]

#: Claims per round trip; more are picked up at once on the next pass.
CLAIM_BATCH = 20
#: Longest pause between polls while the store keeps failing.
MAX_BACKOFF = 5.0


class CommandPoller:
    """Claims and applies the task commands addressed to one controller.

    Its waits are real seconds (``SystemClock``), whatever the controller's clock: it
    waits for another process's writes, not for task time, so a ``FakeClock`` test
    still sees a command as soon as it is written.
    """

    def __init__(
        self,
        *,
        store: TaskStore,
        owner: str,
        lookup: Callable[[str], Controllable | None],
        interval: float,
        lease: float,
        pause_timeout: float,
        on_failure: Callable[[str | None, str, BaseException], None],
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._clock = clock or store.clock
        self._applied_listeners: tuple[CommandListener, ...] = ()
        self._owner = owner
        self._lookup = lookup
        self._interval = interval
        self._pause_timeout = pause_timeout
        self._on_failure = on_failure
        self._consumer = CommandConsumer(
            store,
            owner,
            kinds=("task",),
            actions=ACTIONS,
            lease=lease,
            batch=CLAIM_BATCH,
            logger=log,
            on_store_error=lambda command, exc: on_failure(command.target, "command", exc),
        )
        self._service = BackgroundService(
            f"chongming-commands[{owner}]",
            self._pass,
            clock=SystemClock(),
            on_error=self._pass_failed,
        )
        self._helpers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.applied = 0

    def subscribe(self, fn: CommandListener) -> Callable[[], None]:
        """Call ``fn(command, applied_at)`` after each command this poller applies."""
        with self._lock:
            self._applied_listeners = (*self._applied_listeners, fn)

        def unsubscribe() -> None:
            with self._lock:
                self._applied_listeners = tuple(f for f in self._applied_listeners if f is not fn)

        return unsubscribe

    @property
    def running(self) -> bool:
        return self._service.running

    def start(self) -> None:
        """Start polling (idempotent; never after ``stop``).

        Not on a store without commands (no ``CommandStore``): nobody can write one
        there, and controlling this controller's tasks from elsewhere is refused when
        asked (:func:`~chongming_task.controller._control.control_task`).
        """
        given: object = self._store  # typed TaskStore; may hold the task part only
        if not isinstance(given, CommandStore):
            return
        if not self._service.started:  # started: every submission calls this
            self._service.ensure_started()

    def request_stop(self) -> None:
        """Ask the thread to end after its current wait (it does not block)."""
        self._service.request_stop()

    def stop(self, timeout: float | None = 5.0) -> None:
        """End polling and join the thread and any pause helpers."""
        self._service.request_stop()
        with self._lock:
            helpers = list(self._helpers)
        self._service.join(timeout)
        for helper in helpers:
            helper.join(timeout)

    def poll_once(self) -> tuple[int, int]:
        """Claim and handle one batch; returns (claimed, handed back) counts."""
        batch = self._consumer.poll(self._handle)
        return batch.claimed, batch.handed_back

    # ------------------------------------------------------------ internals

    def _pass(self) -> float:
        claimed, _ = self.poll_once()
        if claimed:
            return 0.0  # there may be more
        self._store.wait_for_commands(self._interval)
        return 0.0

    def _pass_failed(self, exc: Exception, failures: int) -> float:
        """Report, and back off while the store is down, so a dead database is not
        hammered."""
        self._on_failure(None, "command poll", exc)
        return min(MAX_BACKOFF, self._interval * 2.0**failures)

    def _handle(self, command: Command) -> Outcome:
        """Apply or complete one claimed command."""
        run = self._lookup(command.target)
        if run is None:
            if command.target_owner is None:
                return self._settle_unaddressed(command)
            # Addressed to us (the claim rule takes nothing else), yet we do not hold
            # it: pruned, or held by an earlier process under the same owner name.
            return Complete({"applied": False, "error": "task is not held"})
        if command.action == "pause":
            # pause() waits for confirmation; do not hold up other commands meanwhile.
            helper = threading.Thread(
                target=self._apply_later, args=(run, command), name="chongming-pause", daemon=True
            )
            with self._lock:
                self._helpers = [t for t in self._helpers if t.is_alive()]
                self._helpers.append(helper)
            helper.start()
            return KEEP
        return self._apply(run, command)

    def _settle_unaddressed(self, command: Command) -> Outcome:
        """Settle a command an older version addressed to nobody: see the module doc."""
        reason = command.payload.get("reason")
        done = control_task(
            self._store,
            command.target,
            command.action,
            actor=command.issued_by,
            clock=self._clock,
            reason=reason if isinstance(reason, str) else None,
        )
        return Complete({"applied": done.outcome == "applied", "outcome": done.outcome})

    def _apply_later(self, run: Controllable, command: Command) -> None:
        self._consumer.settle(command, self._apply(run, command))

    def _apply(self, run: Controllable, command: Command) -> Outcome:
        actor = command.issued_by
        reason = command.payload.get("reason")
        text = reason if isinstance(reason, str) else None
        try:
            if command.action == "stop":
                applied = run.stop(text, actor=actor)
            elif command.action == "pause":
                applied = run.pause(self._pause_timeout, actor=actor, reason=text)
            else:
                applied = run.resume(actor=actor, reason=text)
        except Exception as exc:
            return Complete({"applied": False, "error": f"{type(exc).__name__}: {exc}"})
        self.applied += 1
        applied_at = self._clock.now()
        self._consumer.complete(command, {"applied": bool(applied)})
        for listener in self._applied_listeners:
            try:
                listener(command, applied_at)
            except Exception:
                log.exception("command listener %r failed (the command was applied)", listener)
        return KEEP  # completed above, before the listeners hear of it
