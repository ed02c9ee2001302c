"""Runs are made from a checked template: options once, per-run values every time.

A controller checks what every run of a submission shares (the task, its policies,
the controller's own settings) once, keeps that ``RunTemplate`` for later submissions
with the same options, and builds each run with ``TaskRun.from_template``, which
checks only what differs per run. These tests pin that nothing a submission says is
lost on the way, and that no check was skipped for what differs.
"""

from __future__ import annotations

import pytest

from chongming_task import ConfigurationError, Controller, RetryPolicy, TaskRun
from chongming_task.policies import FixedBackoff, Timeout
from chongming_task.run import RunTemplate
from chongming_task.runtime.context import TaskContext

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


def test_from_template_still_checks_what_differs_per_run() -> None:
    template = RunTemplate.check(_echo, name="echo")
    run = TaskRun.from_template(
        template, (3,), None, task_id="ok", label="l", bucket=2, bucket_key="k"
    )
    assert run.snapshot.task_id == "ok"
    assert (run.snapshot.label, run.snapshot.bucket, run.snapshot.bucket_key) == ("l", 2, "k")
    cases: list[tuple[dict[str, object], str]] = [
        ({"args": (1, 2, 3)}, "arguments do not fit task 'echo'"),
        ({"task_id": ""}, "task_id must be a non-empty string"),
        ({"task_id": "a\x00b"}, "must not contain NUL"),
        ({"label": 5}, "label must be a string or None"),
        ({"bucket": -1}, "bucket must be an integer >= 0"),
        ({"bucket_key": 9}, "bucket_key must be a string or None"),
    ]
    for change, message in cases:
        options: dict[str, object] = {
            "args": (),
            "task_id": "t",
            "label": None,
            "bucket": None,
            "bucket_key": None,
        }
        options.update(change)
        with pytest.raises(ConfigurationError, match=message):
            TaskRun.from_template(
                template,
                options["args"],  # type: ignore[arg-type]
                None,
                task_id=options["task_id"],  # type: ignore[arg-type]
                label=options["label"],  # type: ignore[arg-type]
                bucket=options["bucket"],  # type: ignore[arg-type]
                bucket_key=options["bucket_key"],  # type: ignore[arg-type]
            )


def test_a_template_refuses_what_a_run_would_refuse() -> None:
    with pytest.raises(ConfigurationError, match="a task must be callable"):
        RunTemplate.check("not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="retry must be a RetryPolicy"):
        RunTemplate.check(_echo, retry=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="tags must be a collection of strings"):
        RunTemplate.check(_echo, tags="one")
    with pytest.raises(ConfigurationError, match="priority must be an integer"):
        RunTemplate.check(_echo, priority="high")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="template must be a RunTemplate"):
        TaskRun.from_template(
            _echo,  # type: ignore[arg-type]
            (),
            None,
            task_id="t",
            label=None,
            bucket=None,
            bucket_key=None,
        )
    with pytest.raises(ConfigurationError, match="metadata"):
        RunTemplate.check(_echo, metadata={"when": object()})  # type: ignore[dict-item]
