"""Prometheus gauges of the bucket ownership registry, read from the store at scrape time.

Like the other store gauges these describe the fleet, so every instance reports the
same numbers (aggregate with ``max``). The ``bucket`` label is bounded by
``num_buckets``; node ids never become labels.

* ``chongming_bucket_owners{bucket}``: live nodes declaring the bucket (1 is right,
  0 is a hole, 2 or more on a partition is a duplicate);
* ``chongming_bucket_duplicates``, ``chongming_bucket_holes``,
  ``chongming_bucket_draining``: buckets in each verdict;
* ``chongming_bucket_orphaned_tasks``: unfinished tasks in buckets nobody owns;
* ``chongming_bucket_stale_declarations``: nodes whose declaration lease expired.

Nothing is exported while no node has declared buckets in the store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from chongming_task.observability._collectors import require_prometheus
from chongming_task.stores._base import TaskStore

__all__ = ["BucketOwnershipCollector"]

log = logging.getLogger("chongming_task.observability")


class BucketOwnershipCollector:
    """The verdicts of :func:`chongming_task.buckets.ownership_report` as gauges."""

    def __init__(self, store: TaskStore) -> None:
        self._core = require_prometheus()
        self.store = store

    def describe(self) -> list[Any]:
        return []  # registering must not query the store

    def collect(self) -> Iterator[Any]:
        from chongming_task.buckets import ownership_report

        try:
            report = ownership_report(self.store)
        except Exception as exc:  # the store collector reports the store as down
            log.warning(
                "metrics scrape: the bucket registry failed: %s: %s", type(exc).__name__, exc
            )
            return
        if not report.declared:
            return
        core = self._core
        owners = core.GaugeMetricFamily(
            "chongming_bucket_owners",
            "Live nodes declaring the bucket (0: a hole; 2 or more on a partition: duplicate).",
            labels=["bucket"],
        )
        for bucket, nodes in sorted(report.owners.items()):
            owners.add_metric([str(bucket)], len(nodes))
        yield owners
        for name, text, value in (
            ("duplicates", "Buckets that two or more live nodes declare.", len(report.duplicates)),
            ("holes", "Buckets that no live node declares.", len(report.holes)),
            ("draining", "Buckets being handed off between nodes.", len(report.draining)),
            (
                "orphaned_tasks",
                "Unfinished tasks in buckets that no live node owns.",
                report.orphaned_tasks,
            ),
            (
                "stale_declarations",
                "Nodes whose bucket declaration lease expired without a clean shutdown.",
                len(report.stale),
            ),
        ):
            yield core.GaugeMetricFamily(f"chongming_bucket_{name}", text, value=value)
