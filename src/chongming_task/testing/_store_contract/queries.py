"""Contract cases for reading many tasks: every filter, order, limit, counts and prune."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from chongming_task.errors import ConfigurationError
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores._base import TaskHead, TaskQuery, WaitingWork
from chongming_task.stores._records import Order
from chongming_task.testing._store_contract._support import (
    START,
    TZ_MINUS_3_30,
    TZ_PLUS_8,
    ContractHarness,
    raises,
)

__all__ = ["QueryCases"]

S = TaskStatus


class QueryCases(ContractHarness):
    """``query``, ``query_heads``, ``count_by_status``, ``count_by_bucket`` and ``prune``."""

    def ids(self, query: TaskQuery = TaskQuery()) -> list[str]:  # noqa: B008
        return [snapshot.task_id for snapshot in self.store.query(query)]

    def populate(self) -> None:
        """Six tasks spread over every filterable field, created in id order."""
        self.created("a", name="sync.tenant", status=S.RUNNING, tags=frozenset({"io"}), bucket=1)
        self.created("b", name="sync.other", status=S.QUEUED, tags=frozenset({"io", "db"}))
        self.created("c", name="Sync.upper", status=S.RUNNING, bucket=2, owner="w1")
        self.created("d", name="sync%tenant", status=S.FAILED, bucket=1, owner="w1")
        self.created(
            "e",
            name="sync_tenant",
            status=S.SUCCEEDED,
            metadata={"schedule": "nightly", "pipeline": "etl", "kind": "cron"},
        )
        self.created(
            "f",
            name="report",
            status=S.RUNNING,
            metadata={"schedule": "hourly", "kind": 5, "deep": {"kind": "cron"}},
        )

    def test_no_filter_returns_everything_in_creation_order(self) -> None:
        self.populate()
        assert self.ids() == ["a", "b", "c", "d", "e", "f"]

    def test_filter_by_statuses(self) -> None:
        self.populate()
        assert self.ids(TaskQuery(statuses=frozenset({S.RUNNING}))) == ["a", "c", "f"]
        both = TaskQuery(statuses=frozenset({S.QUEUED, S.FAILED}))
        assert self.ids(both) == ["b", "d"]
        assert self.ids(TaskQuery(statuses=frozenset())) == []
        assert self.ids(TaskQuery(statuses=frozenset({S.PAUSED}))) == []

    def test_filter_by_name_prefix_is_literal_and_case_sensitive(self) -> None:
        self.populate()
        assert self.ids(TaskQuery(name_prefix="sync")) == ["a", "b", "d", "e"]
        assert self.ids(TaskQuery(name_prefix="sync.")) == ["a", "b"]
        assert self.ids(TaskQuery(name_prefix="sync%")) == ["d"]
        assert self.ids(TaskQuery(name_prefix="sync_")) == ["e"]
        assert self.ids(TaskQuery(name_prefix="Sync")) == ["c"]
        assert self.ids(TaskQuery(name_prefix="sync.tenant.more")) == []
        assert self.ids(TaskQuery(name_prefix="")) == ["a", "b", "c", "d", "e", "f"]

    def test_name_prefix_at_the_top_of_unicode(self) -> None:
        top = "\U0010ffff"
        self.created("u1", name=f"z{top}")
        self.created("u2", name=f"z{top}{top}a")
        self.created("u3", name="z\U0010fffe")
        self.created("u4", name="{")
        assert self.ids(TaskQuery(name_prefix=f"z{top}")) == ["u1", "u2"]
        assert self.ids(TaskQuery(name_prefix="z")) == ["u1", "u2", "u3"]

    def test_filter_by_tag(self) -> None:
        self.populate()
        assert self.ids(TaskQuery(tag="io")) == ["a", "b"]
        assert self.ids(TaskQuery(tag="db")) == ["b"]
        assert self.ids(TaskQuery(tag="i")) == []

    def test_filter_by_bucket_and_buckets(self) -> None:
        self.populate()
        assert self.ids(TaskQuery(bucket=1)) == ["a", "d"]
        assert self.ids(TaskQuery(buckets=frozenset({1, 2}))) == ["a", "c", "d"]
        assert self.ids(TaskQuery(buckets=frozenset())) == []

    def test_filter_by_owner(self) -> None:
        self.populate()
        assert self.ids(TaskQuery(owner="w1")) == ["c", "d"]
        assert self.ids(TaskQuery(owner="nobody")) == []

    def test_filter_by_metadata_strings_only(self) -> None:
        self.populate()
        assert self.ids(TaskQuery(metadata_eq={"schedule": "nightly"})) == ["e"]
        assert self.ids(TaskQuery(metadata_eq={"pipeline": "etl"})) == ["e"]
        assert self.ids(TaskQuery(metadata_eq={"kind": "cron"})) == ["e"]
        assert self.ids(TaskQuery(metadata_eq={"kind": "5"})) == []
        both = TaskQuery(metadata_eq={"schedule": "nightly", "kind": "cron"})
        assert self.ids(both) == ["e"]
        assert self.ids(TaskQuery(metadata_eq={"schedule": "nightly", "kind": "x"})) == []

    def test_filters_combine_with_and(self) -> None:
        self.populate()
        query = TaskQuery(statuses=frozenset({S.RUNNING}), name_prefix="sync", tag="io", bucket=1)
        assert self.ids(query) == ["a"]
        assert self.ids(TaskQuery(statuses=frozenset({S.RUNNING}), owner="w1")) == ["c"]

    def test_filter_by_task_ids(self) -> None:
        self.populate()
        assert self.ids(TaskQuery(task_ids=frozenset({"f", "a", "c"}))) == ["a", "c", "f"]
        assert self.ids(TaskQuery(task_ids=frozenset({"b", "nope"}))) == ["b"]
        assert self.ids(TaskQuery(task_ids=frozenset())) == []
        running = TaskQuery(task_ids=frozenset({"a", "b", "c"}), statuses=frozenset({S.RUNNING}))
        assert self.ids(running) == ["a", "c"]
        assert self.store.count_by_status(running) == {S.RUNNING: 2}

    def lease_population(self, cutoff: datetime) -> dict[str, bool]:
        """Tasks with leases around ``cutoff``; maps each id to "expired by the cutoff"."""
        micro = timedelta(microseconds=1)
        leases: dict[str, tuple[datetime | None, bool]] = {
            "never-leased": (None, True),
            "long-gone": (cutoff - timedelta(hours=1), True),
            "exactly-now": (cutoff, True),
            "a-microsecond-ago": (cutoff - micro, True),
            "a-microsecond-left": (cutoff + micro, False),
            "half-a-millisecond-left": (cutoff + timedelta(microseconds=500), False),
            "live": (cutoff + timedelta(seconds=30), False),
            # The same instants written in other offsets: compared as instants.
            "gone-plus-8": ((cutoff - micro).astimezone(TZ_PLUS_8), True),
            "live-minus-3-30": ((cutoff + micro).astimezone(TZ_MINUS_3_30), False),
            "now-odd-offset": (cutoff.astimezone(timezone(timedelta(hours=5, seconds=15))), True),
            "live-odd-offset": (
                (cutoff + micro).astimezone(timezone(timedelta(seconds=-1, microseconds=7))),
                False,
            ),
            "gone-odd-offset": (
                (cutoff - micro).astimezone(timezone(timedelta(microseconds=3))),
                True,
            ),
        }
        for task_id, (until, _) in leases.items():
            self.created(task_id, status=S.RUNNING, lease_owner="w", lease_until=until)
        return {task_id: expired for task_id, (_, expired) in leases.items()}

    def test_filter_by_lease_expired_by_compares_instants_to_the_microsecond(self) -> None:
        cutoff = datetime(2026, 3, 1, 12, 30, 15, 250_000, tzinfo=START.tzinfo)
        expected = self.lease_population(cutoff)
        expired = [task_id for task_id, gone in expected.items() if gone]
        query = TaskQuery(lease_expired_by=cutoff)
        assert self.ids(query) == expired
        assert self.store.count_by_status(query) == {S.RUNNING: len(expired)}
        # The cutoff's own offset does not matter either.
        assert self.ids(TaskQuery(lease_expired_by=cutoff.astimezone(TZ_MINUS_3_30))) == expired

    def test_lease_expired_by_sees_leases_written_by_touch_and_renew(self) -> None:
        cutoff = START + timedelta(minutes=5)
        self.created("renewed", status=S.RUNNING, lease_owner="w", lease_until=START)
        self.created("touched", status=S.RUNNING, lease_owner="w", lease_until=START)
        self.created("left-alone", status=S.RUNNING, lease_owner="w", lease_until=START)
        query = TaskQuery(lease_expired_by=cutoff)
        assert self.ids(query) == ["renewed", "touched", "left-alone"]
        self.store.renew_leases("w", ["renewed"], cutoff + timedelta(microseconds=1))
        self.store.touch(
            "touched", lease_until=(cutoff + timedelta(seconds=1)).astimezone(TZ_PLUS_8)
        )
        assert self.ids(query) == ["left-alone"]
        self.store.touch("renewed", lease_until=cutoff)
        assert self.ids(query) == ["renewed", "left-alone"]

    def test_filter_by_creation_window_is_half_open_to_the_microsecond(self) -> None:
        micro = timedelta(microseconds=1)
        edge = datetime(2026, 3, 1, 12, 0, 0, 500_000, tzinfo=START.tzinfo)
        self.created("early", created_at=edge - micro, updated_at=edge - micro)
        self.created("edge", created_at=edge, updated_at=edge)
        self.created("late", created_at=edge + micro, updated_at=edge + micro, status=S.FAILED)
        self.created("later", created_at=edge + timedelta(hours=1), updated_at=edge)
        assert self.ids(TaskQuery(created_after=edge)) == ["edge", "late", "later"]
        assert self.ids(TaskQuery(created_before=edge)) == ["early"]
        window = TaskQuery(created_after=edge, created_before=edge + timedelta(minutes=1))
        assert self.ids(window) == ["edge", "late"]
        # Instants, not wall-clock text: the same bound in another offset selects the same.
        shifted = TaskQuery(
            created_after=edge.astimezone(TZ_MINUS_3_30),
            created_before=(edge + timedelta(minutes=1)).astimezone(TZ_PLUS_8),
        )
        assert self.ids(shifted) == ["edge", "late"]
        assert self.ids(TaskQuery(created_after=edge, created_before=edge)) == []
        # With the other filters, orders, limits, heads and counts.
        newest = TaskQuery(created_after=edge, order="-created", limit=2)
        assert self.ids(newest) == ["later", "late"]
        assert [h.task_id for h in self.store.query_heads(newest)] == ["later", "late"]
        failed = TaskQuery(created_after=edge, statuses=frozenset({S.FAILED}))
        assert self.ids(failed) == ["late"]
        assert self.store.count_by_status(TaskQuery(created_before=edge + micro)) == {S.PENDING: 2}

    def test_filter_by_update_window(self) -> None:
        edge = START + timedelta(hours=2)
        self.created("old", updated_at=edge - timedelta(seconds=1))
        self.created("at", updated_at=edge)
        self.created("new", updated_at=edge + timedelta(minutes=5))
        assert self.ids(TaskQuery(updated_after=edge)) == ["at", "new"]
        assert self.ids(TaskQuery(updated_before=edge)) == ["old"]
        both = TaskQuery(updated_after=edge, updated_before=edge + timedelta(minutes=5))
        assert self.ids(both) == ["at"]
        assert self.ids(TaskQuery(updated_after=edge, order="-updated")) == ["new", "at"]
        # A write moves a task into the window (what the store says, not the document's
        # first copy).
        moved = self.store.get("old")
        assert moved is not None
        self.store.save(
            moved.replace(updated_at=edge + timedelta(minutes=1)),
            expect_version=moved.status_version,
        )
        assert self.ids(both) == ["old", "at"]

    def test_query_heads_are_query_without_the_documents(self) -> None:
        self.populate()
        queries = [
            TaskQuery(),
            TaskQuery(statuses=frozenset({S.RUNNING, S.QUEUED}), order="-created"),
            TaskQuery(name_prefix="sync", limit=2),
            TaskQuery(task_ids=frozenset({"e", "b"}), order="updated"),
            TaskQuery(lease_expired_by=START, tag="io"),
            TaskQuery(statuses=frozenset()),
            TaskQuery(limit=0),
        ]
        for query in queries:
            expected = [
                TaskHead(s.task_id, s.status, s.status_version) for s in self.store.query(query)
            ]
            heads = self.store.query_heads(query)
            assert heads == expected, f"query_heads({query}) = {heads}, query says {expected}"
            for head in heads:
                assert isinstance(head, TaskHead)
                assert type(head.status) is TaskStatus
                assert type(head.status_version) is int

    def test_orders_and_limit(self) -> None:
        later = START + timedelta(hours=1)
        self.created("p1", priority=1, updated_at=later + timedelta(seconds=3))
        self.created("p2", priority=5, updated_at=later + timedelta(seconds=1))
        self.created("p3", priority=1, updated_at=later + timedelta(seconds=2))
        self.created("p4", priority=5, updated_at=later + timedelta(seconds=1))
        assert self.ids(TaskQuery(order="created")) == ["p1", "p2", "p3", "p4"]
        assert self.ids(TaskQuery(order="-created")) == ["p4", "p3", "p2", "p1"]
        assert self.ids(TaskQuery(order="updated")) == ["p2", "p4", "p3", "p1"]
        assert self.ids(TaskQuery(order="-updated")) == ["p1", "p3", "p4", "p2"]
        assert self.ids(TaskQuery(order="priority")) == ["p2", "p4", "p1", "p3"]
        assert self.ids(TaskQuery(order="-created", limit=2)) == ["p4", "p3"]
        assert self.ids(TaskQuery(limit=0)) == []
        assert self.ids(TaskQuery(limit=10)) == ["p1", "p2", "p3", "p4"]

    def test_equal_creation_times_keep_insertion_order(self) -> None:
        for task_id in ("z", "y", "x"):
            self.store.create(self.snapshot(task_id, created_at=START, updated_at=START))
        assert self.ids() == ["z", "y", "x"]
        assert self.ids(TaskQuery(order="-created")) == ["x", "y", "z"]

    def test_bad_queries_are_configuration_errors(self) -> None:
        bad: list[dict[str, Any]] = [
            {"limit": -1},
            {"order": "sideways"},
            {"statuses": frozenset({"running"})},
            {"metadata_eq": {"k": 1}},
            {"task_ids": "abc"},
            {"task_ids": frozenset({1})},
            {"lease_expired_by": datetime(2026, 1, 1)},
            {"lease_expired_by": "2026-01-01T00:00:00+00:00"},
            {"created_after": datetime(2026, 1, 1)},
            {"created_before": "2026-01-01T00:00:00+00:00"},
            {"updated_after": 1767225600},
            {"updated_before": datetime(2026, 1, 1)},
        ]
        for kwargs in bad:
            raises(
                ConfigurationError,
                lambda kwargs=kwargs: TaskQuery(**kwargs),  # type: ignore[misc]
                f"TaskQuery({kwargs}) must raise ConfigurationError",
            )

    def test_count_by_status(self) -> None:
        assert self.store.count_by_status() == {}
        self.populate()
        counts = {S.RUNNING: 3, S.QUEUED: 1, S.FAILED: 1, S.SUCCEEDED: 1}
        assert self.store.count_by_status() == counts
        assert self.store.count_by_status(TaskQuery(name_prefix="sync.", limit=1)) == {
            S.RUNNING: 1,
            S.QUEUED: 1,
        }
        assert self.store.count_by_status(TaskQuery(statuses=frozenset())) == {}

    def test_count_tasks_is_the_sum_of_count_by_status(self) -> None:
        """``count_tasks``: how many tasks a query matches, whatever filters it combines."""
        assert self.store.count_tasks() == 0
        self.populate()
        queries = [
            None,
            TaskQuery(),
            TaskQuery(tag="io"),
            TaskQuery(tag="io", name_prefix="sync."),
            TaskQuery(tag="io", name_prefix="sync.t"),
            TaskQuery(tag="io", name_prefix="s", statuses=frozenset({S.QUEUED})),
            TaskQuery(tag="db", name_prefix="sync.other"),
            TaskQuery(tag="nope"),
            TaskQuery(name_prefix="sync", limit=1, order="-created"),
            TaskQuery(bucket=1),
            TaskQuery(statuses=frozenset({S.RUNNING, S.FAILED})),
            TaskQuery(statuses=frozenset()),
            TaskQuery(created_after=START, created_before=START + timedelta(seconds=3)),
        ]
        expected = [6, 6, 2, 2, 1, 1, 1, 0, 4, 2, 4, 0, 2]
        found = [self.store.count_tasks(query) for query in queries]
        assert found == expected, found
        for query in queries:
            assert self.store.count_tasks(query) == sum(self.store.count_by_status(query).values())

    def test_a_page_of_a_prefix_or_a_tag_is_in_order_however_many_match(self) -> None:
        """Pages of filters no index orders by creation: the first ``limit`` matches in
        either creation order, whether matches are everywhere or rare."""
        for index in range(30):
            rare = index in (3, 17)
            self.created(
                f"t{index:02}",
                name="rare.job" if rare else "common.job",
                tags=frozenset({"rare" if rare else "common"}),
            )
        common = [f"t{i:02}" for i in range(30) if i not in (3, 17)]
        orders: list[tuple[Order, bool]] = [("-created", True), ("created", False)]
        for order, newest_first in orders:

            def ids(found: list[str], newest_first: bool = newest_first) -> list[str]:
                return sorted(found, reverse=newest_first)

            for query, wanted in (
                (TaskQuery(name_prefix="common.", order=order, limit=5), ids(common)[:5]),
                (TaskQuery(tag="common", order=order, limit=5), ids(common)[:5]),
                (TaskQuery(name_prefix="rare", order=order, limit=5), ids(["t03", "t17"])),
                (
                    TaskQuery(tag="rare", name_prefix="rare.", order=order, limit=1),
                    ids(["t03", "t17"])[:1],
                ),
                (TaskQuery(tag="rare", name_prefix="common", order=order, limit=5), []),
            ):
                assert self.ids(query) == wanted, (query, self.ids(query))
                heads = [h.task_id for h in self.store.query_heads(query)]
                assert heads == wanted, (query, heads)

    def test_waiting_work_counts_queued_unheld_tasks_with_a_recipe_per_bucket(self) -> None:
        """``waiting_work``: per bucket, the queued tasks nobody holds that were enqueued
        through the work queue (an object under ``metadata["recipe"]``), and when the
        oldest of them (by creation) was queued."""
        assert self.store.waiting_work() == {}
        recipe = {"recipe": {"args": [1], "kwargs": {}}}
        base = self.clock.now()

        def at(seconds: int) -> datetime:
            return (base + timedelta(seconds=seconds)).astimezone(TZ_MINUS_3_30)

        # Bucket 1: a retried task, created first and queued again later, is the oldest.
        self.created("b1-old", status=S.QUEUED, bucket=1, metadata=recipe, queued_at=at(50))
        self.created("b1-new", status=S.QUEUED, bucket=1, metadata=recipe, queued_at=at(5))
        self.created("none-1", status=S.QUEUED, metadata=recipe)  # no bucket: key None
        self.created("b2", status=S.QUEUED, bucket=2, metadata=recipe, queued_at=at(7))
        # Not waiting: held by a process, without a recipe, a bad recipe, not queued.
        self.created("held", status=S.QUEUED, bucket=2, metadata=recipe, owner="w1")
        self.created("plain", status=S.QUEUED, bucket=2)
        self.created("bad", status=S.QUEUED, bucket=2, metadata={"recipe": "args"})
        self.created("running", status=S.RUNNING, bucket=2, metadata=recipe)
        none_1 = self.store.get("none-1")
        assert none_1 is not None
        found = self.store.waiting_work()
        assert found == {
            1: WaitingWork(2, at(50)),
            None: WaitingWork(1, none_1.created_at),  # never queued_at: since its creation
            2: WaitingWork(1, at(7)),
        }, found
        assert all(w.oldest_since.utcoffset() is not None for w in found.values())

    def test_count_by_bucket(self) -> None:
        assert self.store.count_by_bucket() == {}
        self.populate()
        assert self.store.count_by_bucket() == {1: 2, 2: 1}

    def test_activity_counts_the_stored_history_of_the_window(self) -> None:
        """``activity``: transitions per slot, durations of finished tasks, queue depth."""
        minute = timedelta(minutes=1)

        def at(seconds: int) -> datetime:
            return (START + timedelta(seconds=seconds)).astimezone(TZ_PLUS_8)

        def stored(task_id: str, steps: list[tuple[S, int]], **changes: Any) -> None:
            snap = self.snapshot(
                task_id,
                status=steps[-1][0],
                status_version=len(steps) - 1,
                updated_at=at(steps[-1][1]),
                **changes,
            )
            trail = [
                self.transition(task_id, version, status, at=at(seconds))
                for version, (status, seconds) in enumerate(steps)
            ]
            self.store.create(snap, trail)

        stored("early", [(S.PENDING, -70), (S.RUNNING, -10)], created_at=at(-70))
        stored(
            "a",
            [(S.PENDING, 0), (S.RUNNING, 90), (S.SUCCEEDED, 150)],
            name="etl",
            created_at=at(0),
            started_at=at(90),
            finished_at=at(150),
        )
        stored("b", [(S.PENDING, 0), (S.RUNNING, 30), (S.LOST, 200)], created_at=at(0))
        stored("c", [(S.PENDING, 0), (S.QUEUED, 10)], created_at=at(0), bucket=4)
        found = self.store.activity(since=START, until=START + 5 * minute, step=minute)
        rows = [(s.start, s.started, s.succeeded, s.failed) for s in found.slots]
        assert rows == [
            (START, 1, 0, 0),
            (START + minute, 1, 0, 0),
            (START + 2 * minute, 0, 1, 0),
            (START + 3 * minute, 0, 0, 1),
            (START + 4 * minute, 0, 0, 0),
        ]
        assert [(d.name, d.count, d.p50, d.p95) for d in found.durations] == [
            ("etl", 1, 60.0, 60.0)
        ]
        assert found.sampled == 1
        assert found.queued == ((4, 1),)
        error = raises(
            ConfigurationError,
            lambda: self.store.activity(
                since=START, until=START + minute, step=timedelta(seconds=7)
            ),
            "activity must refuse a window that is not a whole number of steps",
        )
        assert "whole number of steps" in str(error)

    def test_prune_keeps_the_newest_terminal_tasks_and_every_active_one(self) -> None:
        statuses = [S.SUCCEEDED, S.RUNNING, S.FAILED, S.QUEUED, S.STOPPED, S.LOST, S.PAUSED]
        for index, status in enumerate(statuses):
            snap = self.created(
                f"t{index}",
                status=status,
                updated_at=START + timedelta(minutes=index),
            )
            self.store.append(self.transition(snap.task_id, 0, S.PENDING))
        # Terminal by recency (updated_at): t5 (LOST) > t4 > t2 > t0.
        assert self.store.prune(keep_terminal=2) == 2
        assert self.ids() == ["t1", "t3", "t4", "t5", "t6"]
        assert self.store.history("t0") == []
        assert self.store.history("t2") == []
        assert len(self.store.history("t4")) == 1
        assert self.store.prune(keep_terminal=2) == 0
        assert self.store.prune(keep_terminal=0) == 2
        remaining = {s.status for s in self.store.query()}
        assert not remaining & TERMINAL
        raises(
            ConfigurationError,
            lambda: self.store.prune(keep_terminal=-1),
            "prune(keep_terminal=-1) must raise ConfigurationError",
        )
