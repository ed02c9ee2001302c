"""Who owns which bucket right now, read from the store: duplicates, holes, orphans.

Every node that owns buckets declares them in the store's node registry (the worker
registry of the work queue: a :class:`~chongming_task.stores._queue_records.WorkerRecord`
per node) with a lease renewed with its heartbeat. :func:`ownership_report` reads the
declarations once and gives the verdicts ``chongming-task buckets --owners``,
``health`` and the metrics report:

* **duplicates**: a bucket that two or more live nodes declare, at least one of them
  explicitly (two workers that both own *every* bucket are competing consumers of an
  unpartitioned queue, which is normal; a partition that two nodes claim is not);
* **holes**: a bucket in ``0..num_buckets-1`` that no live node declares;
* **orphans**: non-terminal tasks in a hole (and tasks with no bucket when no live
  node owns every bucket), counted per bucket with their first ids;
* **stale**: a declaration whose lease expired without a clean shutdown (the node
  died or cannot reach the store);
* **draining**: buckets a live node is handing off (it claims them no more, its held
  tasks of them are still finishing); they are in transit, not holes.

A store with no node record at all has no verdicts: nothing was declared, so nothing
can be missing (a single process with an in-memory store is not a deployment).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from chongming_task._model import JSONValue
from chongming_task._public import public
from chongming_task.controller._buckets import DEFAULT_NUM_BUCKETS, format_buckets
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores._base import QueueStore, TaskQuery, TaskStore
from chongming_task.stores._queue_records import WorkerRecord

__all__ = [
    "NodeDeclaration",
    "OrphanedBucket",
    "OwnershipReport",
    "ownership_report",
]

#: Task ids listed per orphaned bucket (the count is exact).
ORPHAN_IDS: Final = 10
#: Non-terminal tasks read to find tasks without a bucket (only when nobody owns all).
SCAN_LIMIT: Final = 10_000
#: The key of tasks that have no bucket, in ``orphans``.
NO_BUCKET: Final = "-"

_OPEN: Final = frozenset(TaskStatus) - frozenset(TERMINAL)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeDeclaration:
    """One node's declaration as the report judged it."""

    node_id: str
    kind: str
    state: str
    """``live``, ``stale`` (lease expired, no clean shutdown) or ``stopped``."""
    buckets: tuple[int, ...] | None
    """Declared buckets; ``None``: every bucket (no partition)."""
    draining: tuple[int, ...]
    lease_until: datetime
    heartbeat_at: datetime
    num_buckets: int | None

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "node_id": self.node_id,
            "kind": self.kind,
            "state": self.state,
            "buckets": None if self.buckets is None else list(self.buckets),
            "draining": list(self.draining),
            "lease_until": self.lease_until.isoformat(),
            "heartbeat_at": self.heartbeat_at.isoformat(),
            "num_buckets": self.num_buckets,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class OrphanedBucket:
    """Non-terminal tasks of a bucket that no live node owns."""

    bucket: str
    """The bucket number as text, or ``"-"`` for tasks without a bucket."""
    count: int
    task_ids: tuple[str, ...]
    """The first :data:`ORPHAN_IDS` of them, oldest first."""

    def to_dict(self) -> dict[str, JSONValue]:
        return {"bucket": self.bucket, "count": self.count, "task_ids": list(self.task_ids)}


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnershipReport:
    """The verdicts of one read of the node registry (see the module docstring)."""

    checked_at: datetime
    num_buckets: int
    nodes: tuple[NodeDeclaration, ...] = ()
    owners: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Live owners of each bucket in ``0..num_buckets-1`` (empty tuple: a hole)."""
    duplicates: dict[int, tuple[str, ...]] = field(default_factory=dict)
    holes: tuple[int, ...] = ()
    """Buckets no live node declares (a problem on a partitioned deployment)."""
    draining: dict[int, str] = field(default_factory=dict)
    """Buckets in a handoff -> the node draining them."""
    orphans: tuple[OrphanedBucket, ...] = ()
    stale: tuple[str, ...] = ()
    """Nodes whose declaration lease expired without a clean shutdown."""
    mismatched: dict[str, int] = field(default_factory=dict)
    """Live nodes whose ``num_buckets`` differs from the report's."""

    @property
    def declared(self) -> bool:
        """Whether any node ever declared buckets in this store (else: no verdicts)."""
        return bool(self.nodes)

    @property
    def orphaned_tasks(self) -> int:
        return sum(orphan.count for orphan in self.orphans)

    def node(self, node_id: str) -> NodeDeclaration | None:
        return next((n for n in self.nodes if n.node_id == node_id), None)

    @property
    def problems(self) -> list[str]:
        """One sentence per verdict that needs an operator."""
        return self.problems_besides()

    def problems_besides(
        self, *, orphaned: Iterable[str] = (), dead: Iterable[str] = ()
    ) -> list[str]:
        """:attr:`problems` without the orphaned buckets and dead nodes named elsewhere
        (``health`` lists the queue's own verdicts on those already)."""
        said_buckets, said_nodes = set(orphaned), set(dead)
        found = [
            f"bucket {bucket} is declared by {len(nodes)} live nodes: {', '.join(nodes)}"
            for bucket, nodes in sorted(self.duplicates.items())
        ]
        if self.holes and self.partitioned:
            found.append(
                f"{len(self.holes)} of {self.num_buckets} bucket(s) have no live owner: "
                f"{_ranges(self.holes)}"
            )
        found += [
            f"bucket {o.bucket}: {o.count} unfinished task(s) and no live owner"
            f" (e.g. {', '.join(o.task_ids[:3])})"
            for o in self.orphans
            if o.bucket not in said_buckets
        ]
        for node_id in self.stale:
            if node_id in said_nodes:
                continue
            node = self.node(node_id)
            what = (
                "every bucket"
                if node is None or node.buckets is None
                else (f"buckets {_ranges(node.buckets)}")
            )
            when = "" if node is None else f" at {node.lease_until.isoformat()}"
            found.append(f"node {node_id}: its declaration of {what} expired{when} (stale)")
        found += [
            f"node {node_id} uses num_buckets={n}, not {self.num_buckets}: keys map to "
            "other buckets there"
            for node_id, n in sorted(self.mismatched.items())
        ]
        return found

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def partitioned(self) -> bool:
        """Some registered node declares a part of the buckets (holes are then problems:
        a fleet of workers that each own every bucket has no part to miss)."""
        return any(n.buckets is not None for n in self.nodes)

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "checked_at": self.checked_at.isoformat(),
            "num_buckets": self.num_buckets,
            "healthy": self.healthy,
            "nodes": [n.to_dict() for n in self.nodes],
            "owners": {str(b): list(nodes) for b, nodes in sorted(self.owners.items())},
            "duplicates": {str(b): list(nodes) for b, nodes in sorted(self.duplicates.items())},
            "holes": list(self.holes),
            "draining": {str(b): node for b, node in sorted(self.draining.items())},
            "orphans": [o.to_dict() for o in self.orphans],
            "orphaned_tasks": self.orphaned_tasks,
            "stale": list(self.stale),
            "mismatched_num_buckets": dict(self.mismatched),
            "problems": list(self.problems),
        }


def _ranges(buckets: Iterable[int]) -> str:
    return format_buckets(buckets)


def _state(record: WorkerRecord, now: datetime) -> str:
    if record.stopped_at is not None:
        return "stopped"
    return "live" if record.alive(now) else "stale"


@public
def ownership_report(
    store: TaskStore, *, num_buckets: int | None = None, now: datetime | None = None
) -> OwnershipReport:
    """Read the node registry (and the tasks of unowned buckets) and judge it.

    Args:
        store: Any store; one without a worker registry (``QueueStore``) has no nodes.
        num_buckets: The deployment's bucket count; default: what the live nodes
            declare (the most common value), else what any node declared, else 64.
        now: The instant leases are judged at (default ``store.clock.now()``).
    """
    now = now or store.clock.now()
    records = store.list_workers() if isinstance(store, QueueStore) else []
    nodes = tuple(
        NodeDeclaration(
            node_id=r.worker_id,
            kind=r.kind,
            state=_state(r, now),
            buckets=r.buckets,
            draining=r.draining,
            lease_until=r.expires_at(),
            heartbeat_at=r.heartbeat_at,
            num_buckets=r.num_buckets,
        )
        for r in records
    )
    live = [n for n in nodes if n.state == "live"]
    declared = [n.num_buckets for n in live if n.num_buckets is not None] or [
        n.num_buckets for n in nodes if n.num_buckets is not None
    ]
    if num_buckets is None:
        num_buckets = (
            max(set(declared), key=lambda n: (declared.count(n), n))
            if declared
            else DEFAULT_NUM_BUCKETS
        )
    if not nodes:
        return OwnershipReport(checked_at=now, num_buckets=num_buckets)
    owners: dict[int, list[str]] = {bucket: [] for bucket in range(num_buckets)}
    explicit: dict[int, bool] = dict.fromkeys(owners, False)
    draining: dict[int, str] = {}
    for node in live:
        for bucket in node.draining:
            draining[bucket] = node.node_id
        covered = range(num_buckets) if node.buckets is None else node.buckets
        for bucket in covered:
            if bucket in owners:
                owners[bucket].append(node.node_id)
                explicit[bucket] = explicit[bucket] or node.buckets is not None
    duplicates = {
        b: tuple(nodes_of) for b, nodes_of in owners.items() if len(nodes_of) > 1 and explicit[b]
    }
    holes = tuple(b for b, nodes_of in owners.items() if not nodes_of and b not in draining)
    catch_all = any(n.buckets is None for n in live)
    orphans = _orphans(store, holes, include_unbucketed=not catch_all)
    stale = tuple(n.node_id for n in nodes if n.state == "stale")
    mismatched = {
        n.node_id: n.num_buckets
        for n in live
        if n.num_buckets is not None and n.num_buckets != num_buckets
    }
    return OwnershipReport(
        checked_at=now,
        num_buckets=num_buckets,
        nodes=nodes,
        owners={b: tuple(nodes_of) for b, nodes_of in owners.items()},
        duplicates=duplicates,
        holes=holes,
        draining=draining,
        orphans=orphans,
        stale=stale,
        mismatched=mismatched,
    )


def _orphans(
    store: TaskStore, holes: tuple[int, ...], *, include_unbucketed: bool
) -> tuple[OrphanedBucket, ...]:
    found: list[OrphanedBucket] = []
    if holes:
        counts = store.count_by_bucket()
        for bucket in holes:
            if not counts.get(bucket):
                continue  # no task at all: a cheap skip before the per-bucket count
            query = TaskQuery(statuses=_OPEN, bucket=bucket)
            count = sum(store.count_by_status(query).values())
            if not count:
                continue
            ids = tuple(
                s.task_id
                for s in store.query(
                    TaskQuery(statuses=_OPEN, bucket=bucket, order="created", limit=ORPHAN_IDS)
                )
            )
            found.append(OrphanedBucket(bucket=str(bucket), count=count, task_ids=ids))
    if include_unbucketed:
        unbucketed = [
            s.task_id
            for s in store.query(TaskQuery(statuses=_OPEN, order="created", limit=SCAN_LIMIT))
            if s.bucket is None
        ]
        if unbucketed:
            found.append(
                OrphanedBucket(
                    bucket=NO_BUCKET,
                    count=len(unbucketed),
                    task_ids=tuple(unbucketed[:ORPHAN_IDS]),
                )
            )
    return tuple(found)
