"""``CommandConsumer``: the one claim / apply / complete / release loop, on every store.

Each test runs on the in-memory store, SQLite and PostgreSQL: what a command becomes
(completed, handed back, kept, lost) is the store's record, so it is read back from
the store, never from the consumer's own counters alone.
"""

from __future__ import annotations

import logging

import pytest

from chongming_task._consumer import KEEP, RELEASE, CommandConsumer, Complete, Outcome
from chongming_task.errors import ClaimLost, StoreError
from chongming_task.stores._base import Command, TaskStore
from chongming_task.testing import FakeClock

log = logging.getLogger("chongming_task.tests.consumer")


@pytest.fixture
def store_clock() -> FakeClock:
    """The clock of the ``store`` fixture (tests/conftest.py): every store in turn."""
    return FakeClock()


def issue(store: TaskStore, target: str, action: str = "stop", *, kind: str = "task") -> Command:
    return store.submit_command(
        Command.new(
            kind=kind,  # type: ignore[arg-type]
            target=target,
            action=action,
            issued_by="ops",
            issued_at=store.clock.now(),
        )
    )


def consumer(
    store: TaskStore, owner: str = "node-1", *, actions: frozenset[str] | None = None
) -> CommandConsumer:
    return CommandConsumer(
        store, owner, kinds=("task",), actions=actions, lease=30.0, batch=10, logger=log
    )


def status(store: TaskStore, command: Command) -> str:
    stored = store.get_command(command.command_id)
    assert stored is not None
    return stored.status


def test_complete_release_and_keep_reach_the_store(store: TaskStore) -> None:
    done, theirs, later = issue(store, "a"), issue(store, "b"), issue(store, "c")
    decisions: dict[str, Outcome] = {
        "a": Complete({"applied": True}),
        "b": RELEASE,
        "c": KEEP,
    }
    taker = consumer(store)
    batch = taker.poll(lambda command: decisions[command.target])
    assert (batch.claimed, batch.handed_back, batch.more) == (3, 1, True)
    assert status(store, done) == "completed"
    assert store.get_command(done.command_id).result == {"applied": True}  # type: ignore[union-attr]
    handed_back = store.get_command(theirs.command_id)
    assert handed_back is not None
    assert (handed_back.status, handed_back.claimed_by) == ("pending", None)
    kept = store.get_command(later.command_id)
    assert kept is not None
    assert (kept.status, kept.claimed_by) == ("claimed", "node-1")
    assert (taker.completed, taker.released) == (1, 1)
    # The kept one is completed later, by whoever holds it.
    assert taker.complete(kept, {"applied": True, "late": True})
    assert status(store, later) == "completed"


def test_a_handed_back_command_is_claimed_by_the_next_consumer(store: TaskStore) -> None:
    command = issue(store, "job-9")
    consumer(store, "bystander").poll(lambda _: RELEASE)
    claimed: list[str] = []

    def take(found: Command) -> Outcome:
        claimed.append(found.command_id)
        return Complete(None)

    assert consumer(store, "holder").poll(take).claimed == 1
    assert claimed == [command.command_id]
    assert status(store, command) == "completed"


def test_a_failing_handler_hands_its_command_back_and_the_batch_goes_on(
    store: TaskStore,
) -> None:
    first, second, third = issue(store, "a"), issue(store, "b"), issue(store, "c")

    def handle(command: Command) -> Outcome:
        if command.target == "b":
            raise RuntimeError("cannot apply b")
        return Complete({"applied": True})

    with pytest.raises(RuntimeError, match="cannot apply b"):
        consumer(store).poll(handle)
    assert status(store, first) == "completed"
    assert status(store, third) == "completed"
    failed = store.get_command(second.command_id)
    assert failed is not None
    assert (failed.status, failed.claimed_by) == ("pending", None)  # ready for a retry


def test_a_lost_claim_is_reported_not_raised(
    store: TaskStore, caplog: pytest.LogCaptureFixture
) -> None:
    issue(store, "a")
    taker = consumer(store)
    (command,) = taker.claim()
    assert taker.release(command)  # the claim is gone now
    with caplog.at_level(logging.WARNING, logger=log.name):
        assert taker.complete(command, {"applied": True}) is False
        assert taker.release(command) is False
    assert len([r for r in caplog.records if command.command_id in r.getMessage()]) == 2
    with pytest.raises(ClaimLost):
        taker.extend(command)


class BrokenCompletion:
    """``store``, except that completing a command fails as a store outage would."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def complete_command(self, command_id: str, claim_token: str, result: object = None) -> None:
        raise StoreError("the database went away")


def test_other_store_failures_go_to_on_store_error(store: TaskStore) -> None:
    issue(store, "a")
    seen: list[tuple[str, str]] = []
    taker = CommandConsumer(
        BrokenCompletion(store),  # type: ignore[arg-type]
        "node-1",
        kinds=("task",),
        actions=None,
        lease=30.0,
        batch=10,
        logger=log,
        on_store_error=lambda command, exc: seen.append((command.target, str(exc))),
    )
    (command,) = taker.claim()
    assert taker.complete(command, None) is False
    assert seen == [("a", "the database went away")]
    assert status(store, command) == "claimed"  # its lease runs out; then it is retried


def test_without_on_store_error_a_store_failure_is_raised_and_the_command_handed_back(
    store: TaskStore,
) -> None:
    command = issue(store, "a")
    taker = consumer(BrokenCompletion(store))  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="went away"):
        taker.poll(lambda _: Complete(None))
    assert status(store, command) == "pending"


def test_only_the_actions_and_kinds_asked_for_are_claimed(store: TaskStore) -> None:
    stop = issue(store, "a", "stop")
    submit = issue(store, "a", "submit")
    schedule = issue(store, "nightly", "pause", kind="schedule")
    seen: list[str] = []

    def take(command: Command) -> Outcome:
        seen.append(command.action)
        return Complete(None)

    consumer(store, actions=frozenset({"stop"})).poll(take)
    assert seen == ["stop"]
    assert status(store, stop) == "completed"
    assert status(store, submit) == "pending"
    assert status(store, schedule) == "pending"


def test_the_batch_and_limit_bound_a_claim(store: TaskStore) -> None:
    for index in range(5):
        issue(store, f"t{index}")
    taker = CommandConsumer(
        store, "node-1", kinds=("task",), actions=None, lease=30.0, batch=2, logger=log
    )
    assert taker.poll(lambda _: Complete(None)).claimed == 2
    assert taker.poll(lambda _: Complete(None), limit=1).claimed == 1
    assert taker.poll(lambda _: Complete(None), limit=10).claimed == 2
    assert taker.poll(lambda _: Complete(None)).claimed == 0


def test_extend_keeps_a_kept_command_from_being_claimed_again(store: TaskStore) -> None:
    issue(store, "a")
    clock = store.clock
    assert isinstance(clock, FakeClock)
    holder = consumer(store, "holder")
    (command,) = holder.claim()
    clock.advance(20.0)
    holder.extend(command)  # 30 s from now
    clock.advance(20.0)  # 40 s after the claim: alive only thanks to the extension
    assert consumer(store, "other").claim() == []
    clock.advance(15.0)
    (again,) = consumer(store, "other").claim()  # expired: claimable again
    assert again.command_id == command.command_id
