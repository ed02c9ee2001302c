"""The edges a queue owner (controller, pipeline) drives on a run.

``TaskRun`` mixes these in. Each is one transition under the run's lock; the
orchestrator decides *when*, the state machine decides *whether*.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chongming_task._model import Failure, JSONValue
from chongming_task.runtime._attempt import TaskCall
from chongming_task.runtime._state import RunState
from chongming_task.runtime._supervisor import Supervisor

__all__ = ["QueueOwnerEdges"]


class QueueOwnerEdges:
    """``enqueue``, ``block``, ``release``, ``skip``; and the plumbing ``_update_fields``."""

    __slots__ = ()

    _state: RunState
    _supervisor: Supervisor

    def _update_fields(self, **changes: Any) -> None:
        """Change non-status fields (lease, metadata...) under the run's lock.

        Plumbing (the worker's log tail writes its lines into the metadata), not API.
        """
        with self._state.lock:
            self._state.machine.update(**changes)

    def enqueue(self, *, actor: str | None = None, reason: str | None = None) -> None:
        """``pending -> queued`` on behalf of a queue owner, who later calls :meth:`start`.

        Such a *managed* run goes back to its owner after a pause taken while it held
        no slot: resuming it re-queues it and it waits for ``start()`` again.
        """
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            state.managed = True
            state.apply(machine.mark_queued, actor=actor, reason=reason)

    def block(self, *, reason: str | None = None) -> None:
        """``pending -> blocked``: waiting for upstream nodes (holds no slot)."""
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            state.managed = True
            state.apply(machine.mark_blocked, reason=reason)

    def release(
        self,
        *,
        upstream: Mapping[str, JSONValue] | None = None,
        reason: str | None = None,
        trigger: str = "pipeline:released",
    ) -> None:
        """``blocked -> queued``; ``upstream`` becomes ``ctx.upstream`` of every attempt.

        ``trigger`` names who released it on the transition (the scheduler releases
        a firing it armed ahead of its scheduled time with ``schedule:due``).
        """
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            if upstream is not None:
                call = state.call
                new_call = TaskCall(call.fn, call.args, call.kwargs, dict(upstream))
                state.executor.check(new_call)
                state.call = new_call
            state.apply(machine.mark_queued, reason=reason, trigger=trigger)

    def skip(self, *, reason: str, failure: Failure | None = None) -> None:
        """End a run that has not started as ``skipped`` (it should not run at all)."""
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            state.apply(machine.mark_skipped, reason=reason, failure=failure)
