"""Contract cases for schedule control records and firing claims."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from chongming_task.stores._base import ScheduleConflict
from chongming_task.testing._store_contract._support import (
    TZ_PLUS_8,
    ContractHarness,
    as_schedules,
    assert_same_json,
    raises,
)

__all__ = ["ScheduleCases"]


def _expect_conflict(call: Callable[[], object]) -> ScheduleConflict:
    return raises(ScheduleConflict, call, "expected ScheduleConflict")


class ScheduleCases(ContractHarness):
    """put/get/list/delete schedules and claim_firing."""

    def test_insert_then_compare_and_set(self) -> None:
        data = {"pattern": "0 * * * *", "tz": "Asia/Shanghai", "counters": {"runs": 0}}
        first = self.schedules.put_schedule("nightly", data, expect_revision=None)
        assert first.revision == 1
        assert first.updated_at == self.clock.now()
        assert_same_json(dict(first.data), data)
        conflict = _expect_conflict(
            lambda: self.schedules.put_schedule("nightly", {}, expect_revision=None)
        )
        assert conflict.schedule == "nightly"
        assert conflict.actual == 1
        self.clock.advance(5)
        second = self.schedules.put_schedule(
            "nightly", {"pattern": "*/5 * * * *"}, expect_revision=1
        )
        assert second.revision == 2
        assert second.updated_at == self.clock.now()
        stale = _expect_conflict(
            lambda: self.schedules.put_schedule("nightly", {"x": 1}, expect_revision=1)
        )
        assert (stale.expected, stale.actual) == (1, 2)
        assert self.schedules.get_schedule("nightly") == second

    def test_compare_and_set_on_a_missing_schedule_conflicts(self) -> None:
        missing = _expect_conflict(
            lambda: self.schedules.put_schedule("nope", {}, expect_revision=3)
        )
        assert missing.actual is None
        assert self.schedules.get_schedule("nope") is None

    def test_get_list_and_delete(self) -> None:
        for name in ("b-second", "a-first", "日本"):
            self.schedules.put_schedule(name, {"name": name, "n": [1, 2.5]}, expect_revision=None)
        names = [record.name for record in self.schedules.list_schedules()]
        assert names == ["a-first", "b-second", "日本"]
        got = self.schedules.get_schedule("日本")
        assert got is not None
        assert_same_json(dict(got.data), {"name": "日本", "n": [1, 2.5]})
        assert self.schedules.delete_schedule("a-first") is True
        assert self.schedules.delete_schedule("a-first") is False
        assert self.schedules.get_schedule("a-first") is None
        assert [record.name for record in self.schedules.list_schedules()] == ["b-second", "日本"]
        again = self.schedules.put_schedule("a-first", {}, expect_revision=None)
        assert again.revision == 1

    def test_schedules_are_visible_from_another_connection(self) -> None:
        other = as_schedules(self.second_store())
        self.schedules.put_schedule("shared", {"v": 1}, expect_revision=None)
        record = other.get_schedule("shared")
        assert record is not None
        other.put_schedule("shared", {"v": 2}, expect_revision=record.revision)
        latest = self.schedules.get_schedule("shared")
        assert latest is not None
        assert latest.revision == 2

    def test_claim_firing_once_per_schedule_and_instant(self) -> None:
        at = datetime(2026, 3, 1, 4, 0, tzinfo=UTC)
        assert self.schedules.claim_firing("nightly", at, "node-a", "nightly-1") is True
        assert self.schedules.claim_firing("nightly", at, "node-b", "nightly-1b") is False
        same_instant = at.astimezone(TZ_PLUS_8)
        assert self.schedules.claim_firing("nightly", same_instant, "node-b", "x") is False
        assert self.schedules.claim_firing("hourly", at, "node-b", "hourly-1") is True
        later = at + timedelta(microseconds=1)
        assert self.schedules.claim_firing("nightly", later, "node-b", "nightly-2") is True

    def test_prune_firings_forgets_old_claims(self) -> None:
        old = datetime(2026, 3, 1, 4, 0, tzinfo=UTC)
        new = old + timedelta(hours=1)
        assert self.schedules.claim_firing("s", old, "a", "t1")
        assert self.schedules.claim_firing("s", new, "a", "t2")
        pruned = self.schedules.prune_firings(new)
        if pruned == 0:  # what the default does: every claim is kept
            assert self.schedules.claim_firing("s", old, "b", "t3") is False
            self.skip("this store keeps firing claims forever (prune_firings returns 0)")
        assert pruned == 1
        assert self.schedules.claim_firing("s", old, "b", "t3") is True
        assert self.schedules.claim_firing("s", new, "b", "t4") is False
