"""The direct snapshot/transition JSON is byte for byte ``dumps(obj.to_dict())``."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings

from chongming_task.errors import ConfigurationError
from chongming_task.model import Failure, FailureKind, TaskSnapshot, Transition, dumps
from chongming_task.states import TaskStatus
from chongming_task.stores._fastjson import TransitionsJson, snapshot_json, transition_json
from chongming_task.stores.codec import decode_snapshot, encode_snapshot, encode_transition
from chongming_task.testing.store_contract import StoreContract

from .strategies import snapshots, transitions

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@settings(max_examples=300)
@given(snapshots)
def test_generated_snapshots_encode_exactly_like_to_dict(snapshot: TaskSnapshot) -> None:
    assert snapshot_json(snapshot) == dumps(snapshot.to_dict())
    assert decode_snapshot(encode_snapshot(snapshot)) == snapshot


@settings(max_examples=300)
@given(transitions)
def test_generated_transitions_encode_exactly_like_to_dict(transition: Transition) -> None:
    assert transition_json(transition) == dumps(transition.to_dict())
    assert encode_transition(transition) == dumps(transition.to_dict())


@settings(max_examples=300)
@given(transitions)
def test_transitions_sharing_their_instant_encode_exactly_like_each_alone(
    transition: Transition,
) -> None:
    source = transition.from_status
    if source is None:  # a creation record is never written in bulk
        source = TaskStatus.RUNNING
        transition = dataclasses.replace(transition, from_status=source)
    batch = TransitionsJson(
        to_status=transition.to_status,
        trigger=transition.trigger,
        at=transition.at,
        actor=transition.actor,
    )
    for _ in range(2):  # the second call takes the reason from the cache
        assert batch(
            transition.task_id,
            source,
            transition.version,
            transition.reason,
            transition.attempt,
        ) == dumps(transition.to_dict())


def test_the_contracts_richest_snapshot() -> None:
    contract = StoreContract()
    contract.setup_method()
    rich = contract.rich_snapshot("rich")
    assert snapshot_json(rich) == dumps(rich.to_dict())
    lost = rich.replace(
        status=TaskStatus.LOST,
        failure=Failure(kind=FailureKind.LOST, message='"gone"\n\\', retryable=True),
        lease_until=None,
        finished_at=T0.astimezone(timezone(timedelta(seconds=1, microseconds=1))),
    )
    assert snapshot_json(lost) == dumps(lost.to_dict())


def _snapshot(**changes: Any) -> TaskSnapshot:
    base = TaskSnapshot(
        task_id="t", name="n", status=TaskStatus.QUEUED, status_version=1, created_at=T0,
        updated_at=T0,
    )  # fmt: skip
    return base.replace(**changes)


@pytest.mark.parametrize(
    "changes",
    [
        # Fields the model leaves unchecked are encoded as whatever JSON they are.
        {"owner": 7, "label": ["x", 1.5], "lease_owner": {"k": None}, "bucket_key": True},
        {"metadata": {"a": [1, 2.0, None]}, "outcome": "ü\u2028\x00"},
        {"tags": frozenset({"b", "a", 'q"uote'})},
    ],
)
def test_unchecked_and_free_form_fields(changes: dict[str, Any]) -> None:
    snapshot = _snapshot(**changes)
    assert snapshot_json(snapshot) == dumps(snapshot.to_dict())


@pytest.mark.parametrize("outcome", [float("nan"), {1: "x"}, object()])
def test_non_json_outcomes_are_refused_like_dumps(outcome: object) -> None:
    snapshot = _snapshot(outcome=outcome)
    try:
        expected: str | None = dumps(snapshot.to_dict())
    except (TypeError, ValueError):
        expected = None
    if expected is None:
        with pytest.raises(ConfigurationError, match="not JSON-serialisable"):
            encode_snapshot(snapshot)
    else:  # json turns int keys into strings; so does the direct encoder
        assert snapshot_json(snapshot) == expected


def test_instants_formatted_before_are_reused_by_identity_only() -> None:
    """The cache of formatted instants never hands one object's text to another."""
    from chongming_task.stores import _fastjson

    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    same_instant_elsewhere = at.astimezone(timezone(timedelta(hours=8)))
    assert at == same_instant_elsewhere  # equal, yet printed apart
    first = _fastjson._instants(at, None, at)
    assert first == [f'"{at.isoformat()}"', "null", f'"{at.isoformat()}"']
    assert _fastjson._RECENT[id(at)][0] is at  # kept with its object: the id stays taken
    second = _fastjson._instants(same_instant_elsewhere, at)
    assert second == [f'"{same_instant_elsewhere.isoformat()}"', f'"{at.isoformat()}"']
    for offset in range(_fastjson._RECENT_MAX + 10):  # bounded: cleared when full
        _fastjson._instants(at + timedelta(seconds=offset))
    assert len(_fastjson._RECENT) <= _fastjson._RECENT_MAX
    snapshot = TaskSnapshot(
        task_id="t", name="n", status=TaskStatus.PENDING, status_version=0,
        created_at=at, updated_at=same_instant_elsewhere,
    )  # fmt: skip
    assert snapshot_json(snapshot) == dumps(snapshot.to_dict())
