"""Contract cases for fleet limits: slots and starts taken by ``claim_queued``."""

from __future__ import annotations

from datetime import timedelta

from chongming_task.stores._limits import check_limit
from chongming_task.stores._queue_records import Recipe
from chongming_task.testing._store_contract.queue import QueueCases

__all__ = ["GlobalLimitCases"]


class GlobalLimitCases(QueueCases):
    """A tag's holders across claimers never exceed its limit; dead holders free it."""

    def require_slots(self) -> None:
        self.require_queue()
        if not self.queue.supports_global_limits:
            self.skip(f"{type(self.store).__name__} has no global limits")

    def claim(self, owner: str, limit: int = 10, seconds: float = 30.0, **limits: int) -> list[str]:
        until = self.clock.now() + timedelta(seconds=seconds)
        got = self.queue.claim_queued(
            owner, buckets=None, limit=limit, lease_until=until, global_limits=limits
        )
        return [snapshot.task_id for snapshot in got]

    def test_a_global_limit_caps_holders_across_claimers(self) -> None:
        self.require_slots()
        for i in range(3):
            self.queued(f"db-{i}", tags=frozenset({"db"}))
        self.queued("free")
        assert self.claim("w1", db=2) == ["db-0", "db-1", "free"]
        assert self.claim("w2", db=2) == []
        stored = self.store.get("db-2")
        assert stored is not None
        assert stored.owner is None  # still queued and unheld: visible, not claimed
        slots = self.queue.list_global_slots()
        assert [(s.name, s.task_id, s.owner) for s in slots] == [
            ("db", "db-0", "w1"),
            ("db", "db-1", "w1"),
        ]
        assert all(s.lease_until == self.clock.now() + timedelta(seconds=30) for s in slots)
        assert self.queue.release_global_slots("someone-else", "db-0") == 0
        assert self.queue.release_global_slots("w1", "db-0") == 1
        assert self.claim("w2", db=2) == ["db-2"]
        assert [s.task_id for s in self.queue.list_global_slots()] == ["db-1", "db-2"]

    def test_every_limit_of_a_task_needs_room(self) -> None:
        self.require_slots()
        self.queued("both", tags=frozenset({"db", "gpu"}))
        self.queued("gpu-only", tags=frozenset({"gpu"}))
        assert self.claim("w1", gpu=1, db=1, limit=1) == ["both"]
        assert self.claim("w2", gpu=1, db=1) == []
        assert sorted(s.name for s in self.queue.list_global_slots()) == ["db", "gpu"]

    def test_an_expired_slot_no_longer_counts_and_a_renewed_one_does(self) -> None:
        self.require_slots()
        for i in range(3):
            self.queued(f"db-{i}", tags=frozenset({"db"}))
        assert self.claim("dead", db=1, seconds=10) == ["db-0"]
        assert self.claim("live", db=2, seconds=10) == ["db-1"]
        self.clock.advance(5)
        renewed_to = self.clock.now() + timedelta(seconds=10)
        assert self.store.renew_leases("live", ["db-1"], renewed_to) == 1
        self.clock.advance(6)  # the dead holder's lease passed; the renewed one did not
        assert self.claim("other", db=2) == ["db-2"]
        slots = {s.task_id: s for s in self.queue.list_global_slots()}
        assert sorted(slots) == ["db-1", "db-2"]  # the expired row is gone
        assert slots["db-1"].lease_until == renewed_to
        assert slots["db-1"].live(self.clock.now())

    def test_a_full_limit_does_not_hold_back_other_tasks(self) -> None:
        self.require_slots()
        for i in range(30):  # more than a claim looks at in one window
            self.queued(f"db-{i:02d}", tags=frozenset({"db"}), priority=5)
        self.queued("plain")
        assert self.claim("w1", limit=1, db=1) == ["db-00"]
        assert self.claim("w2", limit=1, db=1) == ["plain"]

    def test_without_global_limits_tags_are_free(self) -> None:
        self.require_slots()
        self.queued("a", tags=frozenset({"db"}))
        self.queued("b", tags=frozenset({"db"}))
        assert self.claim("w1") == ["a", "b"]
        assert self.queue.list_global_slots() == []

    # ------------------------------------------------------------ fleet limits

    def keyed(self, task_id: str, key: str | None, **changes: object) -> None:
        """A queued task enqueued with ``concurrency_key=key``."""
        self.queued(task_id, recipe=Recipe(args=(1,), concurrency_key=key), **changes)

    def test_a_fleet_limit_is_declared_listed_replaced_and_deleted(self) -> None:
        self.require_slots()
        assert self.queue.list_limits() == []
        self.queue.set_limit(check_limit("tenant:*", concurrency=2))
        self.queue.set_limit(check_limit("db", rate="5/m"))
        self.queue.set_limit(check_limit("tenant:*", concurrency=1, rate="10/s"))
        assert [limit.to_dict() for limit in self.queue.list_limits()] == [
            {"key": "db", "concurrency": None, "rate": "5/m"},
            {"key": "tenant:*", "concurrency": 1, "rate": "10/s"},
        ]
        assert self.queue.delete_limit("db") is True
        assert self.queue.delete_limit("db") is False
        assert [limit.key for limit in self.queue.list_limits()] == ["tenant:*"]

    def test_a_pattern_limits_each_dynamic_key_on_its_own(self) -> None:
        self.require_slots()
        self.queue.set_limit(check_limit("tenant:*", concurrency=1))
        for i in range(3):
            self.keyed(f"a-{i}", "tenant:a")
        self.keyed("b-0", "tenant:b")
        self.keyed("b-1", "tenant:b")
        self.keyed("free", None)
        self.keyed("other", "shop:1")
        assert self.claim("w1") == ["a-0", "b-0", "free", "other"]
        assert self.claim("w2") == []  # one per tenant, across claimers
        slots = self.queue.list_global_slots()
        assert [(s.name, s.task_id, s.owner) for s in slots] == [
            ("tenant:a", "a-0", "w1"),
            ("tenant:b", "b-0", "w1"),
        ]
        assert self.queue.release_global_slots("w1", "a-0") == 1
        assert self.claim("w2") == ["a-1"]
        self.queue.delete_limit("tenant:*")
        assert self.claim("w3") == ["a-2", "b-1"]  # no limit: nothing held back

    def test_an_exact_limit_wins_over_a_pattern_and_tags_count_too(self) -> None:
        self.require_slots()
        self.queue.set_limit(check_limit("tenant:*", concurrency=1))
        self.queue.set_limit(check_limit("tenant:big", concurrency=2))
        self.queue.set_limit(check_limit("gpu", concurrency=1))
        for i in range(3):
            self.keyed(f"big-{i}", "tenant:big")
        self.keyed("gpu-a", "tenant:x", tags=frozenset({"gpu"}))
        self.keyed("gpu-b", "tenant:y", tags=frozenset({"gpu"}))
        assert self.claim("w1") == ["big-0", "big-1", "gpu-a"]
        assert self.claim("w2") == []

    def test_a_rate_limit_caps_starts_in_a_sliding_window(self) -> None:
        self.require_slots()
        self.queue.set_limit(check_limit("mail", rate="2/m"))
        for i in range(5):
            self.keyed(f"m-{i}", "mail")
        assert self.claim("w1", limit=1) == ["m-0"]
        self.clock.advance(30)
        assert self.claim("w2") == ["m-1"]  # the second start of this window
        self.clock.advance(29)
        assert self.claim("w1") == []  # m-0's window (0..60 s) still counts it
        self.clock.advance(1)
        assert self.claim("w1") == ["m-2"]  # m-0's start expired; m-1 still counts
        starts = self.queue.list_limit_starts()
        live = [s.task_id for s in starts if s.live(self.clock.now())]
        assert live == ["m-1", "m-2"]
        assert all(s.expires_at - s.started_at == timedelta(minutes=1) for s in starts)
        self.clock.advance(30)
        assert self.claim("w1") == ["m-3"]

    def test_concurrency_and_rate_together(self) -> None:
        self.require_slots()
        self.queue.set_limit(check_limit("api", concurrency=1, rate="2/s"))
        for i in range(4):
            self.keyed(f"api-{i}", "api")
        assert self.claim("w1") == ["api-0"]
        assert self.queue.release_global_slots("w1", "api-0") == 1
        assert self.claim("w1") == ["api-1"]
        assert self.queue.release_global_slots("w1", "api-1") == 1
        assert self.claim("w1") == []  # room for one holder, but two starts this second
        self.clock.advance(1)
        assert self.claim("w1") == ["api-2"]

    def test_a_worker_limit_and_a_store_limit_on_one_key_take_the_smaller(self) -> None:
        self.require_slots()
        self.queue.set_limit(check_limit("db", concurrency=3))
        for i in range(4):
            self.queued(f"db-{i}", tags=frozenset({"db"}))
        assert self.claim("w1", db=1) == ["db-0"]
        assert self.claim("w2") == ["db-1", "db-2"]
