"""chongming-task: background work that tells the truth.

Every task is an auditable trajectory of states, controllable (stop, pause, resume)
from this process or another one, honest after restarts, schedulable, and stored in
embedded SQLite or shared PostgreSQL.

This module is the curated public namespace. Names from layers above the model are
resolved lazily on first access, so ``import chongming_task`` stays cheap and pulls in
no optional dependency (``PostgresTaskStore`` needs the ``postgres`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports
from chongming_task._model import Failure, FailureKind, Progress, TaskSnapshot, Transition
from chongming_task.core._clock import Clock, SystemClock
from chongming_task.errors import (
    AttemptsExhausted,
    CarrierCrashed,
    CircularDependency,
    ClaimLost,
    ConcurrencyConflict,
    ConfigurationError,
    ControllerClosed,
    DependencyFailed,
    DuplicateTaskId,
    InvalidState,
    InvalidTransition,
    ScheduleConflict,
    StaleScheduleEdit,
    StoreError,
    TaskCancelled,
    TaskError,
    TaskExecutionError,
    TaskNotFound,
    TaskSkipped,
    TaskTimeout,
    UnknownTask,
    UnknownTaskName,
)
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
    from chongming_task.buckets import HandoffResult, declare_buckets, ownership_report
    from chongming_task.buckets._handoff import handoff
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
        TaskHandle,
    )
    from chongming_task.run import TaskOutcome, TaskRun, run_task
    from chongming_task.runtime._context import RuntimeContext, TaskContext
    from chongming_task.runtime.executors._process import ProcessExecutor
    from chongming_task.runtime.executors.inline import InlineExecutor
    from chongming_task.runtime.executors.thread import ThreadExecutor
    from chongming_task.schedule._admin import ScheduleAdmin
    from chongming_task.schedule._definition import Schedule
    from chongming_task.schedule._preview import preview
    from chongming_task.schedule._scheduler import Scheduler
    from chongming_task.schedule._triggers import CronTrigger, IntervalTrigger
    from chongming_task.stores._base import Command, ScheduleRecord, TaskQuery, TaskStore
    from chongming_task.stores._memory import InMemoryTaskStore
    from chongming_task.stores._postgres import PostgresTaskStore
    from chongming_task.stores._sqlite import SqliteTaskStore
    from chongming_task.web import create_app
    from chongming_task.worker import Submission, Worker

__version__ = "0.1.0"

#: Public names defined above the model layer: name -> module that defines it.
_LAZY: dict[str, str] = {
    "TaskContext": "chongming_task.runtime._context",
    "RuntimeContext": "chongming_task.runtime._context",
    "TaskRun": "chongming_task.run",
    "TaskOutcome": "chongming_task.run",
    "run_task": "chongming_task.run",
    "task": "chongming_task._decorator",
    "TaskSpec": "chongming_task._decorator",
    "InlineExecutor": "chongming_task.runtime.executors.inline",
    "ThreadExecutor": "chongming_task.runtime.executors.thread",
    "ProcessExecutor": "chongming_task.runtime.executors._process",
    "TaskStore": "chongming_task.stores._base",
    "TaskQuery": "chongming_task.stores._base",
    "Command": "chongming_task.stores._base",
    "ScheduleRecord": "chongming_task.stores._base",
    "InMemoryTaskStore": "chongming_task.stores._memory",
    "SqliteTaskStore": "chongming_task.stores._sqlite",
    "PostgresTaskStore": "chongming_task.stores._postgres",
    "Controller": "chongming_task.controller",
    "ControllerStats": "chongming_task.controller",
    "PersistFailure": "chongming_task.controller",
    "TaskDefinition": "chongming_task.controller",
    "ReconcileReport": "chongming_task.controller",
    "render_table": "chongming_task.controller",
    "Scheduler": "chongming_task.schedule._scheduler",
    "Schedule": "chongming_task.schedule._definition",
    "CronTrigger": "chongming_task.schedule._triggers",
    "IntervalTrigger": "chongming_task.schedule._triggers",
    "ScheduleAdmin": "chongming_task.schedule._admin",
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
    "Submission": "chongming_task.worker",
    "preview": "chongming_task.schedule._preview",
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
    "create_app": "chongming_task.web",
}


__getattr__, __dir__ = lazy_exports("chongming_task", globals(), _LAZY)


__all__ = [
    "AggregationPolicy",
    "AsyncClient",
    "AsyncPipelineHandle",
    "AsyncTaskHandle",
    "AttemptsExhausted",
    "BucketPolicy",
    "CarrierCrashed",
    "CheckpointRisk",
    "CircularDependency",
    "ClaimLost",
    "Client",
    "Clock",
    "Command",
    "ConcurrencyConflict",
    "ConcurrencyPolicy",
    "ConfigurationError",
    "Controller",
    "ControllerClosed",
    "ControllerStats",
    "CronTrigger",
    "DependencyFailed",
    "DuplicateTaskId",
    "ExponentialBackoff",
    "Failure",
    "FailureKind",
    "FixedBackoff",
    "HandoffResult",
    "InMemoryTaskStore",
    "InlineExecutor",
    "IntervalTrigger",
    "InvalidState",
    "InvalidTransition",
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
    "ScheduleConflict",
    "ScheduleRecord",
    "Scheduler",
    "SqliteTaskStore",
    "StaleScheduleEdit",
    "StoreError",
    "Submission",
    "SystemClock",
    "TaskCancelled",
    "TaskContext",
    "TaskDefinition",
    "TaskError",
    "TaskExecutionError",
    "TaskHandle",
    "TaskNotFound",
    "TaskOutcome",
    "TaskQuery",
    "TaskRun",
    "TaskSkipped",
    "TaskSnapshot",
    "TaskSpec",
    "TaskStatus",
    "TaskStore",
    "TaskTimeout",
    "ThreadExecutor",
    "Timeout",
    "Transition",
    "TransitionLogger",
    "TransitionObserver",
    "UnknownTask",
    "UnknownTaskName",
    "Worker",
    "__version__",
    "create_app",
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
