"""Contract cases for the audit trail and the side channel (touch, leases)."""

from __future__ import annotations

from datetime import datetime, timedelta

from chongming_task._checkpoint_gaps import BOUNDS, CheckpointGaps
from chongming_task._model import Progress
from chongming_task.errors import ConfigurationError
from chongming_task.states import TaskStatus
from chongming_task.testing._store_contract._support import (
    TZ_MINUS_3_30,
    ContractHarness,
    assert_snapshot_equal,
    raises,
)

__all__ = ["TrailCases"]

S = TaskStatus


class TrailCases(ContractHarness):
    """``append``/``history``, ``touch`` and ``renew_leases``."""

    def test_append_is_idempotent_and_history_is_ordered_by_version(self) -> None:
        task_id = "trail"
        steps = [
            self.transition(task_id, 0, S.PENDING),
            self.transition(task_id, 1, S.QUEUED, S.PENDING),
            self.transition(task_id, 2, S.STARTING, S.QUEUED, attempt=1),
            self.transition(task_id, 3, S.RUNNING, S.STARTING, reason="launched 🚀", attempt=1),
        ]
        for step in (steps[2], steps[0], steps[3], steps[1], steps[2], steps[0]):
            self.store.append(step)
        assert self.store.history(task_id) == steps

    def test_append_of_a_different_record_under_a_used_version_is_ignored(self) -> None:
        first = self.transition("trail", 1, S.QUEUED, S.PENDING, actor="first")
        self.store.append(first)
        self.store.append(self.transition("trail", 1, S.CANCELLED, S.PENDING, actor="second"))
        assert self.store.history("trail") == [first]

    def test_history_keeps_every_field(self) -> None:
        step = self.transition(
            "trail",
            4,
            S.STOPPING,
            S.RUNNING,
            trigger="control:stop_requested",
            actor="ops «console»",
            reason="发布窗口",
            attempt=3,
            at=datetime(2026, 3, 1, 9, 30, 0, 5, tzinfo=TZ_MINUS_3_30),
        )
        self.store.append(step)
        got = self.store.history("trail")
        assert got == [step]
        assert got[0].at.utcoffset() == step.at.utcoffset()

    def test_history_of_an_unknown_task_is_empty(self) -> None:
        assert self.store.history("nobody") == []

    def test_touch_updates_the_side_channel_and_leaves_the_version_alone(self) -> None:
        snap = self.created(status=S.RUNNING, status_version=3)
        beat = datetime(2026, 3, 1, 9, 0, 1, tzinfo=TZ_MINUS_3_30)
        until = self.clock.now() + timedelta(seconds=30)
        progress = Progress(done=120, total=500, unit="rows", message="半")
        assert self.store.touch(
            snap.task_id,
            progress=progress,
            heartbeat_at=beat,
            lease_owner="host:1",
            lease_until=until,
            pid=4242,
        )
        expected = snap.replace(
            progress=progress,
            last_heartbeat_at=beat,
            lease_owner="host:1",
            lease_until=until,
            pid=4242,
        )
        assert_snapshot_equal(self.store.get(snap.task_id), expected)
        # The version did not move, so the state writer's next save still succeeds.
        final = expected.replace(status=S.SUCCEEDED, status_version=4)
        self.store.save(final, expect_version=3)
        assert_snapshot_equal(self.store.get(snap.task_id), final)

    def test_touch_changes_only_the_fields_it_is_given(self) -> None:
        snap = self.created(status=S.RUNNING)
        first = Progress(done=1, total=10)
        self.store.touch(snap.task_id, progress=first, lease_owner="a", pid=1)
        beat = self.clock.now()
        self.store.touch(snap.task_id, heartbeat_at=beat)
        got = self.store.get(snap.task_id)
        assert got is not None
        assert got.progress == first
        assert got.lease_owner == "a"
        assert got.pid == 1
        assert got.last_heartbeat_at == beat
        assert got.updated_at == snap.updated_at
        assert got.status_version == snap.status_version
        assert self.store.touch(snap.task_id)  # nothing to change, but the task exists

    def test_checkpoint_gaps_travel_the_side_channel_and_state_writes(self) -> None:
        if not self.store.keeps_checkpoint_gaps:
            self.skip("the store does not keep checkpoint gaps (keeps_checkpoint_gaps)")
        snap = self.created(status=S.RUNNING, status_version=3)
        counts = [0] * (len(BOUNDS) + 1)
        counts[3], counts[10], counts[-1] = 40, 2, 1
        gaps = CheckpointGaps(counts=tuple(counts), max=4000.25, loop_blocks=3, loop_block_max=0.75)
        beat = self.clock.now()
        assert self.store.touch(snap.task_id, checkpoint_gaps=gaps)
        self.store.touch(snap.task_id, heartbeat_at=beat)  # other fields leave it alone
        got = self.store.get(snap.task_id)
        assert got is not None
        assert got.checkpoint_gaps == gaps
        assert got.status_version == 3
        assert got.updated_at == snap.updated_at
        assert [s.checkpoint_gaps for s in self.store.query()] == [gaps]
        # A state write carries the snapshot's gaps; a later touch overrides them.
        more = gaps.merged(gaps)
        self.store.save(got.replace(status=S.SUCCEEDED, status_version=4), expect_version=3)
        stored = self.store.get(snap.task_id)
        assert stored is not None
        assert stored.checkpoint_gaps == gaps
        self.store.touch(snap.task_id, checkpoint_gaps=more)
        stored = self.store.get(snap.task_id)
        assert stored is not None
        assert stored.checkpoint_gaps == more

    def test_checkpoint_gaps_of_a_name_are_its_newest_runs(self) -> None:
        """``checkpoint_gaps_of``: the exact name's ``limit`` most recently created runs,
        those with gaps, newest first; a longer name sharing the prefix is another name."""
        if not self.store.keeps_checkpoint_gaps:
            self.skip("the store does not keep checkpoint gaps (keeps_checkpoint_gaps)")

        def gaps(n: int) -> CheckpointGaps:
            counts = [0] * (len(BOUNDS) + 1)
            counts[2] = n
            return CheckpointGaps(counts=tuple(counts), max=0.004)

        for index in range(4):
            self.created(f"run-{index}", name="etl", status=S.RUNNING)
            if index != 2:  # run-2 never reached a checkpoint
                assert self.store.touch(f"run-{index}", checkpoint_gaps=gaps(index + 1))
        self.created("other", name="etl.load", status=S.RUNNING)
        assert self.store.touch("other", checkpoint_gaps=gaps(9))
        assert self.store.checkpoint_gaps_of("etl", limit=10) == [
            ("run-3", gaps(4)),
            ("run-1", gaps(2)),
            ("run-0", gaps(1)),
        ]
        # The 2 newest runs: run-2 recorded none, so one pair.
        assert self.store.checkpoint_gaps_of("etl", limit=2) == [("run-3", gaps(4))]
        assert self.store.checkpoint_gaps_of("etl", limit=0) == []
        assert self.store.checkpoint_gaps_of("etl.load", limit=5) == [("other", gaps(9))]
        assert self.store.checkpoint_gaps_of("et", limit=5) == []
        for bad in (-1, 1.5, True):
            raises(
                ConfigurationError,
                lambda bad=bad: self.store.checkpoint_gaps_of("etl", limit=bad),  # type: ignore[misc]
                f"checkpoint_gaps_of(limit={bad!r}) must raise ConfigurationError",
            )

    def test_touch_of_an_unknown_task_returns_false(self) -> None:
        assert self.store.touch("ghost", progress=Progress(done=1)) is False
        assert self.store.touch("ghost") is False
        assert self.store.get("ghost") is None

    def test_touch_refuses_naive_datetimes(self) -> None:
        snap = self.created()
        naive = datetime(2026, 1, 1)  # naive on purpose: the point of the case
        raises(
            ConfigurationError,
            lambda: self.store.touch(snap.task_id, heartbeat_at=naive),
            "a naive heartbeat_at must raise ConfigurationError",
        )
        raises(
            ConfigurationError,
            lambda: self.store.touch(snap.task_id, lease_until=naive),
            "a naive lease_until must raise ConfigurationError",
        )

    def test_renew_leases_renews_only_the_owners_tasks(self) -> None:
        old = self.clock.now() + timedelta(seconds=10)
        new = self.clock.now() + timedelta(seconds=40)
        mine = [self.created(status=S.RUNNING, lease_owner="me", lease_until=old) for _ in range(3)]
        theirs = self.created(status=S.RUNNING, lease_owner="them", lease_until=old)
        ids = [snap.task_id for snap in mine] + [theirs.task_id, "ghost"]
        assert self.store.renew_leases("me", ids, new) == 3
        for snap in mine:
            got = self.store.get(snap.task_id)
            assert got is not None
            assert got.lease_until == new
            assert got.status_version == snap.status_version
        other = self.store.get(theirs.task_id)
        assert other is not None
        assert other.lease_until == old
        assert self.store.renew_leases("me", [], new) == 0
