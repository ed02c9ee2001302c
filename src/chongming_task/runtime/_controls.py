"""Stop, pause, resume and cancel: controlling a run (guide §4).

``TaskRun`` mixes these in. Each request is applied under the run's lock: the state
machine moves (``stopping``, ``pausing``...), the live attempt's control flags are set
for the body's next checkpoint, and the supervisor opens a graceful window where one
is needed. Only ``pause`` waits, for the confirmation, on the clock's timer thread.
"""

from __future__ import annotations

import threading

from chongming_task.runtime._options import seconds
from chongming_task.runtime._state import RunState
from chongming_task.runtime._supervisor import Supervisor
from chongming_task.states import TaskStatus

__all__ = ["RunControls"]

S = TaskStatus


class RunControls:
    """``stop``, ``pause``, ``resume`` and ``cancel``."""

    __slots__ = ()

    _state: RunState
    _supervisor: Supervisor
    _pause_timeout: float

    def stop(self, reason: str | None = None, *, actor: str | None = None) -> bool:
        """Request a stop (guide §4.1); returns at once. False if already terminal.

        An occupying run goes to ``stopping`` and gets ``graceful_stop`` seconds to reach
        a checkpoint; after that a thread is abandoned (``lost``) and a child process is
        terminated. A run holding no slot stops at once.
        """
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            status = machine.status
            if status.is_terminal:
                return False
            if status is S.STOPPING:
                return True
            # The body's flag first: a checkpoint reached while the transition is being
            # recorded already stops (its driver waits for this lock, so ``stopping``
            # is still recorded before ``stopped``) instead of sleeping one more period.
            self._supervisor.stop_attempt_locked(reason, "stop")
            state.apply(machine.request_stop, actor=actor, reason=reason)
            state.wake_locked()
            return True

    def hand_back(self, reason: str, *, actor: str | None = None) -> bool:
        """Stop the body at its next checkpoint and give the task back to the queue.

        A worker's shutdown, not an operator's stop: an occupying run goes to
        ``stopping`` as with :meth:`stop`; once its body stops at a checkpoint it
        returns ``stopping -> queued`` (``StateMachine.hand_back``), unheld, for
        another worker. A run paused in place is released from its checkpoint and
        handed back still paused (``paused -> queued -> paused``); one waiting for a
        retry goes back to the queue at once. A body that returns or fails first ends
        as it would; one that misses the graceful window ends as :meth:`stop` says.
        False (nothing done) when the run is terminal, already stopping (an
        operator's stop stands) or holds no slot otherwise (queued, blocked).
        """
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            status = machine.status
            if status.is_terminal or status is S.STOPPING:
                return False
            if status is S.RETRY_WAIT:
                state.apply(machine.hand_back, actor=actor, reason=reason)
                state.hand_back = (actor, reason)
                state.wake_locked()
                return True
            attempt = state.attempt
            live = attempt is not None and attempt.live
            if status is S.PAUSED and not (machine.paused_in_place and live):
                return False
            if status not in (S.STARTING, S.RUNNING, S.PAUSING, S.PAUSED):
                return False
            state.hand_back = (actor, reason)
            self._supervisor.stop_attempt_locked(reason, "stop")
            if status is not S.PAUSED:
                state.apply(machine.request_stop, actor=actor, reason=reason)
            state.wake_locked()
            return True

    @property
    def handed_back(self) -> bool:
        """Whether a worker's shutdown handed the task back to the queue (it is not
        terminal, and no longer this process's: ``queued`` or ``paused``, unheld)."""
        state = self._state
        with state.lock:
            snapshot = state.machine.snapshot
            return (
                state.hand_back is not None
                and snapshot.owner is None
                and snapshot.status in (S.QUEUED, S.PAUSED)
            )

    def pause(
        self, timeout: float | None = None, *, actor: str | None = None, reason: str | None = None
    ) -> bool:
        """Pause and wait up to ``timeout`` seconds (clock time) for the confirmation.

        True only once the run is ``paused``. A running body pauses in place at its
        next checkpoint; if it does not get there in time the pause is rolled back to
        ``running`` (``runtime:pause_aborted``) and this returns False (guide §4.2).
        """
        wait = self._pause_timeout if timeout is None else seconds(timeout, "pause timeout")
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            status = machine.status
            if status is S.PAUSED:
                return True
            if status in (S.QUEUED, S.RETRY_WAIT):
                state.apply(machine.request_pause, actor=actor, reason=reason)
                state.wake_locked()
                return True
            if status not in (S.STARTING, S.RUNNING, S.PAUSING):
                return False
            if not state.executor.supports_pause:
                return False
            attempt = state.attempt
            if status is not S.PAUSING and attempt is not None:
                state.apply(machine.request_pause, actor=actor, reason=reason)
                attempt.control.request_pause()
            if state.pause_event is None:
                state.pause_event = threading.Event()
            event = state.pause_event
        # The confirmation window is clock time, watched by the clock's timer thread.
        deadline = self._supervisor.after(wait, event.set)
        try:
            event.wait()
        finally:
            self._supervisor.cancel(deadline)
        with state.transaction(self._supervisor.check_locked) as machine:
            if machine.status is S.PAUSED:
                return True
            if machine.status is S.PAUSING:
                state.apply(
                    machine.abort_pause,
                    reason=f"the task did not reach a checkpoint within {wait:g}s",
                )
                if state.attempt is not None:
                    state.attempt.control.cancel_pause()
            return False

    def resume(self, *, actor: str | None = None, reason: str | None = None) -> bool:
        """Undo a pause: back to ``running`` in place, or to ``queued`` (guide §4.3).

        A pause still waiting for its confirmation is withdrawn. False if not paused.
        """
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            attempt = state.attempt
            if machine.status is S.PAUSING:
                state.apply(machine.abort_pause, reason="resumed before the pause was confirmed")
                if attempt is not None:
                    attempt.control.cancel_pause()
                return True
            if machine.status is not S.PAUSED:
                return False
            target = state.apply(machine.resume, actor=actor, reason=reason)
            if target is S.RUNNING and attempt is not None and attempt.live:
                now = state.clock.monotonic()
                if attempt.paused_since is not None:
                    attempt.paused_total += now - attempt.paused_since
                    attempt.paused_since = None
                self._supervisor.body_began_locked(attempt)
                attempt.control.cancel_pause()
            state.wake_locked()
            return True

    def cancel(self, *, reason: str, actor: str | None = None) -> bool:
        """End the run as ``cancelled`` (orchestration, not a person); stops a running body.

        Returns False if the run is already terminal or stopping.
        """
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            if machine.status.is_terminal or machine.status is S.STOPPING:
                return False
            state.apply(machine.mark_cancelled, reason=reason, actor=actor)
            self._supervisor.stop_attempt_locked(reason, "cancel")
            state.wake_locked()
            return True
