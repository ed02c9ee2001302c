"""``deferred_snapshot``: a TaskSnapshot decoded on first use, indistinguishable once read.

SQLite's ``mark_lost_many`` hands these to reconcile's subscribers so that restart
recovery does not decode tens of thousands of snapshots nobody looks into; whoever does
look must see exactly the snapshot the store holds.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from datetime import UTC, datetime

import pytest

from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.model import (
    Failure,
    FailureKind,
    TaskSnapshot,
    deferred_snapshot,
    machine_transition,
    machine_transitions,
)
from chongming_task.states import TaskStatus

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
FULL = TaskSnapshot(
    task_id="t-1",
    name="job",
    status=TaskStatus.LOST,
    status_version=5,
    created_at=T0,
    updated_at=T0,
    finished_at=T0,
    failure=Failure(kind=FailureKind.LOST, message="gone", retryable=True),
    tags=frozenset({"a", "b"}),
    metadata={"k": [1, "v"]},
)


class Decoder:
    """Counts its calls: the decode must happen once, and only when needed."""

    def __init__(self, snapshot: TaskSnapshot = FULL) -> None:
        self.calls = 0
        self.snapshot = snapshot

    def __call__(self) -> TaskSnapshot:
        self.calls += 1
        return self.snapshot


def deferred(decoder: Decoder) -> TaskSnapshot:
    return deferred_snapshot(
        decoder, task_id="t-1", name="job", status=TaskStatus.LOST, status_version=5
    )


def test_the_given_fields_are_read_without_decoding() -> None:
    decoder = Decoder()
    snapshot = deferred(decoder)
    assert isinstance(snapshot, TaskSnapshot)
    assert (snapshot.task_id, snapshot.name, snapshot.status, snapshot.status_version) == (
        "t-1",
        "job",
        TaskStatus.LOST,
        5,
    )
    assert snapshot.is_terminal
    assert decoder.calls == 0


def test_any_other_field_decodes_once_and_every_field_is_the_decoded_one() -> None:
    decoder = Decoder()
    snapshot = deferred(decoder)
    assert snapshot.failure == FULL.failure
    assert decoder.calls == 1
    for field in dataclasses.fields(TaskSnapshot):
        assert getattr(snapshot, field.name) == getattr(FULL, field.name), field.name
    assert decoder.calls == 1


def test_it_equals_the_decoded_snapshot_both_ways_and_prints_as_it() -> None:
    assert deferred(Decoder()) == FULL
    plain = FULL
    assert plain.__eq__(deferred(Decoder())) is NotImplemented  # so Python asks the other side
    assert (plain == deferred(Decoder())) is True
    assert deferred(Decoder()) != FULL.replace(name="other")
    assert FULL.replace(name="other") != deferred(Decoder())
    assert deferred(Decoder()) != "t-1"
    assert repr(deferred(Decoder())) == repr(FULL)
    assert dataclasses.asdict(deferred(Decoder())) == dataclasses.asdict(FULL)


def test_copies_and_pickles_are_plain_snapshots() -> None:
    for made in (
        pickle.loads(pickle.dumps(deferred(Decoder()))),
        copy.copy(deferred(Decoder())),
        copy.deepcopy(deferred(Decoder())),
        deferred(Decoder()).replace(),
    ):
        assert type(made) is TaskSnapshot
        assert made == FULL
    assert deferred(Decoder()).replace(name="renamed") == FULL.replace(name="renamed")
    assert dataclasses.replace(deferred(Decoder()), name="renamed") == FULL.replace(name="renamed")


def test_it_stays_immutable_and_unknown_names_do_not_decode() -> None:
    decoder = Decoder()
    snapshot = deferred(decoder)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.name = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        snapshot.nope  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(snapshot, "__dict__")
    assert decoder.calls == 0


def test_a_corrupt_row_fails_where_it_is_read() -> None:
    def corrupt() -> TaskSnapshot:
        raise StoreError("corrupt task row")

    snapshot = deferred_snapshot(
        corrupt, task_id="t-1", name="job", status=TaskStatus.LOST, status_version=5
    )
    assert snapshot.name == "job"
    with pytest.raises(StoreError, match="corrupt"):
        snapshot.failure  # noqa: B018


def test_machine_transitions_builds_what_machine_transition_builds() -> None:
    make = machine_transitions(
        to_status=TaskStatus.LOST, trigger="reconcile:x", at=T0, actor="node-β"
    )
    made = make("t-1", TaskStatus.RUNNING, 5, "why", 2)
    assert made == machine_transition(
        task_id="t-1",
        from_status=TaskStatus.RUNNING,
        to_status=TaskStatus.LOST,
        trigger="reconcile:x",
        version=5,
        at=T0,
        actor="node-β",
        reason="why",
        attempt=2,
    )
    with pytest.raises(ConfigurationError, match="trigger"):
        machine_transitions(to_status=TaskStatus.LOST, trigger="", at=T0, actor=None)
    with pytest.raises(ConfigurationError, match="actor"):
        machine_transitions(to_status=TaskStatus.LOST, trigger="t", at=T0, actor=3)  # type: ignore[arg-type]
