"""The JSON codec round-trips every model type exactly; corrupt data is a StoreError."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given

from chongming_task._model import (
    FORMAT_VERSION,
    Failure,
    FailureKind,
    Progress,
    TaskSnapshot,
    Transition,
    dumps,
    ensure_json,
    loads,
    parse_datetime,
)
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores._codec import encode_snapshot

from .strategies import aware_datetimes, failures, json_values, progresses, snapshots, transitions

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _through_json(data: dict[str, Any]) -> dict[str, Any]:
    text = dumps(data)
    assert isinstance(text, str)
    result: dict[str, Any] = loads(text)
    return result


def _same_instant_and_offset(left: datetime | None, right: datetime | None) -> None:
    if left is None or right is None:
        assert left is right
        return
    assert left == right
    assert left.utcoffset() == right.utcoffset()
    assert left.isoformat() == right.isoformat()


@given(progresses)
def test_progress_round_trip(progress: Progress) -> None:
    assert Progress.from_dict(_through_json(progress.to_dict())) == progress


@given(failures)
def test_failure_round_trip(failure: Failure) -> None:
    assert Failure.from_dict(_through_json(failure.to_dict())) == failure


@given(transitions)
def test_transition_round_trip(transition: Transition) -> None:
    back = Transition.from_dict(_through_json(transition.to_dict()))
    assert back == transition
    _same_instant_and_offset(back.at, transition.at)


@given(snapshots)
def test_snapshot_round_trip(snapshot: TaskSnapshot) -> None:
    data = snapshot.to_dict()
    assert data["v"] == FORMAT_VERSION
    back = TaskSnapshot.from_dict(_through_json(data))
    assert back == snapshot
    for name in ("created_at", "updated_at", "started_at", "finished_at", "lease_until"):
        _same_instant_and_offset(getattr(back, name), getattr(snapshot, name))
    assert back.to_dict() == data
    assert dumps(back.to_dict()) == dumps(data)


@given(aware_datetimes)
def test_parse_datetime_keeps_offset_and_microseconds(value: datetime) -> None:
    _same_instant_and_offset(parse_datetime(value.isoformat()), value)


@given(json_values)
def test_dumps_loads_nested_json(value: object) -> None:
    ensure_json(value)
    assert loads(dumps(value)) == value


def test_unicode_is_stored_as_text_not_escapes() -> None:
    failure = Failure(kind=FailureKind.EXCEPTION, message='连接失败 🚫 «quoted» \\ "x"')
    text = dumps(failure.to_dict())
    assert "连接失败 🚫" in text
    assert Failure.from_dict(loads(text)) == failure


def test_zoneinfo_datetimes_come_back_as_the_same_instant_and_offset() -> None:
    zoneinfo = pytest.importorskip("zoneinfo")
    try:
        shanghai = zoneinfo.ZoneInfo("Asia/Shanghai")
    except zoneinfo.ZoneInfoNotFoundError:  # pragma: no cover - no tz database
        pytest.skip("no time zone database")
    when = datetime(2026, 3, 1, 8, 30, 0, 123456, tzinfo=shanghai)
    back = parse_datetime(when.isoformat())
    _same_instant_and_offset(back, when)


# ----------------------------------------------------------------- corrupt data


def _snapshot_dict() -> dict[str, Any]:
    snap = TaskSnapshot(
        task_id="t1",
        name="extract",
        status=TaskStatus.RUNNING,
        status_version=3,
        created_at=T0,
        updated_at=T0,
        failure=Failure(kind=FailureKind.EXCEPTION, message="x"),
        progress=Progress(done=1),
    )
    return snap.to_dict()


def _transition_dict() -> dict[str, Any]:
    return Transition(
        task_id="t1", from_status=None, to_status=TaskStatus.PENDING, trigger="x", version=0, at=T0
    ).to_dict()


@pytest.mark.parametrize(
    "change",
    [
        {"status": "exploded"},
        {"status": 3},
        {"status_version": "3"},
        {"status_version": 1.5},
        {"status_version": -1},
        {"attempt": None},
        {"max_attempts": 0},
        {"created_at": "yesterday"},
        {"created_at": "2026-01-01T00:00:00"},
        {"created_at": None},
        {"updated_at": 1767225600},
        {"tags": "db"},
        {"tags": [1, 2]},
        {"metadata": ["not", "an", "object"]},
        {"failure": {"kind": "gremlins", "message": "x"}},
        {"failure": {"kind": "exception"}},
        {"failure": {"kind": "exception", "message": "x", "retryable": "false"}},
        {"failure": "boom"},
        {"progress": {"total": 5}},
        {"progress": {"done": "half"}},
        {"progress": [1, 2]},
        {"priority": "high"},
        {"bucket": -2},
        {"task_id": ""},
        {"v": FORMAT_VERSION + 1},
    ],
    ids=repr,
)
def test_corrupt_snapshot_is_a_store_error(change: dict[str, Any]) -> None:
    data = {**_snapshot_dict(), **change}
    with pytest.raises(StoreError):
        TaskSnapshot.from_dict(data)


@pytest.mark.parametrize("missing", ["task_id", "name", "status", "status_version", "created_at"])
def test_snapshot_missing_required_key_is_a_store_error(missing: str) -> None:
    data = _snapshot_dict()
    del data[missing]
    with pytest.raises(StoreError):
        TaskSnapshot.from_dict(data)


@pytest.mark.parametrize(
    "change",
    [
        {"to": "nowhere"},
        {"from": "limbo"},
        {"version": "1"},
        {"version": None},
        {"at": "2026-01-01T00:00:00"},
        {"at": None},
        {"attempt": "2"},
        {"trigger": ""},
        {"v": 99},
    ],
    ids=repr,
)
def test_corrupt_transition_is_a_store_error(change: dict[str, Any]) -> None:
    with pytest.raises(StoreError):
        Transition.from_dict({**_transition_dict(), **change})


@pytest.mark.parametrize("data", [None, [], "text", 42])
def test_non_objects_are_store_errors(data: Any) -> None:
    for cls in (TaskSnapshot, Transition, Failure, Progress):
        with pytest.raises(StoreError, match="expected a JSON object"):
            cls.from_dict(data)


def test_invalid_json_text_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="invalid JSON"):
        loads("{not json", "task row")
    with pytest.raises(StoreError):
        loads(b"\xff\xfe")


def test_newer_format_names_the_upgrade() -> None:
    with pytest.raises(StoreError, match="upgrade chongming-task"):
        TaskSnapshot.from_dict({**_snapshot_dict(), "v": FORMAT_VERSION + 1})


# ----------------------------------------------------------------- construction


def test_ensure_json_refuses_what_other_readers_could_not_read() -> None:
    for bad in (float("nan"), float("inf"), {1: "int key"}, {"nested": [{2: "x"}]}, object()):
        with pytest.raises(ConfigurationError, match="not JSON-serialisable"):
            ensure_json(bad, "outcome")


@pytest.mark.parametrize("outcome", [float("nan"), float("inf"), object()])
def test_a_snapshot_whose_outcome_is_not_strict_json_is_refused_by_the_codec(
    outcome: object,
) -> None:
    snapshot = TaskSnapshot(
        task_id="t1", name="x", status=TaskStatus.SUCCEEDED, status_version=1,
        created_at=T0, updated_at=T0, outcome=outcome,
    )  # fmt: skip
    with pytest.raises(ConfigurationError, match="not JSON-serialisable"):
        encode_snapshot(snapshot)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        TaskSnapshot(
            task_id="t1",
            name="x",
            status=TaskStatus.PENDING,
            status_version=0,
            created_at=datetime(2026, 1, 1),
            updated_at=T0,
        )
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        Transition(
            task_id="t1",
            from_status=None,
            to_status=TaskStatus.PENDING,
            trigger="x",
            version=0,
            at=datetime(2026, 1, 1),
        )


def test_status_and_kind_strings_are_coerced() -> None:
    snap = TaskSnapshot(
        task_id="t1",
        name="x",
        status="queued",  # type: ignore[arg-type]
        status_version=0,
        created_at=T0,
        updated_at=T0,
        tags=["a", "b"],  # type: ignore[arg-type]
    )
    assert snap.status is TaskStatus.QUEUED
    assert snap.tags == frozenset({"a", "b"})
    failure = Failure(kind="timeout_idle", message="idle")  # type: ignore[arg-type]
    assert failure.kind is FailureKind.TIMEOUT_IDLE


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Progress(done=float("nan")), "Progress.done"),
        (lambda: Progress(done=1, total=float("inf")), "Progress.total"),
        (lambda: Progress(done=True), "Progress.done"),
        (lambda: Progress(done=1, unit=3), "Progress.unit"),  # type: ignore[arg-type]
        (lambda: Failure(kind="nope", message="x"), "Failure.kind"),  # type: ignore[arg-type]
        (lambda: Failure(kind=FailureKind.LOST, message=None), "Failure.message"),  # type: ignore[arg-type]
        (lambda: Failure(kind=FailureKind.LOST, message="x", retryable=1), "Failure.retryable"),  # type: ignore[arg-type]
    ],
)
def test_value_objects_name_the_bad_field(build: Any, field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        build()


def test_snapshot_refuses_a_string_as_tags() -> None:
    with pytest.raises(ConfigurationError, match="tags"):
        TaskSnapshot(
            task_id="t1",
            name="x",
            status=TaskStatus.PENDING,
            status_version=0,
            created_at=T0,
            updated_at=T0,
            tags="db",  # type: ignore[arg-type]
        )


def test_progress_render_and_fraction() -> None:
    assert Progress(done=120, total=500, unit="rows").render() == "120/500 rows (24%)"
    assert Progress(done=3).render() == "3"
    assert Progress(done=3).fraction is None
    assert Progress(done=7, total=5).fraction == 1.0


def test_snapshot_elapsed_uses_first_start() -> None:
    snap = TaskSnapshot(
        task_id="t1",
        name="x",
        status=TaskStatus.SUCCEEDED,
        status_version=4,
        created_at=T0,
        updated_at=T0 + timedelta(seconds=30),
        first_started_at=T0 + timedelta(seconds=5),
        started_at=T0 + timedelta(seconds=20),
        finished_at=T0 + timedelta(seconds=25),
    )
    assert snap.elapsed == 20.0
    assert snap.is_terminal
    offset = timezone(timedelta(hours=8))
    assert snap.replace(finished_at=(T0 + timedelta(seconds=25)).astimezone(offset)).elapsed == 20.0
