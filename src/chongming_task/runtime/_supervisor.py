"""Supervision of one run in time: timeouts and the graceful window of a stop.

The supervisor never runs user code and owns no thread. It computes the run's next
deadline (the earliest timeout scope, or the end of a stop's graceful window, or the
moment to escalate ``terminate`` to ``kill``) and books it with the clock's shared
:class:`~chongming_task.runtime._timers.TimerService`. When it comes due it acts:

- a timeout asks the attempt to stop (``is_stop_requested`` turns true, the next
  checkpoint raises) and remembers which scope fired, so the attempt ends as
  ``timeout_<scope>`` rather than ``stopped``. Outside an attempt (``retry_wait``,
  ``paused``, ``queued``) it ends the run at once;
- a graceful window that runs out ends the carrier by force where the executor can
  (a child process: ``terminate()``, then ``kill()``; an asyncio body: a cancellation,
  then a look whether it ended), and otherwise gives the run up as ``lost``: a thread
  cannot be killed, and saying "stopped" would be a lie (§4.1).

It also books the end of a retry backoff and wakes the driver then. So the clock's
timer thread is the only thread that ever waits on the clock: with a ``FakeClock``,
one sleeper means "the runtime waits for its next deadline". A run with no timeout,
no backoff and no pending stop books nothing, so it costs no thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from chongming_task.policies import Timeout, TimeoutScope
from chongming_task.runtime._attempt import Attempt
from chongming_task.runtime._failures import (
    lost_failure,
    timeout_failure,
    timeout_message,
)
from chongming_task.runtime._state import RunState
from chongming_task.runtime._timers import EPSILON, TimerEntry, TimerService
from chongming_task.states import TaskStatus

__all__ = ["Supervisor"]

S = TaskStatus

_IN_ATTEMPT = frozenset({S.STARTING, S.RUNNING, S.PAUSING})
_BODY_STARTED = frozenset({S.RUNNING, S.PAUSING, S.PAUSED})
_RETRYABLE_SCOPES = frozenset({"attempt", "idle", "no_progress"})
#: Rounds of "act, then look again" per wake-up; a zero graceful window needs two.
_MAX_ROUNDS = 4


class Supervisor:
    """Deadlines of one run, booked on the shared timer service of its clock."""

    __slots__ = (
        "_entry",
        "_no_start",
        "_ran_once",
        "_service",
        "_spent",
        "_state",
        "_woken_for",
    )

    def __init__(self, state: RunState) -> None:
        self._state = state
        self._service: TimerService | None = None
        self._entry: TimerEntry | None = None
        self._ran_once = False
        self._spent: tuple[str, float] | None = None
        self._woken_for: float | None = None  # the backoff deadline the driver was woken for
        timeout = state.timeout
        self._no_start = None if timeout is None else dataclasses.replace(timeout, start=None)

    @property
    def _timers(self) -> TimerService:
        """The clock's shared timer service, looked up on first use: most runs (no
        timeout, no retry, no stop) never book a deadline, and the lookup is a weak
        dictionary probe per run."""
        service = self._service
        if service is None:
            service = self._service = TimerService.for_clock(self._state.clock)
        return service

    # ------------------------------------------------------------ events from the run

    def body_began_locked(self, attempt: Attempt) -> None:
        """The body starts (or resumes into its first run): the attempt's clocks start."""
        now = self._state.clock.monotonic()
        if attempt.started_at is None:
            attempt.started_at = now
        attempt.control.beat = now
        self._ran_once = True

    def stop_attempt_locked(self, reason: str | None, source: str) -> None:
        """Ask the live attempt to stop and open its graceful window (once)."""
        attempt = self._state.attempt
        if attempt is None or not attempt.live:
            return
        attempt.control.request_stop(reason, source)
        if attempt.stop_deadline is None and not attempt.hard_stopped:
            attempt.stop_deadline = self._state.clock.monotonic() + self._state.graceful_stop

    def after(self, seconds: float, callback: Callable[[], None]) -> TimerEntry:
        """Call ``callback`` from the timer thread ``seconds`` of clock time from now."""
        return self._timers.schedule(self._state.clock.monotonic() + seconds, callback)

    def cancel(self, entry: TimerEntry) -> None:
        self._timers.cancel(entry)

    def check_locked(self) -> None:
        """Act on whatever is due, then book the next deadline. Hold the run's lock."""
        state = self._state
        attempt = state.attempt
        windows = (
            attempt is not None
            and attempt.live
            and (attempt.stop_deadline is not None or attempt.kill_deadline is not None)
        )
        backoff = state.machine.status is S.RETRY_WAIT and state.retry_at != self._woken_for
        if state.timeout is None and not windows and not backoff:
            if self._entry is not None:  # nothing due any more: drop what was booked
                self._book_locked(None)
            return
        for _ in range(_MAX_ROUNDS):
            if not self._act_locked(state.clock.monotonic()):
                break
        self._book_locked(self._next_deadline_locked())

    # ------------------------------------------------------------ acting

    def _act_locked(self, now: float) -> bool:
        state = self._state
        attempt = state.attempt
        acted = False
        if (
            state.machine.status is S.RETRY_WAIT
            and state.retry_at != self._woken_for
            and now >= state.retry_at - EPSILON
        ):
            self._woken_for = state.retry_at
            state.wake_locked()  # the backoff is over: the driver starts the next attempt
        if attempt is not None and attempt.live:
            if attempt.kill_deadline is not None and now >= attempt.kill_deadline - EPSILON:
                attempt.kill_deadline = None
                if state.executor.kill(attempt) is False:  # it could not: give the run up
                    self._abandon_locked(attempt, after="nor end when its carrier was cancelled")
                acted = True
            if attempt.stop_deadline is not None and now >= attempt.stop_deadline - EPSILON:
                attempt.stop_deadline = None
                self._hard_stop_locked(attempt, now)
                acted = True
        timeout = self._timeout_locked()
        if timeout is not None:
            deadline, scope = timeout
            if now >= deadline - EPSILON:
                self._fire_timeout_locked(scope, now)
                acted = True
        return acted

    def _hard_stop_locked(self, attempt: Attempt, now: float) -> None:
        state = self._state
        attempt.hard_stopped = True
        if state.executor.terminate(attempt):
            attempt.kill_deadline = now + state.executor.kill_after
            return
        attempt.hard_stopped = False
        self._abandon_locked(attempt)

    def _abandon_locked(self, attempt: Attempt, *, after: str | None = None) -> None:
        """Give the run up as ``lost``: its carrier may still be running (a thread cannot
        be ended; an asyncio body ignored its cancellation)."""
        state = self._state
        machine = state.machine
        if attempt is not state.attempt or machine.status not in _IN_ATTEMPT | {S.STOPPING}:
            return
        window = f"{state.graceful_stop:g}s"
        if attempt.timeout_scope is not None and state.timeout is not None:
            cause = timeout_message(state.timeout, attempt.timeout_scope)
        else:
            cause = "a stop was requested"
        also = f" {after}" if after else ""
        message = (
            f"{cause}, and the task did not reach a checkpoint within the {window} graceful "
            f"window{also}; its {state.executor.name} carrier was abandoned and may still be "
            "running"
        )
        state.apply(machine.mark_lost, lost_failure(message))

    def _fire_timeout_locked(self, scope: TimeoutScope, now: float) -> None:
        state = self._state
        timeout = state.timeout
        assert timeout is not None
        machine = state.machine
        status = machine.status
        attempt = state.attempt
        message = timeout_message(timeout, scope)
        trigger = f"supervisor:timeout_{scope}"
        failure = timeout_failure(timeout, scope, retryable=self.timeout_retryable(scope))
        if status in _IN_ATTEMPT and attempt is not None and attempt.live:
            attempt.timeout_scope = scope
            self.stop_attempt_locked(message, "timeout")
        elif status is S.RETRY_WAIT:
            state.apply(machine.mark_failed, failure, trigger=trigger)
        elif status in (S.PAUSED, S.QUEUED):
            # The table has no paused/queued -> failed edge; cancelled is the one that fits.
            state.apply(machine.mark_cancelled, reason=message, failure=failure, trigger=trigger)
            self.stop_attempt_locked(message, "timeout")
        else:
            self._spent = (scope, now)  # nothing to act on: never fire this one again
        state.wake_locked()

    def timeout_retryable(self, scope: str) -> bool:
        """Whether a timeout of ``scope`` may be retried: ``attempt``, ``idle``, ``no_progress``.

        ``start`` counts from submission and ``total`` spans every attempt, so another
        attempt would find them expired already.
        """
        return scope in _RETRYABLE_SCOPES and self._state.retry.retry_timeouts

    # ------------------------------------------------------------ deadlines

    def _timeout_locked(self) -> tuple[float, TimeoutScope] | None:
        """The earliest timeout deadline and its scope, unless it was spent already."""
        found = self._any_timeout_locked()
        spent = self._spent
        if found is None or spent is None:
            return found
        return None if found[1] == spent[0] and found[0] <= spent[1] else found

    def _any_timeout_locked(self) -> tuple[float, TimeoutScope] | None:
        state = self._state
        timeout = state.timeout
        status = state.machine.status
        if timeout is None or status.is_terminal or status is S.STOPPING:
            return None
        if not state.started and not (state.managed and status is S.QUEUED):
            # A run waiting in its owner's queue counts ``start`` from submission
            # (guide §6): starved there, it ends ``cancelled`` with ``timeout_start``.
            # Blocked (upstream) or paused runs are judged once queued again.
            return None
        attempt = state.attempt
        live = attempt is not None and attempt.live
        if live and attempt is not None and attempt.timeout_scope is not None:
            return None  # this attempt is already being stopped for a timeout
        paused = status is S.PAUSED
        policy: Timeout = timeout if not (self._ran_once or paused) else self._no_start or timeout
        if (
            live
            and attempt is not None
            and attempt.started_at is not None
            and status in _BODY_STARTED
        ):
            return policy.next_deadline(
                submitted_at=state.submitted_at,
                attempt_started_at=attempt.started_at,
                last_beat_at=attempt.control.beat,
                paused=paused,
                paused_seconds=attempt.paused_total,
                last_progress_at=attempt.progress_moved_at(),
            )
        return policy.next_deadline(
            submitted_at=state.submitted_at,
            attempt_started_at=None,
            last_beat_at=None,
            paused=paused,
        )

    def _next_deadline_locked(self) -> float | None:
        candidates: list[float] = []
        state = self._state
        if state.machine.status is S.RETRY_WAIT and state.retry_at != self._woken_for:
            candidates.append(state.retry_at)
        attempt = self._state.attempt
        if attempt is not None and attempt.live:
            if attempt.stop_deadline is not None:
                candidates.append(attempt.stop_deadline)
            if attempt.kill_deadline is not None:
                candidates.append(attempt.kill_deadline)
        timeout = self._timeout_locked()
        if timeout is not None:
            candidates.append(timeout[0])
        return min(candidates) if candidates else None

    def _book_locked(self, deadline: float | None) -> None:
        entry = self._entry
        if entry is not None:
            if deadline == entry.deadline and not (entry.cancelled or entry.popped):
                return
            self._timers.cancel(entry)
            self._entry = None
        if deadline is not None:
            self._entry = self._timers.schedule(deadline, self._on_timer)

    def _on_timer(self) -> None:
        with self._state.transaction():
            self.check_locked()
