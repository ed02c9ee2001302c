"""Numbers a constructor takes: NaN, infinity, bools, huge and negative values are a
clear ConfigurationError naming the option, never accepted and never a TypeError."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from chongming_task import (
    Controller,
    InMemoryTaskStore,
    ProcessExecutor,
    Scheduler,
    SqliteTaskStore,
)
from chongming_task.errors import ConfigurationError

BAD_SECONDS = [math.nan, math.inf, -math.inf, -1, 0, True, "5", 1e300]


def scheduler(**options: Any) -> Any:
    with Controller() as controller:
        return Scheduler(controller, **options)


CASES: list[tuple[str, Callable[[Any], Any]]] = [
    ("tick", lambda v: scheduler(tick=v)),
    ("misfire_tolerance", lambda v: scheduler(misfire_tolerance=v)),
    ("lead", lambda v: scheduler(lead=v)),
    ("lease", lambda v: InMemoryTaskStore().claim_commands("owner", lease=v)),
    ("lease", lambda v: SqliteTaskStore(":memory:").claim_commands("owner", lease=v)),
]


@pytest.mark.parametrize("value", BAD_SECONDS, ids=repr)
@pytest.mark.parametrize(
    ("option", "make"),
    CASES,
    ids=["tick", "misfire_tolerance", "lead", "lease-memory", "lease-sqlite"],
)
def test_bad_durations_are_refused(option: str, make: Callable[[Any], Any], value: Any) -> None:
    with pytest.raises(ConfigurationError, match=option):
        make(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -1, True, "1"], ids=repr)
def test_bad_kill_after_is_refused(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="kill_after"):
        ProcessExecutor(kill_after=value)


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "4"], ids=repr)
def test_bad_max_parallel_is_refused(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_parallel"):
        Controller(max_parallel=value)
