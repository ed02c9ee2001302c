"""Retention: delete finished tasks older than an age, and compact old histories.

A store that runs for a year keeps every task and every transition unless told
otherwise. Two policies, both on finished (terminal) tasks only -- a task that is
still pending, running or paused is never touched, however old:

* :func:`prune_older_than` deletes finished tasks whose last change (``updated_at``,
  when they finished) is older than an age, with their whole history. ``prune
  --older-than 7d`` and ``worker --keep-finished-for 7d`` (which runs it on a
  schedule, :class:`RetentionLoop`) use it.
* :func:`compact_history` keeps old finished tasks but thins their audit trail to
  what an investigation needs: the first transition (creation), the last one (how it
  ended) and every transition into ``failed``, ``retry_wait`` or ``lost`` (each
  failure). The middle -- ``queued -> starting -> running``, pause and resume
  round-trips -- goes.

Trade-offs: pruning is the only way to keep a store's size bounded, but a pruned task
is gone (``status`` says "unknown task id"). Compaction keeps every task answerable
(``status`` and ``history`` still work, ``ps`` still counts it) and why it failed, at
the cost of the exact trajectory: version numbers in ``history`` have gaps afterwards,
which is how a compacted history is recognised. An archive table (moving rows instead
of deleting them) was considered and not built: it keeps everything, so it only moves
the growth, and each store would need a second schema to migrate; export with
``history --json`` first when the full trail must be kept elsewhere.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from chongming_task._service import BackgroundService
from chongming_task._validation import check_duration_text
from chongming_task.errors import ConfigurationError
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores._records import TaskQuery

if TYPE_CHECKING:
    from chongming_task.core import Clock
    from chongming_task.stores._base import TaskStore

__all__ = [
    "KEPT_IN_HISTORY",
    "PruneReport",
    "RetentionLoop",
    "compact_history",
    "parse_age",
    "prune_older_than",
]

log = logging.getLogger("chongming_task.retention")

#: Tasks read per page while looking for old ones.
PAGE: Final = 500

#: Transitions into these statuses survive ``compact_history`` (plus first and last).
KEPT_IN_HISTORY: Final = frozenset({TaskStatus.FAILED, TaskStatus.RETRY_WAIT, TaskStatus.LOST})

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)


def parse_age(text: str) -> timedelta:
    """``"7d"`` -> 7 days. Units ``s``, ``m``, ``h``, ``d``, ``w``; a bare number is seconds.

    Raises:
        ConfigurationError: Not a positive age in that form (``nan``, ``-1d``,
            ``7 days``), or longer than 100 years (``MAX_SECONDS``).
    """
    match = _AGE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ConfigurationError(
            f"{text!r} is not an age; write a number and a unit: 90s, 30m, 12h, 7d or 2w"
        )
    seconds = float(match.group(1)) * _UNITS[(match.group(2) or "s").lower()]
    if not seconds > 0:
        raise ConfigurationError(f"an age must be > 0, got {text!r}")
    check_duration_text(seconds, text, "an age of")
    return timedelta(seconds=seconds)


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneReport:
    """What one retention pass found (and, unless ``dry_run``, did)."""

    cutoff: datetime
    """Finished tasks last changed before this instant matched."""
    matched: int
    removed: int
    """Tasks deleted (0 on a dry run)."""
    dry_run: bool
    sample: tuple[str, ...] = ()
    """The first few matching task ids, oldest first (for a dry run's report)."""


def _finished(statuses: Iterable[TaskStatus | str] | None) -> frozenset[TaskStatus]:
    if statuses is None:
        return frozenset(TERMINAL)
    chosen = frozenset(TaskStatus(status) for status in statuses)
    unfinished = sorted(status.value for status in chosen - TERMINAL)
    if unfinished:
        raise ConfigurationError(
            f"only finished tasks are pruned; {', '.join(unfinished)} is not a final status "
            f"(choose from {', '.join(sorted(status.value for status in TERMINAL))})"
        )
    return chosen


def _old_pages(
    store: TaskStore, statuses: frozenset[TaskStatus], cutoff: datetime, *, skip_seen: bool
) -> Iterable[list[str]]:
    """Pages of ids of finished tasks changed before ``cutoff``, oldest first.

    The store has no offset, so a pass that deletes reads the oldest page again each
    time (what it deleted is gone); a dry run reads ever longer prefixes instead.
    """
    seen = 0
    while True:
        limit = seen + PAGE if skip_seen else PAGE
        found = store.query(TaskQuery(statuses=statuses, order="updated", limit=limit))
        page = found[seen:] if skip_seen else found
        old = [snapshot.task_id for snapshot in page if snapshot.updated_at < cutoff]
        if old:
            yield old
        if len(old) < len(page) or len(page) < (PAGE if skip_seen else limit):
            return
        seen += len(page) if skip_seen else 0


def prune_older_than(
    store: TaskStore,
    older_than: timedelta,
    *,
    clock: Clock,
    statuses: Iterable[TaskStatus | str] | None = None,
    dry_run: bool = False,
) -> PruneReport:
    """Delete finished tasks (with their history) last changed more than ``older_than`` ago.

    Args:
        store: Where the tasks are.
        older_than: Their age at least (by ``updated_at``: when they finished).
        clock: What "now" is (inject a fake one in tests).
        statuses: Only these final statuses (default: every final status).
        dry_run: Count and sample, delete nothing.

    Raises:
        ConfigurationError: ``older_than`` is not positive, or a status is not final.
    """
    if older_than <= timedelta(0):
        raise ConfigurationError(f"older_than must be > 0, got {older_than}")
    chosen = _finished(statuses)
    cutoff = clock.now() - older_than
    matched = removed = 0
    sample: list[str] = []
    for page in _old_pages(store, chosen, cutoff, skip_seen=dry_run):
        matched += len(page)
        sample.extend(page[: max(0, 5 - len(sample))])
        if not dry_run:
            removed += store.delete_tasks(page)
    return PruneReport(
        cutoff=cutoff, matched=matched, removed=removed, dry_run=dry_run, sample=tuple(sample)
    )


def compact_history(
    store: TaskStore,
    older_than: timedelta,
    *,
    clock: Clock,
    task_ids: Collection[str] | None = None,
) -> int:
    """Thin the history of finished tasks older than ``older_than``; returns transitions removed.

    Kept per task: the first transition, the last, and every one into ``failed``,
    ``retry_wait`` or ``lost``. Running it twice removes nothing more.
    """
    cutoff = clock.now() - older_than
    removed = 0
    query = TaskQuery(
        statuses=frozenset(TERMINAL),
        order="updated",
        task_ids=None if task_ids is None else frozenset(task_ids),
    )
    for snapshot in store.query(query):
        if snapshot.updated_at >= cutoff:
            break
        history = store.history(snapshot.task_id)
        if len(history) <= 2:
            continue
        doomed = [
            transition.version
            for transition in history[1:-1]
            if transition.to_status not in KEPT_IN_HISTORY
        ]
        if doomed:
            removed += store.delete_transitions(snapshot.task_id, doomed)
    return removed


class RetentionLoop:
    """Runs ``prune_older_than`` every ``interval`` on its own thread, timed by ``clock``.

    The worker's ``--keep-finished-for``: the first pass runs at start, then one per
    interval (default: a tenth of the age, between one minute and one hour). Errors are
    handed to ``on_error`` and the loop carries on; the next pass tries again.

    Args:
        store: Where to prune.
        older_than: What to prune.
        clock: Times the interval and decides the cutoff (a ``FakeClock`` in tests).
        interval: Seconds between passes.
        on_pass: Told of every pass's report.
        on_error: Told of every pass that raised.
    """

    def __init__(
        self,
        store: TaskStore,
        older_than: timedelta,
        *,
        clock: Clock,
        interval: float | None = None,
        on_pass: Callable[[PruneReport], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        if older_than <= timedelta(0):
            raise ConfigurationError(f"older_than must be > 0, got {older_than}")
        default = min(3600.0, max(60.0, older_than.total_seconds() / 10))
        self.interval = default if interval is None else float(interval)
        if not math.isfinite(self.interval) or self.interval <= 0:
            raise ConfigurationError(f"interval must be > 0 seconds, got {interval!r}")
        self.store = store
        self.older_than = older_than
        self.clock = clock
        self.passes = 0
        self._on_pass = on_pass
        self._on_error = on_error
        self._service = BackgroundService(
            "chongming-retention", self._pass, clock=clock, on_error=self._failed
        )
        self._service.start()

    def _pass(self) -> float:
        try:
            report = prune_older_than(self.store, self.older_than, clock=self.clock)
        except Exception:
            self.passes += 1
            raise  # to _failed
        if self._on_pass is not None:
            self._on_pass(report)
        self.passes += 1
        return self.interval

    def _failed(self, exc: Exception, failures: int) -> float:
        """The next pass tries again, one interval later."""
        if self._on_error is not None:
            self._on_error(exc)
        else:
            log.warning("retention pass failed: %s: %s", type(exc).__name__, exc)
        return self.interval

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop the loop (idempotent); a pass under way finishes first."""
        self._service.stop(timeout)
