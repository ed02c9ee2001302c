"""Values the store could not keep are refused where they are passed (guide §8.13),
with a ConfigurationError naming the value and the limit -- never an OverflowError
or TypeError from deep inside, never a task that runs and then cannot be stored."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Controller
from chongming_task._model import FailureKind
from chongming_task.errors import ConfigurationError
from chongming_task.policies import RetryPolicy, Timeout
from chongming_task.schedule._triggers import IntervalTrigger, make_trigger
from chongming_task.stores._base import OUTCOME_MAX_BYTES
from chongming_task.stores._sqlite import SqliteTaskStore

from ._helpers import S, path

NAN, INF = float("nan"), float("inf")
END = datetime(9999, 12, 31, 23, 30, tzinfo=UTC)


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    controller = Controller(store=SqliteTaskStore(tmp_path / "tasks.db"))
    controller.register("job", lambda ctx: 1)
    yield controller
    controller.close(close_store=True)


# The calls take the controller as Any: most pass wrongly typed values on purpose.
CALLS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "priority 2**63": (lambda c: c.submit("job", priority=2**63), "9223372036854775807"),
    "priority -2**63-1": (lambda c: c.submit("job", priority=-(2**63) - 1), ">="),
    "tags=5": (lambda c: c.submit("job", tags=5), "tags"),
    "tags with an int": (lambda c: c.submit("job", tags=["a", 5]), "tags"),
    "metadata=5": (lambda c: c.submit("job", metadata=5), "metadata"),
    "metadata=bytes": (lambda c: c.submit("job", metadata=b".."), "metadata"),
    "metadata int key": (lambda c: c.submit("job", metadata={1: "a"}), "metadata"),
    "task_id=dict": (lambda c: c.submit("job", task_id={"a": 1}), "task_id"),
    "task_id too long": (lambda c: c.submit("job", task_id="x" * 300), "256"),
    "task_id control char": (lambda c: c.submit("job", task_id="a\x00b"), "control"),
    "task_id surrogate": (lambda c: c.submit("job", task_id="a\udcffb"), "UTF-8"),
    "submit_many ids": (lambda c: c.submit_many("job", [()], task_ids=["x" * 300]), "256"),
    "register(tags=5)": (lambda c: c.register("other", lambda ctx: 1, tags=5), "tags"),
    "register(long tag)": (
        lambda c: c.register("other", lambda ctx: 1, tags=["x" * 300]),
        "256",
    ),
    "list_tasks(status=0)": (lambda c: c.list_tasks(status=0), "status"),
    "list_tasks(status=[0])": (lambda c: c.list_tasks(status=[0]), "status"),
}


@pytest.mark.parametrize("case", list(CALLS))
def test_public_calls_refuse_what_the_store_cannot_keep(controller: Controller, case: str) -> None:
    call, named = CALLS[case]
    with pytest.raises(ConfigurationError, match=named):
        call(controller)
    assert controller.list_tasks() == []  # nothing reached the store


SETTINGS: dict[str, tuple[Callable[[], Any], str]] = {
    "lease_ttl=nan": (lambda: Controller(lease_ttl=NAN), "lease_ttl"),
    "lease_ttl=inf": (lambda: Controller(lease_ttl=INF), "lease_ttl"),
    "lease_ttl=1e12": (lambda: Controller(lease_ttl=1e12), "at most"),
    "command_poll_interval=nan": (lambda: Controller(command_poll_interval=NAN), "command_poll"),
    "command_poll_interval=inf": (lambda: Controller(command_poll_interval=INF), "command_poll"),
    "graceful_stop=nan": (lambda: Controller(graceful_stop=NAN), "graceful_stop"),
    "Timeout(total=1e12)": (lambda: Timeout(total=1e12), "at most"),
    "RetryPolicy(max_attempts=2**70)": (lambda: RetryPolicy(max_attempts=2**70), "max_attempts"),
    "IntervalTrigger(inf)": (lambda: IntervalTrigger(INF), "interval"),
    "IntervalTrigger(nan)": (lambda: IntervalTrigger(NAN), "interval"),
    "IntervalTrigger(10**12)": (
        lambda: IntervalTrigger(10**12).next_after(datetime.now(UTC)),
        "at most",
    ),
    "interval next_after 9999": (
        lambda: IntervalTrigger(3600).next_after(END),
        "last representable",
    ),
    "cron next_after 9999": (
        lambda: make_trigger("0 0 1 1 *").next_after(END),
        "last representable",
    ),
    "@every 100000000h": (lambda: make_trigger("@every 100000000h"), "at most"),
}


@pytest.mark.parametrize("case", list(SETTINGS))
def test_settings_refuse_non_finite_and_out_of_range_values(case: str) -> None:
    call, named = SETTINGS[case]
    with pytest.raises(ConfigurationError, match=named):
        call()


def test_an_oversized_outcome_fails_the_attempt_before_the_terminal_write(
    controller: Controller,
) -> None:
    controller.register("big", lambda ctx: "x" * (OUTCOME_MAX_BYTES + 1))
    outcome = controller.submit("big", task_id="big").wait(10)
    assert outcome.status is S.FAILED
    stored = controller.store.get("big")
    assert stored is not None
    assert stored.status is S.FAILED  # what the store says, not only memory
    assert stored.failure is not None
    assert stored.failure.kind is FailureKind.RESULT_INVALID
    assert str(OUTCOME_MAX_BYTES) in stored.failure.message
    assert path(controller.store.history("big"))[-1] == "failed"
    assert controller.pending_writes == []
    assert list(controller.persist_failures) == []


def test_an_outcome_at_the_cap_is_stored(controller: Controller) -> None:
    # 2 quote characters around the string: exactly the cap.
    controller.register("edge", lambda ctx: "x" * (OUTCOME_MAX_BYTES - 2))
    assert controller.submit("edge", task_id="edge").wait(10).ok
    assert controller.store.get("edge").status is S.SUCCEEDED  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("keyword", "message"),
    [
        ("max_paralel", "'max_paralel'; did you mean 'max_parallel'?"),
        ("lease", "'lease'; did you mean 'lease_ttl'?"),
        ("xyz", "'xyz'$"),
    ],
)
def test_a_keyword_that_is_no_setting_names_the_nearest(keyword: str, message: str) -> None:
    # Python's own error for a misspelt keyword (as list_tasks gives), with a hint:
    # the settings are one TypedDict (ControllerSettings), not a hand-kept signature.
    settings: dict[str, Any] = {keyword: 2}
    with pytest.raises(
        TypeError, match=f"^Controller\\(\\) got an unexpected keyword argument {message}"
    ):
        Controller(**settings)


def test_a_misspelt_list_tasks_filter_names_the_nearest(controller: Controller) -> None:
    filters: dict[str, Any] = {"stauts": "queued"}
    with pytest.raises(
        TypeError, match=r"^list_tasks\(\) got an unexpected keyword argument 'stauts'; did you"
    ):
        controller.list_tasks(**filters)
