"""The exception hierarchy of guide §10, exactly."""

from __future__ import annotations

import pickle

import pytest

from chongming_task import errors
from chongming_task.errors import (
    AttemptsExhausted,
    CircularDependency,
    ConcurrencyConflict,
    ConfigurationError,
    DependencyFailed,
    InvalidTransition,
    StoreError,
    TaskCancelled,
    TaskError,
    TaskExecutionError,
    TaskTimeout,
)
from chongming_task.states import TaskStatus


def test_section_10_children_are_direct_children_of_task_error() -> None:
    children = {
        InvalidTransition,
        DependencyFailed,
        CircularDependency,
        TaskTimeout,
        TaskExecutionError,
        AttemptsExhausted,
        ConcurrencyConflict,
        StoreError,
        ConfigurationError,
    }
    for cls in children:
        assert cls.__bases__[0] is TaskError, cls
    assert TaskError.__bases__ == (Exception,)
    assert ConfigurationError.__bases__ == (TaskError, ValueError)


#: The whole tree, pinned: a new class is a decision, made here and in errors.py's
#: docstring.
TREE = {
    "TaskError": ("Exception",),
    "InvalidTransition": ("TaskError",),
    "DependencyFailed": ("TaskError",),
    "CircularDependency": ("TaskError",),
    "TaskTimeout": ("TaskError",),
    "TaskExecutionError": ("TaskError",),
    "ChildError": ("TaskExecutionError",),
    "CarrierCrashed": ("TaskError",),
    "AttemptsExhausted": ("TaskError",),
    "HandoffError": ("TaskError",),
    "HandoffRefused": ("HandoffError", "ConfigurationError"),
    "HandoffTimeout": ("HandoffError", "TimeoutError"),
    "ConcurrencyConflict": ("TaskError",),
    "ClaimLost": ("ConcurrencyConflict",),
    "ScheduleConflict": ("ConcurrencyConflict",),
    "StaleScheduleEdit": ("ScheduleConflict",),
    "StoreError": ("TaskError",),
    "SchemaMissing": ("StoreError",),
    "CorruptRows": ("StoreError",),
    "TaskNotFound": ("StoreError", "KeyError"),
    "ConfigurationError": ("TaskError", "ValueError"),
    "DuplicateTaskId": ("ConfigurationError",),
    "UnknownTask": ("ConfigurationError", "LookupError"),
    "UnknownTaskName": ("ConfigurationError", "LookupError"),
    "ArtifactDirUnavailable": ("ConfigurationError", "AttributeError"),
    "InvalidState": ("ConfigurationError",),
    "ControllerClosed": ("InvalidState",),
    "TaskCancelled": ("BaseException",),
    "TaskSkipped": ("Exception",),
}


def test_the_tree_is_exactly_the_documented_one() -> None:
    assert set(errors.__all__) == set(TREE)
    for name, bases in TREE.items():
        cls = getattr(errors, name)
        assert tuple(base.__name__ for base in cls.__bases__) == bases, name
        assert cls.__module__ == "chongming_task.errors", name
        assert name in (errors.__doc__ or ""), f"{name} is missing from the docstring tree"


def test_no_exception_class_is_defined_outside_errors() -> None:
    """Every exception the library raises on purpose lives in errors.py (the CLI's own
    exit-code carriers and internal signals excepted)."""
    import importlib
    import inspect
    import pkgutil

    import chongming_task

    allowed = {"chongming_task.cli._errors", "chongming_task.cli._signals", "chongming_task.errors"}
    found = []
    for info in pkgutil.walk_packages(chongming_task.__path__, "chongming_task."):
        if info.name in allowed or ".web" in info.name or "postgres" in info.name:
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra is not installed
            continue
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not value.__name__.startswith("_")
            ):
                found.append(f"{info.name}.{value.__name__}")
    assert found == []


def test_task_cancelled_is_a_base_exception_outside_task_error() -> None:
    assert issubclass(TaskCancelled, BaseException)
    assert not issubclass(TaskCancelled, Exception)
    assert not issubclass(TaskCancelled, TaskError)


def test_except_exception_cannot_swallow_cancellation() -> None:
    swallowed: list[BaseException] = []

    def loop() -> None:
        try:
            for _ in range(3):
                raise TaskCancelled("stop requested", source="operator")
        except Exception as exc:  # the pattern of guide §10 that must not catch it
            swallowed.append(exc)

    with pytest.raises(TaskCancelled):
        loop()
    assert swallowed == []


def test_task_cancelled_text_and_pickle() -> None:
    exc = TaskCancelled("maintenance", source="operator")
    assert str(exc) == "task cancelled by operator: maintenance"
    assert str(TaskCancelled()) == "task cancelled by stop"
    back = pickle.loads(pickle.dumps(exc))
    assert (type(back), back.reason, back.source) == (TaskCancelled, "maintenance", "operator")


def test_errors_carry_data_not_just_text() -> None:
    exc = InvalidTransition(
        task_id="t1",
        current=TaskStatus.QUEUED,
        target=TaskStatus.RUNNING,
        action="executor:launched",
        allowed=[TaskStatus.STARTING, TaskStatus.CANCELLED],
        detail="why",
    )
    assert exc.allowed == (TaskStatus.CANCELLED, TaskStatus.STARTING)
    assert str(exc) == (
        "illegal state transition: queued -> running; action 'executor:launched'; "
        "allowed now: cancelled, starting (why)"
    )
    conflict = ConcurrencyConflict("t1", 3, 4)
    assert (conflict.expected, conflict.actual) == (3, 4)
    assert "expected status_version 3, store has 4" in str(conflict)
    timeout = TaskTimeout("idle", 60)
    assert (timeout.scope, timeout.seconds, str(timeout)) == (
        "idle",
        60,
        "idle timeout of 60s expired",
    )
    cycle = CircularDependency(["a", "b", "a"])
    assert cycle.cycle == ("a", "b", "a")
    assert str(cycle) == "circular dependency: a -> b -> a"
    exhausted = AttemptsExhausted("t1", 3, 3)
    assert (exhausted.task_id, exhausted.attempt, exhausted.max_attempts) == ("t1", 3, 3)
