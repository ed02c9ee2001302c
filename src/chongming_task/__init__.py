"""chongming-task: background work that tells the truth.

Every task is an auditable trajectory of states, controllable (stop, pause, resume)
from this process or another one, honest after restarts, schedulable, and stored in
embedded SQLite or shared PostgreSQL.

This module is the curated public namespace: what a user writes tasks, runs them and
picks a store with. Every name here reports ``chongming_task`` as its ``__module__``
(``chongming_task._public``). The rest lives in the faces of its concept: the
exceptions in :mod:`chongming_task.errors`, the store contract and what a backend
author needs in :mod:`chongming_task.stores`, test support in
:mod:`chongming_task.testing`, the dashboard in :mod:`chongming_task.web`.

Names from layers above the model are resolved lazily on first access, so
``import chongming_task`` stays cheap and pulls in no optional dependency
(``PostgresTaskStore`` needs the ``postgres`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports
from chongming_task._model import Failure, FailureKind, Progress, TaskSnapshot, Transition
from chongming_task.core import Clock, SystemClock
from chongming_task.policies import (
    AggregationPolicy,
    BucketPolicy,
    ConcurrencyPolicy,
    ExponentialBackoff,
    FixedBackoff,
    Jitter,
    JoinMode,
    RetryPolicy,
    Timeout,
)
from chongming_task.states import TaskStatus

if TYPE_CHECKING:  # type checkers see the real classes; runtime resolves them lazily
    from chongming_task._checkpoint_lint import lint_function
    from chongming_task._decorator import TaskSpec, task
    from chongming_task._explain import CheckpointRisk, LimitFull, QueuePosition
    from chongming_task.buckets import HandoffResult, declare_buckets, handoff, ownership_report
    from chongming_task.controller import (
        Controller,
        ControllerStats,
        PersistFailure,
        ReconcileReport,
        TaskDefinition,
        render_table,
    )
    from chongming_task.observability import (
        JsonLogFormatter,
        TransitionLogger,
        TransitionObserver,
        inject_trace_context,
        install_prometheus,
        install_tracing,
        serve_metrics,
    )
    from chongming_task.pipeline import NodeOutcome, Pipeline, PipelineOutcome, PipelineRun
    from chongming_task.queue import (
        AsyncClient,
        AsyncPipelineHandle,
        AsyncTaskHandle,
        Client,
        PipelineHandle,
        TaskHandle,
    )
    from chongming_task.run import TaskOutcome, TaskRun, run_task
    from chongming_task.runtime import RuntimeContext, TaskContext
    from chongming_task.runtime.executors import ProcessExecutor
    from chongming_task.runtime.executors.inline import InlineExecutor
    from chongming_task.runtime.executors.thread import ThreadExecutor
    from chongming_task.schedule import (
        CronTrigger,
        IntervalTrigger,
        Schedule,
        ScheduleAdmin,
        Scheduler,
        preview,
    )
    from chongming_task.stores._base import TaskQuery
    from chongming_task.stores._memory import InMemoryTaskStore
    from chongming_task.stores._postgres import PostgresTaskStore
    from chongming_task.stores._sqlite import SqliteTaskStore
    from chongming_task.worker import Worker

__version__ = "0.1.0"

#: Public names defined above the model layer: name -> module that defines it.
_LAZY: dict[str, str] = {
    "TaskContext": "chongming_task.runtime",
    "RuntimeContext": "chongming_task.runtime",
    "TaskRun": "chongming_task.run",
    "TaskOutcome": "chongming_task.run",
    "run_task": "chongming_task.run",
    "task": "chongming_task._decorator",
    "TaskSpec": "chongming_task._decorator",
    "InlineExecutor": "chongming_task.runtime.executors.inline",
    "ThreadExecutor": "chongming_task.runtime.executors.thread",
    "ProcessExecutor": "chongming_task.runtime.executors",
    "TaskQuery": "chongming_task.stores",
    "InMemoryTaskStore": "chongming_task.stores",
    "SqliteTaskStore": "chongming_task.stores",
    "PostgresTaskStore": "chongming_task.stores",
    "Controller": "chongming_task.controller",
    "ControllerStats": "chongming_task.controller",
    "PersistFailure": "chongming_task.controller",
    "TaskDefinition": "chongming_task.controller",
    "ReconcileReport": "chongming_task.controller",
    "render_table": "chongming_task.controller",
    "Scheduler": "chongming_task.schedule",
    "Schedule": "chongming_task.schedule",
    "CronTrigger": "chongming_task.schedule",
    "IntervalTrigger": "chongming_task.schedule",
    "ScheduleAdmin": "chongming_task.schedule",
    "Pipeline": "chongming_task.pipeline",
    "PipelineRun": "chongming_task.pipeline",
    "PipelineOutcome": "chongming_task.pipeline",
    "NodeOutcome": "chongming_task.pipeline",
    "Worker": "chongming_task.worker",
    "Client": "chongming_task.queue",
    "AsyncClient": "chongming_task.queue",
    "TaskHandle": "chongming_task.queue",
    "PipelineHandle": "chongming_task.queue",
    "AsyncTaskHandle": "chongming_task.queue",
    "AsyncPipelineHandle": "chongming_task.queue",
    "preview": "chongming_task.schedule",
    "declare_buckets": "chongming_task.buckets",
    "handoff": "chongming_task.buckets",
    "ownership_report": "chongming_task.buckets",
    "HandoffResult": "chongming_task.buckets",
    "CheckpointRisk": "chongming_task._explain",
    "LimitFull": "chongming_task._explain",
    "QueuePosition": "chongming_task._explain",
    "lint_function": "chongming_task._checkpoint_lint",
    "TransitionObserver": "chongming_task.observability",
    "TransitionLogger": "chongming_task.observability",
    "JsonLogFormatter": "chongming_task.observability",
    "install_prometheus": "chongming_task.observability",
    "install_tracing": "chongming_task.observability",
    "serve_metrics": "chongming_task.observability",
    "inject_trace_context": "chongming_task.observability",
}


#: Names this namespace exported before it was curated: name -> the face that has it.
_MOVED: dict[str, str] = {
    **dict.fromkeys(
        (
            "AttemptsExhausted",
            "CarrierCrashed",
            "CircularDependency",
            "ClaimLost",
            "ConcurrencyConflict",
            "ConfigurationError",
            "ControllerClosed",
            "DependencyFailed",
            "DuplicateTaskId",
            "InvalidState",
            "InvalidTransition",
            "ScheduleConflict",
            "StaleScheduleEdit",
            "StoreError",
            "TaskCancelled",
            "TaskError",
            "TaskExecutionError",
            "TaskNotFound",
            "TaskSkipped",
            "TaskTimeout",
            "UnknownTask",
            "UnknownTaskName",
        ),
        "chongming_task.errors",
    ),
    "Command": "chongming_task.stores",
    "ScheduleRecord": "chongming_task.stores",
    "TaskStore": "chongming_task.stores",
    "create_app": "chongming_task.web",
}

__getattr__, __dir__ = lazy_exports("chongming_task", globals(), _LAZY, _MOVED)


__all__ = [
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
