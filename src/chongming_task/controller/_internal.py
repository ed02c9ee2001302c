"""The controller's plumbing: what the library's own layers call, and users should not.

``Controller._internal`` returns the controller's :class:`ControllerInternals`. What is
here is part of how the library's pieces fit together (the work queue's worker runs
the tasks it claimed through it, the scheduler releases its armed firings, a pipeline
cancels its nodes), not of the controller's documented surface (guide §8): it may
change without notice, and a user who needs it has found a gap in the public API."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from chongming_task.errors import InvalidState

if TYPE_CHECKING:
    from chongming_task._model import JSONValue, TaskSnapshot
    from chongming_task.controller._dispatch import Dispatcher
    from chongming_task.controller._submission import Submission
    from chongming_task.run import TaskRun
    from chongming_task.runtime import ChildTasks

__all__ = ["ControllerInternals"]


class ControllerInternals:
    """The plumbing of one controller (``Controller._internal``), over its parts."""

    def __init__(self, *, submission: Submission, dispatch: Dispatcher, owner: str) -> None:
        self._submission = submission
        self._dispatch = dispatch
        self._owner = owner

    def run_claimed(self, stored: TaskSnapshot, children: ChildTasks | None = None) -> TaskRun:
        """Run a task this controller claimed from the work queue, as a local submit would.

        ``stored`` is the ``queued`` snapshot ``TaskStore.claim_queued`` returned (held
        by this controller); it waits for a slot like any submission. ``children``: how
        its ``ctx.enqueue`` stores child tasks (``None``: it cannot).

        Raises:
            ConfigurationError: No recipe, an unregistered name, arguments that do not
                fit the signature, or a closed controller (nothing is written then).
        """
        return self._submission.run_claimed(stored, children)

    def release(
        self,
        task_id: str,
        *,
        upstream: Mapping[str, JSONValue] | None = None,
        reason: str | None = None,
        trigger: str = "pipeline:released",
    ) -> None:
        """Move a held ``blocked`` run to the ready queue; ``upstream`` becomes ``ctx.upstream``.

        Started at once if a slot is free: the run launches its body only once its
        ``-> starting`` is stored.

        Raises:
            InvalidState: This controller does not hold ``task_id``, or it is not blocked.
        """
        self._held(task_id).release(upstream=upstream, reason=reason, trigger=trigger)

    def release_many(
        self, task_ids: Iterable[str], *, reason: str | None = None, trigger: str
    ) -> dict[str, Exception]:
        """:meth:`release` each run (the scheduler's firings of one instant); the failures."""
        failures: dict[str, Exception] = {}
        for task_id in task_ids:
            try:
                self._held(task_id).release(reason=reason, trigger=trigger)
            except Exception as exc:
                failures[task_id] = exc
        return failures

    def skip(self, task_id: str, *, reason: str) -> None:
        """End a held run that has not started as ``skipped`` (it should not run at all)."""
        self._held(task_id).skip(reason=reason)

    def cancel(self, task_id: str, *, reason: str) -> None:
        """Cancel a held run on behalf of orchestration (fail_fast), not of a person."""
        self._held(task_id).cancel(reason=reason, actor=self._owner)

    def hold_queue(self) -> None:
        """Start nothing more (a draining worker): held queued runs stay queued."""
        self._dispatch.close()

    def let_go(self, task_id: str) -> None:
        """Stop holding a run a worker's shutdown handed back to the queue (it is another
        worker's to claim now); its last write, if still pending, is kept until stored."""
        run = self._dispatch.get(task_id)
        if run is not None and run.handed_back:
            self._dispatch.drop(task_id)

    def _held(self, task_id: str) -> TaskRun:
        run = self._dispatch.get(task_id)
        if run is None:
            raise InvalidState(f"task {task_id!r} is not held by this controller")
        return run
