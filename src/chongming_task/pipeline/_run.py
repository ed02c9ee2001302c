"""The handle of a submitted pipeline: watch it, wait for it, stop it.

Every node is an ordinary controller task (with ``{"pipeline", "pipeline_run",
"node"}`` in its metadata), so ``ps``, history, metrics and reconcile see pipelines
with no special case. The decisions live in
:class:`~chongming_task.pipeline._orchestrator.Orchestrator`; this is the read-only
view and the two verbs a caller needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from chongming_task._model import TaskSnapshot
from chongming_task._public import public
from chongming_task.pipeline._orchestrator import Orchestrator
from chongming_task.pipeline._outcome import PipelineOutcome
from chongming_task.states import TaskStatus

__all__ = ["PipelineRun"]


@public
class PipelineRun:
    """The handle returned by ``controller.submit_pipeline(pipeline)``.

    Read ``status``, ``nodes`` and ``task_ids`` at any time; :meth:`wait` for the
    :class:`PipelineOutcome`; :meth:`stop` to stop every node that has not settled.
    """

    def __init__(self, orchestrator: Orchestrator) -> None:
        self._orchestrator = orchestrator

    @property
    def pipeline_name(self) -> str:
        return self._orchestrator.pipeline_name

    @property
    def run_id(self) -> str:
        """``<pipeline name>-<8 hex digits>`` unless given to ``submit_pipeline``."""
        return self._orchestrator.run_id

    @property
    def task_ids(self) -> Mapping[str, str]:
        """Node id -> the id of the task that runs it (``<run_id>/<node_id>``)."""
        return MappingProxyType(self._orchestrator.task_ids)

    @property
    def nodes(self) -> dict[str, TaskSnapshot]:
        """Node id -> the latest snapshot of its task, in declaration order."""
        return self._orchestrator.snapshots()

    @property
    def task_runs(self) -> dict[str, Any]:
        """Node id -> the controller's ``TaskRun`` handle, for per-node control."""
        return dict(self._orchestrator.handles)

    @property
    def status(self) -> TaskStatus:
        """``running`` (``stopping`` after :meth:`stop`) until settled, then the outcome's."""
        outcome = self._orchestrator.outcome
        if outcome is not None:
            return outcome.status
        return TaskStatus.STOPPING if self._orchestrator.stop_requested else TaskStatus.RUNNING

    @property
    def done(self) -> bool:
        """Whether every node is terminal (the outcome is final)."""
        return self._orchestrator.done.is_set()

    @property
    def outcome(self) -> PipelineOutcome | None:
        """The outcome once settled, else ``None`` (never blocks)."""
        return self._orchestrator.outcome

    def wait(self, timeout: float | None = None) -> PipelineOutcome:
        """Block until every node is terminal and return the outcome.

        ``timeout`` is in real seconds (a caller's patience, not task time), like
        ``TaskRun.wait``.

        Raises:
            TimeoutError: the run did not settle within ``timeout``; nothing changes,
                the run goes on (call :meth:`stop` to end it).
        """
        orchestrator = self._orchestrator
        if not orchestrator.done.wait(timeout):
            raise TimeoutError(
                f"pipeline {self.pipeline_name!r} ({self.run_id}) did not settle within "
                f"{timeout}s; unsettled nodes: {orchestrator.unsettled()}"
            )
        outcome = orchestrator.outcome
        assert outcome is not None  # set before ``done``
        return outcome

    def stop(self, reason: str | None = None) -> bool:
        """Stop every node that has not settled; each ends ``stopped`` (a person's act).

        Blocked and queued nodes stop at once, running ones go through ``stopping``.
        Nothing is released afterwards. Returns ``False`` when the run had already
        settled. Follow it with :meth:`wait` to see the end.
        """
        if self.done:
            return False
        self._orchestrator.stop(reason)
        return True

    def __repr__(self) -> str:
        return f"PipelineRun({self.pipeline_name!r}, run_id={self.run_id!r}, {self.status.value})"
