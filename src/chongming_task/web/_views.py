"""What the pages show, read through the library's public API only.

Every number here comes from the store's query API (``get``, ``query``,
``query_heads``, ``count_by_status``, ``count_by_bucket``, ``history``) and from
:class:`~chongming_task.schedule._admin.ScheduleAdmin`; the dashboard has no SQL of its
own. Each view returns plain data (dataclasses and JSON-ready dicts) that the HTML
templates and the JSON API both render, so the two can never disagree.

Text that came from a task (failure messages, tracebacks, metadata, outcomes) is
redacted again on the way out (``chongming_task._redact``): the store redacts what it
writes, and a row written by an older or foreign writer is redacted here too. A task's
JSON is the CLI's (``chongming_task.controller._document.task_doc``): one view, one rule.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

from chongming_task._explain import Explanation, explain
from chongming_task._model import TaskSnapshot, Transition
from chongming_task._redact import redact
from chongming_task._timespec import parse_instant
from chongming_task.buckets import FleetHealth, fleet_health, ownership_report
from chongming_task.controller._document import controls_of, due_at, task_doc, transition_doc
from chongming_task.controller._explaining import store_facts
from chongming_task.controller._table import elapsed_seconds
from chongming_task.core import Clock
from chongming_task.errors import ConfigurationError
from chongming_task.schedule import ScheduleAdmin
from chongming_task.states import OCCUPYING, TERMINAL, TaskStatus
from chongming_task.stores._base import QueueStore, ScheduleStore, TaskQuery, TaskStore
from chongming_task.stores._queue_health import QueueHealth, queue_health
from chongming_task.stores._queue_records import WorkerRecord, children_query
from chongming_task.stores._records import Order
from chongming_task.web._params import optional_int

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "Dashboard",
    "Overview",
    "StuckTask",
    "TaskFilters",
    "TaskPage",
    "WorkerSource",
    "controls_of",
    "due_at",
    "elapsed",
    "task_doc",
    "transition_doc",
]

DEFAULT_PAGE_SIZE: Final = 50
MAX_PAGE_SIZE: Final = 500
#: Rows read past a cursor's recorded position to find it again after new tasks arrived.
_CURSOR_SLACK: Final = 200
#: The orders of the task list (``sort=``): newest first (default) or oldest first.
SORTS: Final = ("newest", "oldest")
#: The time-range parameters of ``/tasks`` and ``/api/tasks`` (``TaskQuery`` fields).
TIME_BOUNDS: Final = ("created_after", "created_before", "updated_after", "updated_before")
_FAILED: Final = frozenset({TaskStatus.FAILED, TaskStatus.LOST})
_STUCK_LIMIT: Final = 50
_HELD_LIMIT: Final = 2000
#: One live fingerprint in this many also counts tasks per status (see ``fingerprint``).
FULL_EVERY: Final = 10
#: Queued tasks read (oldest first) at most to find the oldest one that is due.
_DUE_SCAN: Final = 2000
#: Unfinished tasks listed on a worker's page.
_WORKER_TASKS: Final = 200
#: The newest failed and lost tasks that ``/failures`` groups (one bounded read).
FAILURE_WINDOW: Final = 2000
#: What a failure message's fingerprint replaces by a placeholder: UUIDs and long
#: tokens with a digit (``<id>``: task ids, hashes, addresses), then digit runs (``<n>``).
_IDS: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?<![\w.-])(?=[\w.:-]*\d)[\w.:-]{12,}"
)
_NUMBERS: Final = re.compile(r"\d+")
_FINGERPRINT_CHARS: Final = 300


def fingerprint(message: str) -> str:
    """``message`` with its ids and numbers normalised, so that the same failure of
    different tasks (``order 1234 not found``, ``order 98 not found``) reads alike."""
    text = _NUMBERS.sub("<n>", _IDS.sub("<id>", message))
    text = " ".join(text.split())
    return text[:_FINGERPRINT_CHARS]


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Failed and lost tasks with the same error type and message fingerprint."""

    error: str
    """The exception type, or the failure kind when there is none (``lost``, timeouts)."""
    fingerprint: str
    task_ids: tuple[str, ...]
    """Newest first."""
    newest: TaskSnapshot

    @property
    def count(self) -> int:
        return len(self.task_ids)

    @property
    def key(self) -> str:
        """A short stable name of the group (for the retry form and URLs)."""
        digest = hashlib.sha256(f"{self.error}\0{self.fingerprint}".encode()).hexdigest()
        return digest[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "error": self.error,
            "fingerprint": self.fingerprint,
            "count": self.count,
            "task_ids": list(self.task_ids),
            "newest_at": _iso(self.newest.updated_at),
        }


def group_failures(snapshots: Iterable[TaskSnapshot]) -> list[FailureGroup]:
    """``snapshots`` (failed or lost, newest first) grouped by error type and message
    fingerprint; the largest group first, then the most recent."""
    groups: dict[tuple[str, str], list[TaskSnapshot]] = {}
    for snapshot in snapshots:
        failure = snapshot.failure
        error = (failure.exception_type or failure.kind.value) if failure else snapshot.status.value
        message = redact(failure.message) if failure else ""
        groups.setdefault((error, fingerprint(message or "")), []).append(snapshot)
    found = [
        FailureGroup(error, print_, tuple(s.task_id for s in members), members[0])
        for (error, print_), members in groups.items()
    ]
    found.sort(key=lambda g: (-g.count, -g.newest.updated_at.timestamp()))
    return found


def by_attempt(
    timeline: Sequence[tuple[Transition, float | None]],
) -> list[tuple[int, list[tuple[Transition, float | None]]]]:
    """The timeline cut where the attempt changes: ``[(attempt, rows), ...]`` in order."""
    out: list[tuple[int, list[tuple[Transition, float | None]]]] = []
    for row in timeline:
        if not out or out[-1][0] != row[0].attempt:
            out.append((row[0].attempt, []))
        out[-1][1].append(row)
    return out


#: Children a task page lists (``status --json`` lists them all).
CHILDREN_SHOWN: Final = 200


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def is_due(snapshot: TaskSnapshot, now: datetime) -> bool:
    due = due_at(snapshot)
    return due is None or due <= now


#: Seconds since the first start, to ``now`` while the task is unfinished (the stored
#: :attr:`~TaskSnapshot.elapsed` stops at its last write): the CLI's rule.
elapsed = elapsed_seconds


# ---------------------------------------------------------------- task list


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFilters:
    """The filters of the tasks page (query parameters of ``/tasks``)."""

    statuses: frozenset[TaskStatus] | None = None
    name_prefix: str | None = None
    tag: str | None = None
    bucket: int | None = None
    owner: str | None = None
    id_prefix: str | None = None
    """Id search (``q``): the tasks whose id starts with this text (an exact id too)."""
    argument: str | None = None
    """Argument search (``arg``): text the enqueued arguments' JSON contains
    (``TaskQuery.argument``)."""
    oldest_first: bool = False
    """``sort=oldest``: the oldest task first (the last page of the default order)."""
    created_after: datetime | None = None
    """Created at or after this instant (the time range's start, inclusive)."""
    created_before: datetime | None = None
    """Created before this instant (the range's end, exclusive)."""
    updated_after: datetime | None = None
    updated_before: datetime | None = None

    @classmethod
    def parse(
        cls,
        params: Mapping[str, str],
        statuses: Sequence[str] = (),
        *,
        now: datetime,
    ) -> TaskFilters:
        """From query parameters; blank values are no filter.

        The time bounds (``created_after``, ``created_before``, ``updated_after``,
        ``updated_before``) are ages counted back from ``now`` (``2h``) or ISO times
        with an offset (:func:`~chongming_task._timespec.parse_instant`); an age is
        resolved once, so the links of the page (next page, the filter form) carry the
        instant and every page shows the same window.

        Raises:
            ConfigurationError: an unknown status, a bucket that is no integer, a time
                that is neither form, or a range that ends before it starts.
        """
        chosen: set[TaskStatus] = set()
        for raw in statuses:
            for part in raw.split(","):
                value = part.strip()
                if not value:
                    continue
                try:
                    chosen.add(TaskStatus(value))
                except ValueError:
                    valid = ", ".join(s.value for s in TaskStatus)
                    raise ConfigurationError(f"unknown status {value!r}; valid: {valid}") from None
        bucket = optional_int(params.get("bucket"), "bucket")
        sort = (params.get("sort") or "newest").strip() or "newest"
        if sort not in SORTS:
            raise ConfigurationError(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")

        def text(key: str) -> str | None:
            value = (params.get(key) or "").strip()
            return value or None

        bounds: dict[str, datetime | None] = {}
        for key in TIME_BOUNDS:
            given = text(key)
            bounds[key] = None if given is None else parse_instant(given, now=now, name=key)
        for start, end in (
            ("created_after", "created_before"),
            ("updated_after", "updated_before"),
        ):
            low, high = bounds[start], bounds[end]
            if low is not None and high is not None and high <= low:
                raise ConfigurationError(
                    f"{end} ({high.isoformat()}) must be after {start} ({low.isoformat()})"
                )
        return cls(
            statuses=frozenset(chosen) or None,
            name_prefix=text("name"),
            tag=text("tag"),
            bucket=bucket,
            owner=text("owner"),
            id_prefix=text("q"),
            argument=text("arg"),
            oldest_first=sort == "oldest",
            **bounds,
        )

    @property
    def order(self) -> Order:
        """The store order of the list: newest first, or oldest first."""
        return "created" if self.oldest_first else "-created"

    def query(
        self,
        *,
        limit: int | None,
        order: Order | None = None,
        created_before: datetime | None = None,
        created_after: datetime | None = None,
    ) -> TaskQuery:
        """The store query in the list's order (or ``order``); ``created_before`` and
        ``created_after`` tighten the filter's own range (a page)."""
        before = self.created_before
        if created_before is not None and (before is None or created_before < before):
            before = created_before
        after = self.created_after
        if created_after is not None and (after is None or created_after > after):
            after = created_after
        return TaskQuery(
            statuses=self.statuses,
            name_prefix=self.name_prefix,
            tag=self.tag,
            bucket=self.bucket,
            owner=self.owner,
            id_prefix=self.id_prefix,
            argument=self.argument,
            created_after=after,
            created_before=before,
            updated_after=self.updated_after,
            updated_before=self.updated_before,
            limit=limit,
            order=order or self.order,
        )

    def params(self) -> dict[str, str]:
        """The query parameters that reproduce these filters (for links)."""
        out: dict[str, str] = {}
        if self.statuses:
            out["status"] = ",".join(sorted(s.value for s in self.statuses))
        for key, value in (
            ("name", self.name_prefix),
            ("tag", self.tag),
            ("owner", self.owner),
            ("q", self.id_prefix),
            ("arg", self.argument),
        ):
            if value:
                out[key] = value
        if self.bucket is not None:
            out["bucket"] = str(self.bucket)
        for key in TIME_BOUNDS:
            value = getattr(self, key)
            if value is not None:
                out[key] = value.isoformat()
        if self.oldest_first:
            out["sort"] = "oldest"
        return out


@dataclass(frozen=True, slots=True)
class TaskPage:
    tasks: list[TaskSnapshot]
    next_cursor: str | None
    filters: TaskFilters
    limit: int
    position: int
    """How many tasks precede this page (in its order)."""
    total: int = 0
    """How many tasks the filters match (the store's count, not the rows read)."""


def encode_cursor(position: int, last: TaskSnapshot) -> str:
    """The cursor after ``last``: its position, id and creation time (the keyset)."""
    data = [position, last.task_id, last.created_at.isoformat()]
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str, datetime | None]:
    """``(position, last task id, its creation time)`` of a cursor.

    A cursor of an older dashboard has no creation time (``None``).

    Raises:
        ConfigurationError: the cursor was not made by :func:`encode_cursor`.
    """
    bad = "invalid page cursor; start again from the first page"
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        decoded = json.loads(raw)
        if not isinstance(decoded, list) or len(decoded) not in (2, 3):
            raise ValueError(cursor)
        position, last_id = decoded[0], decoded[1]
        created = datetime.fromisoformat(decoded[2]) if len(decoded) == 3 else None
    except (ValueError, TypeError, binascii.Error):
        raise ConfigurationError(bad) from None
    if (
        not isinstance(position, int)
        or isinstance(position, bool)
        or position < 0
        or not isinstance(last_id, str)
        or (created is not None and created.tzinfo is None)
    ):
        raise ConfigurationError(bad)
    return position, last_id, created


# ---------------------------------------------------------------- overview


@dataclass(frozen=True, slots=True)
class StuckTask:
    snapshot: TaskSnapshot
    why: str


@dataclass(frozen=True, slots=True)
class Overview:
    counts: dict[TaskStatus, int]
    total: int
    unfinished: int
    queue_depth: int
    oldest_queued: TaskSnapshot | None
    """The oldest queued task that is due (not one enqueued to start later)."""
    oldest_queued_age: float | None
    running: list[TaskSnapshot]
    stuck: list[StuckTask]
    recent_failures: list[TaskSnapshot]
    schedules: Any
    """The ``SchedulerHealth`` of the schedule records, or ``None`` without schedules."""
    workers: list[WorkerInfo]
    checked_at: datetime
    health: FleetHealth
    """The verdict ``chongming-task health`` gives, with its problems."""


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A process: a worker in the store's registry, or an owner holding leases on tasks."""

    name: str
    tasks: int
    """Unfinished tasks it holds (``lease_owner``) or is recorded on (``owner``)."""
    live_leases: int
    """Of those, leases not yet expired."""
    latest_lease: datetime | None
    buckets: list[int] | None = field(default_factory=list)
    """Buckets it declares (registry; ``None``: every bucket) or holds tasks of (leases)."""
    up: bool | None = None
    """Registry: heart-beating. Leases: ``True`` some lease is live, ``False`` all
    expired, ``None`` it holds none."""
    source: str = "leases"
    """``registry`` (``chongming-task workers``) or ``leases`` (a holder the registry
    does not list, such as a bare ``Controller``)."""
    state: str | None = None
    """Registry: ``live``, ``dead`` (stopped heart-beating) or ``stopped`` (shut down)."""
    kind: str | None = None
    host: str | None = None
    pid: int | None = None
    version: str | None = None
    slots: int | None = None
    started_at: datetime | None = None
    heartbeat_at: datetime | None = None
    heartbeat_age: float | None = None
    """Seconds since its last heartbeat, at the time of the read."""


class WorkerSource(Protocol):
    """The hook for a worker registry: ``create_app(store, workers=...)``.

    Without one the dashboard reads the store's own worker registry (the one
    ``chongming-task workers`` reads) and adds the lease holders it does not list
    (:meth:`Dashboard.workers_from_leases`). An object passed here replaces both.
    """

    def workers(self) -> list[WorkerInfo]: ...


class Dashboard:
    """The read and control operations behind every page.

    Args:
        store: The shared store (any process's tasks).
        clock: Time of ages and "stuck" judgements (a ``FakeClock`` in tests).
        idle_after: Seconds without a heartbeat after which a running task looks stuck.
        stopping_grace: Seconds in ``stopping`` after which a task looks stuck.
        workers: A worker registry (:class:`WorkerSource`); ``None`` infers workers
            from leases.
    """

    def __init__(
        self,
        store: TaskStore,
        *,
        clock: Clock,
        idle_after: float = 60.0,
        stopping_grace: float = 30.0,
        workers: WorkerSource | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.idle_after = idle_after
        self.stopping_grace = stopping_grace
        self.worker_source = workers
        self._fingerprints = 0
        self._counts: list[tuple[str, int]] | None = None

    # -- tasks ----------------------------------------------------------------------

    def get(self, task_id: str) -> TaskSnapshot | None:
        return self.store.get(task_id)

    def history(self, task_id: str) -> list[Transition]:
        return self.store.history(task_id)

    def children(self, task_id: str) -> list[TaskSnapshot]:
        """The first ``CHILDREN_SHOWN`` tasks ``task_id`` enqueued with ``ctx.enqueue``."""
        return self.store.query(replace(children_query(task_id), limit=CHILDREN_SHOWN))

    def explain(self, snapshot: TaskSnapshot) -> Explanation:
        """Why the task is where it is, from what the store knows (``chongming-task
        explain``'s store view: holder, lease, history, queue order, worker registry).

        The checkpoint gaps of the task's name say nothing about a task that never
        started, so its page leaves them out."""
        found = explain(store_facts(self.store, snapshot, now=self.clock.now()))
        if snapshot.started_at is None and snapshot.first_started_at is None:
            kept = tuple(r for r in found.reasons if r.kind != "checkpoint_gaps")
            found = replace(found, reasons=kept)
        return found

    def failures(self, window: int = FAILURE_WINDOW) -> tuple[list[FailureGroup], int]:
        """The newest ``window`` failed and lost tasks, grouped (:func:`group_failures`),
        and how many were read (``window`` reached: older failures are not grouped)."""
        found = self.store.query(TaskQuery(statuses=_FAILED, order="-created", limit=window))
        return group_failures(found), len(found)

    def tasks(
        self, filters: TaskFilters, *, limit: int = DEFAULT_PAGE_SIZE, cursor: str | None = None
    ) -> TaskPage:
        """One page of tasks, newest first (oldest first with ``sort=oldest``), and how
        many tasks the filters match in all (:meth:`count`).

        The cursor records the last task of the previous page, its creation time and
        how many tasks came before it. A page is one keyset read: the tasks created at
        or before that time (``created_before`` the next microsecond; oldest first: at or
        after it), in the list's order,
        starting right after that task, so tasks that arrived meanwhile shift nothing,
        no row is shown twice and none is skipped, and a deep page costs what page one
        costs. Only when the task is gone (deleted) or more than ``_CURSOR_SLACK`` tasks
        share its creation time does a page fall back to counting ``position + limit``
        three-column heads from the newest.

        Raises:
            ConfigurationError: an invalid cursor or limit.
        """
        if limit < 1 or limit > MAX_PAGE_SIZE:
            raise ConfigurationError(f"limit must be 1..{MAX_PAGE_SIZE}, got {limit}")
        rows, next_cursor, position = self._page(filters, limit, cursor)
        return TaskPage(rows, next_cursor, filters, limit, position, self.count(filters))

    def count(self, filters: TaskFilters) -> int:
        """How many tasks ``filters`` match: the store's ``count_tasks`` with the same
        filters (an index count for every filter but ``argument``), never rows read."""
        return self.store.count_tasks(filters.query(limit=None))

    def _page(
        self, filters: TaskFilters, limit: int, cursor: str | None
    ) -> tuple[list[TaskSnapshot], str | None, int]:
        """``(rows, next cursor, position)`` of one page (see :meth:`tasks`)."""
        if cursor is None:
            rows = self.store.query(filters.query(limit=limit + 1))
            more = len(rows) > limit
            rows = rows[:limit]
            next_cursor = encode_cursor(len(rows), rows[-1]) if more and rows else None
            return rows, next_cursor, 0
        position, last_id, last_created = decode_cursor(cursor)
        page_ids: list[str] | None = None
        more = False
        if last_created is not None:
            # The tasks at or past the last one in the list's order, from the index.
            after, before = (
                (last_created, None)
                if filters.oldest_first
                else (None, last_created + timedelta(microseconds=1))
            )
            read = limit + 1 + _CURSOR_SLACK
            heads = self.store.query_heads(
                filters.query(limit=read, created_after=after, created_before=before)
            )
            ids = [head.task_id for head in heads]
            if last_id in ids:
                start_at = ids.index(last_id) + 1
                if len(ids) == read and len(ids) < start_at + limit + 1:
                    # Ties on the creation time pushed the page past this read.
                    heads = self.store.query_heads(
                        filters.query(
                            limit=start_at + limit + 1, created_after=after, created_before=before
                        )
                    )
                    ids = [head.task_id for head in heads]
                page_ids = ids[start_at : start_at + limit]
                more = len(ids) > start_at + limit
                start = position
        if page_ids is None:
            heads = self.store.query_heads(
                filters.query(limit=position + limit + 1 + _CURSOR_SLACK)
            )
            ids = [head.task_id for head in heads]
            try:
                start = ids.index(last_id) + 1
            except ValueError:
                start = min(position, len(ids))  # the task went away: keep the position
            page_ids = ids[start : start + limit]
            more = len(ids) > start + limit
        found_rows = (
            self.store.query(TaskQuery(task_ids=frozenset(page_ids), order=filters.order))
            if page_ids
            else []
        )
        by_id = {row.task_id: row for row in found_rows}
        rows = [by_id[task_id] for task_id in page_ids if task_id in by_id]
        next_cursor = encode_cursor(start + len(rows), rows[-1]) if more and rows else None
        return rows, next_cursor, start

    def time_in_states(
        self, snapshot: TaskSnapshot, history: Sequence[Transition]
    ) -> list[tuple[Transition, float | None]]:
        """Each transition with the seconds spent in the state it entered.

        The last state of an unfinished task runs until now; a terminal state has no
        duration (``None``).
        """
        out: list[tuple[Transition, float | None]] = []
        now = self.clock.now()
        for index, transition in enumerate(history):
            if index + 1 < len(history):
                seconds: float | None = (history[index + 1].at - transition.at).total_seconds()
            elif transition.to_status.is_terminal:
                seconds = None
            else:
                seconds = (now - transition.at).total_seconds()
            out.append((transition, None if seconds is None else max(0.0, seconds)))
        return out

    # -- overview -------------------------------------------------------------------

    def stuck(self, now: datetime) -> list[StuckTask]:
        """Unfinished tasks that look stuck, each with the reason in one sentence."""
        found: dict[str, StuckTask] = {}
        expired = self.store.query(
            TaskQuery(
                statuses=frozenset(OCCUPYING),
                lease_expired_by=now,
                order="updated",
                limit=_STUCK_LIMIT,
            )
        )
        for snapshot in expired:
            if snapshot.lease_until is not None:
                ago = (now - snapshot.lease_until).total_seconds()
                why = f"lease of {snapshot.lease_owner or '?'} expired {ago:.0f}s ago"
            else:
                why = "occupies a slot but nobody holds a lease on it"
            found[snapshot.task_id] = StuckTask(snapshot, why)
        stopping = self.store.query(
            TaskQuery(
                statuses=frozenset({TaskStatus.STOPPING}), order="updated", limit=_STUCK_LIMIT
            )
        )
        grace = timedelta(seconds=self.stopping_grace)
        for snapshot in stopping:
            if snapshot.task_id not in found and now - snapshot.updated_at > grace:
                seconds = (now - snapshot.updated_at).total_seconds()
                found[snapshot.task_id] = StuckTask(
                    snapshot,
                    f"stopping for {seconds:.0f}s, past the {self.stopping_grace:g}s grace window",
                )
        idle = timedelta(seconds=self.idle_after)
        # Only a running task is expected to beat: a paused one (an operator's choice)
        # or a pausing one never looks stuck for its silence.
        silent = self.store.query(
            TaskQuery(statuses=frozenset({TaskStatus.RUNNING}), order="updated", limit=_STUCK_LIMIT)
        )
        for snapshot in silent:
            beat = snapshot.last_heartbeat_at or snapshot.started_at
            if snapshot.task_id in found or beat is None or now - beat <= idle:
                continue
            seconds = (now - beat).total_seconds()
            found[snapshot.task_id] = StuckTask(
                snapshot, f"no heartbeat for {seconds:.0f}s (idle after {self.idle_after:g}s)"
            )
        return list(found.values())

    def running(self, limit: int = _STUCK_LIMIT) -> list[TaskSnapshot]:
        return self.store.query(
            TaskQuery(
                statuses=frozenset({TaskStatus.RUNNING, TaskStatus.PAUSING, TaskStatus.PAUSED}),
                order="-updated",
                limit=limit,
            )
        )

    def overview(self) -> Overview:
        now = self.clock.now()
        counts = self.store.count_by_status()
        full = {status: int(counts.get(status, 0)) for status in TaskStatus}
        queued = full[TaskStatus.QUEUED]
        oldest_task = self.oldest_due(now) if queued else None
        age = None
        if oldest_task is not None:
            since = oldest_task.queued_at or oldest_task.created_at
            age = max(0.0, (now - since).total_seconds())
        failures = (
            # Newest created first: "-created" is an indexed walk in every store, while
            # "-updated" over 50,000 failed tasks of a million sorts them all.
            self.store.query(TaskQuery(statuses=_FAILED, order="-created", limit=10))
            if full[TaskStatus.FAILED] or full[TaskStatus.LOST]
            else []
        )
        health = self.verdict()
        return Overview(
            health=health,
            counts=full,
            total=sum(full.values()),
            unfinished=sum(n for s, n in full.items() if s not in TERMINAL),
            queue_depth=queued,
            oldest_queued=oldest_task,
            oldest_queued_age=age,
            running=self.running(limit=20),
            stuck=self.stuck(now),
            recent_failures=failures,
            schedules=self.schedule_health(),
            workers=self.workers(health.queue),
            checked_at=now,
        )

    def oldest_due(self, now: datetime) -> TaskSnapshot | None:
        """The oldest queued task that may start now (a delayed one is not waiting yet).

        Reads the oldest queued task, and only when it is not due yet more of them
        (64, then 512, then ``_DUE_SCAN``); ``None`` if none of those is due."""
        for limit in (1, 64, 512, _DUE_SCAN):
            page = self.store.query(
                TaskQuery(statuses=frozenset({TaskStatus.QUEUED}), order="created", limit=limit)
            )
            found = next((s for s in page if is_due(s, now)), None)
            if found is not None or len(page) < limit:
                return found
        return None

    def verdict(self) -> FleetHealth:
        """What ``chongming-task health`` says about this store, problems included."""
        admin = self.admin() if self.keeps_schedules else None
        return fleet_health(self.store, admin, now=self.clock.now())

    # -- schedules ------------------------------------------------------------------

    def admin(self, actor: str | None = None) -> ScheduleAdmin:
        return ScheduleAdmin(self.store, clock=self.clock, actor=actor)

    @property
    def keeps_schedules(self) -> bool:
        """Whether the store has the schedule part (a tasks-only backend has none)."""
        given: object = self.store  # typed TaskStore; may hold the task part only
        return isinstance(given, ScheduleStore)

    def schedule_health(self) -> Any:
        """The schedules' health; ``None`` without schedules or without the schedule part."""
        if not self.keeps_schedules or not self.store.list_schedules():
            return None
        return self.admin().health()

    # -- workers and buckets --------------------------------------------------------

    def workers(self, queue: QueueHealth | None = None) -> list[WorkerInfo]:
        """The registry's workers (live, dead, stopped: as ``chongming-task workers``
        lists them), then the lease holders it does not list.

        ``queue``: a :func:`queue_health` read already made (the overview's verdict)."""
        if self.worker_source is not None:
            return self.worker_source.workers()
        holders = {w.name: w for w in self.workers_from_leases()}
        if queue is None and isinstance(self.store, QueueStore):
            queue = queue_health(self.store, self.clock.now())
        out = []
        if queue is not None:
            for record in queue.workers:
                held = holders.pop(record.worker_id, None)
                out.append(self._registered(record, queue, held))
        return out + list(holders.values())

    @staticmethod
    def _registered(
        record: WorkerRecord, queue: QueueHealth, held: WorkerInfo | None
    ) -> WorkerInfo:
        state = queue.state_of(record)
        return WorkerInfo(
            name=record.worker_id,
            tasks=held.tasks if held else 0,
            live_leases=held.live_leases if held else 0,
            latest_lease=held.latest_lease if held else None,
            buckets=None if record.buckets is None else list(record.buckets),
            up=state == "live",
            source="registry",
            state=state,
            kind=record.kind,
            host=record.host,
            pid=record.pid,
            version=record.version,
            slots=record.slots,
            started_at=record.started_at,
            heartbeat_at=record.heartbeat_at,
            heartbeat_age=max(0.0, (queue.checked_at - record.heartbeat_at).total_seconds()),
        )

    def worker(self, worker_id: str) -> tuple[WorkerInfo, list[TaskSnapshot]] | None:
        """One worker and the unfinished tasks it owns (newest first); ``None``: unknown."""
        found = next((w for w in self.workers() if w.name == worker_id), None)
        if found is None:
            return None
        unfinished = frozenset(TaskStatus) - frozenset(TERMINAL)
        owned = self.store.query(
            TaskQuery(statuses=unfinished, owner=worker_id, order="-updated", limit=_WORKER_TASKS)
        )
        held = [s for s in self._held_tasks() if s.lease_owner == worker_id]
        tasks = {s.task_id: s for s in [*owned, *held]}
        return found, sorted(tasks.values(), key=lambda s: s.updated_at, reverse=True)

    def _held_tasks(self) -> list[TaskSnapshot]:
        """Tasks a process holds: the occupying statuses and ``paused`` (bounded read).

        Queued tasks are left out on purpose: a worker's queue can hold a million of
        them, and none of them says anything about who is alive.
        """
        held = frozenset(OCCUPYING | {TaskStatus.PAUSED})
        return self.store.query(TaskQuery(statuses=held, order="-updated", limit=_HELD_LIMIT))

    def workers_from_leases(self, tasks: Iterable[TaskSnapshot] | None = None) -> list[WorkerInfo]:
        """Owners of unfinished tasks, as the leases in the store show them."""
        now = self.clock.now()
        seen: dict[str, list[TaskSnapshot]] = defaultdict(list)
        for snapshot in self._held_tasks() if tasks is None else tasks:
            holder = snapshot.lease_owner or snapshot.owner
            if holder:
                seen[holder].append(snapshot)
        out = []
        for name, held in sorted(seen.items()):
            leases = [s.lease_until for s in held if s.lease_until is not None]
            live = sum(1 for until in leases if until > now)
            out.append(
                WorkerInfo(
                    name=name,
                    tasks=len(held),
                    live_leases=live,
                    latest_lease=max(leases, default=None),
                    buckets=sorted({s.bucket for s in held if s.bucket is not None}),
                    up=(live > 0) if leases else None,
                )
            )
        return out

    def buckets(self) -> list[dict[str, Any]]:
        """Per bucket: its tasks, queued work, declared owners and live lease holders.

        ``queued``: queued tasks nobody holds yet (``health``/``workers`` count the
        same); ``owners``: live nodes declaring the bucket (``buckets --owners``);
        ``holders``: owners of live leases on its active tasks (occupying statuses and
        ``paused``). ``state`` is ``duplicate`` (two live nodes declare it, or two
        processes hold its tasks), ``orphaned`` (queued or unfinished work and no live
        worker owning it: nothing will run it), ``owned``, ``unowned`` (active tasks
        nobody holds a live lease on) or ``idle`` (nothing queued, nothing active).
        """
        now = self.clock.now()
        counts = self.store.count_by_bucket()
        queue = queue_health(self.store, now)
        report = ownership_report(self.store, now=now)
        orphaned = set(queue.orphaned) | {o.bucket for o in report.orphans}
        holders: dict[int, set[str]] = defaultdict(set)
        unheld: dict[int, int] = defaultdict(int)
        unfinished: dict[int, int] = defaultdict(int)
        for snapshot in self._held_tasks():
            if snapshot.bucket is None:
                continue
            unfinished[snapshot.bucket] += 1
            if snapshot.lease_owner and snapshot.lease_until and snapshot.lease_until > now:
                holders[snapshot.bucket].add(snapshot.lease_owner)
            else:
                unheld[snapshot.bucket] += 1
        queued = {int(b): n for b, n in queue.depth.items() if b.lstrip("-").isdigit()}
        rows = []
        for bucket in sorted(set(counts) | set(unfinished) | set(queued)):
            held_by = sorted(holders.get(bucket, ()))
            owners = list(report.owners.get(bucket, ())) if report.declared else []
            if len(held_by) > 1 or bucket in report.duplicates:
                state = "duplicate"
            elif str(bucket) in orphaned:
                state = "orphaned"
            elif held_by or owners:
                state = "owned"
            elif unfinished.get(bucket):
                state = "unowned"
            else:
                state = "idle"
            rows.append(
                {
                    "bucket": bucket,
                    "tasks": counts.get(bucket, 0),
                    "queued": queued.get(bucket, 0),
                    "active": unfinished.get(bucket, 0),
                    "unheld": unheld.get(bucket, 0),
                    "owners": owners,
                    "holders": held_by,
                    "state": state,
                }
            )
        return rows

    # -- change detection (live updates) ---------------------------------------------

    def fingerprint(self) -> str:
        """A value that changes whenever a task or schedule changes state.

        Every call reads the newest-written and the newest-created task heads and the
        schedule revisions: three indexed reads of a row or two, whatever the store's
        size. Every ``FULL_EVERY``-th call also counts tasks per status, a safety net
        for a change the heads cannot show (a writer whose clock lags behind, a prune):
        that is the one read whose cost grows with the store.
        """
        self._fingerprints += 1
        if self._counts is None or self._fingerprints % FULL_EVERY == 0:
            self._counts = sorted((s.value, n) for s, n in self.store.count_by_status().items())
        written = self.store.query_heads(TaskQuery(order="-updated", limit=1))
        created = self.store.query_heads(TaskQuery(order="-created", limit=1))
        kept = self.store.list_schedules() if self.keeps_schedules else []
        schedules = [(r.name, r.revision) for r in kept]
        return json.dumps(
            [self._counts, [list(h) for h in written + created], schedules], default=str
        )
