"""The bucket ownership registry: who owns which bucket, and moving buckets between nodes.

See ``docs/buckets.md``. Nodes declare the buckets they own in the store, with a lease
renewed with their heartbeat (a worker does it by itself; a plain controller with
:func:`declare_buckets`); :func:`ownership_report` judges the declarations (duplicate
owners, holes, orphaned tasks, stale declarations) and :func:`handoff` moves buckets
from one live node to another through commands in the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports
from chongming_task.buckets._agent import (
    BucketAgent,
    Declaration,
    declaration_lease,
    declare_buckets,
)
from chongming_task.buckets._handoff import (
    HandoffError,
    HandoffRefused,
    HandoffResult,
    HandoffTimeout,
    handoff,
)
from chongming_task.buckets._registry import (
    NodeDeclaration,
    OrphanedBucket,
    OwnershipReport,
    ownership_report,
)

if TYPE_CHECKING:  # resolved on first access: the fleet's health reads the scheduler's
    from chongming_task.buckets._health import FleetHealth, fleet_health

_LAZY: dict[str, str] = {
    "FleetHealth": "chongming_task.buckets._health",
    "fleet_health": "chongming_task.buckets._health",
}

__getattr__, __dir__ = lazy_exports("chongming_task.buckets", globals(), _LAZY)

__all__ = [
    "BucketAgent",
    "Declaration",
    "FleetHealth",
    "HandoffError",
    "HandoffRefused",
    "HandoffResult",
    "HandoffTimeout",
    "NodeDeclaration",
    "OrphanedBucket",
    "OwnershipReport",
    "declaration_lease",
    "declare_buckets",
    "fleet_health",
    "handoff",
    "ownership_report",
]
