"""Named limits across processes: lease-backed slots in the store (docs/queue.md).

``ConcurrencyPolicy.limits`` counts the tasks of one process. A *global* limit
(``Worker(global_limits={"db": 4})``, ``chongming-task worker --global-limit db=4``)
counts the holders of a tag across every worker sharing the store. Like the
per-process limits it is keyed by tag: a task carrying the tag ``db`` (from
``@task(tags=["db"])`` or ``enqueue(tags=["db"])``) needs a ``db`` slot.

A slot is a row in the store -- (name, task id, owner, acquired at, lease until) --
taken in the same atomic write that claims the queued task (``claim_queued(...,
global_limits=...)``), renewed with the task's own lease (``renew_leases``) and
deleted when the task ends (``release_global_slots``). A holder that dies stops
renewing: once its lease has passed, the row no longer counts, so a ``lost`` holder
gives its slot back with no one doing anything. A task that finds a limit full is
not claimed: it stays ``queued`` and unheld, visible in ``ps``, until a slot frees.

The value of a limit is the claiming worker's: a worker claims only while fewer than
*its* number of live holders exist, so workers configured differently never hold
more than the largest number configured among them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

__all__ = ["GlobalSlot", "SlotLedger"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GlobalSlot:
    """One holder of one global limit's slot, as the store keeps it."""

    name: str
    """The limit (a tag)."""
    task_id: str
    """The task holding it."""
    owner: str
    """The worker that claimed the task (and renews the lease)."""
    acquired_at: datetime
    lease_until: datetime
    """Renewed with the task's lease; past it the slot no longer counts."""

    def live(self, now: datetime) -> bool:
        """Whether it still counts against its limit at ``now``."""
        return self.lease_until > now


class SlotLedger:
    """One claim's view of the global limits: which are full, and taking slots.

    Pure bookkeeping over the live holder counts the store read inside the claim's
    transaction (or under its lock), so every store decides the same way.
    """

    def __init__(self, limits: Mapping[str, int], in_use: Mapping[str, int]) -> None:
        self.limits = dict(limits)
        self.use: Counter[str] = Counter({k: v for k, v in in_use.items() if k in self.limits})

    def needs(self, tags: Iterable[str]) -> frozenset[str]:
        """The limits a task with ``tags`` needs a slot of."""
        return frozenset(tag for tag in tags if tag in self.limits)

    def full(self) -> list[str]:
        """The limits with no free slot now (sorted)."""
        return sorted(name for name, limit in self.limits.items() if self.use[name] >= limit)

    def fits(self, names: Iterable[str]) -> bool:
        return all(self.use[name] < self.limits[name] for name in names)

    def take(self, names: Iterable[str]) -> None:
        for name in names:
            self.use[name] += 1
