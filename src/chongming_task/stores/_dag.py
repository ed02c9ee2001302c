"""Pipelines on the fleet: a node's dependencies live in its row, and the store applies
the join rules inside the transaction that settles an upstream node.

``Client.enqueue_pipeline`` stores every node as a queued-work task (a recipe) whose
metadata holds, under :data:`DAG_KEY`, its join mode, its upstream nodes (node id ->
task id), the task ids of its downstream nodes and the run's aggregation. Nodes with
upstream nodes start ``blocked``. Whenever a store writes a pipeline node's terminal
state -- a worker's result, a stop, ``lost`` from reconcile -- it calls
:func:`settle_dependants` in the same transaction (SQLite: the same ``BEGIN
IMMEDIATE``; PostgreSQL: the same transaction, after a lock on the run; memory: under
the store's lock). Each blocked dependant whose join rule now holds moves ``blocked ->
queued`` (claimable by any worker), or ``-> skipped`` when it never can; a skip
settles that node in turn. With fail_fast, the first real failure (failed or lost)
skips every blocked node of the run and cancels every queued node no worker holds.

No orchestrator process exists, so none can crash: whoever settles the last upstream
node decides, atomically with its own write. The rules themselves are the pure
functions of :mod:`chongming_task._joins`, shared with the in-process orchestrator.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from chongming_task._joins import Verdict, decide_join, skip_failure, triggers_fail_fast
from chongming_task._model import JSONValue, TaskSnapshot, Transition
from chongming_task.core import Clock
from chongming_task.core.state_machine import StateMachine
from chongming_task.policies import JoinMode
from chongming_task.states import TaskStatus

__all__ = [
    "DAG_KEY",
    "DagRows",
    "NodeLinks",
    "links_of",
    "run_of",
    "settle_dependants",
    "settles_a_node",
    "upstream_values",
]

#: The metadata key holding a fleet pipeline node's links (reserved: ``Client`` refuses it).
DAG_KEY: Final = "pipeline_dag"
#: Who the store's own transitions name as their actor.
ACTOR: Final = "store:pipeline"

S = TaskStatus


@dataclass(frozen=True, slots=True)
class NodeLinks:
    """What :data:`DAG_KEY` holds for one node."""

    join: JoinMode
    upstream: Mapping[str, str]
    """Upstream node id -> its task id, in the order given."""
    downstream: tuple[str, ...]
    """Task ids of the nodes that depend on this one."""
    fail_fast: bool

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "join": self.join.value,
            "upstream": dict(self.upstream),
            "downstream": list(self.downstream),
            "fail_fast": self.fail_fast,
        }


def links_of(snapshot: TaskSnapshot) -> NodeLinks | None:
    """The node links of a fleet pipeline node; ``None`` for any other task."""
    raw = snapshot.metadata.get(DAG_KEY)
    if not isinstance(raw, Mapping):
        return None
    upstream = raw.get("upstream")
    downstream = raw.get("downstream")
    try:
        join = JoinMode(str(raw.get("join")))
    except ValueError:
        return None
    if not isinstance(upstream, Mapping) or not isinstance(downstream, list):
        return None
    return NodeLinks(
        join=join,
        upstream={str(node): str(task) for node, task in upstream.items()},
        downstream=tuple(str(task) for task in downstream),
        fail_fast=bool(raw.get("fail_fast")),
    )


def run_of(snapshot: TaskSnapshot) -> tuple[str, str] | None:
    """``(pipeline name, run id)`` of a fleet pipeline node, else ``None``."""
    if DAG_KEY not in snapshot.metadata:
        return None
    name = snapshot.metadata.get("pipeline")
    run = snapshot.metadata.get("pipeline_run")
    return (name, run) if isinstance(name, str) and isinstance(run, str) else None


def settles_a_node(snapshot: TaskSnapshot) -> bool:
    """Whether writing ``snapshot`` settles a fleet pipeline node (the hook's trigger)."""
    return DAG_KEY in snapshot.metadata and snapshot.status.is_terminal


class DagRows(Protocol):
    """The rows of one store transaction, as :func:`settle_dependants` needs them."""

    def get(self, task_id: str) -> TaskSnapshot | None:
        """The task as this transaction sees it."""
        ...

    def put(
        self, snapshot: TaskSnapshot, expect_version: int, transitions: Iterable[Transition]
    ) -> bool:
        """Write ``snapshot`` if its stored version is ``expect_version``; whether it did."""
        ...

    def members(self, name: str, run: str) -> list[TaskSnapshot]:
        """Every node task of pipeline ``name``'s run ``run``."""
        ...


def settle_dependants(rows: DagRows, settled: Iterable[TaskSnapshot], *, clock: Clock) -> int:
    """Apply the join rules to the dependants of the nodes just settled; how many nodes
    were released (``blocked -> queued``), so the caller can wake the workers.

    Called inside the transaction that wrote ``settled``. A skipped dependant is settled
    in turn (its own dependants are judged next), so one call decides everything the
    settled nodes made decidable.
    """
    released = 0
    work = deque(snapshot for snapshot in settled if settles_a_node(snapshot))
    while work:
        node = work.popleft()
        links = links_of(node)
        if links is None:
            continue
        if links.fail_fast and triggers_fail_fast(node.status):
            _fail_fast(rows, node, clock)
            continue
        for task_id in sorted(links.downstream):
            decided = _judge(rows, task_id, clock)
            if decided is None:
                continue
            if decided.status is S.QUEUED:
                released += 1
            else:
                work.append(decided)
    return released


def _judge(rows: DagRows, task_id: str, clock: Clock) -> TaskSnapshot | None:
    """Release or skip the blocked node ``task_id`` if its join rule decides now."""
    node = rows.get(task_id)
    if node is None or node.status is not S.BLOCKED:
        return None
    links = links_of(node)
    if links is None:
        return None
    statuses: dict[str, TaskStatus] = {}
    for node_id, upstream_id in links.upstream.items():
        upstream = rows.get(upstream_id)
        # A pruned upstream row settled long ago and its outcome is gone: no success.
        statuses[node_id] = S.SKIPPED if upstream is None else upstream.status
    decision = decide_join(links.join, statuses)
    if decision.verdict is Verdict.WAIT:
        return None
    machine = StateMachine(node, clock=clock)
    if decision.verdict is Verdict.RELEASE:
        machine.mark_queued(actor=ACTOR, reason=decision.reason, trigger="pipeline:released")
    else:
        reason = f"pipeline {node.metadata.get('pipeline')!r}: {decision.reason}"
        machine.mark_skipped(
            reason=reason, failure=skip_failure(reason), actor=ACTOR, trigger="pipeline:skipped"
        )
    if not rows.put(machine.snapshot, node.status_version, machine.transitions):
        return None
    return machine.snapshot


def _fail_fast(rows: DagRows, failed: TaskSnapshot, clock: Clock) -> None:
    """The run's first real failure: skip every blocked node, cancel every queued one
    no worker holds. Nodes a worker holds run to their end; they release nothing, as
    every node that waited is skipped now."""
    run = run_of(failed)
    if run is None:
        return
    node_id = failed.metadata.get("node")
    message = failed.failure.message if failed.failure is not None else failed.status.value
    cause = f"node {node_id!r} {failed.status.value}: {message}"
    for member in rows.members(*run):
        machine = StateMachine(member, clock=clock)
        if member.status is S.BLOCKED:
            reason = f"pipeline {run[0]!r} failed fast before this node was released: {cause}"
            machine.mark_skipped(
                reason=reason, failure=skip_failure(reason), actor=ACTOR, trigger="pipeline:skipped"
            )
        elif member.status is S.QUEUED and member.owner is None:
            machine.mark_cancelled(
                reason=f"pipeline {run[0]!r} failed fast: {cause}",
                actor=ACTOR,
                trigger="pipeline:cancelled",
            )
        else:
            continue
        rows.put(machine.snapshot, member.status_version, machine.transitions)


def upstream_values(
    snapshot: TaskSnapshot, get: Mapping[str, TaskSnapshot | None]
) -> dict[str, JSONValue]:
    """``ctx.upstream`` of a fleet node: node id -> return value of each *succeeded*
    upstream node (``get``: the upstream task id -> its stored snapshot)."""
    links = links_of(snapshot)
    if links is None:
        return {}
    values: dict[str, JSONValue] = {}
    for node_id, task_id in links.upstream.items():
        upstream = get.get(task_id)
        if upstream is not None and upstream.status is S.SUCCEEDED:
            values[node_id] = upstream.outcome
    return values
