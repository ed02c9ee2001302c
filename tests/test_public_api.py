"""The curated public namespace: sorted, resolvable, lazy where it should be.

Tolerant for now: lazily exported names whose module is not written yet are skipped
(other parts of the package are being built in parallel); once a module exists,
every name mapped to it must resolve.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest

import chongming_task
import chongming_task.stores


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def test_all_is_sorted_and_unique() -> None:
    names = list(chongming_task.__all__)
    assert names == sorted(names)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", chongming_task.__all__)
def test_every_name_in_all_resolves(name: str) -> None:
    assert getattr(chongming_task, name) is not None


#: Known problem for the lead: a submodule named like a public name (today
#: ``chongming_task/task.py``, kept as an alias of ``chongming_task._decorator``)
#: shadows it. Importing a submodule binds it as an attribute of the package, so once
#: anything imports ``chongming_task.task``, the guide's ``from chongming_task import
#: task`` returns the module and ``@task`` fails. Point ``_LAZY["task"]`` at
#: ``chongming_task._decorator`` and delete ``task.py``; these marks then lift by
#: themselves (they apply only while such a submodule exists).
_SHADOWED = pytest.mark.xfail(reason="a submodule shadows this public name", strict=True)


def _shadowed(name: str) -> bool:
    return _module_exists(f"chongming_task.{name}")


@pytest.mark.parametrize("name", sorted(chongming_task._LAZY))
def test_lazy_name_resolves_once_its_module_exists(name: str) -> None:
    module_name = chongming_task._LAZY[name]
    if not _module_exists(module_name):
        pytest.skip(f"{module_name} is not written yet")
    if _shadowed(name):
        pytest.skip("order-dependent while shadowed; see test_public_name_survives_*")
    module = importlib.import_module(module_name)
    value = getattr(chongming_task, name)
    assert value is getattr(module, name)
    assert name in dir(chongming_task)


_PUBLIC = sorted(set(chongming_task._LAZY) | set(chongming_task.__all__))


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=_SHADOWED) if _shadowed(name) else name for name in _PUBLIC],
)
def test_no_submodule_shadows_a_public_name(name: str) -> None:
    """A submodule named like a public name would replace it on the package once imported."""
    assert not _shadowed(name)


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=_SHADOWED) for name in _PUBLIC if _shadowed(name)] or ["task"],
)
def test_public_name_survives_import_of_every_submodule(name: str) -> None:
    """In a fresh interpreter: import all submodules, then the public name must be intact."""
    script = (
        "import pkgutil, importlib, types, sys\n"
        "import chongming_task\n"
        "for info in pkgutil.iter_modules(chongming_task.__path__):\n"
        "    if info.name.startswith('_'):\n"
        "        continue\n"
        "    try:\n"
        "        importlib.import_module('chongming_task.' + info.name)\n"
        "    except ImportError:\n"
        "        pass\n"
        "value = getattr(chongming_task, sys.argv[1])\n"
        "print(isinstance(value, types.ModuleType))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, name],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert completed.stdout.strip() == "False", f"chongming_task.{name} is a module"


def test_lazy_names_do_not_shadow_eager_ones() -> None:
    eager = {name for name in chongming_task.__all__ if name not in chongming_task._LAZY}
    assert not eager & set(chongming_task._LAZY)


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = chongming_task.NoSuchThing
    assert not hasattr(chongming_task, "NoSuchThing")


def test_version_is_exported() -> None:
    assert isinstance(chongming_task.__version__, str)
    assert chongming_task.__version__.count(".") >= 2


def test_model_names_have_one_public_home() -> None:
    """The guide imports these from the package root and from their modules alike."""
    from chongming_task import policies, states
    from chongming_task.core import state_machine

    assert chongming_task.TaskStatus is states.TaskStatus
    assert chongming_task.RetryPolicy is policies.RetryPolicy
    assert state_machine.StateMachine.__module__ == "chongming_task.core.state_machine"


#: The public namespace, pinned: each name and the module that defines it. Adding,
#: removing or moving a public name is a decision made here. ``__module__`` stays the
#: defining module on purpose (httpx rewrites it to the package): ``typing.
#: get_type_hints`` -- what FastAPI and pydantic call on a response model -- resolves
#: a class's string annotations in ``sys.modules[cls.__module__]``, and the package
#: namespace does not hold ``datetime`` or ``Mapping``.
PUBLIC: dict[str, str | None] = {
    "AggregationPolicy": "chongming_task.policies",
    "AsyncClient": "chongming_task.queue._client",
    "AsyncPipelineHandle": "chongming_task.queue._pipelines",
    "AsyncTaskHandle": "chongming_task.queue._client",
    "AttemptsExhausted": "chongming_task.errors",
    "BucketPolicy": "chongming_task.policies",
    "CarrierCrashed": "chongming_task.errors",
    "CheckpointRisk": "chongming_task._explain",
    "CircularDependency": "chongming_task.errors",
    "ClaimLost": "chongming_task.errors",
    "Client": "chongming_task.queue._client",
    "Clock": "chongming_task.core._clock",
    "Command": "chongming_task.stores._records",
    "ConcurrencyConflict": "chongming_task.errors",
    "ConcurrencyPolicy": "chongming_task.policies",
    "ConfigurationError": "chongming_task.errors",
    "Controller": "chongming_task.controller._controller",
    "ControllerClosed": "chongming_task.errors",
    "ControllerStats": "chongming_task.controller._stats",
    "CronTrigger": "chongming_task.schedule._triggers",
    "DependencyFailed": "chongming_task.errors",
    "DuplicateTaskId": "chongming_task.errors",
    "ExponentialBackoff": "chongming_task.policies",
    "Failure": "chongming_task._model",
    "FailureKind": "chongming_task._model",
    "FixedBackoff": "chongming_task.policies",
    "HandoffResult": "chongming_task.buckets._handoff",
    "InMemoryTaskStore": "chongming_task.stores._memory",
    "InlineExecutor": "chongming_task.runtime.executors.inline",
    "IntervalTrigger": "chongming_task.schedule._triggers",
    "InvalidState": "chongming_task.errors",
    "InvalidTransition": "chongming_task.errors",
    "Jitter": "chongming_task.policies",
    "JoinMode": "chongming_task.policies",
    "JsonLogFormatter": "chongming_task.observability._logging",
    "LimitFull": "chongming_task._explain",
    "NodeOutcome": "chongming_task.pipeline._outcome",
    "PersistFailure": "chongming_task.controller._writethrough",
    "Pipeline": "chongming_task.pipeline._graph",
    "PipelineHandle": "chongming_task.queue._pipelines",
    "PipelineOutcome": "chongming_task.pipeline._outcome",
    "PipelineRun": "chongming_task.pipeline._run",
    "PostgresTaskStore": "chongming_task.stores._postgres",
    "ProcessExecutor": "chongming_task.runtime.executors._process",
    "Progress": "chongming_task._model",
    "QueuePosition": "chongming_task._explain",
    "ReconcileReport": "chongming_task.controller._reconcile",
    "RetryPolicy": "chongming_task.policies",
    "RuntimeContext": "chongming_task.runtime._context",
    "Schedule": "chongming_task.schedule._definition",
    "ScheduleAdmin": "chongming_task.schedule._admin",
    "ScheduleConflict": "chongming_task.errors",
    "ScheduleRecord": "chongming_task.stores._records",
    "Scheduler": "chongming_task.schedule._scheduler",
    "SqliteTaskStore": "chongming_task.stores._sqlite",
    "StaleScheduleEdit": "chongming_task.errors",
    "StoreError": "chongming_task.errors",
    "Submission": "chongming_task.worker._submission",
    "SystemClock": "chongming_task.core._clock",
    "TaskCancelled": "chongming_task.errors",
    "TaskContext": "chongming_task.runtime._context",
    "TaskDefinition": "chongming_task.controller._registry",
    "TaskError": "chongming_task.errors",
    "TaskExecutionError": "chongming_task.errors",
    "TaskHandle": "chongming_task.queue._client",
    "TaskNotFound": "chongming_task.errors",
    "TaskOutcome": "chongming_task.run",
    "TaskQuery": "chongming_task.stores._records",
    "TaskRun": "chongming_task.run",
    "TaskSkipped": "chongming_task.errors",
    "TaskSnapshot": "chongming_task._model",
    "TaskSpec": "chongming_task._decorator",
    "TaskStatus": "chongming_task.states",
    "TaskStore": "chongming_task.stores._base",
    "TaskTimeout": "chongming_task.errors",
    "ThreadExecutor": "chongming_task.runtime.executors.thread",
    "Timeout": "chongming_task.policies",
    "Transition": "chongming_task._model",
    "TransitionLogger": "chongming_task.observability._logging",
    "TransitionObserver": "chongming_task.observability._events",
    "UnknownTask": "chongming_task.errors",
    "UnknownTaskName": "chongming_task.errors",
    "Worker": "chongming_task.worker._daemon",
    "__version__": None,
    "create_app": "chongming_task.web._app",
    "declare_buckets": "chongming_task.buckets._agent",
    "handoff": "chongming_task.buckets._handoff",
    "inject_trace_context": "chongming_task.observability._trace_context",
    "install_prometheus": "chongming_task.observability._prometheus",
    "install_tracing": "chongming_task.observability._otel",
    "lint_function": "chongming_task._checkpoint_lint",
    "ownership_report": "chongming_task.buckets._registry",
    "preview": "chongming_task.schedule._preview",
    "render_table": "chongming_task.controller._table",
    "run_task": "chongming_task.run",
    "serve_metrics": "chongming_task.observability._server",
    "task": "chongming_task._decorator",
}


def test_the_public_namespace_is_exactly_the_pinned_one() -> None:
    assert list(chongming_task.__all__) == list(PUBLIC)
    for name, module in PUBLIC.items():
        if module is None:
            continue
        assert getattr(chongming_task, name).__module__ == module, name


def test_public_value_types_answer_get_type_hints() -> None:
    """The records a user may return from an endpoint (snapshots, outcomes, queries)."""
    import dataclasses
    import typing

    checked = []
    for name in chongming_task.__all__:
        value = getattr(chongming_task, name)
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            typing.get_type_hints(value)  # a NameError here breaks FastAPI/pydantic users
            checked.append(name)
    assert {"TaskSnapshot", "Transition", "TaskOutcome", "PipelineOutcome"} <= set(checked)


def test_the_stores_namespace_names_every_backend() -> None:
    from chongming_task.stores import (
        InMemoryTaskStore,
        SqliteTaskStore,
        TaskQuery,
        TaskStore,
    )

    assert InMemoryTaskStore is chongming_task.InMemoryTaskStore
    assert SqliteTaskStore is chongming_task.SqliteTaskStore
    assert issubclass(SqliteTaskStore, TaskStore)
    assert TaskQuery is chongming_task.TaskQuery


@pytest.mark.parametrize("name", chongming_task.stores.__all__)
def test_every_name_of_the_stores_namespace_resolves(name: str) -> None:
    """What a third-party backend imports from ``chongming_task.stores`` is really there."""
    assert getattr(chongming_task.stores, name) is not None
