"""A submitted pipeline: one orchestrator that releases, skips and cancels node tasks.

Every node is an ordinary controller task (with ``{"pipeline", "pipeline_run", "node"}``
in its metadata), so ``ps``, history, metrics and reconcile see pipelines with no
special case. What is pipeline-specific lives here: a subscriber feeds the node tasks'
transitions into a queue, and one orchestrator thread per run turns each settled
node into decisions (:mod:`chongming_task.pipeline.decisions`) and carries them out
through the controller. Waiting nodes sit in ``blocked`` -- a real status that holds
no slot and is not in the ready queue -- until their join mode releases them.

Only the orchestrator thread acts on nodes, so "release", "skip", "cancel" and "stop"
are never decided concurrently; the subscriber only records snapshots and enqueues.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

from chongming_task.model import JSONValue, TaskSnapshot, Transition
from chongming_task.pipeline.decisions import (
    Verdict,
    decide_join,
    fail_fast_plan,
    settle_status,
    triggers_fail_fast,
)
from chongming_task.pipeline.graph import Node
from chongming_task.pipeline.outcome import NodeFailure, NodeOutcome, PipelineOutcome
from chongming_task.pipeline.port import ControllerPort
from chongming_task.states import TaskStatus

__all__ = ["PipelineRun"]

log = logging.getLogger("chongming_task.pipeline")

S = TaskStatus

_STOP = "stop"


class PipelineRun:
    """The handle returned by ``controller.submit_pipeline(pipeline)``.

    Read ``status``, ``nodes`` and ``task_ids`` at any time; ``wait()`` for the
    :class:`PipelineOutcome`; ``stop()`` to stop every node that has not settled.
    """

    def __init__(
        self,
        port: ControllerPort,
        *,
        pipeline_name: str,
        run_id: str,
        fail_fast: bool,
        nodes: Mapping[str, Node],
        task_ids: Mapping[str, str],
    ) -> None:
        self.pipeline_name = pipeline_name
        self.run_id = run_id
        self.fail_fast = fail_fast
        self._port = port
        self._defs = dict(nodes)
        self._task_ids = dict(task_ids)
        self._node_of = {task_id: node_id for node_id, task_id in self._task_ids.items()}
        self._downstream: dict[str, list[str]] = {node_id: [] for node_id in self._defs}
        for node in self._defs.values():
            for dep in node.depends_on:
                self._downstream[dep].append(node.node_id)
        self._lock = threading.Lock()
        self._snapshots: dict[str, TaskSnapshot] = {}
        self._handles: dict[str, Any] = {}
        # Orchestrator-only state (touched by one thread once started).
        self._released: set[str] = set()
        self._decided: set[str] = set()
        self._failed = False
        self._first_failure: NodeFailure | None = None
        self._stop_requested = False
        self._stop_reason: str | None = None
        self._events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._done = threading.Event()
        self._outcome: PipelineOutcome | None = None
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None

    # ------------------------------------------------------------ public view

    @property
    def task_ids(self) -> Mapping[str, str]:
        """Node id -> the id of the task that runs it (``<run_id>/<node_id>``)."""
        return MappingProxyType(self._task_ids)

    @property
    def nodes(self) -> dict[str, TaskSnapshot]:
        """Node id -> the latest snapshot of its task, in declaration order."""
        with self._lock:
            return {
                node_id: self._snapshots[node_id]
                for node_id in self._defs
                if node_id in self._snapshots
            }

    @property
    def task_runs(self) -> dict[str, Any]:
        """Node id -> the controller's ``TaskRun`` handle, for per-node control."""
        with self._lock:
            return dict(self._handles)

    @property
    def status(self) -> TaskStatus:
        """``running`` (``stopping`` after :meth:`stop`) until settled, then the outcome's."""
        outcome = self._outcome
        if outcome is not None:
            return outcome.status
        return S.STOPPING if self._stop_requested else S.RUNNING

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def outcome(self) -> PipelineOutcome | None:
        """The outcome once settled, else ``None`` (never blocks)."""
        return self._outcome

    def wait(self, timeout: float | None = None) -> PipelineOutcome:
        """Block until every node is terminal and return the outcome.

        Raises:
            TimeoutError: the run did not settle within ``timeout`` seconds (nothing
                changes: the run goes on).
        """
        if not self._port.clock.wait(self._done, timeout):
            raise TimeoutError(
                f"pipeline {self.pipeline_name!r} ({self.run_id}) did not settle within "
                f"{timeout}s; unsettled nodes: {self._unsettled()}"
            )
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        assert self._outcome is not None
        return self._outcome

    def stop(self, reason: str | None = None) -> bool:
        """Stop every node that has not settled (each ends ``stopped``, a person's act).

        Returns ``False`` when the run had already settled. The stop is asynchronous:
        follow it with :meth:`wait`.
        """
        if self._done.is_set():
            return False
        self._events.put((_STOP, reason))
        return True

    def __repr__(self) -> str:
        return f"PipelineRun({self.pipeline_name!r}, run_id={self.run_id!r}, {self.status.value})"

    # ------------------------------------------------------------ wiring (submit)

    def _on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Subscriber: keep the newest snapshot and hand terminal events to the thread."""
        node_id = self._node_of.get(transition.task_id)
        if node_id is None:
            return
        with self._lock:
            current = self._snapshots.get(node_id)
            if current is None or snapshot.status_version >= current.status_version:
                self._snapshots[node_id] = snapshot
        if transition.to_status.is_terminal:
            self._events.put(("settled", (node_id, snapshot)))

    def _attach(self, node_id: str, handle: Any) -> None:
        with self._lock:
            self._handles[node_id] = handle
            snapshot: TaskSnapshot = handle.snapshot
            current = self._snapshots.get(node_id)
            if current is None or snapshot.status_version > current.status_version:
                self._snapshots[node_id] = snapshot

    def _start(self, unsubscribe: Callable[[], None], roots: list[str]) -> None:
        self._unsubscribe = unsubscribe
        self._released.update(roots)
        self._decided.update(roots)
        self._thread = threading.Thread(
            target=self._orchestrate, name=f"pipeline-{self.run_id}", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------ orchestrator thread

    def _orchestrate(self) -> None:
        try:
            self._settle_check()  # every node may already be terminal (inline executors)
            while not self._done.is_set():
                kind, payload = self._events.get()
                if kind == _STOP:
                    self._apply_stop(payload)
                else:
                    node_id, snapshot = payload
                    self._on_settled(node_id, snapshot)
                self._settle_check()
        except BaseException:  # pragma: no cover - a bug here must not hang wait()
            log.exception("pipeline %s orchestrator crashed", self.run_id)
            self._finish(force=True)
            raise

    def _status_of(self, node_id: str) -> TaskStatus:
        with self._lock:
            snapshot = self._snapshots.get(node_id)
        return S.PENDING if snapshot is None else snapshot.status

    def _statuses(self) -> dict[str, TaskStatus]:
        return {node_id: self._status_of(node_id) for node_id in self._defs}

    def _unsettled(self) -> list[str]:
        return [node_id for node_id, status in self._statuses().items() if not status.is_terminal]

    def _on_settled(self, node_id: str, snapshot: TaskSnapshot) -> None:
        status = snapshot.status
        if triggers_fail_fast(status) and not self._stop_requested and not self._failed:
            self._failed = True
            self._first_failure = NodeFailure(node_id, snapshot.task_id, status, snapshot.failure)
            if self.fail_fast:
                self._apply_fail_fast()
        if self._stop_requested or (self._failed and self.fail_fast):
            return  # nothing is released any more; the remaining nodes are being settled
        for child in self._downstream[node_id]:
            if child not in self._decided:
                self._evaluate(child)

    def _evaluate(self, node_id: str) -> None:
        node = self._defs[node_id]
        upstream = {dep: self._status_of(dep) for dep in node.depends_on}
        decision = decide_join(node.join, upstream)
        if decision.verdict is Verdict.WAIT:
            return
        self._decided.add(node_id)
        if decision.verdict is Verdict.RELEASE:
            self._released.add(node_id)
            values = self._upstream_values(node)
            task_id = self._task_ids[node_id]
            self._act(node_id, "release", partial(self._port.release, task_id, values))
        else:
            reason = f"pipeline {self.pipeline_name!r}: {decision.reason}"
            self._act(node_id, "skip", partial(self._port.skip, self._task_ids[node_id], reason))

    def _upstream_values(self, node: Node) -> dict[str, JSONValue]:
        """Only succeeded upstream nodes: a missing key means "no value", never ``None``."""
        with self._lock:
            snapshots = {dep: self._snapshots.get(dep) for dep in node.depends_on}
        return {
            dep: snap.outcome
            for dep, snap in snapshots.items()
            if snap is not None and snap.status is S.SUCCEEDED
        }

    def _apply_fail_fast(self) -> None:
        assert self._first_failure is not None
        cause = str(self._first_failure)
        cancel, skip = fail_fast_plan(self._statuses(), self._released)
        for node_id in cancel:
            reason = f"pipeline {self.pipeline_name!r} failed fast: {cause}"
            self._act(
                node_id, "cancel", partial(self._port.cancel, self._task_ids[node_id], reason)
            )
        for node_id in skip:
            self._decided.add(node_id)
            reason = (
                f"pipeline {self.pipeline_name!r} failed fast before this node was released: "
                f"{cause}"
            )
            self._act(node_id, "skip", partial(self._port.skip, self._task_ids[node_id], reason))

    def _apply_stop(self, reason: str | None) -> None:
        if self._stop_requested:
            return
        self._stop_requested = True
        self._stop_reason = reason
        text = f"pipeline {self.pipeline_name!r} stopped" + (f": {reason}" if reason else "")
        for node_id in self._unsettled():
            self._decided.add(node_id)
            self._act(node_id, "stop", partial(self._port.stop, self._task_ids[node_id], text))

    def _act(self, node_id: str, action: str, call: Callable[[], object]) -> None:
        """Carry out one decision; a node that settled meanwhile is not an error."""
        try:
            call()
        except Exception as exc:
            if self._status_of(node_id).is_terminal:
                return
            log.warning("pipeline %s: could not %s node %r: %s", self.run_id, action, node_id, exc)

    def _settle_check(self) -> None:
        if not self._done.is_set():
            self._finish(force=False)

    def _finish(self, *, force: bool) -> None:
        statuses = self._statuses()
        status = settle_status(statuses, failed=self._failed, stop_requested=self._stop_requested)
        if status is None:
            if not force:
                return
            status = S.FAILED
        with self._lock:
            nodes = {
                node_id: NodeOutcome(node_id, self._snapshots[node_id])
                for node_id in self._defs
                if node_id in self._snapshots
            }
        self._outcome = PipelineOutcome(
            pipeline=self.pipeline_name,
            run_id=self.run_id,
            status=status,
            nodes=MappingProxyType(nodes),
            first_failure=self._first_failure,
            stop_reason=self._stop_reason,
        )
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._done.set()
