"""The work queue's store vocabulary: a task's recipe and a worker's registry record.

A task enqueued through :class:`chongming_task.Client` is stored ``queued`` with no
holder and carries its *recipe* -- the registered name (the task's ``name``) plus its
JSON arguments -- in ``metadata["recipe"]``. Only queued work stores a recipe: a task
submitted in-process with ``Controller.submit()`` keeps the guide's rule that its
arguments are never persisted (§8.11). A worker claims such a task (sets ``owner`` and
its lease in one write) and runs it with the recipe's arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from chongming_task._model import JSONValue, TaskSnapshot, parse_datetime
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores._records import TaskQuery

__all__ = [
    "CONCURRENCY_KEY",
    "PARENT_KEY",
    "RECIPE_KEY",
    "UNIQUE_KEY",
    "Recipe",
    "WorkerRecord",
    "children_query",
    "concurrency_key_in",
    "concurrency_key_of",
    "is_claimable",
    "parent_of",
    "recipe_of",
    "unique_key_of",
    "unique_stands",
    "unique_taken",
]

#: The metadata key holding a queued task's recipe (reserved: ``Client`` refuses it).
RECIPE_KEY: Final = "recipe"
#: The recipe member holding a task's dynamic limit key (read by the claim's SQL).
CONCURRENCY_KEY: Final = "concurrency_key"


#: The metadata key holding the unique key a task was enqueued with (reserved like the
#: recipe). The store indexes it only for tasks created by ``QueueStore.create_unique``.
UNIQUE_KEY: Final = "unique_key"


#: The metadata key holding the id of the task that enqueued this one with
#: ``ctx.enqueue`` (reserved like the recipe). The SQL stores copy it into an indexed
#: column (``meta_parent``), so the children of a task are one index walk away.
PARENT_KEY: Final = "parent"
_UNFINISHED: Final = frozenset(status for status in TaskStatus if not status.is_terminal)


def parent_of(snapshot: TaskSnapshot) -> str | None:
    """The id of the task that enqueued ``snapshot`` as its child, or ``None``."""
    parent = snapshot.metadata.get(PARENT_KEY)
    return parent if isinstance(parent, str) else None


def children_query(task_id: str, *, unfinished: bool = False) -> TaskQuery:
    """The children of ``task_id`` (``unfinished``: only those not terminal yet), oldest
    first: the one query the task page, ``status`` and a stop of the parent use."""
    return TaskQuery(
        metadata_eq={PARENT_KEY: task_id}, statuses=_UNFINISHED if unfinished else None
    )


def unique_key_of(snapshot: TaskSnapshot) -> str | None:
    """The unique key ``snapshot`` carries in its metadata, or ``None``."""
    key = snapshot.metadata.get(UNIQUE_KEY)
    return key if isinstance(key, str) else None


def unique_stands(
    status: TaskStatus, finished_at: datetime | None, finished_since: datetime | None
) -> bool:
    """Whether a task with a unique key keeps another with that key from being created:
    it is not terminal, or it finished at or after ``finished_since`` (the window)."""
    if not status.is_terminal:
        return True
    return finished_since is not None and finished_at is not None and finished_at >= finished_since


def unique_taken(task_id: str, key: str) -> ConfigurationError:
    """The refusal of a write that would give ``key`` a second unfinished task (a retry of
    a finished task while another task with its key is not finished)."""
    return ConfigurationError(
        f"task {task_id!r} cannot become unfinished again: another task with its "
        f"unique_key {key!r} is not finished; wait for that one or stop it first"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipe:
    """How to run a queued task: JSON arguments, and the earliest start."""

    args: tuple[JSONValue, ...] = ()
    kwargs: Mapping[str, JSONValue] | None = None
    not_before: datetime | None = None
    enqueued_by: str | None = None
    concurrency_key: str | None = None
    """The dynamic key fleet limits count it under (``enqueue(concurrency_key=...)``)."""

    def to_dict(self) -> dict[str, JSONValue]:
        found: dict[str, JSONValue] = {
            "args": list(self.args),
            "kwargs": dict(self.kwargs or {}),
            "not_before": None if self.not_before is None else self.not_before.isoformat(),
            "enqueued_by": self.enqueued_by,
        }
        if self.concurrency_key is not None:
            found[CONCURRENCY_KEY] = self.concurrency_key
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Recipe:
        args = data.get("args") or []
        kwargs = data.get("kwargs") or {}
        if not isinstance(args, list) or not isinstance(kwargs, Mapping):
            raise ConfigurationError(f"malformed recipe: {dict(data)!r:.200}")
        by = data.get("enqueued_by")
        return cls(
            args=tuple(args),
            kwargs=dict(kwargs),
            not_before=parse_datetime(data.get("not_before"), "recipe.not_before"),
            enqueued_by=by if isinstance(by, str) else None,
            concurrency_key=concurrency_key_in(data),
        )


def concurrency_key_in(recipe: object) -> str | None:
    """The ``concurrency_key`` of a stored recipe (a mapping), if it has one."""
    key = recipe.get(CONCURRENCY_KEY) if isinstance(recipe, Mapping) else None
    return key if isinstance(key, str) else None


def concurrency_key_of(snapshot: TaskSnapshot) -> str | None:
    """The ``concurrency_key`` a queued task was enqueued with (without decoding it all)."""
    return concurrency_key_in(snapshot.metadata.get(RECIPE_KEY))


def recipe_of(snapshot: TaskSnapshot) -> Recipe | None:
    """The recipe of a task enqueued through the work queue; ``None`` for any other task."""
    raw = snapshot.metadata.get(RECIPE_KEY)
    if not isinstance(raw, Mapping):
        return None
    try:
        return Recipe.from_dict(raw)
    except (ConfigurationError, ValueError, TypeError):
        return None


def is_claimable(snapshot: TaskSnapshot, now: datetime) -> bool:
    """Queued, held by nobody, enqueued with a recipe, and due."""
    if snapshot.status is not TaskStatus.QUEUED or snapshot.owner is not None:
        return False
    recipe = recipe_of(snapshot)
    if recipe is None:
        return False
    return recipe.not_before is None or recipe.not_before <= now


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerRecord:
    """One worker in the store's registry (``chongming-task workers``)."""

    worker_id: str
    host: str
    pid: int
    version: str
    buckets: tuple[int, ...] | None
    """The buckets it owns; ``None`` for all of them."""
    slots: int
    started_at: datetime
    heartbeat_at: datetime
    heartbeat_interval: float = 1.0
    stopped_at: datetime | None = None
    """Set by a clean shutdown: the worker is gone on purpose, not dead."""
    kind: str = "worker"
    """``"worker"`` (claims queued work) or ``"controller"`` (a node declared with
    :func:`chongming_task.buckets.declare_buckets`; it claims nothing from the queue)."""
    lease_until: datetime | None = None
    """When its bucket declaration expires unless renewed (with the heartbeat); ``None``
    in a record written before declarations had a lease: three heartbeat intervals."""
    num_buckets: int | None = None
    """The node's ``BucketPolicy.num_buckets`` (holes are counted in ``0..num_buckets-1``)."""
    draining: tuple[int, ...] = ()
    """Buckets being handed off: no longer claimed, held tasks of them still finishing."""

    def owns(self, bucket: int | None) -> bool:
        if self.buckets is None:
            return True
        return bucket is not None and bucket in self.buckets

    def expires_at(self) -> datetime:
        """The end of its declaration lease (a legacy record: three heartbeat intervals)."""
        if self.lease_until is not None:
            return self.lease_until
        return self.heartbeat_at + timedelta(seconds=max(3 * self.heartbeat_interval, 2.0))

    def alive(self, now: datetime, *, grace: float | None = None) -> bool:
        """Heart-beating: its lease has not expired (``grace``: seconds since its last beat)."""
        if self.stopped_at is not None:
            return False
        if grace is not None:
            return (now - self.heartbeat_at).total_seconds() <= grace
        return now <= self.expires_at()

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "worker_id": self.worker_id,
            "host": self.host,
            "pid": self.pid,
            "version": self.version,
            "buckets": None if self.buckets is None else list(self.buckets),
            "slots": self.slots,
            "started_at": self.started_at.isoformat(),
            "heartbeat_at": self.heartbeat_at.isoformat(),
            "heartbeat_interval": self.heartbeat_interval,
            "stopped_at": None if self.stopped_at is None else self.stopped_at.isoformat(),
            "kind": self.kind,
            "lease_until": None if self.lease_until is None else self.lease_until.isoformat(),
            "num_buckets": self.num_buckets,
            "draining": list(self.draining),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerRecord:
        try:
            buckets: Sequence[int] | None = data.get("buckets")
            started = parse_datetime(data["started_at"], "started_at")
            beat = parse_datetime(data["heartbeat_at"], "heartbeat_at")
            if started is None or beat is None:
                raise ValueError("started_at and heartbeat_at are required")
            return cls(
                worker_id=str(data["worker_id"]),
                host=str(data.get("host", "")),
                pid=int(data.get("pid", 0)),
                version=str(data.get("version", "")),
                buckets=None if buckets is None else tuple(int(b) for b in buckets),
                slots=int(data.get("slots", 1)),
                started_at=started,
                heartbeat_at=beat,
                heartbeat_interval=float(data.get("heartbeat_interval", 1.0)),
                stopped_at=parse_datetime(data.get("stopped_at"), "stopped_at"),
                kind=str(data.get("kind") or "worker"),
                lease_until=parse_datetime(data.get("lease_until"), "lease_until"),
                num_buckets=None if data.get("num_buckets") is None else int(data["num_buckets"]),
                draining=tuple(int(b) for b in data.get("draining") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"corrupt worker record: {exc!r}") from exc
