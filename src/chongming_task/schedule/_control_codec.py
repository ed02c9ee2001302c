"""JSON codec of :class:`~chongming_task.schedule._control.ScheduleControl`.

The record is shared by every process and every version of the library that touches
the store, so the format is explicit and versioned: ``from_dict`` fills fields that an
older writer did not know with their defaults, and refuses a newer format instead of
guessing at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from chongming_task._model import parse_datetime
from chongming_task.errors import ConfigurationError, StoreError

if TYPE_CHECKING:
    from chongming_task.schedule._control import ScheduleControl

__all__ = ["CONTROL_FORMAT", "control_from_dict", "control_to_dict"]

#: Version of the dictionaries written by ``control_to_dict``.
CONTROL_FORMAT: Final = 1

_DATETIMES: Final = (
    "registered_at",
    "updated_at",
    "anchor",
    "last_run_at",
    "last_fired_at",
    "next_run_at",
)
_TUPLES: Final = ("args", "tags", "counted")
_PLAIN: Final = (
    "task",
    "default_pattern",
    "pattern",
    "default_timezone",
    "timezone",
    "overridden",
    "status",
    "status_reason",
    "definition_revision",
    "updated_by",
    "description",
    "overlap",
    "max_runtime",
    "retry_attempts",
    "retry_backoff",
    "manual_run_enabled",
    "misfire",
    "misfire_grace",
    "bucket_key",
    "runs",
    "errors",
    "skips",
    "consecutive_failures",
    "last_status",
    "last_error",
    "display_name",
    "dst",
)
_REQUIRED: Final = ("task", "default_pattern", "pattern", "registered_at", "updated_at")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def control_to_dict(control: ScheduleControl) -> dict[str, Any]:
    data: dict[str, Any] = {"v": CONTROL_FORMAT, "name": control.name}
    for name in _PLAIN:
        data[name] = getattr(control, name)
    for name in _DATETIMES:
        data[name] = _iso(getattr(control, name))
    for name in _TUPLES:
        data[name] = list(getattr(control, name))
    data["kwargs"] = dict(control.kwargs)
    return data


def control_from_dict(name: str, data: Mapping[str, Any], revision: int) -> dict[str, Any]:
    """Constructor keywords for ``ScheduleControl`` from stored ``data``.

    Raises:
        StoreError: the data is corrupt, incomplete, or from a newer format.
    """
    version = data.get("v", CONTROL_FORMAT)
    if not isinstance(version, int) or version > CONTROL_FORMAT:
        raise StoreError(
            f"schedule {name!r} record has format version {version!r}, newer than this "
            f"library understands ({CONTROL_FORMAT}); upgrade chongming-task"
        )
    missing = [key for key in _REQUIRED if data.get(key) is None]
    if missing:
        raise StoreError(f"corrupt schedule record {name!r}: missing {', '.join(missing)}")
    try:
        kwargs: dict[str, Any] = {"name": name, "revision": revision}
        for key in _PLAIN:
            if key in data:
                kwargs[key] = data[key]
        for key in _DATETIMES:
            kwargs[key] = parse_datetime(data.get(key), f"schedule {name!r} {key}")
        for key in _TUPLES:
            kwargs[key] = tuple(data.get(key) or ())
        kwargs["kwargs"] = dict(data.get("kwargs") or {})
    except (TypeError, ValueError, ConfigurationError) as exc:
        raise StoreError(f"corrupt schedule record {name!r}: {exc}") from exc
    if kwargs.get("dst", "default") not in ("default", "skip", "vixie"):
        raise StoreError(f"corrupt schedule record {name!r}: dst policy {kwargs['dst']!r}")
    if kwargs.get("status", "active") not in ("active", "paused"):
        raise StoreError(f"corrupt schedule record {name!r}: status {kwargs['status']!r}")
    return kwargs
