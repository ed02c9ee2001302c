"""The curated public namespace: sorted, resolvable, lazy where it should be.

Tolerant for now: lazily exported names whose module is not written yet are skipped
(other parts of the package are being built in parallel); once a module exists,
every name mapped to it must resolve.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import pickle
import subprocess
import sys
import typing
from datetime import datetime

import pytest

import chongming_task


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


#: The public namespace, pinned. Adding, removing or moving a public name is a decision
#: made here: the top level is what a user writes tasks, runs them and picks a store
#: with; the rest lives in the faces (``FACES``). Every name reports ``chongming_task``
#: as its ``__module__`` (``chongming_task._public.public`` at its definition).
PUBLIC: list[str] = [
    "AggregationPolicy",
    "AsyncClient",
    "AsyncPipelineHandle",
    "AsyncTaskHandle",
    "BucketPolicy",
    "CheckpointRisk",
    "Client",
    "Clock",
    "ConcurrencyPolicy",
    "Controller",
    "ControllerStats",
    "CronTrigger",
    "ExponentialBackoff",
    "Failure",
    "FailureKind",
    "FixedBackoff",
    "HandoffResult",
    "InMemoryTaskStore",
    "InlineExecutor",
    "IntervalTrigger",
    "Jitter",
    "JoinMode",
    "JsonLogFormatter",
    "LimitFull",
    "NodeOutcome",
    "PersistFailure",
    "Pipeline",
    "PipelineHandle",
    "PipelineOutcome",
    "PipelineRun",
    "PostgresTaskStore",
    "ProcessExecutor",
    "Progress",
    "QueuePosition",
    "ReconcileReport",
    "RetryPolicy",
    "RuntimeContext",
    "Schedule",
    "ScheduleAdmin",
    "Scheduler",
    "SqliteTaskStore",
    "SystemClock",
    "TaskContext",
    "TaskDefinition",
    "TaskHandle",
    "TaskOutcome",
    "TaskQuery",
    "TaskRun",
    "TaskSnapshot",
    "TaskSpec",
    "TaskStatus",
    "ThreadExecutor",
    "Timeout",
    "Transition",
    "TransitionLogger",
    "TransitionObserver",
    "Worker",
    "declare_buckets",
    "handoff",
    "inject_trace_context",
    "install_prometheus",
    "install_tracing",
    "lint_function",
    "ownership_report",
    "preview",
    "render_table",
    "run_task",
    "serve_metrics",
    "task",
]

#: The faces that hold what the top level does not, each with its ``__all__``.
FACES = (
    "chongming_task.errors",
    "chongming_task.stores",
    "chongming_task.testing",
    "chongming_task.web",
)


def test_the_public_namespace_is_exactly_the_pinned_one() -> None:
    assert list(chongming_task.__all__) == PUBLIC
    assert len(PUBLIC) <= 70
    for name in PUBLIC:
        assert getattr(chongming_task, name).__module__ == "chongming_task", name


def test_a_public_name_reports_the_package_wherever_it_is_imported_from() -> None:
    """Set where the name is defined, not on first access through the package: a
    fresh interpreter that imports each defining module first sees the same home."""
    script = (
        "import importlib, sys, chongming_task\n"
        "wrong = []\n"
        "for name, module in sorted(chongming_task._LAZY.items()):\n"
        "    value = getattr(importlib.import_module(module), name)\n"
        "    if value.__module__ != 'chongming_task':\n"
        "        wrong.append(f'{module}.{name}: {value.__module__}')\n"
        "print(wrong)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert completed.stdout.strip() == "[]"


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_class_or_function_pickles_by_its_public_name(name: str) -> None:
    """What a process executor or a multiprocessing queue sends by reference."""
    value = getattr(chongming_task, name)
    assert pickle.loads(pickle.dumps(value)) is value


def test_public_values_pickle_across_a_process_boundary() -> None:
    failure = chongming_task.Failure(
        kind=chongming_task.FailureKind.EXCEPTION, exception_type="x.Y", message="m"
    )
    values = (chongming_task.TaskStatus.PAUSED, failure, chongming_task.RetryPolicy())
    script = (
        "import pickle, sys\n"
        "values = pickle.loads(sys.stdin.buffer.read())\n"
        "print([type(v).__module__ + '.' + type(v).__qualname__ for v in values])\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps(values),
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert completed.stdout.decode().strip() == str(
        ["chongming_task.TaskStatus", "chongming_task.Failure", "chongming_task.RetryPolicy"]
    )


def test_public_value_types_answer_get_type_hints() -> None:
    """The records a user may return from an endpoint (snapshots, outcomes, queries):
    their string annotations resolve in the module that defines them."""
    checked = []
    for name in chongming_task.__all__:
        value = getattr(chongming_task, name)
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            typing.get_type_hints(value)  # a NameError here breaks FastAPI/pydantic users
            checked.append(name)
    assert {"TaskSnapshot", "Transition", "TaskOutcome", "PipelineOutcome"} <= set(checked)
    hints = typing.get_type_hints(chongming_task.TaskSnapshot)
    assert hints["created_at"] is datetime
    assert hints["status"] is chongming_task.TaskStatus
    assert hints["failure"] == chongming_task.Failure | None
    assert hints["tags"] == frozenset[str]
    assert [f.name for f in dataclasses.fields(chongming_task.TaskSnapshot)][:2] == [
        "task_id",
        "name",
    ]


@pytest.mark.parametrize("name", sorted(chongming_task._MOVED))
def test_a_name_moved_to_a_face_still_resolves_with_a_warning(name: str) -> None:
    face = importlib.import_module(chongming_task._MOVED[name])
    assert name in face.__all__
    assert name not in chongming_task.__all__
    assert name not in dir(chongming_task)
    with pytest.warns(DeprecationWarning, match=rf"import it from {face.__name__}$"):
        value = getattr(chongming_task, name)
    assert value is getattr(face, name)


@pytest.mark.parametrize("face", FACES)
def test_every_name_of_a_face_resolves(face: str) -> None:
    module = importlib.import_module(face)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_exceptions_keep_their_stored_path() -> None:
    """A stored ``Failure.exception_type`` names ``chongming_task.errors.<class>``."""
    from chongming_task import errors

    for name in errors.__all__:
        assert getattr(errors, name).__module__ == "chongming_task.errors", name


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
