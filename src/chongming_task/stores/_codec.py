"""Encoding helpers every backend shares, public for third-party stores.

One codec for everyone keeps fidelity identical across backends: a snapshot is the
model's ``to_dict`` as compact JSON, decoded with ``from_dict``; instants used for
ordering and lease comparisons are integer microseconds since the Unix epoch (UTC),
which sort correctly whatever timezone the original datetime carried.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from chongming_task._model import JSONValue, TaskSnapshot, Transition, dumps, loads
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.stores._records import OUTCOME_MAX_BYTES

__all__ = [
    "check_outcome",
    "decode_snapshot",
    "decode_transition",
    "encode_json",
    "encode_snapshot",
    "encode_transition",
    "from_micros",
    "require_aware",
    "to_micros",
]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)
#: UTF-8 needs at most 4 bytes per character, so a document of fewer characters than
#: this cannot hold an outcome over the cap, and the exact (second) encoding is skipped.
_SAFE_CHARS: Final = OUTCOME_MAX_BYTES // 4


def to_micros(value: datetime) -> int:
    """Exact integer microseconds since the epoch (no float rounding)."""
    return (value - _EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    """Inverse of :func:`to_micros`, as a UTC datetime."""
    return _EPOCH + timedelta(microseconds=value)


def require_aware(value: datetime | None, what: str) -> None:
    """Refuse naive datetimes: an instant without a timezone cannot be compared."""
    if value is not None and value.tzinfo is None:
        raise ConfigurationError(
            f"{what} must be a timezone-aware datetime (use datetime.now(timezone.utc)), "
            f"got naive {value.isoformat()}"
        )


def encode_json(value: JSONValue, what: str) -> str:
    """Compact JSON, with a ``ConfigurationError`` naming ``what`` when it is not JSON."""
    try:
        return dumps(value)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{what} is not JSON-serialisable: {exc}") from exc


def check_outcome(outcome: JSONValue, task_id: str) -> None:
    """Enforce ``OUTCOME_MAX_BYTES`` on a task's outcome."""
    if outcome is None:
        return
    size = len(encode_json(outcome, f"outcome of task {task_id!r}").encode("utf-8"))
    if size > OUTCOME_MAX_BYTES:
        raise ConfigurationError(
            f"outcome of task {task_id!r} is {size} bytes of JSON, over the store's cap of "
            f"{OUTCOME_MAX_BYTES} bytes (OUTCOME_MAX_BYTES); write large results to the "
            "artifact directory and return their path instead"
        )


def encode_snapshot(snapshot: TaskSnapshot) -> str:
    """The snapshot's JSON document (``dumps(snapshot.to_dict())``), outcome cap enforced."""
    try:
        text = dumps(snapshot.to_dict())
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"snapshot of task {snapshot.task_id!r} is not JSON-serialisable: {exc}"
        ) from exc
    if len(text) > _SAFE_CHARS and snapshot.outcome is not None:
        check_outcome(snapshot.outcome, snapshot.task_id)
    return text


def decode_snapshot(raw: str | bytes | Mapping[str, Any]) -> TaskSnapshot:
    """A snapshot from its stored document; anything malformed is a ``StoreError``."""
    data = raw if isinstance(raw, Mapping) else loads(raw, "task snapshot")
    if not isinstance(data, Mapping):
        raise StoreError(f"corrupt task snapshot: expected a JSON object, got {data!r:.80}")
    return TaskSnapshot.from_dict(data)


def encode_transition(transition: Transition) -> str:
    """The transition's JSON document: ``dumps(transition.to_dict())``."""
    return dumps(transition.to_dict())


def decode_transition(raw: str | bytes | Mapping[str, Any]) -> Transition:
    """A transition from its stored document; anything malformed is a ``StoreError``."""
    data = raw if isinstance(raw, Mapping) else loads(raw, "transition")
    if not isinstance(data, Mapping):
        raise StoreError(f"corrupt transition: expected a JSON object, got {data!r:.80}")
    return Transition.from_dict(data)
