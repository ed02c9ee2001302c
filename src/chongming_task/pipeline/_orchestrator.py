"""The orchestrator of one pipeline run: settled nodes in, releases/skips/cancels out.

It subscribes *inline* to the controller's transitions, so it reacts in the thread
that settled a node, before the controller hands the freed slot to the next queued
task: a fail_fast cancellation therefore reaches a queued sibling before the sibling
can start, and a released node joins the ready queue before the slot is reassigned.

Acting on a node causes more transitions, which arrive back here while we are still
acting (a trivial node can settle while ``release`` is still returning).
A trampoline keeps that sane: every event goes into one queue, and only one thread
at a time drains it; a thread that finds the queue being drained leaves its event
there and returns. Decisions are therefore never made concurrently or re-entrantly,
and no thread of our own is needed.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

from chongming_task._joins import (
    Verdict,
    decide_join,
    fail_fast_plan,
    settle_status,
    slot_free_first,
    triggers_fail_fast,
)
from chongming_task._model import JSONValue, TaskSnapshot, Transition
from chongming_task.pipeline._graph import Node
from chongming_task.pipeline._outcome import NodeFailure, NodeOutcome, PipelineOutcome
from chongming_task.pipeline._port import ControllerPort
from chongming_task.states import TaskStatus

__all__ = ["Orchestrator"]

log = logging.getLogger("chongming_task.pipeline")

S = TaskStatus

_Event = tuple[str, Any]  # ("settled", node_id) | ("stop", reason)

#: What ends a node whose decided action the controller refused (see ``_act``).
_FALLBACK = {"release": "skip", "skip": "stop"}


class Orchestrator:
    """Node state of one run and the decisions carried out on it."""

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
        self.port = port
        self.defs = dict(nodes)
        self.task_ids = dict(task_ids)
        self._node_of = {task_id: node_id for node_id, task_id in self.task_ids.items()}
        self._downstream: dict[str, list[str]] = {node_id: [] for node_id in self.defs}
        for node in self.defs.values():
            for dep in node.depends_on:
                self._downstream[dep].append(node.node_id)
        self._lock = threading.Lock()  # guards snapshots, handles and the event queue
        self._snapshots: dict[str, TaskSnapshot] = {}
        self.handles: dict[str, Any] = {}
        self._events: deque[_Event] = deque()
        # Set by the subscriber the moment a node fails, before its event is handled:
        # a drainer still releasing the previous node's children must stop at once.
        self._failure_seen = False
        # Held by submission until every node exists, so nothing is decided early.
        self._draining = True
        # Touched only by the draining thread:
        self._released: set[str] = set()
        self._decided: set[str] = set()
        self._failed = False
        self._first_failure: NodeFailure | None = None
        self.stop_requested = False
        self._stop_reason: str | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.done = threading.Event()
        self.outcome: PipelineOutcome | None = None

    # ------------------------------------------------------------ reading

    def snapshots(self) -> dict[str, TaskSnapshot]:
        with self._lock:
            return {n: self._snapshots[n] for n in self.defs if n in self._snapshots}

    def status_of(self, node_id: str) -> TaskStatus:
        with self._lock:
            snapshot = self._snapshots.get(node_id)
        return S.PENDING if snapshot is None else snapshot.status

    def statuses(self) -> dict[str, TaskStatus]:
        return {node_id: self.status_of(node_id) for node_id in self.defs}

    def unsettled(self) -> list[str]:
        return [node_id for node_id, status in self.statuses().items() if not status.is_terminal]

    # ------------------------------------------------------------ input

    def on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """The inline subscriber: record the newest snapshot; a settled node is an event."""
        node_id = self._node_of.get(transition.task_id)
        if node_id is None:
            return
        # Recording and queueing happen under one lock, so "every node is terminal and
        # the queue is empty" really means every settled node has been handled.
        event = ("settled", node_id) if transition.to_status.is_terminal else None
        self._post(event, node_id, snapshot)

    def attach(self, node_id: str, handle: Any) -> None:
        """Keep the node's ``TaskRun`` handle and its snapshot (submission time)."""
        with self._lock:
            self.handles[node_id] = handle
        self._post(None, node_id, handle.snapshot)

    def stop(self, reason: str | None) -> None:
        self._post(("stop", reason))

    def _post(
        self, event: _Event | None, node_id: str | None = None, snapshot: TaskSnapshot | None = None
    ) -> None:
        """Record a snapshot and/or queue an event; drain here unless someone else does."""
        with self._lock:
            if node_id is not None and snapshot is not None:
                current = self._snapshots.get(node_id)
                if current is None or snapshot.status_version >= current.status_version:
                    self._snapshots[node_id] = snapshot
                if triggers_fail_fast(snapshot.status):
                    self._failure_seen = True
            if event is None:
                return
            self._events.append(event)
            if self._draining:
                return
            self._draining = True
        self._drain()

    def start(self, unsubscribe: Callable[[], None], roots: list[str]) -> None:
        """Every node exists: decide on whatever has happened meanwhile, then go live."""
        self._unsubscribe = unsubscribe
        self._released.update(roots)
        self._decided.update(roots)
        self._drain()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._events:
                    self._draining = False
                    settled_now = self._settle_locked()
                    break
                kind, payload = self._events.popleft()
            if self.done.is_set():
                continue
            try:
                if kind == "stop":
                    self._apply_stop(payload)
                else:
                    self._on_settled(payload)
            except Exception:  # a bug here must not break the run that reported it
                log.exception("pipeline %s: handling %s %r failed", self.run_id, kind, payload)
        if settled_now and self._unsubscribe is not None:
            self._unsubscribe()

    # ------------------------------------------------------------ decisions

    def _on_settled(self, node_id: str) -> None:
        with self._lock:
            snapshot = self._snapshots[node_id]
        status = snapshot.status
        if triggers_fail_fast(status) and not self.stop_requested and not self._failed:
            self._failed = True
            self._first_failure = NodeFailure(node_id, snapshot.task_id, status, snapshot.failure)
            if self.fail_fast:
                self._apply_fail_fast()
        if self.stop_requested or (self._failed and self.fail_fast):
            return  # nothing is released any more; the remaining nodes are being settled
        for child in self._downstream[node_id]:
            if child not in self._decided:
                self._evaluate(child)

    def _evaluate(self, node_id: str) -> None:
        if self.fail_fast and self._failure_seen:
            return  # a failure is queued: fail_fast will skip this node, not release it
        node = self.defs[node_id]
        decision = decide_join(node.join, {dep: self.status_of(dep) for dep in node.depends_on})
        if decision.verdict is Verdict.WAIT:
            return
        self._decided.add(node_id)
        task_id = self.task_ids[node_id]
        if decision.verdict is Verdict.RELEASE:
            self._released.add(node_id)
            values = self._upstream_values(node)
            self._act(node_id, "release", partial(self.port.release, task_id, values))
        else:
            reason = f"pipeline {self.pipeline_name!r}: {decision.reason}"
            self._act(node_id, "skip", partial(self.port.skip, task_id, reason))

    def _upstream_values(self, node: Node) -> dict[str, JSONValue]:
        """Only succeeded upstream nodes: a missing key means "no value", never ``None``."""
        with self._lock:
            found = [self._snapshots.get(dep) for dep in node.depends_on]
        return {
            dep: snap.outcome
            for dep, snap in zip(node.depends_on, found, strict=True)
            if snap is not None and snap.status is S.SUCCEEDED
        }

    def _apply_fail_fast(self) -> None:
        cause = str(self._first_failure)
        cancel, skip = fail_fast_plan(self.statuses(), self._released)
        for node_id in cancel:
            reason = f"pipeline {self.pipeline_name!r} failed fast: {cause}"
            self._act(node_id, "cancel", partial(self.port.cancel, self.task_ids[node_id], reason))
        for node_id in skip:
            self._decided.add(node_id)
            reason = (
                f"pipeline {self.pipeline_name!r} failed fast before this node was released: "
                f"{cause}"
            )
            self._act(node_id, "skip", partial(self.port.skip, self.task_ids[node_id], reason))

    def _apply_stop(self, reason: str | None) -> None:
        if self.stop_requested:
            return
        self.stop_requested = True
        self._stop_reason = reason
        text = f"pipeline {self.pipeline_name!r} stopped" + (f": {reason}" if reason else "")
        for node_id in slot_free_first(self.statuses()):
            self._decided.add(node_id)
            self._act(node_id, "stop", partial(self.port.stop, self.task_ids[node_id], text))

    def _act(self, node_id: str, action: str, call: Callable[[], object]) -> None:
        """Carry out one decision; a node that settled meanwhile is not an error.

        A node that cannot be released or skipped would wait in ``blocked`` forever
        and the run would never settle, so such a node is ended another way: a
        refused release becomes a skip naming the refusal, a refused skip a stop.
        """
        try:
            call()
        except Exception as exc:
            if self.status_of(node_id).is_terminal:
                return
            log.warning("pipeline %s: could not %s node %r: %s", self.run_id, action, node_id, exc)
            fallback = _FALLBACK.get(action)
            if fallback is not None:
                reason = f"pipeline {self.pipeline_name!r}: could not {action} the node: {exc}"
                method = getattr(self.port, fallback)
                self._act(node_id, fallback, partial(method, self.task_ids[node_id], reason))

    # ------------------------------------------------------------ settling

    def _settle_locked(self) -> bool:
        """With the lock held and the queue empty: finish if every node is terminal."""
        if self.done.is_set() or len(self._snapshots) < len(self.defs):
            return False
        statuses = {n: snap.status for n, snap in self._snapshots.items()}
        status = settle_status(statuses, failed=self._failed, stop_requested=self.stop_requested)
        if status is None:
            return False
        nodes = {n: NodeOutcome(n, self._snapshots[n]) for n in self.defs}
        self.outcome = PipelineOutcome(
            pipeline=self.pipeline_name,
            run_id=self.run_id,
            status=status,
            nodes=MappingProxyType(nodes),
            first_failure=self._first_failure,
            stop_reason=self._stop_reason,
        )
        self.done.set()
        return True
