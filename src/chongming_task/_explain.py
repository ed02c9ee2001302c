"""Why is this task not running? The reasons, in order, as data.

``status`` says *what* a task is; operators next ask *why*: why is it still
``queued``, why did ``stop`` not land, is anyone going to run it. :func:`explain`
answers from :class:`Facts` -- the snapshot, its history, who holds which slots, the
queue ahead of it, the worker registry, the task's policies -- and returns
:class:`Reason` records, most decisive first. It is a pure function: no I/O, no
clock reads, so the CLI, ``Controller.explain`` and a dashboard share it, and tests
build the facts by hand.

Facts come from one of two places, and every explanation says which
(:attr:`Explanation.source`):

- ``"controller"``: the process holding the task knows its admission state (the
  limits, who holds each slot, the exact queue order, deadlines on its clock);
- ``"store"``: any other process (the CLI) knows what the store knows (holder,
  lease, history, the tasks each holder runs, the worker registry). It cannot see a
  controller's named limits, so it names the holder's running tasks instead of
  claiming which limit is full.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, TypeVar, dataclass_transform

from chongming_task._checkpoint_gaps import CheckpointGaps, GapForecast, forecast, format_seconds
from chongming_task._model import JSONValue, TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task._redact import redact
from chongming_task.policies import Timeout
from chongming_task.states import OCCUPYING, TaskStatus
from chongming_task.stores._limits import LimitUse
from chongming_task.stores._pauses import QueuePause
from chongming_task.stores._queue_records import WorkerRecord

__all__ = [
    "AdmissionFacts",
    "BlockedUpstream",
    "CheckpointRisk",
    "Ended",
    "Explanation",
    "Facts",
    "HeldBy",
    "HolderGone",
    "LimitFull",
    "NoBucketOwner",
    "NotBefore",
    "Paused",
    "Pausing",
    "QueuePaused",
    "QueuePosition",
    "Reason",
    "RetryWait",
    "Running",
    "SlotHolder",
    "StartTimeout",
    "Stopping",
    "explain",
]

S = TaskStatus
Source = Literal["controller", "store"]
#: Task ids a reason names at most (the count is always exact).
NAMED = 10


def _ago(now: datetime, then: datetime | None) -> str:
    if then is None:
        return "never"
    seconds = (now - then).total_seconds()
    return f"{seconds:.1f}s ago" if seconds >= 0 else f"in {-seconds:.1f}s"


def _at(moment: datetime | None, text: str, unknown: str = "") -> str:
    """``text`` with the instant (ISO 8601) in its ``{}``; ``unknown`` without one."""
    return unknown if moment is None else text.format(moment.isoformat())


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:NAMED])
    return f"{shown} and {len(ids) - NAMED} more" if len(ids) > NAMED else shown


def _json(value: Any) -> JSONValue:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, tuple | list | frozenset | set):
        items = sorted(value) if isinstance(value, frozenset | set) else value
        return [_json(item) for item in items]
    if isinstance(value, Mapping):
        return {str(key): _json(item) for key, item in value.items()}
    if isinstance(value, GapForecast):
        return value.to_dict()
    if isinstance(value, TaskStatus):
        return value.value
    return value


# ---------------------------------------------------------------- reasons


@dataclass(frozen=True, slots=True, kw_only=True)
class Reason:
    """One reason; subclasses add typed fields and build :attr:`message` from them."""

    kind: ClassVar[str] = "reason"
    """Its name in :meth:`to_dict` and the CLI's JSON (``limit_full``, ``paused``, ...)."""

    @property
    def message(self) -> str:
        raise NotImplementedError

    def to_dict(self) -> dict[str, JSONValue]:
        """``{"kind", "message", <fields>}``, JSON-ready, its text redacted."""
        data: dict[str, JSONValue] = {"kind": self.kind, "message": redact(self.message)}
        for item in fields(self):
            value = _json(getattr(self, item.name))
            data[item.name] = redact(value) if isinstance(value, str) else value
        return data


_R = TypeVar("_R", bound=Reason)


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def _reason(kind: str) -> Callable[[type[_R]], type[_R]]:
    """Declares a reason: a frozen, keyword-only, slotted dataclass named ``kind``.

    Every reason is declared alike; this says it once (and mypy reads the classes as
    the dataclasses they are).
    """

    def declare(cls: type[_R]) -> type[_R]:
        cls.kind = kind
        return dataclass(frozen=True, slots=True, kw_only=True)(cls)

    return declare


@public
@_reason("limit_full")
class LimitFull(Reason):
    """A limit the task needs room in is full: ``max_parallel``, a named limit, a bucket."""

    limit: Literal["max_parallel", "named", "bucket"]
    name: str | None = None
    """The tag of a named limit; the worker id for a worker's slots."""
    bucket: int | None = None
    capacity: int
    holders: tuple[str, ...]
    """The tasks holding the limit's slots."""

    @property
    def message(self) -> str:
        held = f"held by {_ids(self.holders)}" if self.holders else "held"
        used = f"{len(self.holders)} of {self.capacity}"
        if self.limit == "named":
            return f"named limit {self.name!r} is full ({used} slots {held})"
        if self.limit == "bucket":
            return f"bucket {self.bucket}'s limit is full ({used} slots {held})"
        where = f" of worker {self.name}" if self.name else ""
        return f"max_parallel{where} is full ({used} slots {held})"


@_reason("fleet_limit_full")
class FleetLimitFull(Reason):
    """A fleet limit (declared in the store) on one of the task's keys has no room."""

    key: str
    """The task's key (a tag or its concurrency key)."""
    rule: str
    """The declared limit bounding it (the key itself or a pattern)."""
    concurrency: int | None = None
    holders: tuple[str, ...] = ()
    """``task_id@worker`` of each holder, when the concurrency is reached."""
    rate: str | None = None
    started: int = 0
    """Starts counted in the current window, when the rate is reached."""
    opens_at: datetime | None = None
    """When the rate window next has room."""

    @property
    def message(self) -> str:
        name = repr(self.key) if self.rule == self.key else f"{self.key!r} (limit {self.rule!r})"
        parts = []
        if self.holders:
            parts.append(
                f"{len(self.holders)} of {self.concurrency} slots held by {_ids(self.holders)}"
            )
        if self.opens_at is not None:
            parts.append(
                f"{self.started} starts of {self.rate} in the window; "
                f"the next start is allowed at {self.opens_at.isoformat()}"
            )
        return f"fleet limit {name} is full ({'; '.join(parts)})"


@_reason("held_by")
class HeldBy(Reason):
    """Store view of a held queued task: its holder decides; what the holder runs now."""

    owner: str
    lease_until: datetime | None
    running: tuple[str, ...]
    """The occupying tasks the holder runs."""
    sharing_tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Of those, the ones carrying each of this task's tags (a named limit's suspects)."""

    @property
    def message(self) -> str:
        text = f"held by {self.owner}, which runs {len(self.running)} task(s)"
        if self.running:
            text += f": {_ids(self.running)}"
        for tag, ids in sorted(self.sharing_tags.items()):
            text += f"; with tag {tag!r}: {_ids(ids)}"
        return (
            text + "; its limits are not in the store: Controller.explain() in that process "
            "says which one is full"
        )


@_reason("holder_gone")
class HolderGone(Reason):
    """The holder's lease ran out: nobody supervises the task any more."""

    owner: str
    lease_until: datetime
    occupying: bool
    """True: reconcile will mark it ``lost``; False: another node may adopt it."""

    @property
    def message(self) -> str:
        then = "reconcile marks it lost" if self.occupying else "another node may adopt it"
        return f"its holder {self.owner}'s lease expired at {self.lease_until.isoformat()}: {then}"


@public
@_reason("queue_position")
class QueuePosition(Reason):
    """Where the task stands among the tasks queued with the same holder."""

    priority: int
    position: int | None
    """1-based, among queued tasks of its priority; ``None`` if beyond what was read."""
    ahead: tuple[str, ...]
    """Queued tasks of its priority before it."""
    higher: int
    """Queued tasks of a higher priority (they go first)."""

    @property
    def message(self) -> str:
        if self.position is None:
            return f"priority {self.priority}: beyond the first queued tasks read"
        text = f"position {self.position} in priority {self.priority}"
        if self.ahead:
            text += f" (behind {_ids(self.ahead)})"
        if self.higher:
            text += f"; {self.higher} queued task(s) of higher priority go first"
        return text


@_reason("blocked")
class BlockedUpstream(Reason):
    """A pipeline node waiting for its upstream nodes to settle."""

    pipeline: str | None
    run: str | None
    unsettled: Mapping[str, str]
    """Node id -> status of the run's nodes that have not settled (its upstream are
    among them)."""

    @property
    def message(self) -> str:
        if self.pipeline is None:
            return "blocked: it waits for whoever created it blocked to release it"
        nodes = ", ".join(f"{node} ({status})" for node, status in sorted(self.unsettled.items()))
        return (
            f"blocked on upstream nodes of pipeline {self.pipeline!r} (run {self.run}); "
            f"not settled yet: {nodes or 'none (it is about to be released)'}"
        )


@_reason("no_bucket_owner")
class NoBucketOwner(Reason):
    """Queued for any worker, but no live worker owns its bucket."""

    bucket: int | None
    live_workers: tuple[str, ...]

    @property
    def message(self) -> str:
        which = "its bucket" if self.bucket is None else f"bucket {self.bucket}"
        if not self.live_workers:
            return f"no live worker is registered, so nothing claims it ({which})"
        return (
            f"no live worker owns {which} (live: {_ids(self.live_workers)}); start one with "
            "--owned-buckets including it"
        )


@_reason("not_before")
class NotBefore(Reason):
    """Enqueued with a delay: not claimable before then."""

    at: datetime

    @property
    def message(self) -> str:
        return f"not due before {self.at.isoformat()}"


@_reason("queue_paused")
class QueuePaused(Reason):
    """Queued and unheld in a paused queue (its task name or its bucket): no worker
    claims it until the queue is resumed (docs/queue.md, "Pause intake")."""

    name: str | None = None
    """The paused task name (``None``: the bucket is paused)."""
    bucket: int | None = None
    actor: str
    """Who paused the queue."""
    paused_at: datetime
    reason: str

    @property
    def message(self) -> str:
        pause = QueuePause(
            name=self.name,
            bucket=self.bucket,
            actor=self.actor,
            reason=self.reason,
            paused_at=self.paused_at,
        )
        return f"waiting: {pause.describe()}"


@_reason("start_timeout")
class StartTimeout(Reason):
    """The ``start`` timeout ends the task if it has not started by then."""

    at: datetime
    seconds: float

    @property
    def message(self) -> str:
        return (
            f"its start timeout ({self.seconds:g}s) fires at {self.at.isoformat()} "
            "unless it starts first (it then ends cancelled, timeout_start)"
        )


@_reason("paused")
class Paused(Reason):
    """Paused, by whom and since when; nothing runs it until ``resume``."""

    by: str | None
    at: datetime | None
    reason: str | None
    in_place: bool
    """Paused inside its body (it keeps its slot) rather than before it started."""

    @property
    def message(self) -> str:
        who = self.by or "an unknown actor"
        where = "in place, keeping its slot" if self.in_place else "before it ran"
        when = _at(self.at, " at {}")
        why = f" ({self.reason})" if self.reason else ""
        return f"paused {where} by {who}{when}{why}; `resume` continues it"


@_reason("pausing")
class Pausing(Reason):
    """A pause was asked; the body confirms it at its next checkpoint."""

    by: str | None
    at: datetime | None
    last_checkpoint_at: datetime | None

    @property
    def message(self) -> str:
        last = _at(self.last_checkpoint_at, "{}", "none seen")
        return (
            f"pause requested by {self.by or 'an unknown actor'}; it pauses at its next "
            f"checkpoint (last one: {last})"
        )


@_reason("retry_wait")
class RetryWait(Reason):
    """Between attempts: the next one starts when the backoff ends."""

    until: datetime | None
    attempt: int
    """The attempt that failed."""
    failure: str | None
    exact: bool
    """False when ``until`` was read back from the transition's reason (rounded)."""

    @property
    def message(self) -> str:
        when = _at(self.until, "{}", "unknown")
        approx = "" if self.exact else "about "
        failed = f": {self.failure}" if self.failure else ""
        return f"in retry_wait until {approx}{when} after attempt {self.attempt} failed{failed}"


@_reason("stopping")
class Stopping(Reason):
    """A stop was asked: the body must reach a checkpoint within the graceful window."""

    by: str | None
    requested_at: datetime | None
    window: float | None
    window_ends_at: datetime | None
    remaining: float | None
    """Seconds of the graceful window left (``None`` when not known here)."""
    last_checkpoint_at: datetime | None

    @property
    def message(self) -> str:
        who = self.by or "the runtime"
        if self.remaining is not None and self.window is not None:
            left = f"{max(0.0, self.remaining):.1f}s of its {self.window:g}s graceful window left"
        else:
            left = "its graceful window is the holder's setting (not in the store)"
        seen = _at(
            self.last_checkpoint_at, "last reached a checkpoint at {}", "never reached a checkpoint"
        )
        return f"stop requested by {who}; {left}; the body {seen}"


@_reason("running")
class Running(Reason):
    """Not waiting: the attempt runs."""

    attempt: int
    since: datetime | None
    last_checkpoint_at: datetime | None
    owner: str | None

    @property
    def message(self) -> str:
        since = _at(self.since, " since {}")
        seen = _at(self.last_checkpoint_at, "last checkpoint {}", "no checkpoint seen yet")
        return f"not waiting: attempt {self.attempt} runs{since} on {self.owner or '?'} ({seen})"


@_reason("ended")
class Ended(Reason):
    """Terminal: how it ended."""

    status: TaskStatus
    at: datetime | None
    failure_kind: str | None
    detail: str | None

    @property
    def message(self) -> str:
        when = _at(self.at, " at {}")
        kind = f" ({self.failure_kind})" if self.failure_kind else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"it ended: {self.status.value}{when}{kind}{detail}"


@public
@_reason("checkpoint_gaps")
class CheckpointRisk(Reason):
    """The measured checkpoint gaps of this task's name against its windows."""

    task_name: str
    forecast: GapForecast

    @property
    def message(self) -> str:
        f = self.forecast
        head = (
            f"checkpoint gaps of {self.task_name!r} over {f.gaps} gap(s): p50 "
            f"{format_seconds(f.p50)}, p99 {format_seconds(f.p99)}, max {format_seconds(f.max)}"
        )
        warnings = f.warnings
        if warnings:
            return head + "; warning: " + "; warning: ".join(warnings)
        verdicts = []
        if f.graceful_stop is not None:
            verdicts.append(f"a stop lands within the {f.graceful_stop:g}s graceful window")
        if f.idle is not None:
            verdicts.append(f"idle ({f.idle:g}s) is above the gaps seen")
        return head + "; " + ("; ".join(verdicts) or "no graceful window or idle known here")


# ---------------------------------------------------------------- facts


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotHolder:
    """A task holding a slot of the controller that holds the explained task."""

    task_id: str
    tags: frozenset[str] = frozenset()
    bucket: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionFacts:
    """What a controller's admission knows (only in the process holding the task)."""

    max_parallel: int
    limits: Mapping[str, int]
    max_parallel_per_bucket: int | None
    active: tuple[SlotHolder, ...]
    queued: bool
    """The task waits in this controller's ready queue."""
    ahead: tuple[str, ...] = ()
    higher: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """Everything :func:`explain` reads. Fields a source cannot know stay ``None``/empty."""

    snapshot: TaskSnapshot
    history: Sequence[Transition]
    now: datetime
    source: Source
    admission: AdmissionFacts | None = None
    holder_running: tuple[TaskSnapshot, ...] = ()
    """Store view: the occupying tasks of the explained task's holder."""
    queue_ahead: tuple[str, ...] | None = None
    """Store view: queued tasks of its holder and priority before it (``None``: not read
    or not among the tasks read)."""
    queue_higher: int = 0
    workers: tuple[WorkerRecord, ...] | None = None
    """The store's worker registry (``None``: not read or the store has none)."""
    worker_running: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Occupying tasks per live worker id (for a worker's slots)."""
    siblings: tuple[TaskSnapshot, ...] = ()
    """The other nodes of its pipeline run."""
    timeout: Timeout | None = None
    graceful_stop: float | None = None
    stop_deadline: datetime | None = None
    retry_at: datetime | None = None
    last_checkpoint_at: datetime | None = None
    gaps: CheckpointGaps | None = None
    """Measured gaps of this task's name (merged over its runs)."""
    limit_uses: tuple[LimitUse, ...] = ()
    """Store view: the fleet limits on the task's keys and their use now."""
    queue_pause: QueuePause | None = None
    """Store view: the pause of the unheld queued task's queue (its name or bucket)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    """The answer: the reasons, most decisive first, and where the facts came from."""

    task_id: str
    status: TaskStatus
    source: Source
    reasons: tuple[Reason, ...]

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "task_id": self.task_id,
            "status": self.status.value,
            "source": self.source,
            "reasons": [reason.to_dict() for reason in self.reasons],
        }

    def render(self) -> str:
        """Text for a terminal: one line per reason, redacted."""
        head = f"{self.task_id}: {self.status.value} (explained from the {self.source})"
        return "\n".join([head, *(f"  - {redact(reason.message)}" for reason in self.reasons)])


# ---------------------------------------------------------------- explaining


def explain(facts: Facts) -> Explanation:
    """The reasons ``facts.snapshot`` is where it is, most decisive first (pure)."""
    snap = facts.snapshot
    status = snap.status
    reasons: list[Reason]
    if status.is_terminal:
        reasons = [_ended(facts)]
    elif status is S.QUEUED or status is S.PENDING:
        reasons = _queued(facts)
    elif status is S.BLOCKED:
        reasons = [_blocked(facts)]
    elif status is S.PAUSED:
        reasons = [_paused(facts)]
    elif status is S.PAUSING:
        by, at = _requested(facts.history, S.PAUSING)
        reasons = [Pausing(by=by, at=at, last_checkpoint_at=_checkpoint(facts))]
    elif status is S.RETRY_WAIT:
        reasons = [_retry_wait(facts)]
    elif status is S.STOPPING:
        reasons = [_stopping(facts)]
    else:
        reasons = [
            Running(
                attempt=snap.attempt,
                since=snap.started_at,
                last_checkpoint_at=_checkpoint(facts),
                owner=snap.lease_owner or snap.owner,
            )
        ]
    if not status.is_terminal:
        reasons.extend(_holder_gone(facts))
    risk = _risk(facts)
    if risk is not None:
        reasons.append(risk)
    return Explanation(
        task_id=snap.task_id, status=status, source=facts.source, reasons=tuple(reasons)
    )


def _checkpoint(facts: Facts) -> datetime | None:
    return facts.last_checkpoint_at or facts.snapshot.last_heartbeat_at


def _requested(
    history: Sequence[Transition], status: TaskStatus
) -> tuple[str | None, datetime | None]:
    """Who asked for the latest move to ``status``, and when."""
    for record in reversed(history):
        if record.to_status is status:
            return record.actor, record.at
    return None, None


def _ended(facts: Facts) -> Ended:
    snap = facts.snapshot
    failure = snap.failure
    detail = None if failure is None else failure.message
    last = facts.history[-1] if facts.history else None
    if detail is None and last is not None and last.reason:
        detail = last.reason
    return Ended(
        status=snap.status,
        at=snap.finished_at or (last.at if last else None),
        failure_kind=None if failure is None else failure.kind.value,
        detail=detail,
    )


def _queued(facts: Facts) -> list[Reason]:
    snap = facts.snapshot
    reasons: list[Reason] = []
    admission = facts.admission
    if admission is not None:
        reasons.extend(_limits(snap, admission))
        if admission.queued:
            reasons.append(
                QueuePosition(
                    priority=snap.priority,
                    position=len(admission.ahead) + 1,
                    ahead=admission.ahead,
                    higher=admission.higher,
                )
            )
    else:
        reasons.extend(_store_queue(facts))
    timeout = facts.timeout
    if timeout is not None and timeout.start is not None and snap.first_started_at is None:
        # ``start`` counts from submission: the task's creation.
        at = snap.created_at + timedelta(seconds=timeout.start)
        reasons.append(StartTimeout(at=at, seconds=timeout.start))
    return reasons


def _limits(snap: TaskSnapshot, admission: AdmissionFacts) -> list[Reason]:
    found: list[Reason] = []
    active = admission.active
    if len(active) >= admission.max_parallel:
        found.append(
            LimitFull(
                limit="max_parallel",
                capacity=admission.max_parallel,
                holders=tuple(h.task_id for h in active),
            )
        )
    for tag in sorted(snap.tags):
        cap = admission.limits.get(tag)
        if cap is None:
            continue
        holders = tuple(h.task_id for h in active if tag in h.tags)
        if len(holders) >= cap:
            found.append(LimitFull(limit="named", name=tag, capacity=cap, holders=holders))
    per_bucket = admission.max_parallel_per_bucket
    if per_bucket is not None and snap.bucket is not None:
        holders = tuple(h.task_id for h in active if h.bucket == snap.bucket)
        if len(holders) >= per_bucket:
            found.append(
                LimitFull(limit="bucket", bucket=snap.bucket, capacity=per_bucket, holders=holders)
            )
    return found


def _store_queue(facts: Facts) -> list[Reason]:
    snap = facts.snapshot
    reasons: list[Reason] = []
    owner = snap.owner
    if owner is None:
        reasons.extend(_unheld(facts))
    else:
        worker = _worker(facts, owner)
        running = tuple(s.task_id for s in facts.holder_running)
        if worker is not None and len(running) >= worker.slots:
            reasons.append(
                LimitFull(limit="max_parallel", name=owner, capacity=worker.slots, holders=running)
            )
        else:
            sharing = {
                tag: ids
                for tag in sorted(snap.tags)
                if (ids := tuple(s.task_id for s in facts.holder_running if tag in s.tags))
            }
            reasons.append(
                HeldBy(
                    owner=owner,
                    lease_until=snap.lease_until,
                    running=running,
                    sharing_tags=sharing,
                )
            )
    if facts.queue_ahead is not None:
        reasons.append(
            QueuePosition(
                priority=snap.priority,
                position=len(facts.queue_ahead) + 1,
                ahead=facts.queue_ahead,
                higher=facts.queue_higher,
            )
        )
    return reasons


def _worker(facts: Facts, worker_id: str) -> WorkerRecord | None:
    for record in facts.workers or ():
        if record.worker_id == worker_id and record.alive(facts.now):
            return record
    return None


def _unheld(facts: Facts) -> list[Reason]:
    from chongming_task.stores._queue_records import recipe_of

    snap = facts.snapshot
    reasons: list[Reason] = []
    pause = facts.queue_pause
    if pause is not None:
        reasons.append(
            QueuePaused(
                name=pause.name,
                bucket=pause.bucket,
                actor=pause.actor,
                paused_at=pause.paused_at,
                reason=pause.reason,
            )
        )
    recipe = recipe_of(snap)
    if recipe is not None and recipe.not_before is not None and recipe.not_before > facts.now:
        reasons.append(NotBefore(at=recipe.not_before))
    reasons.extend(_fleet_limits(facts.limit_uses))
    if facts.workers is None:
        return reasons
    live = [w for w in facts.workers if w.alive(facts.now)]
    owners = [w for w in live if w.owns(snap.bucket)]
    if not owners:
        reasons.append(
            NoBucketOwner(bucket=snap.bucket, live_workers=tuple(w.worker_id for w in live))
        )
        return reasons
    for worker in owners:
        running = facts.worker_running.get(worker.worker_id, ())
        if len(running) < worker.slots:
            return reasons  # a worker with room owns it: it is claimed on its next poll
    for worker in owners:
        running = facts.worker_running.get(worker.worker_id, ())
        reasons.append(
            LimitFull(
                limit="max_parallel", name=worker.worker_id, capacity=worker.slots, holders=running
            )
        )
    return reasons


def _fleet_limits(uses: Sequence[LimitUse]) -> list[Reason]:
    found: list[Reason] = []
    for use in uses:
        if not (use.concurrency_full or use.rate_full):
            continue
        found.append(
            FleetLimitFull(
                key=use.key,
                rule=use.rule,
                concurrency=use.concurrency,
                holders=tuple(f"{h.task_id}@{h.owner}" for h in use.holders)
                if use.concurrency_full
                else (),
                rate=None if use.rate is None else str(use.rate),
                started=len(use.starts) if use.rate_full else 0,
                opens_at=use.opens_at,
            )
        )
    return found


def _blocked(facts: Facts) -> BlockedUpstream:
    meta = facts.snapshot.metadata
    pipeline = meta.get("pipeline")
    run = meta.get("pipeline_run")
    if not isinstance(pipeline, str):
        return BlockedUpstream(pipeline=None, run=None, unsettled={})
    unsettled = {
        str(s.metadata.get("node", s.task_id)): s.status.value
        for s in facts.siblings
        if not s.status.is_terminal
        and s.task_id != facts.snapshot.task_id
        and s.status is not S.BLOCKED
    }
    return BlockedUpstream(
        pipeline=pipeline, run=run if isinstance(run, str) else None, unsettled=unsettled
    )


def _paused(facts: Facts) -> Paused:
    history = facts.history
    by = at = reason = None
    in_place = False
    for index in range(len(history) - 1, -1, -1):
        record = history[index]
        if record.to_status is S.PAUSED:
            at = record.at
            in_place = record.from_status is S.PAUSING
            source = history[index - 1] if in_place and index > 0 else record
            by, reason = source.actor or record.actor, source.reason or record.reason
            break
    return Paused(by=by, at=at, reason=reason, in_place=in_place)


def _retry_wait(facts: Facts) -> RetryWait:
    snap = facts.snapshot
    failure = snap.failure
    if facts.retry_at is not None:
        return RetryWait(
            until=facts.retry_at,
            attempt=snap.attempt,
            failure=None if failure is None else failure.message,
            exact=True,
        )
    until = None
    for record in reversed(facts.history):
        if record.to_status is S.RETRY_WAIT:
            delay = _delay(record.reason)
            until = None if delay is None else record.at + timedelta(seconds=delay)
            break
    return RetryWait(
        until=until,
        attempt=snap.attempt,
        failure=None if failure is None else failure.message,
        exact=False,
    )


def _delay(reason: str | None) -> float | None:
    """The backoff the state machine wrote into a ``retry_wait`` reason (``retry in 5s: ...``)."""
    prefix = "retry in "
    if reason is None or not reason.startswith(prefix):
        return None
    number = reason[len(prefix) :].split("s:", 1)[0]
    try:
        return float(number)
    except ValueError:
        return None


def _stopping(facts: Facts) -> Stopping:
    by, at = _requested(facts.history, S.STOPPING)
    window = facts.graceful_stop
    ends = facts.stop_deadline
    if ends is None and window is not None and at is not None:
        ends = at + timedelta(seconds=window)
    remaining = None if ends is None else (ends - facts.now).total_seconds()
    return Stopping(
        by=by,
        requested_at=at,
        window=window,
        window_ends_at=ends,
        remaining=remaining,
        last_checkpoint_at=_checkpoint(facts),
    )


def _holder_gone(facts: Facts) -> list[Reason]:
    snap = facts.snapshot
    until = snap.lease_until
    owner = snap.lease_owner or snap.owner
    if facts.source != "store" or until is None or owner is None or until > facts.now:
        return []
    return [HolderGone(owner=owner, lease_until=until, occupying=snap.status in OCCUPYING)]


def _risk(facts: Facts) -> CheckpointRisk | None:
    if facts.gaps is None or not facts.gaps.count:
        return None
    idle = None if facts.timeout is None else facts.timeout.idle
    verdict = forecast(facts.gaps, graceful_stop=facts.graceful_stop, idle=idle)
    return CheckpointRisk(task_name=facts.snapshot.name, forecast=verdict)
