"""What a submission says reaches every run it makes, and each run checks its own values."""

from __future__ import annotations

import pytest

from chongming_task import Controller, RetryPolicy, TaskRun
from chongming_task.errors import ConfigurationError
from chongming_task.policies import FixedBackoff, Timeout
from chongming_task.runtime._context import TaskContext

from ._helpers import path


def _echo(ctx: TaskContext, value: int = 0) -> int:
    return value


def test_per_submission_options_win_over_the_kept_template() -> None:
    with Controller(max_parallel=2) as controller:
        controller.register("echo", _echo, tags=["base"])
        plain = controller.submit("echo", 1)
        retried = controller.submit(
            "echo", 2, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0))
        )
        tagged = controller.submit("echo", 3, tags=["extra"], priority=7)
        timed = controller.submit("echo", 4, timeout=Timeout(total=30))
        again = controller.submit("echo", 5)
        assert [run.wait(10).value for run in (plain, retried, tagged, timed, again)] == [
            1,
            2,
            3,
            4,
            5,
        ]
        assert plain.snapshot.max_attempts == 1
        assert retried.snapshot.max_attempts == 3
        assert again.snapshot.max_attempts == 1
        assert tagged.snapshot.tags == frozenset({"base", "extra"})
        assert tagged.snapshot.priority == 7
        assert again.snapshot.tags == frozenset({"base"})
        assert again.snapshot.priority == 0
        for run in (plain, retried, tagged, timed, again):
            assert path(run.transitions) == [
                "pending",
                "queued",
                "starting",
                "running",
                "succeeded",
            ]


def test_each_run_gets_its_own_copy_of_the_submission_metadata() -> None:
    with Controller(max_parallel=2) as controller:
        controller.register("echo", _echo)
        runs = controller.submit_many("echo", [(1,), (2,)], metadata={"source": "test"})
        first, second = (run.snapshot.metadata for run in runs)
        assert first == second == {"source": "test"}
        assert first is not second
        for run in runs:
            assert run.wait(10).ok


def test_a_run_checks_what_differs_per_run() -> None:
    run = TaskRun(_echo, (3,), name="echo", task_id="ok", label="l", bucket=2, bucket_key="k")
    assert run.snapshot.task_id == "ok"
    assert (run.snapshot.label, run.snapshot.bucket, run.snapshot.bucket_key) == ("l", 2, "k")
    cases: list[tuple[dict[str, object], str]] = [
        ({"args": (1, 2, 3)}, "arguments do not fit task 'echo'"),
        ({"task_id": ""}, "task_id must be a non-empty string"),
        ({"task_id": "a\x00b"}, "must not contain NUL"),
        ({"label": 5}, "label must be a string or None"),
        ({"bucket": -1}, "bucket must be an integer >= 0"),
        ({"bucket_key": 9}, "bucket_key must be a string or None"),
        ({"fn": "not callable"}, "a task must be callable"),
        ({"retry": 3}, "retry must be a RetryPolicy"),
        ({"tags": "one"}, "tags must be a collection of strings"),
        ({"priority": "high"}, "priority must be an integer"),
        ({"metadata": {"when": object()}}, "metadata"),
    ]
    for change, message in cases:
        options: dict[str, object] = {"fn": _echo, "args": (), "name": "echo", "task_id": "t"}
        options.update(change)
        with pytest.raises(ConfigurationError, match=message):
            TaskRun(**options)  # type: ignore[arg-type]
