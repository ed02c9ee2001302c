"""Schedule validation: the Go scheduler's limits, with messages that say what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from chongming_task.errors import ConfigurationError
from chongming_task.policies import FixedBackoff, RetryPolicy, Timeout
from chongming_task.schedule import CronTrigger, IntervalTrigger, Schedule


def make(**changes: Any) -> Schedule:
    options: dict[str, Any] = {
        "name": "nightly-sync",
        "task": "sync",
        "trigger": CronTrigger("0 2 * * *", "Asia/Shanghai"),
    }
    options.update(changes)
    return Schedule(**options)


def test_defaults_follow_go_register_cron() -> None:
    schedule = make()
    assert schedule.overlap == "forbid"
    assert schedule.max_runtime == 3600
    assert schedule.retry_attempts == 0
    assert schedule.retry_backoff == 60
    assert schedule.manual_run_enabled is True
    assert schedule.misfire == "skip"


def test_policy_maps_to_library_policies() -> None:
    schedule = make(retry_attempts=3, retry_backoff=5, max_runtime=120)
    assert schedule.retry_policy == RetryPolicy(max_attempts=4, backoff=FixedBackoff(5))
    assert schedule.timeout == Timeout(total=120)


def test_string_trigger_becomes_a_utc_cron_and_args_are_frozen() -> None:
    schedule = make(trigger="@hourly", args=[1, "x"], kwargs={"a": [1, 2]}, tags={"etl"})
    assert schedule.trigger == CronTrigger("@hourly")
    assert schedule.args == (1, "x")
    assert dict(schedule.kwargs) == {"a": [1, 2]}
    assert schedule.tags == frozenset({"etl"})
    with pytest.raises(TypeError):
        schedule.kwargs["b"] = 1  # type: ignore[index]
    assert make(trigger=IntervalTrigger(30)).anchor is not None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": ""}, "schedule name must contain 1-191 characters"),
        ({"name": "x" * 192}, "schedule name must contain 1-191 characters"),
        ({"name": "has space"}, "may contain only letters, digits"),
        ({"name": "-dash-first"}, "may contain only"),
        ({"task": ""}, "'nightly-sync' task name is required"),
        ({"trigger": 5}, "trigger must be a CronTrigger or IntervalTrigger"),
        ({"trigger": "not cron"}, "has 2 fields"),
        ({"args": {"a": 1}}, "args must be a list or tuple"),
        ({"kwargs": [1]}, "kwargs must be a mapping"),
        ({"args": (object(),)}, "args is not JSON-serialisable"),
        ({"kwargs": {"when": float("nan")}}, "kwargs is not JSON-serialisable"),
        ({"description": "d" * 1001}, "description exceeds 1000 characters"),
        ({"overlap": "replace"}, "overlap policy 'replace' is invalid; use 'forbid' or 'allow'"),
        ({"max_runtime": 0}, "max runtime seconds must be between 1 and 86400, got 0"),
        ({"max_runtime": 86401}, "max runtime seconds must be between 1 and 86400"),
        ({"max_runtime": True}, "max runtime seconds"),
        ({"retry_attempts": 11}, "retry attempts must be between 0 and 10, got 11"),
        ({"retry_attempts": -1}, "retry attempts must be between 0 and 10"),
        ({"retry_attempts": 1.0}, "retry attempts must be between 0 and 10"),
        ({"retry_backoff": 0}, "retry backoff seconds must be between 1 and 86400"),
        ({"retry_backoff": 86401}, "retry backoff seconds must be between 1 and 86400"),
        ({"manual_run_enabled": "yes"}, "manual_run_enabled must be a bool"),
        ({"misfire": "catch_up"}, "misfire policy 'catch_up' is invalid; use 'skip' or 'run_once'"),
        ({"misfire_grace": 0}, "misfire grace seconds must be between 1 and 86400"),
        ({"bucket_key": ""}, "bucket_key must be a non-empty string or None"),
        ({"tags": "etl"}, "tags must be non-empty strings"),
        ({"tags": {""}}, "tags must be non-empty strings"),
    ],
)
def test_invalid_definitions(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        make(**changes)


def test_limits_are_inclusive_and_names_allow_a_useful_charset() -> None:
    make(max_runtime=1, retry_attempts=10, retry_backoff=86400, description="d" * 1000)
    make(max_runtime=86400, retry_attempts=0, retry_backoff=1)
    for name in ("a", "x" * 191, "etl.daily:orders/eu@v2+1", "同步_任务", "_private"):
        assert make(name=name).name == name


def test_policy_dict_is_json() -> None:
    from chongming_task._model import ensure_json

    policy = make(kwargs={"day": "2026-01-01"}, tags={"b", "a"}).policy()
    ensure_json(policy)
    assert policy["tags"] == ["a", "b"]
    assert policy["kwargs"] == {"day": "2026-01-01"}
