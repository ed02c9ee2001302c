"""Assertions and clocks the contract cases share (no pytest: plain ``assert``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from chongming_task._model import TaskSnapshot
from chongming_task.core import SystemClock

__all__ = [
    "WatchedClock",
    "assert_same_json",
    "assert_snapshot_equal",
    "by_id",
    "raises",
]

E = TypeVar("E", bound=BaseException)


def raises(expected: type[E], call: Callable[[], object], message: str) -> E:
    """The exception ``call`` raised, asserting it is an ``expected`` (pytest-free ``raises``)."""
    try:
        call()
    except expected as exc:
        return exc
    raise AssertionError(message)


def assert_same_json(got: Any, want: Any, path: str = "$") -> None:
    """Strict JSON equality: same types (``1`` is not ``1.0`` is not ``True``), same values."""
    assert type(got) is type(want), f"{path}: type {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, dict):
        assert set(got) == set(want), f"{path}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            assert_same_json(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for index, (item, expected) in enumerate(zip(got, want, strict=True)):
            assert_same_json(item, expected, f"{path}[{index}]")
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


class WatchedClock(SystemClock):
    """The system clock, counting the threads blocked in ``wait``/``sleep`` on it.

    Lets a real-time case know that a waiter has reached its wait before it acts,
    without sleeping a guessed amount.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sleepers = 0

    @property
    def sleepers(self) -> int:
        with self._lock:
            return self._sleepers

    def _enter(self, delta: int) -> None:
        with self._lock:
            self._sleepers += delta

    def sleep(self, seconds: float) -> None:
        self._enter(1)
        try:
            super().sleep(seconds)
        finally:
            self._enter(-1)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        self._enter(1)
        try:
            return super().wait(event, timeout)
        finally:
            self._enter(-1)


def field_names(snapshot: TaskSnapshot) -> list[str]:
    """Every dataclass field of a snapshot, for field-by-field comparison."""
    return list(getattr(snapshot, "__dataclass_fields__", {}))


def assert_snapshot_equal(got: TaskSnapshot | None, want: TaskSnapshot) -> None:
    """Field by field, datetimes compared as instants *and* as ISO text, JSON strictly."""
    assert got is not None, f"task {want.task_id!r} is missing"
    for name in field_names(want):
        value, expected = getattr(got, name), getattr(want, name)
        if isinstance(expected, datetime):
            assert isinstance(value, datetime), f"{name}: {value!r} is not a datetime"
            assert value == expected, f"{name}: {value!r} != {expected!r}"
            assert value.utcoffset() == expected.utcoffset(), f"{name}: offset changed"
        elif name in ("outcome", "metadata"):
            assert_same_json(
                value if name == "outcome" else dict(value),
                expected if name == "outcome" else dict(expected),
                name,
            )
        else:
            assert value == expected, f"{name}: {value!r} != {expected!r}"


def by_id(snapshots: list[TaskSnapshot]) -> Mapping[str, TaskSnapshot]:
    return {snapshot.task_id: snapshot for snapshot in snapshots}
