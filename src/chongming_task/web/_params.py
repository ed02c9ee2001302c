"""Parsing the dashboard's request input: one rule for its integers, one for its text.

A bad value is a :class:`~chongming_task.errors.ConfigurationError` naming the
parameter, which the dashboard answers with 400, never a 500 or a 503:

- an integer is ASCII digits (optionally a ``-``) or a JSON integer, in a stated range;
  ``"²"`` (which ``str.isdigit()`` accepts and ``int()`` does not), ``"1.5"``, a
  5,000-digit number or a ``bool`` is refused;
- every string of a JSON body or form, keys included, is one a store can keep and
  look up (:func:`~chongming_task._validation.check_lookup`: no NUL byte, no lone
  surrogate); a JSON body nests at most ``MAX_DEPTH`` deep.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from chongming_task._validation import INT64_MAX, check_lookup
from chongming_task.errors import ConfigurationError

__all__ = ["MAX_DEPTH", "checked_input", "int_param", "json_object", "optional_int"]

#: The most digits of an integer (a signed 64-bit integer has 19).
_MAX_DIGITS: Final = 19
_INTEGER: Final = re.compile(rf"-?[0-9]{{1,{_MAX_DIGITS}}}")
#: How deep a request's JSON may nest (the dashboard's own bodies are flat).
MAX_DEPTH: Final = 32
_TOO_DEEP: Final = f"the request body nests deeper than {MAX_DEPTH} levels"


def _shown(raw: object) -> str:
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


def int_param(raw: object, name: str, *, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """``raw`` (a query/form string or a JSON value) as an int in ``[minimum, maximum]``."""
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and _INTEGER.fullmatch(text := raw.strip()):
        value = int(text)
    if value is None or not minimum <= value <= maximum:
        raise ConfigurationError(
            f"{name} must be an integer from {minimum} to {maximum}, got {_shown(raw)}"
        )
    return value


def optional_int(
    raw: str | None, name: str, *, minimum: int = 0, maximum: int = INT64_MAX
) -> int | None:
    """:func:`int_param` of a query parameter; ``None`` when absent or blank."""
    if raw is None or not raw.strip():
        return None
    return int_param(raw, name, minimum=minimum, maximum=maximum)


def checked_input(value: Any) -> Any:
    """``value`` (parsed JSON or form fields) once every string in it passes
    :func:`~chongming_task._validation.check_lookup` (keys included) and it nests at
    most ``MAX_DEPTH`` deep."""
    pending: list[tuple[Any, str, int]] = [(value, "the request", 0)]
    while pending:
        item, name, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise ConfigurationError(_TOO_DEEP)
        if isinstance(item, str):
            check_lookup(item, name)
        elif isinstance(item, dict):
            for key, inner in item.items():
                check_lookup(key, "a field name")
                pending.append((inner, f"field {key!r}" if depth == 0 else name, depth + 1))
        elif isinstance(item, list):
            pending.extend((inner, name, depth + 1) for inner in item)
    return value


def _json_int(text: str) -> int | float:
    """A JSON integer of more than 19 digits as a float (which no integer field takes,
    so the error names the field), never ``int()``'s 4,300-digit ``ValueError``."""
    return int(text) if len(text.lstrip("-")) <= _MAX_DIGITS else float(text)


def json_object(body: bytes) -> dict[str, Any]:
    """A request body as a JSON object that passes :func:`checked_input`."""
    try:
        parsed = json.loads(body, parse_int=_json_int)
    except RecursionError:
        raise ConfigurationError(_TOO_DEEP) from None
    except ValueError:
        raise ConfigurationError("the request body is not JSON") from None
    if not isinstance(parsed, dict):
        raise ConfigurationError("the request body must be a JSON object")
    result: dict[str, Any] = checked_input(parsed)
    return result
