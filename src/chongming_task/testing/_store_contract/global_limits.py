"""Contract cases for global limits: lease-backed slots taken by ``claim_queued``."""

from __future__ import annotations

from datetime import timedelta

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
