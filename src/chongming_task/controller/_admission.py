"""The ready queue and the slot ledger: who may start next (guide §8.4, §8.8).

Three limits stack: the global ``max_parallel``, named-resource limits per tag
(``ConcurrencyPolicy.limits``; every limited tag of a task needs room) and
``max_parallel_per_bucket``. Higher priority goes first, FIFO within one priority.

Choosing the next task is a *scan*, not a look at the head (guide §8.8): a head that
is blocked by a full bucket or tag must not hold back a task of another bucket.
Scanning every queued task would make 100,000 queued tasks quadratic, so queued tasks
are grouped by their *constraint class* -- the bucket (only when buckets are limited)
and the set of limited tags. Tasks of one class are blocked or eligible together, so
only each class's head can be the answer: one admission costs O(classes + log n).
Without bucket or tag limits there is exactly one class and it is a plain heap.

The ledger is pure bookkeeping with no threads and no I/O; the controller serialises
calls under its lock.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from chongming_task._validation import check_int
from chongming_task.errors import ConfigurationError

__all__ = ["Admission", "SlotClaim", "check_per_bucket"]

_GroupKey = tuple[int | None, frozenset[str]]
_NONE: frozenset[str] = frozenset()


def check_per_bucket(value: object) -> int | None:
    """``max_parallel_per_bucket``: an ``int >= 1`` (never a ``bool``), or ``None`` for no limit."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"max_parallel_per_bucket must be an integer >= 1 or None, got {value!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class SlotClaim:
    """What one admitted task holds: a global slot, its bucket's slot, its tag units."""

    bucket: int | None
    limited_tags: frozenset[str]


@dataclass(slots=True)
class _Group:
    """Queued tasks of one constraint class, as a heap of (-priority, seq, task_id)."""

    key: _GroupKey
    heap: list[tuple[int, int, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Entry:
    group: _GroupKey
    seq: int
    bucket: int | None


class Admission:
    """Ready queue plus slot ledger of one controller.

    Args:
        max_parallel: How many tasks may hold a slot at once.
        limits: Tag -> how many slot-holding tasks carrying that tag may exist.
        max_parallel_per_bucket: Slot holders allowed per bucket (``None``: no limit).
    """

    def __init__(
        self,
        *,
        max_parallel: int,
        limits: Mapping[str, int] | None = None,
        max_parallel_per_bucket: int | None = None,
    ) -> None:
        check_int(max_parallel, "max_parallel", minimum=1)
        self.max_parallel = max_parallel
        self.limits: Mapping[str, int] = dict(limits or {})
        self.max_parallel_per_bucket = check_per_bucket(max_parallel_per_bucket)
        self._seq = itertools.count()
        self._groups: dict[_GroupKey, _Group] = {}
        self._queued: dict[str, _Entry] = {}
        self._active: dict[str, SlotClaim] = {}
        self._bucket_use: Counter[int] = Counter()
        self._tag_use: Counter[str] = Counter()

    # ------------------------------------------------------------ queue

    def push(
        self, task_id: str, *, priority: int = 0, tags: Iterable[str] = (), bucket: int | None
    ) -> None:
        """Queue ``task_id`` behind every task of higher or equal priority.

        A task already queued or holding a slot is left as it is: the caller owns the
        lifecycle, and a second push must not create a second claim on a slot.
        """
        if task_id in self._queued or task_id in self._active:
            return
        limited = frozenset(tag for tag in tags if tag in self.limits) if self.limits else _NONE
        key: _GroupKey = (bucket if self.max_parallel_per_bucket is not None else None, limited)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(key)
        seq = next(self._seq)
        heapq.heappush(group.heap, (-priority, seq, task_id))
        # The group's own key, not this call's equal copy: 100,000 queued tasks share it.
        self._queued[task_id] = _Entry(group.key, seq, bucket)

    def remove(self, task_id: str) -> bool:
        """Take ``task_id`` out of the queue (stopped, paused or cancelled while queued).

        The heap entry is dropped lazily when it surfaces, which keeps this O(1).
        """
        return self._queued.pop(task_id, None) is not None

    def pop_eligible(self) -> str | None:
        """Admit the best eligible queued task and give it a slot; ``None`` if none may start."""
        if len(self._active) >= self.max_parallel or not self._queued:
            return None
        best: tuple[int, int, str] | None = None
        best_group: _Group | None = None
        for key in list(self._groups):
            group = self._groups[key]
            head = self._clean_head(group)
            if head is None:
                del self._groups[key]
                continue
            if not self._has_room(key):
                continue
            if best is None or head < best:
                best, best_group = head, group
        if best is None or best_group is None:
            return None
        heapq.heappop(best_group.heap)
        task_id = best[2]
        entry = self._queued.pop(task_id)
        claim = SlotClaim(entry.bucket, entry.group[1])
        self._take(task_id, claim)
        return task_id

    def admit(self, task_id: str, *, tags: Iterable[str] = (), bucket: int | None) -> None:
        """Give ``task_id`` a slot directly, over the limits (a run that was already running).

        Used when a task is taken over while it already holds its resources; the
        ledger must reflect reality even if that means exceeding a limit for a while.
        """
        self._queued.pop(task_id, None)
        if task_id not in self._active:
            limited = frozenset(tag for tag in tags if tag in self.limits)
            self._take(task_id, SlotClaim(bucket, limited))

    def release(self, task_id: str) -> bool:
        """Return the slot (and bucket and tag units) held by ``task_id``."""
        claim = self._active.pop(task_id, None)
        if claim is None:
            return False
        if claim.bucket is not None:
            self._bucket_use[claim.bucket] -= 1
            if self._bucket_use[claim.bucket] <= 0:
                del self._bucket_use[claim.bucket]
        for tag in claim.limited_tags:
            self._tag_use[tag] -= 1
            if self._tag_use[tag] <= 0:
                del self._tag_use[tag]
        return True

    # ------------------------------------------------------------ reading

    def is_active(self, task_id: str) -> bool:
        return task_id in self._active

    @property
    def active_count(self) -> int:
        """Tasks holding a slot (paused-in-place ones included: a pause keeps its slot)."""
        return len(self._active)

    @property
    def queued_count(self) -> int:
        """Tasks waiting for a slot."""
        return len(self._queued)

    def active_in_bucket(self, bucket: int) -> int:
        """Slot holders in ``bucket`` (counted whether or not buckets are limited)."""
        return self._bucket_use.get(bucket, 0)

    def tag_usage(self, tag: str) -> int:
        """Slot holders carrying the limited tag ``tag``."""
        return self._tag_use.get(tag, 0)

    def claims(self) -> dict[str, SlotClaim]:
        """Every slot holder and what it holds (for ``explain``)."""
        return dict(self._active)

    def queue_seq(self, task_id: str) -> int | None:
        """The task's place in arrival order while it is queued (FIFO within a priority)."""
        entry = self._queued.get(task_id)
        return None if entry is None else entry.seq

    def queued_ids(self) -> list[str]:
        """Queued task ids in no particular order."""
        return list(self._queued)

    def active_ids(self) -> list[str]:
        return list(self._active)

    # ------------------------------------------------------------ internals

    def _take(self, task_id: str, claim: SlotClaim) -> None:
        self._active[task_id] = claim
        if claim.bucket is not None:
            self._bucket_use[claim.bucket] += 1
        for tag in claim.limited_tags:
            self._tag_use[tag] += 1

    def _clean_head(self, group: _Group) -> tuple[int, int, str] | None:
        """The group's live head, dropping entries removed or re-pushed since."""
        heap = group.heap
        while heap:
            head = heap[0]
            entry = self._queued.get(head[2])
            if entry is not None and entry.seq == head[1] and entry.group == group.key:
                return head
            heapq.heappop(heap)
        return None

    def _has_room(self, key: _GroupKey) -> bool:
        bucket, tags = key
        if (
            bucket is not None
            and self.max_parallel_per_bucket is not None
            and self._bucket_use.get(bucket, 0) >= self.max_parallel_per_bucket
        ):
            return False
        return all(self._tag_use.get(tag, 0) < self.limits[tag] for tag in tags)
