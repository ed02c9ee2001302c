"""The checks shared by every surface that takes a value the store must keep.

Everything the store would refuse -- or could not even represent -- is refused where
the user passes it (``submit``, ``register``, ``Controller(...)``, policies, triggers,
the CLI), with a :class:`~chongming_task.errors.ConfigurationError` that names the
value and the limit, before anything runs (guide §8.13: fail loudly at the call, not
later inside the store).

==================  ==========================================================
value               limit
==================  ==========================================================
integers            an ``int`` (never a ``bool``), in a stated range
priority            a signed 64-bit integer (SQLite INTEGER, PostgreSQL bigint)
durations           a finite ``int``/``float`` of seconds, at most 100 years
instants            a timezone-aware ``datetime``
ids, tags           non-empty strings of at most 256 characters, no control
                    characters, valid UTF-8 (no lone surrogates)
metadata            a mapping of ``str`` keys to JSON values
global limits       a mapping of tag names (as ids) to integers >= 1
outcome             at most ``OUTCOME_MAX_BYTES`` (1 MiB) of compact UTF-8 JSON
==================  ==========================================================
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from chongming_task.errors import ConfigurationError

__all__ = [
    "GLOBAL_LIMIT_MAX",
    "ID_MAX_LENGTH",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_SECONDS",
    "OUTCOME_MAX_BYTES",
    "add_seconds",
    "check_aware",
    "check_global_limits",
    "check_int",
    "check_metadata",
    "check_outcome_size",
    "check_priority",
    "check_seconds",
    "check_tags",
    "check_task_id",
    "check_text",
    "check_utf8",
    "refuse_unknown_keywords",
]

#: The largest task outcome a store accepts, measured as UTF-8 bytes of its compact JSON.
OUTCOME_MAX_BYTES: Final = 1024 * 1024
#: A signed 64-bit integer: what both SQL stores index.
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
#: The longest duration any setting takes (100 years): beyond it, ``now + duration``
#: leaves the calendar ``datetime`` can represent.
MAX_SECONDS: Final = 100 * 365.25 * 24 * 3600.0
#: The longest task id, tag or name a store keeps.
ID_MAX_LENGTH: Final = 256


def check_int(
    value: object, name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` as an ``int`` in ``[minimum, maximum]`` (a ``bool`` is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(f"{name} must be <= {maximum}, got {value!r}")
    return value


def check_priority(value: object, name: str = "priority") -> int:
    """A priority: a signed 64-bit integer."""
    return check_int(value, name, minimum=INT64_MIN, maximum=INT64_MAX)


def check_seconds(
    value: object,
    name: str,
    *,
    allow_zero: bool = False,
    maximum: float = MAX_SECONDS,
) -> float:
    """A duration in seconds: finite, positive (or zero with ``allow_zero``), bounded."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(f"{name} must be a finite number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigurationError(f"{name} must be {bound} seconds, got {value!r}")
    if value > maximum:
        raise ConfigurationError(f"{name} must be at most {maximum:g} seconds, got {value!r}")
    return float(value)


def check_aware(value: object, name: str) -> datetime:
    """A timezone-aware ``datetime``."""
    if not isinstance(value, datetime):
        raise ConfigurationError(f"{name} must be a timezone-aware datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigurationError(
            f"{name} must be a timezone-aware datetime (use datetime.now(timezone.utc)), "
            f"got naive {value.isoformat()}"
        )
    return value


def add_seconds(instant: datetime, seconds: float, name: str) -> datetime:
    """``instant + seconds``, or a ``ConfigurationError`` naming the calendar's limit."""
    try:
        return instant + timedelta(seconds=seconds)
    except OverflowError as exc:
        raise ConfigurationError(
            f"{name}: {instant.isoformat()} + {seconds:g}s is beyond the last representable "
            f"instant ({datetime.max.isoformat()})"
        ) from exc


def check_outcome_size(value: object, what: str) -> None:
    """Refuse an outcome over ``OUTCOME_MAX_BYTES`` of compact UTF-8 JSON (a JSON value)."""
    if value is None or isinstance(value, bool | int | float):
        return
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if len(text) <= OUTCOME_MAX_BYTES // 4:
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > OUTCOME_MAX_BYTES:
        raise ConfigurationError(
            f"{what} is {size} bytes of JSON, over the store's cap of {OUTCOME_MAX_BYTES} "
            "bytes (OUTCOME_MAX_BYTES); write large results to the artifact directory and "
            "return their path instead"
        )


def check_utf8(value: str, name: str) -> str:
    """Refuse a string that is not valid UTF-8 (lone surrogates: undecodable bytes)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"{name} is not valid UTF-8 text (undecodable byte or lone surrogate at "
            f"position {exc.start}): {value!r}"
        ) from exc
    return value


def check_text(value: object, name: str, *, max_length: int = ID_MAX_LENGTH) -> str:
    """A non-empty string of at most ``max_length`` characters, no control characters."""
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{name} must be a non-empty string, got {value!r}")
    if len(value) > max_length:
        raise ConfigurationError(
            f"{name} must be at most {max_length} characters, got {len(value)}: {value[:40]!r}..."
        )
    bad = next((char for char in value if ord(char) < 32 or ord(char) == 127), None)
    if bad is not None:
        raise ConfigurationError(f"{name} must not contain control characters, got {value!r}")
    return check_utf8(value, name)


def check_task_id(value: object, name: str = "task_id") -> str:
    """A task id: see :func:`check_text`."""
    return check_text(value, name)


def check_tags(value: object, name: str = "tags") -> frozenset[str]:
    """Tags: a collection (never a bare string) of texts (see :func:`check_text`)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        hint = f"; write [{value!r}]" if isinstance(value, str) else ""
        raise ConfigurationError(f"{name} must be a collection of strings{hint}, got {value!r}")
    try:
        result = frozenset(value)
    except TypeError as exc:
        raise ConfigurationError(f"{name} must hold strings, got {value!r}") from exc
    for tag in result:
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(
                f"{name} must be non-empty strings (the contract is frozenset[str]), got {tag!r}"
            )
        check_text(tag, f"tag {tag!r}")
    return result


def check_metadata(value: object, name: str = "metadata") -> dict[str, Any]:
    """Metadata: a mapping of ``str`` keys (JSON values are checked by the caller)."""
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{name} must be a mapping of str keys to JSON values, got {value!r}"
        )
    result = dict(value)
    for key in result:
        if not isinstance(key, str):
            raise ConfigurationError(f"{name} keys must be strings, got {key!r}")
        check_utf8(key, f"{name} key")
    return result


#: The most holders a global limit may allow (slots are rows in the store).
GLOBAL_LIMIT_MAX: Final = 1_000_000


def check_global_limits(value: object, name: str = "global_limits") -> dict[str, int]:
    """Named limits across processes: tag -> how many holders at once (an ``int`` >= 1).

    ``None`` is no limit at all (an empty mapping). A ``bool``, a float (``NaN``
    included), zero or a negative number is refused, as is a name that is not a tag
    (a non-empty string, see :func:`check_text`).
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{name} must map a tag to a number of slots (e.g. {{'db': 4}}), got {value!r}"
        )
    result: dict[str, int] = {}
    for tag, limit in value.items():
        if not isinstance(tag, str):
            raise ConfigurationError(f"{name} keys must be tag names (strings), got {tag!r}")
        check_text(tag, f"{name} name")
        result[tag] = check_int(limit, f"{name}[{tag!r}]", minimum=1, maximum=GLOBAL_LIMIT_MAX)
    return result


def refuse_unknown_keywords(call: str, given: Iterable[str], accepted: Iterable[str]) -> None:
    """Python's own ``TypeError`` for a keyword ``call`` does not take, naming the nearest.

    For the public calls whose keywords are a ``TypedDict`` (``Controller(**settings)``,
    ``list_tasks(**filters)``): Python cannot refuse those itself at run time.
    """
    known = set(accepted)
    unknown = sorted(set(given) - known)
    if unknown:
        near = difflib.get_close_matches(unknown[0], sorted(known), 1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise TypeError(f"{call}() got an unexpected keyword argument {unknown[0]!r}{hint}")


# -- arguments of the public calls ---------------------------------------------------
# What every lookup, wait and batch call checks before anything reaches a store: a
# caller's mistake is a ConfigurationError naming the parameter, never a TypeError
# from deep inside, an OverflowError or a driver's "Error binding parameter" (which
# reads as a broken database).

__all__ += ["check_buckets", "check_count", "check_items", "check_lookup_id", "check_timeout"]


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def check_lookup_id(value: object, name: str = "task_id") -> str:
    """An id to look up (a task, a schedule, a command): a ``str`` of valid UTF-8.

    Any such string is a well-formed question; an id nothing has is answered by the
    lookup itself (``None``, ``False``, ``UnknownTask``). Anything else is refused.
    """
    if not isinstance(value, str):
        raise ConfigurationError(
            f"{name} must be a string (an id), got {type(value).__name__} {_shown(value)}"
        )
    return check_utf8(value, name)


def check_count(value: object, name: str) -> int:
    """A number of things (``keep_terminal``, a limit): an ``int`` from 0 to ``INT64_MAX``."""
    return check_int(value, name, minimum=0, maximum=INT64_MAX)


def check_timeout(value: object, name: str = "timeout") -> float | None:
    """How long a caller waits: ``None`` (as long as it takes) or seconds >= 0."""
    return None if value is None else check_seconds(value, name, allow_zero=True)


def check_items(value: object, name: str) -> list[Any]:
    """A collection's items (a list, tuple, set, generator...): never a string or ``None``."""
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise ConfigurationError(
            f"{name} must be a list or another collection of items, got "
            f"{type(value).__name__} {_shown(value)}"
        )
    return list(value)


def check_buckets(value: object, name: str = "buckets") -> frozenset[int]:
    """Bucket numbers: a collection of ``int`` from 0 to ``INT64_MAX``."""
    return frozenset(check_count(bucket, f"{name}[]") for bucket in check_items(value, name))
