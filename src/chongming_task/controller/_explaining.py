"""Gathering the facts ``explain`` reasons over: from a store, and from a holding controller.

:func:`store_facts` reads only what any process can read (the snapshot, its history,
the holder's running tasks, the queue ahead, the worker registry, the pipeline run's
other nodes, the checkpoint gaps of the task's name). :func:`controller_facts` adds
what only the holding controller knows: its admission ledger and the run's deadlines.
Every read is bounded (``SCAN_LIMIT``), so explaining one task never walks a million.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime

from chongming_task._checkpoint_gaps import CheckpointGaps, merge_gaps
from chongming_task._explain import AdmissionFacts, Explanation, Facts, explain
from chongming_task._model import TaskSnapshot
from chongming_task.controller._registry import TaskRegistry
from chongming_task.errors import UnknownTask
from chongming_task.policies import Timeout
from chongming_task.run import TaskRun
from chongming_task.states import OCCUPYING, TaskStatus
from chongming_task.stores._base import QueueStore, TaskQuery, TaskStore
from chongming_task.stores._limits import LimitUse, limit_uses
from chongming_task.stores._pauses import QueuePause, pause_of
from chongming_task.stores._queue_records import concurrency_key_of

__all__ = ["SCAN_LIMIT", "controller_facts", "explain_task", "name_gaps", "store_facts"]

S = TaskStatus

#: Tasks read per question (queue ahead, a holder's running tasks, a name's runs).
SCAN_LIMIT = 10_000
#: Runs of one task name whose checkpoint gaps are merged (the most recently created).
GAP_RUNS = 1_000


def name_gaps(
    store: TaskStore,
    name: str,
    *,
    limit: int = GAP_RUNS,
    live: Mapping[str, TaskSnapshot] | None = None,
) -> CheckpointGaps | None:
    """The checkpoint gaps of the last ``limit`` runs named ``name`` (the most recently
    created, ``store.checkpoint_gaps_of``), merged.

    ``live`` snapshots (a holding controller's, fresher than the store's copy, which
    the side channel updates about once a second) replace the stored ones by id.
    """
    runs: dict[str, CheckpointGaps | None] = dict(store.checkpoint_gaps_of(name, limit=limit))
    runs.update(
        {task_id: s.checkpoint_gaps for task_id, s in (live or {}).items() if s.name == name}
    )
    return merge_gaps(runs.values())


def store_facts(
    store: TaskStore,
    snapshot: TaskSnapshot,
    *,
    now: datetime,
    timeout: Timeout | None = None,
    graceful_stop: float | None = None,
) -> Facts:
    """What the store says about ``snapshot``'s wait (the ``"store"`` view)."""
    status = snapshot.status
    facts = Facts(
        snapshot=snapshot,
        history=store.history(snapshot.task_id),
        now=now,
        source="store",
        timeout=timeout,
        graceful_stop=graceful_stop,
        gaps=name_gaps(store, snapshot.name),
    )
    if status in (S.QUEUED, S.PENDING):
        facts = _queue_facts(store, facts)
    elif status is S.BLOCKED:
        run = snapshot.metadata.get("pipeline_run")
        if isinstance(run, str):
            siblings = store.query(TaskQuery(metadata_eq={"pipeline_run": run}, limit=SCAN_LIMIT))
            facts = dataclasses.replace(facts, siblings=tuple(siblings))
    return facts


def _queue_facts(store: TaskStore, facts: Facts) -> Facts:
    snap = facts.snapshot
    owner = snap.owner
    running: tuple[TaskSnapshot, ...] = ()
    if owner is not None:
        running = tuple(
            store.query(TaskQuery(statuses=frozenset(OCCUPYING), owner=owner, limit=SCAN_LIMIT))
        )
    queued = store.query(
        TaskQuery(statuses=frozenset({S.QUEUED}), order="priority", limit=SCAN_LIMIT)
    )
    ahead: list[str] = []
    higher = 0
    found = False
    for other in queued:
        if other.owner != owner:
            continue
        if other.task_id == snap.task_id:
            found = True
            break
        if other.priority > snap.priority:
            higher += 1
        elif other.priority == snap.priority:
            ahead.append(other.task_id)
    workers = tuple(store.list_workers()) if isinstance(store, QueueStore) else ()
    worker_running: dict[str, tuple[str, ...]] = {}
    if owner is None:
        for worker in workers:
            if worker.alive(facts.now) and worker.owns(snap.bucket):
                held = store.query(
                    TaskQuery(
                        statuses=frozenset(OCCUPYING), owner=worker.worker_id, limit=SCAN_LIMIT
                    )
                )
                worker_running[worker.worker_id] = tuple(s.task_id for s in held)
    return dataclasses.replace(
        facts,
        limit_uses=() if owner is not None else _limit_uses(store, snap, facts.now),
        queue_pause=None if owner is not None else _queue_pause(store, snap),
        holder_running=running,
        queue_ahead=tuple(ahead) if found else None,
        queue_higher=higher,
        workers=workers,
        worker_running=worker_running,
    )


def _queue_pause(store: TaskStore, snap: TaskSnapshot) -> QueuePause | None:
    """The pause of an unheld queued task's queue, if it is paused."""
    if not (isinstance(store, QueueStore) and store.supports_queue_pauses):
        return None
    return pause_of(snap, store.list_queue_pauses())


def _limit_uses(store: TaskStore, snap: TaskSnapshot, now: datetime) -> tuple[LimitUse, ...]:
    """The fleet limits on an unheld queued task's keys and their use now."""
    if not (isinstance(store, QueueStore) and store.supports_global_limits):
        return ()
    declared = store.list_limits()
    if not declared:
        return ()
    keys = set(snap.tags)
    key = concurrency_key_of(snap)
    if key is not None:
        keys.add(key)
    slots, starts = store.list_global_slots(), store.list_limit_starts()
    return tuple(limit_uses(keys, declared, slots, starts, now))


def controller_facts(
    store: TaskStore, facts: Facts, run: TaskRun, admission: AdmissionFacts | None
) -> Facts:
    """``facts`` (from the store) completed by the holding controller's own knowledge."""
    supervision = run._supervision()
    snapshot = run.snapshot
    return dataclasses.replace(
        facts,
        snapshot=snapshot,
        source="controller",
        admission=admission,
        timeout=supervision.timeout,
        graceful_stop=supervision.graceful_stop,
        stop_deadline=supervision.stop_deadline,
        retry_at=supervision.retry_at,
        last_checkpoint_at=supervision.last_checkpoint_at,
        gaps=name_gaps(store, snapshot.name, live={snapshot.task_id: snapshot}),
    )


def explain_task(
    store: TaskStore,
    snapshot: TaskSnapshot | None,
    run: TaskRun | None,
    admission: AdmissionFacts | None,
    *,
    task_id: str,
    registry: TaskRegistry,
    now: datetime,
) -> Explanation:
    """``Controller.explain``: the store's facts, completed by the holder's if it holds ``run``.

    ``snapshot`` is the controller's view of the stored task (a pending write counts);
    a run held here but not yet stored is explained from its own snapshot.

    Raises:
        UnknownTask: Neither a ``snapshot`` nor a ``run``.
    """
    if snapshot is None and run is not None:
        snapshot = run.snapshot
    if snapshot is None:
        raise UnknownTask(
            task_id, f"unknown task id {task_id!r}: not in the store and not held here"
        )
    definition = registry.get(snapshot.name)
    facts = store_facts(
        store,
        snapshot,
        now=now,
        timeout=None if definition is None else definition.timeout,
        graceful_stop=None,
    )
    if run is not None:
        facts = controller_facts(store, facts, run, admission)
    return explain(facts)
