"""The value parsers: --arg JSON-or-string, --args-json, bucket ranges, errors."""

from __future__ import annotations

import pytest

from chongming_task.cli._errors import ExitCode, UsageError, describe, one_line
from chongming_task.cli._parsing import (
    format_buckets,
    parse_arg_value,
    parse_bucket_ranges,
    parse_task_kwargs,
)
from chongming_task.errors import ConfigurationError, StoreError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5", 5),
        ("-3", -3),
        ("2.5", 2.5),
        ("true", True),
        ("false", False),
        ("null", None),
        ('"5"', "5"),
        ("[1, 2]", [1, 2]),
        ('{"a": 1}', {"a": 1}),
        ("kafka://orders", "kafka://orders"),
        ("", ""),
        ("hello world", "hello world"),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("5x", "5x"),
        ("租户A", "租户A"),
    ],
)
def test_arg_value_is_json_when_valid_else_string(text: str, expected: object) -> None:
    value = parse_arg_value(text)
    assert value == expected
    assert type(value) is type(expected)


def test_task_kwargs_merge_json_object_and_args() -> None:
    kwargs = parse_task_kwargs(["n=5", "flag=true", 's="5"', "url=a=b"], '{"m": [1]}')
    assert kwargs == {"m": [1], "n": 5, "flag": True, "s": "5", "url": "a=b"}


@pytest.mark.parametrize(
    ("args", "args_json", "fragment"),
    [
        (["n"], None, "must have the form key=value"),
        (["=5"], None, "not a valid argument name"),
        (["a-b=5"], None, "not a valid argument name"),
        (["n=1", "n=2"], None, "given twice"),
        (["n=1"], '{"n": 2}', "given twice"),
        (None, "{not json", "not valid JSON"),
        (None, "[1, 2]", "must be a JSON object"),
        (None, '{"n": NaN}', "not valid JSON"),
        (["task_id=x"], None, "set it with --task-id"),
        (["priority=3"], None, "set it with --priority"),
        (None, '{"bucket_key": "k"}', "set it with --bucket-key"),
    ],
)
def test_bad_task_arguments_are_usage_errors(
    args: list[str] | None, args_json: str | None, fragment: str
) -> None:
    with pytest.raises(UsageError, match=fragment) as info:
        parse_task_kwargs(args, args_json)
    assert info.value.code == ExitCode.USAGE


def test_bucket_ranges() -> None:
    assert parse_bucket_ranges("0-15,32,40-47", num_buckets=64) == frozenset(
        [*range(16), 32, *range(40, 48)]
    )
    assert parse_bucket_ranges(" 3 , 1-2 ", num_buckets=4) == frozenset({1, 2, 3})
    assert parse_bucket_ranges("5-5", num_buckets=8) == frozenset({5})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty item"),
        ("1,,2", "empty item"),
        ("a", "not a bucket number"),
        ("1-b", "not a bucket number"),
        ("5-3", "runs backwards"),
        ("0-64", "outside 0..63"),
        ("64", "outside 0..63"),
        ("-1", "not a bucket number"),
    ],
)
def test_bad_bucket_ranges(text: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        parse_bucket_ranges(text, num_buckets=64)


def test_format_buckets_inverts_parse() -> None:
    buckets = parse_bucket_ranges("0-15,32,40-47", num_buckets=64)
    assert format_buckets(buckets) == "0-15,32,40-47"
    assert format_buckets([]) == ""
    assert format_buckets([7]) == "7"


def test_describe_maps_errors_to_one_line_and_code() -> None:
    assert describe(UsageError("bad\nthing")) == ("bad thing", ExitCode.USAGE)
    assert describe(ConfigurationError("nope"))[1] == ExitCode.USAGE
    try:
        raise StoreError("cannot open") from OSError("disk\non fire")
    except StoreError as exc:
        message, code = describe(exc)
    assert code == ExitCode.FAILED
    assert "\n" not in message
    assert "disk on fire" in message
    message, code = describe(RuntimeError("surprise"))
    assert code == ExitCode.FAILED
    assert message.startswith("internal error: RuntimeError: surprise")
    assert one_line("  a \n\n  b  ") == "a b"
