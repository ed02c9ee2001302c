"""Exit codes and the mapping from any error to one clear line on stderr.

A command line is used by people and by scripts. People need one sentence that says
what is wrong and what to do; scripts need an exit code they can branch on. Neither
is served by a traceback, so :func:`describe` turns every exception into exactly one
line and one of the four documented codes (guide §8.10).
"""

from __future__ import annotations

import sqlite3
from enum import IntEnum

from chongming_task._redact import mask_dsn, printable, redact_secrets
from chongming_task.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    InvalidTransition,
    StoreError,
    TaskError,
)

__all__ = [
    "CliError",
    "CommandFailed",
    "ExitCode",
    "UsageError",
    "describe",
    "one_line",
    "scrub",
]


class ExitCode(IntEnum):
    """The process exit codes of ``chongming-task`` (documented in docs/cli.md)."""

    OK = 0
    """The command did what it was asked."""
    FAILED = 1
    """The command was well formed but could not be carried out (unknown task id or
    task name, arguments that do not fit the task, unreachable database, a task module
    that cannot be imported, a missing ``--bucket-key``...): guide §8.10."""
    USAGE = 2
    """The command line cannot be right as written, whatever the module or the store
    hold: what the parser rejects (unknown command or option, missing argument, a
    value of the wrong type) and malformed or out-of-range values."""
    TASK_NOT_SUCCEEDED = 3
    """The command succeeded but the task it ran did not (failed, stopped, lost...)."""


class CliError(Exception):
    """An error the CLI reports as one line; ``code`` is the exit code."""

    code: ExitCode = ExitCode.FAILED

    def __init__(self, message: str, *, code: ExitCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class UsageError(CliError):
    """The command line itself is wrong: exit code 2."""

    code = ExitCode.USAGE


class CommandFailed(CliError):
    """A well-formed command that could not be carried out: exit code 1."""

    code = ExitCode.FAILED


def one_line(text: str) -> str:
    """Collapse ``text`` to one line so stderr carries exactly one line per error."""
    return " ".join(part.strip() for part in text.strip().splitlines() if part.strip())


def scrub(text: str) -> str:
    """``text`` as the CLI may show it: DSN passwords as ``***``, other secrets redacted,
    escape sequences and control characters gone (``chongming_task._redact.printable``).

    Every error, notice and library log line passes through here: a driver error can
    quote the connection string, a task's failure text can carry a token or an escape
    sequence.
    """
    # Redacted before and after: removing an escape sequence can join a key together.
    return redact_secrets(printable(redact_secrets(mask_dsn(text))))


def describe(exc: BaseException) -> tuple[str, ExitCode]:
    """The one-line message and exit code for ``exc``.

    Library errors keep their own message (they already say what is wrong and what to
    do); only their category decides the exit code. Anything unexpected is reported
    as an internal error, still on one line, with a hint for getting the traceback.
    """
    if isinstance(exc, CliError):
        return one_line(str(exc)), exc.code
    if isinstance(exc, ConfigurationError):
        return one_line(str(exc)), ExitCode.USAGE
    if isinstance(exc, InvalidTransition | ConcurrencyConflict):
        return one_line(str(exc)), ExitCode.FAILED
    if isinstance(exc, StoreError):
        message = one_line(str(exc))
        cause = one_line(str(exc.__cause__)) if exc.__cause__ is not None else ""
        if cause and cause not in message:
            message = f"{message} ({cause})"
        return f"database error: {message}", ExitCode.FAILED
    if isinstance(exc, TaskError):
        return one_line(str(exc)), ExitCode.FAILED
    if isinstance(exc, sqlite3.Error):
        return one_line(f"database error: {exc}"), ExitCode.FAILED
    if _is_driver_error(exc):
        return one_line(f"database error: {type(exc).__name__}: {exc}"), ExitCode.FAILED
    if isinstance(exc, OSError):
        return one_line(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")), (
            ExitCode.FAILED
        )
    return (
        one_line(
            f"internal error: {type(exc).__name__}: {exc} "
            "(set CHONGMING_DEBUG=1 to see the traceback, and please report it)"
        ),
        ExitCode.FAILED,
    )


def _is_driver_error(exc: BaseException) -> bool:
    """True for a psycopg error, recognised by module so psycopg stays optional."""
    return any(cls.__module__.startswith("psycopg") for cls in type(exc).__mro__)
