"""How each way of not succeeding becomes a :class:`Failure` (guide §5.2).

Every builder redacts its text: a failure leaves this process (store, logs, CLI) and
is read by far more people than could read the task's configuration.
"""

from __future__ import annotations

import signal
import traceback as traceback_module

from chongming_task._model import Failure, FailureKind
from chongming_task._redact import redact_failure
from chongming_task.errors import (
    CarrierCrashed,
    TaskCancelled,
)
from chongming_task.policies import RetryPolicy, Timeout

__all__ = [
    "CarrierCrashed",
    "crash_failure",
    "describe_exit",
    "end_traceback",
    "exception_failure",
    "format_traceback",
    "is_retryable",
    "lost_failure",
    "result_failure",
    "timeout_failure",
    "timeout_message",
    "timeout_seconds",
]

_TIMEOUT_KINDS = {
    "start": FailureKind.TIMEOUT_START,
    "attempt": FailureKind.TIMEOUT_ATTEMPT,
    "idle": FailureKind.TIMEOUT_IDLE,
    "no_progress": FailureKind.TIMEOUT_NO_PROGRESS,
    "total": FailureKind.TIMEOUT_TOTAL,
}


def qualified_name(error: BaseException) -> str:
    kind = type(error)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def format_traceback(error: BaseException) -> str:
    return "".join(traceback_module.format_exception(error))


def end_traceback(error: BaseException) -> str | None:
    """The traceback an attempt that raised ``error`` keeps: ``None`` for a ``TaskCancelled``.

    A checkpoint's ``TaskCancelled`` ends the run as ``stopped``, ``cancelled`` or a
    timeout, and none of those failures carries a traceback, so none is formatted.
    """
    if isinstance(error, TaskCancelled):
        return None
    return format_traceback(error)


def is_retryable(policy: RetryPolicy, error: BaseException) -> bool:
    """Whether retrying could help, whatever the attempt budget (``Failure.retryable``)."""
    if isinstance(error, TaskCancelled):
        return False
    if policy.give_up_on and isinstance(error, policy.give_up_on):
        return False
    return isinstance(error, policy.retry_on)


def exception_failure(error: BaseException, traceback: str | None, *, retryable: bool) -> Failure:
    text = str(error)
    message = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return redact_failure(
        Failure(
            kind=FailureKind.EXCEPTION,
            message=message,
            retryable=retryable,
            exception_type=qualified_name(error),
            traceback=traceback,
        )
    )


def timeout_seconds(timeout: Timeout, scope: str) -> float:
    value = {
        "start": timeout.start,
        "attempt": timeout.per_attempt,
        "idle": timeout.idle,
        "no_progress": timeout.no_progress,
        "total": timeout.total,
    }[scope]
    return float(value or 0.0)


def timeout_message(timeout: Timeout, scope: str) -> str:
    seconds = timeout_seconds(timeout, scope)
    if scope == "no_progress":
        return f"no_progress timeout of {seconds:g}s expired: progress done did not advance"
    return f"{scope} timeout of {seconds:g}s expired"


def timeout_failure(timeout: Timeout, scope: str, *, retryable: bool) -> Failure:
    return Failure(
        kind=_TIMEOUT_KINDS[scope],
        message=timeout_message(timeout, scope),
        retryable=retryable,
        exception_type="chongming_task.errors.TaskTimeout",
    )


def lost_failure(message: str) -> Failure:
    return redact_failure(Failure(kind=FailureKind.LOST, message=message, retryable=True))


def result_failure(message: str) -> Failure:
    return redact_failure(
        Failure(kind=FailureKind.RESULT_INVALID, message=message, retryable=False)
    )


def describe_exit(exitcode: int | None, pid: int | None) -> str:
    """``child process 123 was killed by signal SIGSEGV (exit code -11)`` and the like."""
    who = f"child process {pid}" if pid is not None else "child process"
    if exitcode is None:
        return f"{who} vanished without an exit code"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"{who} was killed by signal {name} (exit code {exitcode})"
    return f"{who} exited with code {exitcode} before reporting a result"


def crash_failure(exitcode: int | None, pid: int | None, *, retryable: bool) -> Failure:
    return Failure(
        kind=FailureKind.CRASHED,
        message=describe_exit(exitcode, pid),
        retryable=retryable,
        exception_type=f"{CarrierCrashed.__module__}.{CarrierCrashed.__qualname__}",
    )
