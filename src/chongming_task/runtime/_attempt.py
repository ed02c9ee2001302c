"""One attempt of a run, as the executors see it, and how an attempt can end.

An executor receives an :class:`Attempt` and returns an :data:`AttemptEnd`. Between
the two it reports what happens (running, paused, progress, logs, beats, pid) through
the attempt, which forwards to its run under the run's lock. The attempt also carries
the per-attempt supervision state: its timing, the timeout that fired in it, and the
stop and kill deadlines of its graceful window.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Protocol

from chongming_task._model import JSONValue, Progress
from chongming_task.runtime._context import LogEntry, RuntimeContext
from chongming_task.runtime._control import Control

__all__ = [
    "SPENT_CALL",
    "Attempt",
    "AttemptEnd",
    "AttemptOwner",
    "Exited",
    "InvalidResult",
    "Raised",
    "Returned",
    "TaskCall",
]


@dataclass(frozen=True, slots=True)
class TaskCall:
    """The function and the arguments a run calls on every attempt."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    upstream: Mapping[str, JSONValue] = field(default_factory=dict)


def _spent(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("a finished run's call was released; a TaskRun executes once")


#: What a finished run keeps instead of its call: the arguments go back to the caller's
#: garbage collector as soon as the last attempt is over (``Driver._let_go_locked``).
SPENT_CALL: Final = TaskCall(_spent, (), MappingProxyType({}), MappingProxyType({}))


# ---------------------------------------------------------------- endings


@dataclass(frozen=True, slots=True)
class Returned:
    """The body returned ``value``."""

    value: Any


@dataclass(frozen=True, slots=True)
class Raised:
    """The body (or the carrier before it) raised ``error``."""

    error: BaseException
    traceback: str | None = None


@dataclass(frozen=True, slots=True)
class InvalidResult:
    """The body returned something that cannot be stored or sent back."""

    message: str


@dataclass(frozen=True, slots=True)
class Exited:
    """The carrier (a child process) ended without reporting a result."""

    exitcode: int | None
    pid: int | None = None


AttemptEnd = Returned | Raised | InvalidResult | Exited


# ---------------------------------------------------------------- the attempt


class AttemptOwner(Protocol):
    """What an attempt forwards to (implemented by ``TaskRun``)."""

    def _attempt_context(self, attempt: Attempt) -> RuntimeContext: ...

    def _attempt_running(self, attempt: Attempt, pid: int | None = None) -> None: ...

    def _attempt_pause_reached(self, attempt: Attempt, seq: int) -> bool: ...

    def _attempt_progress(self, attempt: Attempt, progress: Progress) -> None: ...

    def _attempt_log(
        self, attempt: Attempt, level: int, message: str, at: datetime | None, stacklevel: int
    ) -> None: ...

    def _attempt_beat(self, attempt: Attempt) -> None: ...

    def _attempt_pid(self, attempt: Attempt, pid: int) -> None: ...

    def _recent_logs(self) -> list[LogEntry]: ...


class Attempt:
    """One try of a run: its flags, its timing and its carrier's handle."""

    def __init__(
        self,
        *,
        owner: AttemptOwner,
        number: int,
        call: TaskCall,
        control: Control,
        task_id: str,
        task_name: str,
        artifact_root: Path | None,
    ) -> None:
        self.owner = owner
        self.number = number
        self.call = call
        self.control = control
        self.task_id = task_id
        self.task_name = task_name
        self.artifact_root = artifact_root
        # Supervision state, written under the run's lock.
        self.begun_at = control.beat
        """Monotonic time the attempt began (``starting``): its first gap runs from here."""
        self.started_at: float | None = None
        """Monotonic time the body began (``running``); ``None`` before."""
        self.paused_since: float | None = None
        self.paused_total = 0.0
        self.progress_at: float | None = None
        """Monotonic time ``done`` last went up in this attempt (``no_progress``)."""
        self.progress_done: float | None = None
        """The highest ``done`` reported in this attempt."""
        self.progress_paused = 0.0
        """``paused_total`` when ``done`` last went up: later pauses do not count."""
        self.timeout_scope: str | None = None
        """The timeout that asked this attempt to stop, if one did."""
        self.stop_deadline: float | None = None
        self.kill_deadline: float | None = None
        self.hard_stopped = False
        """The executor was told to end the carrier by force."""
        self.live = True
        """False once the executor returned the attempt's end."""
        self.handle: Any = None
        """Executor-private state (the ProcessExecutor's child)."""

    def progress_moved_at(self) -> float | None:
        """When ``done`` last went up, moved forward by the time paused since (or ``None``)."""
        if self.progress_at is None:
            return None
        return self.progress_at + (self.paused_total - self.progress_paused)

    # ------------------------------------------------------------ for executors

    def make_context(self) -> RuntimeContext:
        """The ``TaskContext`` to run the body with in this process."""
        return self.owner._attempt_context(self)

    def mark_running(self, *, pid: int | None = None) -> None:
        """The body is about to run (``starting -> running``), in process ``pid`` if given."""
        self.owner._attempt_running(self, pid)

    def confirm_pause(self, seq: int) -> bool:
        """The body reached a checkpoint with pause ``seq`` pending; True if it should block."""
        return self.owner._attempt_pause_reached(self, seq)

    def set_pid(self, pid: int) -> None:
        self.owner._attempt_pid(self, pid)

    def report_beat(self) -> None:
        self.owner._attempt_beat(self)

    def report_progress(self, progress: Progress) -> None:
        self.owner._attempt_progress(self, progress)

    def report_gaps(self, counts: list[int], largest: float) -> None:
        """Checkpoint gaps the body counted in another process (new counts only)."""
        gaps = self.control.gaps
        if gaps is not None:
            gaps.add(counts, largest)

    def report_log(
        self, level: int, message: str, at: datetime | None = None, *, stacklevel: int = 2
    ) -> None:
        """Log for the task; ``stacklevel`` 2 points the record at the caller of ``ctx.log``."""
        self.owner._attempt_log(self, level, message, at, stacklevel + 1)

    def recent_logs(self) -> list[LogEntry]:
        return self.owner._recent_logs()

    def __repr__(self) -> str:
        return f"Attempt(task_id={self.task_id!r}, number={self.number}, live={self.live})"
