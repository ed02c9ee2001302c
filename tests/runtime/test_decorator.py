"""@task: the spec lives on the function, the function stays the function."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import chongming_task
from chongming_task._decorator import RESERVED_OPTIONS, TaskSpec, reserved_collisions, spec_of, task
from chongming_task.errors import ConfigurationError
from chongming_task.policies import RetryPolicy, Timeout
from chongming_task.run import run_task
from chongming_task.runtime._context import TaskContext
from chongming_task.runtime.executors.inline import InlineExecutor


def test_bare_decorator_keeps_the_function_and_records_defaults() -> None:
    def extract(ctx: TaskContext, source: str) -> str:
        """Read rows from source.

        More text that is not the description.
        """
        return source.upper()

    decorated = task(extract)
    assert decorated is extract
    spec = spec_of(extract)
    assert spec == TaskSpec(name="extract", description="Read rows from source.")
    assert extract.__chongming_task__ is spec  # type: ignore[attr-defined]
    assert extract(None, "x") == "X"  # type: ignore[arg-type]  # still a plain function


def test_decorator_with_options() -> None:
    retry = RetryPolicy(max_attempts=3)
    timeout = Timeout(per_attempt=60)

    @task(name="load", tags={"io", "db"}, description="Load it.", retry=retry, timeout=timeout)
    def load(ctx: TaskContext) -> int:
        """Ignored docstring."""
        return 1

    spec = spec_of(load)
    assert spec is not None
    assert (spec.name, spec.description, spec.tags) == ("load", "Load it.", frozenset({"io", "db"}))
    assert (spec.retry, spec.timeout) == (retry, timeout)
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]


def test_the_spec_gives_defaults_to_runs_and_explicit_options_win() -> None:
    calls: list[int] = []

    @task(name="flaky", tags=["io"], retry=RetryPolicy(max_attempts=2))
    def flaky(ctx: TaskContext) -> int:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("first")
        return ctx.attempt

    from chongming_task.policies import FixedBackoff

    outcome = run_task(
        flaky,
        executor=InlineExecutor(),
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
    )
    assert outcome.value == 2
    assert outcome.snapshot.name == "flaky"
    assert outcome.snapshot.tags == frozenset({"io"})
    renamed = run_task(flaky, name="other", tags=["x"], executor=InlineExecutor())
    assert renamed.snapshot.name == "other"
    assert renamed.snapshot.tags == frozenset({"x"})


def test_no_global_registry() -> None:
    before = set(vars(chongming_task))

    @task
    def anything(ctx: TaskContext) -> None:
        return None

    assert set(vars(chongming_task)) == before
    assert not hasattr(task, "registry")


def test_bad_declarations_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="tags"):
        task(tags="io")
    with pytest.raises(ConfigurationError, match="tags"):
        task(tags=[1])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        task(retry=3)  # type: ignore[call-overload]  # the wrong type, on purpose
    with pytest.raises(ConfigurationError, match="Timeout"):
        task(timeout=60)  # type: ignore[call-overload]  # the wrong type, on purpose
    with pytest.raises(ConfigurationError, match="first positional parameter"):

        @task  # type: ignore[arg-type]
        def no_ctx() -> None:
            return None

    with pytest.raises(ConfigurationError, match="name"):
        task(name="")(lambda ctx: None)


def test_reserved_collisions_skip_ctx_and_catch_all_keywords() -> None:
    def fine(ctx: TaskContext, source: str, *args: Any, **kwargs: Any) -> None:
        return None

    def clashing(name: Any, label: str, /, priority: int, *, tags: list[str]) -> None:
        return None

    assert reserved_collisions(fine) == ()
    assert reserved_collisions(clashing) == ("priority", "tags")  # label is positional-only
    assert {"task_id", "name", "retry", "timeout", "bucket_key"} <= RESERVED_OPTIONS


def test_the_public_task_name_is_the_decorator_even_after_the_runtime_loaded() -> None:
    code = (
        "import chongming_task.run, chongming_task._decorator\n"
        "from chongming_task import task, TaskSpec\n"
        "assert callable(task) and task.__name__ == 'task', task\n"
        "assert TaskSpec.__name__ == 'TaskSpec'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
