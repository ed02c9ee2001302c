"""Value parsers for the command line: task arguments, bucket ranges, environment.

Each parser raises :class:`~chongming_task.cli._errors.UsageError` with a message
that quotes the offending text and shows the accepted form, because the person
reading it is looking at a shell prompt, not at this code.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from chongming_task import _validation
from chongming_task.cli._errors import UsageError

__all__ = [
    "ENV_PREFIX",
    "MAX_ARG_DEPTH",
    "RESERVED_ARG_NAMES",
    "check_argv",
    "env",
    "format_buckets",
    "integer",
    "parse_arg_value",
    "parse_bucket_ranges",
    "parse_json_object",
    "parse_task_kwargs",
    "seconds",
]

#: How deeply an ``--arg`` JSON value may nest (a task argument is data, not a stack test).
MAX_ARG_DEPTH: Final = 100

#: Every environment fallback of the CLI starts with this prefix.
ENV_PREFIX: Final = "CHONGMING_"

#: Option names of ``submit`` that a task argument may not take (the runtime refuses
#: such parameters too); each maps to the CLI option that sets it instead.
RESERVED_ARG_NAMES: Final[Mapping[str, str]] = {
    "task_id": "--task-id",
    "name": "TASK",
    "label": "--label",
    "tags": "--tag",
    "priority": "--priority",
    "bucket_key": "--bucket-key",
    "unique_key": "--unique-key",
    "unique_for": "--unique-for",
    "metadata": "the submission (not settable from the CLI)",
    "blocked": "the submission (not settable from the CLI)",
    "retry": "the task definition",
    "timeout": "the task definition",
    "executor": "the task definition",
    "graceful_stop": "the task definition",
    "artifact_dir": "the task definition",
    "clock": "the task definition",
}


def env(name: str, default: str | None = None) -> str | None:
    """``CHONGMING_<name>`` from the environment; empty counts as unset."""
    value = os.environ.get(ENV_PREFIX + name, "")
    return value if value else default


def _refuse_constant(text: str) -> Any:
    # NaN and Infinity are not JSON (other languages and jsonb reject them): an --arg
    # spelled that way is kept as the string the user typed, a document is refused.
    raise ValueError(f"{text} is not JSON (write null or a quoted string)")


def _check_depth(text: str, option: str) -> None:
    """Refuse JSON nested deeper than ``MAX_ARG_DEPTH`` before ``json.loads`` recurses
    into it (thousands of levels exhaust Python's stack: ``RecursionError``)."""
    if _nesting(text) > MAX_ARG_DEPTH:
        raise UsageError(
            f"{option} nests deeper than {MAX_ARG_DEPTH} levels of JSON lists/objects "
            f"(starts {text[:20]!r}); pass such data through a file or the task itself"
        )


def parse_json_object(text: str, option: str) -> dict[str, Any]:
    """A JSON object given whole on the command line (``--args-json``, ``--input``).

    Raises:
        UsageError: Not JSON (``NaN`` and ``Infinity`` are not), not an object, or
            nested deeper than ``MAX_ARG_DEPTH``.
    """
    _check_depth(text, option)
    example = "'{\"n\": 5}'"
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise UsageError(
            f"{option} must be a JSON object such as {example}; it is not valid JSON: {exc}"
        ) from None
    if not isinstance(document, dict):
        raise UsageError(
            f"{option} must be a JSON object such as {example}, got {type(document).__name__}"
        )
    return document


def parse_arg_value(text: str) -> Any:
    """The value of ``--arg key=value``: JSON when it is valid JSON, else the string.

    ``5`` is the integer 5, ``true`` a boolean, ``null`` None, ``[1,2]`` a list and
    ``'"5"'`` (quoted for the shell) the string ``"5"``; ``kafka://orders`` is not
    JSON and stays a string.
    """
    _check_depth(text, "--arg value")
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError:
        return text


def _nesting(text: str) -> int:
    """An upper bound of the JSON nesting depth of ``text`` (brackets outside strings)."""
    if "[" not in text and "{" not in text:
        return 0
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def check_argv(argv: Sequence[str]) -> None:
    """Refuse an argument that is not valid UTF-8 text (undecodable bytes arrive as
    lone surrogates) before anything parses it."""
    for index, item in enumerate(argv):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UsageError(
                f"argument {index + 1} is not valid UTF-8 (undecodable byte at position "
                f"{exc.start}): {item.encode('utf-8', 'surrogateescape')!r}"
            ) from None


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds, >= 0, at most 100 years."""
    value = float(text)  # a ValueError: argparse says "invalid float value: 'x'"
    if not math.isfinite(value) or value < 0 or value > _validation.MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected a finite number of seconds between 0 and "
            f"{_validation.MAX_SECONDS:g}, got {text!r}"
        )
    return value


seconds.__name__ = "float"  # argparse names the type in its "invalid ... value" message


def integer(text: str) -> int:
    """argparse type: an integer that fits a signed 64-bit column."""
    value = int(text)  # a ValueError: argparse says "invalid int value: 'x'"
    if not _validation.INT64_MIN <= value <= _validation.INT64_MAX:
        raise argparse.ArgumentTypeError(
            f"expected an integer between {_validation.INT64_MIN} and "
            f"{_validation.INT64_MAX}, got {text!r}"
        )
    return value


def _parse_one(item: str) -> tuple[str, Any]:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep:
        raise UsageError(f"--arg {item!r} must have the form key=value (e.g. --arg n=5)")
    if not key.isidentifier():
        raise UsageError(
            f"--arg {item!r}: {key!r} is not a valid argument name "
            "(use a Python identifier, e.g. --arg batch_size=100)"
        )
    return key, parse_arg_value(value)


def _reserved(key: str) -> str | None:
    """The option that sets ``key`` if it is an option of every submission (``run`` and
    ``submit``), else ``None``; :func:`refuse_enqueue_options` adds the queue's."""
    option = RESERVED_ARG_NAMES.get(key)
    if option is not None:
        return option
    from chongming_task._decorator import RESERVED_OPTIONS
    from chongming_task.controller._registry import SUBMIT_OPTIONS

    if key in SUBMIT_OPTIONS or key in RESERVED_OPTIONS:
        return "the submission (not settable as a task argument)"
    return None


#: The CLI options that set ``Client.enqueue``'s own options (``submit`` enqueues).
_ENQUEUE_FLAGS: Final[Mapping[str, str]] = {
    "delay": "--delay",
    "not_before": "--not-before",
    "unique_key": "--unique-key",
    "unique_for": "--unique-for",
    "concurrency_key": "--concurrency-key",
    "connection": "the Python API (Client.enqueue(connection=...))",
}


def refuse_enqueue_options(kwargs: Mapping[str, Any]) -> None:
    """``submit`` enqueues: a task argument named like an option of ``Client.enqueue``
    (``delay``...) would be taken as that option, so it is refused (``run`` passes it on:
    ``Controller.submit`` has no such option)."""
    from chongming_task.controller._registry import ENQUEUE_OPTIONS

    for key in kwargs:
        if key in ENQUEUE_OPTIONS:
            flag = _ENQUEUE_FLAGS.get(key, "the submission")
            raise UsageError(
                f"--arg {key!r} is an option of the queue's enqueue, not a task argument "
                f"here; set it with {flag}, or use `run` to pass it to the task"
            )


def _refuse_reserved(key: str, origin: str) -> None:
    option = _reserved(key)
    if option is not None:
        raise UsageError(
            f"{origin} {key!r} is an option of the submission, not a task argument; "
            f"set it with {option}"
        )


def parse_task_kwargs(args: Sequence[str] | None, args_json: str | None) -> dict[str, Any]:
    """Merge ``--args-json`` (a whole JSON object) and ``--arg key=value`` items.

    A key given twice, in either form, is refused rather than silently overwritten.
    """
    kwargs: dict[str, Any] = {}
    if args_json is not None:
        for key, value in parse_json_object(args_json, "--args-json").items():
            if not key.isidentifier():
                raise UsageError(f"--args-json key {key!r} is not a valid argument name")
            _refuse_reserved(key, "--args-json key")
            kwargs[key] = value
    for item in args or ():
        key, value = _parse_one(item)
        _refuse_reserved(key, "--arg")
        if key in kwargs:
            raise UsageError(f"task argument {key!r} is given twice (--arg / --args-json)")
        kwargs[key] = value
    return kwargs


def parse_bucket_ranges(
    text: str, *, num_buckets: int, option: str = "--owned-buckets"
) -> frozenset[int]:
    """Parse ``0-15,32,40-47`` into bucket numbers, each checked against ``num_buckets``.

    A bucket outside ``0..num_buckets-1`` is refused here: a node that "owns" a bucket
    no key maps to would wait for tasks that can never arrive.
    """
    buckets: set[int] = set()
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not part for part in parts):
        raise UsageError(f"{option} {text!r} has an empty item; use ranges like 0-15,32,40-47")
    for part in parts:
        low_text, dash, high_text = part.partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise UsageError(
                f"{option} {text!r}: {part!r} is not a bucket number or a range like 40-47"
            ) from None
        if low > high:
            raise UsageError(
                f"{option} {text!r}: range {part!r} runs backwards; write {high}-{low}"
            )
        for bucket in (low, high):
            if not 0 <= bucket < num_buckets:
                raise UsageError(
                    f"bucket {bucket} in {option} is outside 0..{num_buckets - 1} "
                    f"(--num-buckets {num_buckets}); a task there would never run"
                )
        buckets.update(range(low, high + 1))
    return frozenset(buckets)


def format_buckets(buckets: Iterable[int]) -> str:
    """The inverse of :func:`parse_bucket_ranges`: ``{0, 1, 2, 5}`` -> ``0-2,5``."""
    runs: list[list[int]] = []
    for bucket in sorted(set(buckets)):
        if runs and bucket == runs[-1][1] + 1:
            runs[-1][1] = bucket
        else:
            runs.append([bucket, bucket])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)


integer.__name__ = "int"
