"""Contract cases for commands: claims under a lease, fencing, and waiting for arrivals."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.stores._base import ClaimLost, Command
from chongming_task.testing import wait_until
from chongming_task.testing._store_contract._support import (
    ContractHarness,
    as_commands,
    assert_same_json,
    raises,
)

__all__ = ["CommandCases"]

#: Real-time bound for "returns promptly" (generous for a loaded CI machine).
PROMPT_SECONDS = 3.0


def _expect_claim_lost(call: Callable[[], object]) -> ClaimLost:
    return raises(ClaimLost, call, "a stale claim token must raise ClaimLost")


class CommandCases(ContractHarness):
    """submit / claim / complete / release / extend / get / wait."""

    def test_submit_and_get_round_trip(self) -> None:
        command = self.command(
            "任务-1",
            action="pause",
            payload={"reason": "发布窗口", "nested": {"ids": [1, 2.5, None, True]}, "n": 1e300},
            target_owner="worker-1",
        )
        stored = self.commands.submit_command(command)
        assert stored == command
        got = self.commands.get_command(command.command_id)
        assert got == command
        assert got is not None
        assert_same_json(dict(got.payload), dict(command.payload))
        assert got.status == "pending"
        assert got.claims == 0
        assert self.commands.get_command("missing") is None

    def test_submit_stores_a_fresh_pending_command_whatever_it_is_given(self) -> None:
        forged = uuid.uuid4().hex
        given = replace(
            self.command(),
            status="claimed",
            claimed_by="someone",
            claim_token=forged,
            lease_until=self.clock.now(),
            claims=3,
        )
        stored = self.commands.submit_command(given)
        assert stored.status == "pending"
        assert (stored.claimed_by, stored.claim_token, stored.lease_until) == (None, None, None)
        assert stored.claims == 0
        assert self.commands.get_command(given.command_id) == stored
        [claimed] = self.commands.claim_commands("w", lease=30)
        assert claimed.claim_token != forged

    def test_submit_is_idempotent_on_command_id(self) -> None:
        command = self.command()
        self.commands.submit_command(command)
        [claimed] = self.commands.claim_commands("w", lease=30)
        again = self.commands.submit_command(command)
        assert again.status == "claimed"
        assert again.claim_token == claimed.claim_token
        assert self.commands.claim_commands("w", lease=30) == []

    def test_claim_respects_target_owner_and_kinds(self) -> None:
        mine = self.commands.submit_command(self.command("t1", target_owner="me"))
        anyone = self.commands.submit_command(self.command("t2"))
        theirs = self.commands.submit_command(self.command("t3", target_owner="them"))
        sched = self.commands.submit_command(self.command("nightly", kind="schedule", action="run"))
        got = self.commands.claim_commands("me", lease=30, kinds=["task"])
        assert [c.command_id for c in got] == [mine.command_id, anyone.command_id]
        for command in got:
            assert command.status == "claimed"
            assert command.claimed_by == "me"
            assert command.claim_token
            assert command.claims == 1
            assert command.lease_until is not None
        assert [c.command_id for c in self.commands.claim_commands("me", lease=30)] == [
            sched.command_id
        ]
        assert [c.command_id for c in self.commands.claim_commands("them", lease=30)] == [
            theirs.command_id
        ]

    def test_claims_are_oldest_first_limited_and_tokens_are_unique(self) -> None:
        ids = [self.commands.submit_command(self.command(f"t{i}")).command_id for i in range(7)]
        first = self.commands.claim_commands("w", lease=30, limit=3)
        second = self.commands.claim_commands("w", lease=30, limit=10)
        assert [c.command_id for c in first + second] == ids
        tokens = {c.claim_token for c in first + second}
        assert len(tokens) == 7
        assert self.commands.claim_commands("w", lease=30) == []

    # ------------------------------------------------------------ claim order

    def test_claims_are_oldest_first_whatever_a_payload_says(self) -> None:
        # A "priority" in a payload means nothing to the claim: commands are taken in
        # the order they were submitted, and one handed back keeps its place.
        payloads: list[dict[str, Any]] = [{"priority": 1}, {}, {"priority": 99}, {"priority": -3}]
        issued = [
            self.commands.submit_command(self.command(f"t{n}", payload=payload))
            for n, payload in enumerate(payloads)
        ]
        first = self.commands.claim_commands("w", lease=30, limit=2, kinds=["task"])
        assert [c.target for c in first] == ["t0", "t1"], "claims must be oldest first"
        back = first[0]
        assert back.claim_token is not None
        self.commands.release_command(back.command_id, back.claim_token)
        rest = self.commands.claim_commands("w", lease=30, limit=10, actions=["stop"])
        assert [c.command_id for c in rest] == [issued[n].command_id for n in (0, 2, 3)]
        # A claim whose lease expired competes in the same order.
        self.clock.advance(31)
        again = self.commands.claim_commands("w2", lease=30, limit=2)
        assert [c.target for c in again] == ["t0", "t1"]
        assert [c.claims for c in again] == [3, 2]

    def test_bad_claim_arguments_are_configuration_errors(self) -> None:
        for call in (
            lambda: self.commands.claim_commands("w", lease=0),
            lambda: self.commands.claim_commands("w", lease=-1),
            lambda: self.commands.claim_commands("w", lease=1, limit=0),
        ):
            raises(
                ConfigurationError, call, "invalid claim arguments must raise ConfigurationError"
            )

    # ------------------------------------------------------------ the action filter

    def test_claim_filters_by_action_oldest_first(self) -> None:
        stop = self.commands.submit_command(self.command("t1", action="stop"))
        first = self.commands.submit_command(self.command("t2", action="adopt"))
        pause = self.commands.submit_command(self.command("t3", action="pause", target_owner="w"))
        second = self.commands.submit_command(self.command("t4", action="adopt"))
        run = self.commands.submit_command(self.command("s1", kind="schedule", action="run"))
        controls = self.commands.claim_commands(
            "w", lease=30, kinds=["task"], actions={"stop", "pause", "resume"}
        )
        assert [c.command_id for c in controls] == [stop.command_id, pause.command_id]
        for untouched in (first, second, run):
            got = self.commands.get_command(untouched.command_id)
            assert got is not None
            assert (got.status, got.claims) == ("pending", 0), "claimed an unwanted action"
        adopts = self.commands.claim_commands("w", lease=30, kinds=("task",), actions=("adopt",))
        assert [c.command_id for c in adopts] == [first.command_id, second.command_id]
        assert all(c.claimed_by == "w" and c.claim_token for c in adopts)
        assert self.commands.claim_commands("w", lease=30, actions=["adopt", "stop"]) == []
        assert [c.command_id for c in self.commands.claim_commands("w", lease=30)] == [
            run.command_id
        ]

    def test_a_claimer_of_other_actions_never_holds_up_the_oldest_command(self) -> None:
        # The interleaving the filter exists for: one consumer claims between two
        # commands of another's action, and that one claims before anything is back.
        worker = as_commands(self.second_store())
        older = self.commands.submit_command(self.command("a", action="adopt"))
        assert (
            self.commands.claim_commands("w", lease=30, actions=["stop", "pause", "resume"]) == []
        )
        newer = self.commands.submit_command(self.command("b", action="adopt"))
        [taken] = worker.claim_commands("w", lease=30, limit=1, actions=["adopt"])
        assert taken.command_id == older.command_id
        [then] = worker.claim_commands("w", lease=30, limit=1, actions=["adopt"])
        assert then.command_id == newer.command_id

    def test_an_expired_claim_is_reclaimed_only_by_its_actions(self) -> None:
        command = self.commands.submit_command(self.command(action="adopt"))
        [first] = self.commands.claim_commands("a", lease=5, actions=["adopt"])
        self.clock.advance(6)
        assert self.commands.claim_commands("b", lease=5, actions=["stop"]) == []
        [again] = self.commands.claim_commands("b", lease=5, actions=["adopt"])
        assert again.command_id == command.command_id
        assert again.claims == 2
        assert again.claim_token != first.claim_token

    def test_bad_action_filters_are_configuration_errors(self) -> None:
        command = self.commands.submit_command(self.command(action="s"))
        bad: tuple[Any, ...] = ("adopt", b"adopt", [], ["stop", ""], [None])
        for actions in bad:

            def claim(actions: Any = actions) -> object:
                return self.commands.claim_commands("w", lease=5, actions=actions)

            exc = raises(
                ConfigurationError, claim, f"actions={actions!r} must raise ConfigurationError"
            )
            assert isinstance(exc, ValueError)
        [claimed] = self.commands.claim_commands("w", lease=5, actions=["s"])
        assert claimed.command_id == command.command_id
        assert claimed.claims == 1, "a refused filter must not have claimed anything"

    def test_an_expired_lease_makes_the_command_claimable_again(self) -> None:
        command = self.commands.submit_command(self.command())
        [first] = self.commands.claim_commands("a", lease=30)
        self.clock.advance(29.9)
        assert self.commands.claim_commands("b", lease=30) == []
        self.clock.advance(0.1)
        [second] = self.commands.claim_commands("b", lease=30)
        assert second.command_id == command.command_id
        assert second.claimed_by == "b"
        assert second.claims == 2
        assert second.claim_token != first.claim_token

    def test_a_stale_token_is_fenced_off_everywhere(self) -> None:
        command = self.commands.submit_command(self.command())
        [old] = self.commands.claim_commands("a", lease=5)
        self.clock.advance(6)
        [new] = self.commands.claim_commands("b", lease=5)
        assert old.claim_token is not None
        assert new.claim_token is not None
        stale = old.claim_token
        lost = _expect_claim_lost(lambda: self.commands.complete_command(command.command_id, stale))
        assert lost.command_id == command.command_id
        _expect_claim_lost(lambda: self.commands.release_command(command.command_id, stale))
        _expect_claim_lost(lambda: self.commands.extend_command(command.command_id, stale, 10))
        self.commands.complete_command(command.command_id, new.claim_token, {"applied": True})
        done = self.commands.get_command(command.command_id)
        assert done is not None
        assert done.status == "completed"
        assert done.result == {"applied": True}
        assert done.claimed_by == "b"

    def test_an_expired_but_unclaimed_lease_still_completes(self) -> None:
        command = self.commands.submit_command(self.command())
        [claim] = self.commands.claim_commands("a", lease=5)
        self.clock.advance(60)
        assert claim.claim_token is not None
        self.commands.complete_command(command.command_id, claim.claim_token, "late")
        done = self.commands.get_command(command.command_id)
        assert done is not None
        assert done.result == "late"
        assert self.commands.claim_commands("b", lease=5) == []

    def test_completion_is_final(self) -> None:
        command = self.commands.submit_command(self.command())
        [claim] = self.commands.claim_commands("a", lease=5)
        token = claim.claim_token
        assert token is not None
        self.commands.complete_command(command.command_id, token, [1, {"深": None}])
        done = self.commands.get_command(command.command_id)
        assert done is not None
        assert done.completed_at == self.clock.now()
        assert done.result == [1, {"深": None}]
        _expect_claim_lost(lambda: self.commands.complete_command(command.command_id, token))
        self.clock.advance(3600)
        assert self.commands.claim_commands("a", lease=5) == []

    def test_release_hands_the_command_back(self) -> None:
        command = self.commands.submit_command(self.command(target_owner=None))
        [claim] = self.commands.claim_commands("console", lease=30)
        assert claim.claim_token is not None
        self.commands.release_command(command.command_id, claim.claim_token)
        released = self.commands.get_command(command.command_id)
        assert released is not None
        assert released.status == "pending"
        assert released.claim_token is None
        assert released.claimed_by is None
        [again] = self.commands.claim_commands("worker", lease=30)
        assert again.claims == 2
        token = claim.claim_token
        _expect_claim_lost(lambda: self.commands.complete_command(command.command_id, token))

    def test_extend_keeps_the_claim(self) -> None:
        command = self.commands.submit_command(self.command())
        [claim] = self.commands.claim_commands("a", lease=10)
        assert claim.claim_token is not None
        self.clock.advance(8)
        self.commands.extend_command(command.command_id, claim.claim_token, 10)
        self.clock.advance(8)
        assert self.commands.claim_commands("b", lease=10) == []
        got = self.commands.get_command(command.command_id)
        assert got is not None
        assert got.claim_token == claim.claim_token
        self.clock.advance(2)
        assert len(self.commands.claim_commands("b", lease=10)) == 1

    def test_unknown_commands_are_store_errors_not_lost_claims(self) -> None:
        for call in (
            lambda: self.commands.complete_command("missing", "token"),
            lambda: self.commands.release_command("missing", "token"),
            lambda: self.commands.extend_command("missing", "token", 5),
        ):
            exc = raises(StoreError, call, "an unknown command must raise StoreError")
            assert not isinstance(exc, ClaimLost), "an unknown command is not a lost claim"

    def test_commands_from_another_connection_are_claimable(self) -> None:
        other = as_commands(self.second_store())
        command = other.submit_command(self.command(target_owner="me"))
        [claim] = self.commands.claim_commands("me", lease=30)
        assert claim.command_id == command.command_id
        assert claim.claim_token is not None
        other.complete_command(command.command_id, claim.claim_token, "ok")
        got = self.commands.get_command(command.command_id)
        assert got is not None
        assert got.status == "completed"

    # ------------------------------------------------------------ waiting

    def _waiter(self, timeout: float) -> tuple[threading.Thread, list[float]]:
        elapsed: list[float] = []

        def wait() -> None:
            started = time.monotonic()
            self.commands.wait_for_commands(timeout)
            elapsed.append(time.monotonic() - started)

        thread = threading.Thread(target=wait, daemon=True)
        thread.start()
        return thread, elapsed

    def test_wait_times_out_on_the_stores_clock(self) -> None:
        self.commands.claim_commands("w", lease=5)
        thread, elapsed = self._waiter(30.0)
        self.clock.wait_for_sleepers(1)
        self.clock.advance(30.0)
        thread.join(PROMPT_SECONDS)
        assert not thread.is_alive(), "wait_for_commands ignored its timeout"
        assert elapsed

    def test_wait_returns_when_a_command_arrives(self) -> None:
        self.commands.claim_commands("w", lease=5)
        thread, elapsed = self._waiter(3600.0)
        self.clock.wait_for_sleepers(1)
        self.commands.submit_command(self.command())
        thread.join(PROMPT_SECONDS)
        assert not thread.is_alive(), "wait_for_commands slept through a submit"
        assert elapsed[0] < PROMPT_SECONDS

    def test_wait_returns_at_once_if_a_command_came_since_the_last_claim(self) -> None:
        other = as_commands(self.second_store())

        def poll_once() -> None:
            # A poller's loop: claim, (a command arrives), wait. Same thread throughout.
            self.commands.claim_commands("w", lease=5)
            other.submit_command(self.command())
            self.commands.wait_for_commands(3600.0)

        thread = threading.Thread(target=poll_once, daemon=True)
        thread.start()
        thread.join(PROMPT_SECONDS)
        assert not thread.is_alive(), "a command submitted before the wait was missed"

    def test_wait_wakes_for_a_command_from_another_connection(self) -> None:
        second = self.second_store()
        other = as_commands(second)
        with self.real_time(self.store, second) as clock:
            self.commands.claim_commands("w", lease=5)
            thread, elapsed = self._waiter(60.0)
            wait_until(lambda: clock.sleepers >= 1, timeout=PROMPT_SECONDS)
            other.submit_command(self.command())
            thread.join(PROMPT_SECONDS)
            assert not thread.is_alive(), "a command from another connection was not noticed"
            assert elapsed[0] < PROMPT_SECONDS

    def test_close_wakes_waiters_promptly(self) -> None:
        with self.real_time() as clock:
            self.commands.claim_commands("w", lease=5)
            thread, _ = self._waiter(3600.0)
            wait_until(lambda: clock.sleepers >= 1, timeout=PROMPT_SECONDS)
            self.store.close()
            thread.join(PROMPT_SECONDS)
            assert not thread.is_alive(), "close() left a waiter blocked"

    def test_commands_are_immutable_records(self) -> None:
        command = self.command()
        assert isinstance(command, Command)

        def mutate() -> None:
            command.status = "completed"  # type: ignore[misc]

        raises(AttributeError, mutate, "Command must be frozen")
