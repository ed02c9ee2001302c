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
ids, tags, names    non-empty strings of at most 256 characters, no control
                    characters, valid UTF-8 (no lone surrogates)
one-line texts      label (256), progress unit (64), progress message, skip and
                    blocked reasons (512 each): no control characters (tab and
                    newline included), valid UTF-8
metadata            a mapping of ``str`` keys (as one-line texts of 256) to JSON
                    values, valid UTF-8, at most ``METADATA_MAX_BYTES`` (64 KiB)
lookups             an id, name or filter to look up: a string without NUL
                    bytes, valid UTF-8
global limits       a mapping of tag names (as ids) to integers >= 1
unique work         a key as an id; a window of seconds or a ``timedelta`` > 0
outcome             at most ``OUTCOME_MAX_BYTES`` (1 MiB) of compact UTF-8 JSON
==================  ==========================================================

Text a task *body* produces (its outcome, a progress message, a failure, a skip
reason, a log line) is not refused for a lone surrogate, which is what
``os.listdir``, ``os.environ`` and ``os.fsdecode`` give for bytes that are not UTF-8:
:func:`escape_surrogates` writes each as its backslash escape (``\\udcff`` becomes
the four characters ``\\xff``, the byte it stands for), so the store can keep it and
the run and the store agree.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from chongming_task.errors import ConfigurationError

__all__ = [
    "GLOBAL_LIMIT_MAX",
    "ID_MAX_LENGTH",
    "INT64_MAX",
    "INT64_MIN",
    "LABEL_MAX_LENGTH",
    "LINE_MAX_LENGTH",
    "MAX_SECONDS",
    "METADATA_MAX_BYTES",
    "OUTCOME_MAX_BYTES",
    "UNIT_MAX_LENGTH",
    "add_seconds",
    "check_aware",
    "check_duration_text",
    "check_global_limits",
    "check_int",
    "check_line",
    "check_lookup",
    "check_metadata",
    "check_outcome_size",
    "check_priority",
    "check_seconds",
    "check_tags",
    "check_task_id",
    "check_text",
    "check_unique",
    "check_utf8",
    "escape_json_surrogates",
    "escape_surrogates",
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
#: The longest label (one line, shown in task lists).
LABEL_MAX_LENGTH: Final = 256
#: The longest progress unit (``"rows"``, ``"files"``).
UNIT_MAX_LENGTH: Final = 64
#: The longest progress message, skip or blocked reason (one line; the same cap as a
#: failure message, ``chongming_task._redact.MESSAGE_MAX_LENGTH``).
LINE_MAX_LENGTH: Final = 512
#: The largest metadata mapping a submission takes, as UTF-8 bytes of compact JSON.
METADATA_MAX_BYTES: Final = 64 * 1024


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


def check_duration_text(seconds: float | Decimal, text: str, name: str) -> None:
    """Refuse a duration typed as text (``7d``, ``@every 2h``) that is over ``MAX_SECONDS``.

    Checked on the parsed number, before it becomes a ``timedelta`` or an ``int``:
    thousands of digits overflow both (``OverflowError``, or ``ValueError`` from
    Python's limit on integer digits). ``text`` is quoted clipped to 40 characters.
    """
    if seconds > MAX_SECONDS:
        shown = text if len(text) <= 40 else f"{text[:37]}..."
        raise ConfigurationError(
            f"{name} {shown!r} is longer than 100 years; a duration must be at most "
            f"{MAX_SECONDS:g} seconds"
        )


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


def check_lookup(value: object, name: str) -> str:
    """A string a store can look up (an id, a name, a filter): a ``str``, valid UTF-8,
    without NUL bytes (PostgreSQL text cannot hold one; no stored id has one)."""
    if not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise ConfigurationError(f"{name} must not contain a NUL byte (\\x00), got {value[:60]!r}")
    return check_utf8(value, name)


#: C0 controls, DEL and C1 controls (U+0080..U+009F, the terminal's CSI among them):
#: what no stored one-line text holds (they rewrite a terminal, split a log line).
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
#: A lone surrogate: a Python ``str`` holds one, UTF-8 (and so no store) cannot.
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def check_line(value: object, name: str, *, max_length: int, allow_empty: bool = True) -> str:
    """One line of text: a ``str`` of at most ``max_length`` characters, valid UTF-8,
    without control characters (C0 -- tab and newline included --, DEL, C1).

    The one rule for every text a caller hands to the store; ``name`` and the limit
    are in the ``ConfigurationError``.
    """
    if not isinstance(value, str) or (not value and not allow_empty):
        kind = "a string" if allow_empty else "a non-empty string"
        raise ConfigurationError(f"{name} must be {kind}, got {value!r}")
    if len(value) > max_length:
        raise ConfigurationError(
            f"{name} must be at most {max_length} characters, got {len(value)}: {value[:40]!r}..."
        )
    bad = _CONTROL.search(value)
    if bad is not None:
        raise ConfigurationError(
            f"{name} must not contain control characters (one line: no tab, newline or "
            f"escape), got {bad.group()!r} at position {bad.start()}: {value[:80]!r}"
        )
    return check_utf8(value, name)


def check_text(value: object, name: str, *, max_length: int = ID_MAX_LENGTH) -> str:
    """A non-empty :func:`check_line` of at most ``max_length`` characters."""
    return check_line(value, name, max_length=max_length, allow_empty=False)


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its backslash escape (lossless).

    A surrogate ``os.fsdecode`` made of an undecodable byte (U+DC80..U+DCFF) becomes
    that byte's escape (``"\\udcff"`` -> ``"\\\\xff"``); any other lone surrogate its
    code point's (``"\\ud800"`` -> ``"\\\\ud800"``). Text without one is returned as is.
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(_escape_one, text)


def _escape_one(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def escape_json_surrogates(value: Any) -> Any:
    """A JSON value with :func:`escape_surrogates` applied to every string and key.

    For what a task body returns: the same object when there is nothing to escape.
    """
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return _escape_json(value)
    except (TypeError, ValueError, RecursionError):
        return value  # not JSON at all: refused by ensure_json, not here
    return value


def _escape_json(value: Any) -> Any:
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, Mapping):
        return {escape_surrogates(str(k)): _escape_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escape_json(item) for item in value]
    return value


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
    """Metadata: a mapping of ``str`` keys (one line, at most ``ID_MAX_LENGTH``) whose
    strings are valid UTF-8, at most ``METADATA_MAX_BYTES`` of JSON (that the values
    are JSON is checked by the caller)."""
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{name} must be a mapping of str keys to JSON values, got {value!r}"
        )
    result = dict(value)
    for key in result:
        if not isinstance(key, str):
            raise ConfigurationError(f"{name} keys must be strings, got {key!r}")
        check_line(key, f"{name} key {key[:40]!r}", max_length=ID_MAX_LENGTH)
    _check_json_text(result, name, METADATA_MAX_BYTES, "METADATA_MAX_BYTES")
    return result


def _check_json_text(value: object, name: str, max_bytes: int, constant: str) -> None:
    """Refuse a JSON value holding a lone surrogate, or over ``max_bytes`` of UTF-8 JSON."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return  # not JSON: the caller's ensure_json names what is wrong
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        _refuse_surrogate(value, name)
        raise  # pragma: no cover (the walk above found it)
    if size > max_bytes:
        raise ConfigurationError(
            f"{name} is {size} bytes of JSON, over the cap of {max_bytes} bytes ({constant}); "
            "keep large data in your own storage and put its key here"
        )


def _refuse_surrogate(value: object, name: str) -> None:
    """Name where in a JSON value the first lone surrogate is (iterative, any depth)."""
    stack: list[tuple[str, object]] = [(name, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            check_utf8(item, where)
        elif isinstance(item, Mapping):
            for key, sub in item.items():
                check_utf8(str(key), f"{where} key")
                stack.append((f"{where}[{key!r}]", sub))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{index}]", sub) for index, sub in enumerate(item))


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


def check_unique(unique_key: object, unique_for: object) -> tuple[str | None, float | None]:
    """``enqueue``'s unique work: the key (an id, see :func:`check_text`) and its window.

    ``unique_for`` is seconds (finite, > 0, at most 100 years) or a ``timedelta``; it
    needs a ``unique_key``. Returns ``(key, seconds)``, ``None`` where not given.
    """
    key = None if unique_key is None else check_text(unique_key, "unique_key")
    if unique_for is None:
        return key, None
    if key is None:
        raise ConfigurationError(
            f"unique_for={unique_for!r} needs a unique_key: the window is how long a "
            "finished task with that key still counts"
        )
    seconds = unique_for.total_seconds() if isinstance(unique_for, timedelta) else unique_for
    return key, check_seconds(seconds, "unique_for")


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
