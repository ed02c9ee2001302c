"""``TaskContext``: the one object a task body talks to (guide §2, §8.13).

Checkpoints are unconditional: ``checkpoint()`` and ``acheckpoint()`` are always the
stop point, the pause point and the heartbeat, and no other member ever is one.

=========================  =============  ============  ===========  ===============
member                     stop point     pause point   heartbeat    may block/raise
=========================  =============  ============  ===========  ===============
``checkpoint()``           yes            yes           yes          yes
``await acheckpoint()``    yes            yes           yes          yes
``heartbeat.beat()``       no             no            yes          no
``is_stop_requested``      no (a probe)   no            no           no
``is_pause_requested``     no (a probe)   no            no           no
``progress()``/``log()``   no             no            no           no
=========================  =============  ============  ===========  ===============

The context belongs to one attempt: it is built when the attempt starts, which is why
it is injected as the first argument instead of being captured by a closure (§2.1).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol

from chongming_task._checkpoint_gaps import FAST_GAP
from chongming_task._model import JSONValue, Progress
from chongming_task._public import public
from chongming_task._validation import (
    LINE_MAX_LENGTH,
    UNIT_MAX_LENGTH,
    check_line,
    check_text,
    check_timeout,
    escape_surrogates,
)
from chongming_task.errors import (
    ArtifactDirUnavailable,
    ConfigurationError,
    TaskSkipped,
)
from chongming_task.runtime._control import Control

if TYPE_CHECKING:
    from chongming_task.queue import TaskHandle
    from chongming_task.run import TaskOutcome

__all__ = [
    "ArtifactDirUnavailable",
    "ChildTasks",
    "ContextHost",
    "Heartbeat",
    "LogEntry",
    "RuntimeContext",
    "TaskContext",
    "TaskSkipped",
    "emit_task_log",
]

#: How many log entries ``ctx.logs`` keeps per task (guide §8.13).
LOG_KEEP = 200

_TASK_LOGGER = logging.getLogger("chongming_task.task")
#: ``wait_children`` reads the store after this long, then twice as long each time
#: up to ``_WAIT_MAX`` (seconds): a parent waiting for hours costs one read a second.
_WAIT_FIRST: Final = 0.05
_WAIT_MAX: Final = 1.0


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line of ``ctx.logs``: what a task said, when, at which level and attempt."""

    at: datetime
    level: int
    message: str
    attempt: int

    @property
    def level_name(self) -> str:
        return logging.getLevelName(self.level)


class ContextHost(Protocol):
    """Where a context sends what the body reports (the run, or the child's pipe)."""

    def report_progress(self, progress: Progress) -> None: ...

    def report_log(self, level: int, message: str) -> None: ...

    def recent_logs(self) -> list[LogEntry]: ...


class ChildTasks(Protocol):
    """Where ``ctx.enqueue`` stores a child and ``ctx.wait_children`` reads them (the
    worker's queue: :class:`chongming_task.queue._children.QueueChildren`)."""

    def enqueue(
        self, parent: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> TaskHandle: ...

    def outcomes(self, parent: str) -> list[TaskOutcome] | None:
        """The outcomes of every child of ``parent``, oldest first; ``None`` while one
        is unfinished."""
        ...


def emit_task_log(
    task_id: str, task_name: str, attempt: int, level: int, message: str, *, stacklevel: int = 1
) -> None:
    """Log ``message`` as ``chongming_task.task.<task_id>`` with the task as ``extra``.

    The per-task logger is only used when the application configured it; otherwise the
    record goes through ``chongming_task.task`` carrying the per-task name. Calling
    ``logging.getLogger`` per task would keep one logger per task id alive forever.
    """
    name = f"chongming_task.task.{task_id}"
    configured = logging.Logger.manager.loggerDict.get(name)
    logger = configured if isinstance(configured, logging.Logger) else _TASK_LOGGER
    if not logger.isEnabledFor(level):
        return
    frame = sys._getframe(stacklevel)
    record = logger.makeRecord(
        name,
        level,
        frame.f_code.co_filename,
        frame.f_lineno,
        message,
        (),
        None,
        func=frame.f_code.co_name,
        extra={"task_id": task_id, "task_name": task_name, "attempt": attempt},
    )
    logger.handle(record)


class Heartbeat:
    """``ctx.heartbeat``: refresh the idle timer without being a stop or pause point."""

    __slots__ = ("_control", "_monotonic")

    def __init__(self, control: Control, monotonic: Callable[[], float]) -> None:
        self._control = control
        self._monotonic = monotonic

    def beat(self) -> None:
        """Say "still alive" before a long stretch with no ``checkpoint()`` (guide §6.1)."""
        self._control.beat = self._monotonic()

    @property
    def last(self) -> float:
        """Monotonic time of the last beat (checkpoint or ``beat()``)."""
        return self._control.beat


_UNSAFE_PATH = re.compile(r"[^A-Za-z0-9._-]")


@public
class RuntimeContext:
    """What a task body receives as its first argument (public name ``TaskContext``)."""

    __slots__ = (
        "_artifact_dir",
        "_artifact_root",
        "_attempt",
        "_children",
        "_control",
        "_host",
        "_monotonic",
        "_task_id",
        "_task_name",
        "_upstream",
        "heartbeat",
    )

    def __init__(
        self,
        *,
        task_id: str,
        task_name: str,
        attempt: int,
        control: Control,
        monotonic: Callable[[], float],
        host: ContextHost,
        upstream: Mapping[str, JSONValue] | None = None,
        artifact_root: Path | None = None,
        children: ChildTasks | None = None,
    ) -> None:
        self._task_id = task_id
        self._children = children
        self._task_name = task_name
        self._attempt = attempt
        self._control = control
        self._monotonic = monotonic
        self._host = host
        self._upstream: Mapping[str, JSONValue] = MappingProxyType(dict(upstream or {}))
        self._artifact_root = artifact_root
        self._artifact_dir: Path | None = None
        self.heartbeat = Heartbeat(control, monotonic)

    # ------------------------------------------------------------ identity

    @property
    def task_id(self) -> str:
        return self._task_id

    @property
    def task_name(self) -> str:
        return self._task_name

    @property
    def attempt(self) -> int:
        """The 1-based number of the attempt this context belongs to."""
        return self._attempt

    # ------------------------------------------------------------ checkpoints

    def checkpoint(self) -> None:
        """Honour a stop or pause request and refresh the heartbeat.

        Raises:
            TaskCancelled: a stop was requested (also while paused here). Let it
                propagate; it is a ``BaseException`` so ``except Exception`` misses it.
        """
        control = self._beat()
        if control.pause_requested:
            control.wait_while_paused()
            self._resumed(control)

    async def acheckpoint(self) -> None:
        """:meth:`checkpoint` for ``async def`` tasks: a pause waits without blocking the loop.

        Raises:
            TaskCancelled: a stop was requested.
        """
        control = self._beat()
        if control.pause_requested:
            await control.await_while_paused()
            self._resumed(control)

    def _beat(self) -> Control:
        """A checkpoint's part before any pause: the heartbeat, the gap, a stop."""
        control = self._control
        control.beat = now = self._monotonic()
        gaps = control.gaps
        if gaps is not None:  # GapRecorder's counting, inline: this is the hot path
            gap = now - gaps.last
            gaps.last = now
            if gap < FAST_GAP:
                gaps.fast += 1
            else:
                gaps.add_gap(gap)
        if control.stop_requested:
            raise control.cancelled()
        return control

    def _resumed(self, control: Control) -> None:
        """A checkpoint's part after a pause: a stop while paused, a fresh heartbeat."""
        if control.stop_requested:
            raise control.cancelled()
        control.beat = now = self._monotonic()
        if control.gaps is not None:
            control.gaps.last = now  # a pause is not a gap between checkpoints

    @property
    def is_stop_requested(self) -> bool:
        """Whether a stop was requested. Never blocks or raises: use it in cleanup code."""
        return self._control.stop_requested

    @property
    def is_pause_requested(self) -> bool:
        """Whether a pause is pending. Never blocks; the pause happens at ``checkpoint()``."""
        return self._control.pause_requested

    # ------------------------------------------------------------ reporting

    def progress(
        self,
        done: float,
        *,
        total: float | None = None,
        unit: str | None = None,
        message: str | None = None,
    ) -> None:
        """Report how far the task has got. Does not refresh the heartbeat (guide §8.13).

        ``unit`` and ``message`` are one line each (no control characters, tab and
        newline included) of at most 64 and 512 characters. A lone surrogate in
        ``message`` (a file name from ``os.listdir``) is kept as its backslash escape
        (``\\xff``); in ``unit``, a fixed word, it is refused.

        Raises:
            ConfigurationError: ``done`` or ``total`` is not a finite number, or ``unit``
                or ``message`` is not such a line (the error names the limit).
        """
        if unit is not None:
            check_line(unit, "progress unit", max_length=UNIT_MAX_LENGTH)
        if isinstance(message, str):
            message = check_line(
                escape_surrogates(message), "progress message", max_length=LINE_MAX_LENGTH
            )
        self._host.report_progress(Progress(done=done, total=total, unit=unit, message=message))

    def log(self, message: object, *, level: int | str = logging.INFO) -> None:
        """Log through stdlib logging as ``chongming_task.task.<task_id>``; kept in ``logs``."""
        self._host.report_log(_level(level), str(message))

    def warning(self, message: object) -> None:
        self._host.report_log(logging.WARNING, str(message))

    def error(self, message: object) -> None:
        self._host.report_log(logging.ERROR, str(message))

    @property
    def logs(self) -> list[LogEntry]:
        """The last 200 log entries of this task (in memory only)."""
        return self._host.recent_logs()

    # ------------------------------------------------------------ child tasks

    def enqueue(self, name: str, /, *args: Any, **kwargs: Any) -> TaskHandle:
        """Enqueue task ``name`` as a child of this task; its :class:`TaskHandle`.

        The same path as :meth:`Client.enqueue` (a stored recipe, claimable by any
        worker that may claim it; ``delay``, ``unique_key``, ``bucket_key``... pass
        through), with this task's id stored on the child (``metadata["parent"]``): an
        operator's stop of this task stops its unfinished children (docs/queue.md,
        "Child tasks"). Not a checkpoint.

        Raises:
            ConfigurationError: This task was not claimed from the work queue by a
                worker running it in-process (a ``Controller.submit`` run, or the
                process executor), or :meth:`Client.enqueue` refuses the child.
        """
        check_text(name, "task name")
        return self._require_children("enqueue").enqueue(self._task_id, name, args, kwargs)

    def wait_children(self, timeout: float | None = None) -> list[TaskOutcome]:
        """Wait until every child of this task is finished; their outcomes, oldest first.

        A loop of checkpoints: a stop raises ``TaskCancelled`` and a pause pauses here,
        as at any ``checkpoint()``; the heartbeat stays fresh. The task keeps its slot
        while it waits (docs/queue.md, "Child tasks", says how to keep waiting parents
        from holding every slot). Children that failed are returned, not raised: look
        at each ``outcome.status``.

        Raises:
            TimeoutError: ``timeout`` seconds passed first (the children go on).
            TaskCancelled: a stop was requested meanwhile.
            ConfigurationError: As :meth:`enqueue`, or a malformed ``timeout``.
        """
        children = self._require_children("wait_children")
        timeout = check_timeout(timeout)
        control = self._control
        deadline = None if timeout is None else self._monotonic() + timeout
        interval = _WAIT_FIRST
        while True:
            self.checkpoint()
            found = children.outcomes(self._task_id)
            if found is not None:
                return found
            now = self._monotonic()
            if deadline is not None and now >= deadline:
                raise TimeoutError(
                    f"task {self._task_id!r}: children still unfinished after {timeout} s"
                )
            control.sleep(interval if deadline is None else min(interval, deadline - now))
            interval = min(2 * interval, _WAIT_MAX)

    def _require_children(self, member: str) -> ChildTasks:
        if self._children is None:
            raise ConfigurationError(
                f"ctx.{member}() needs a task a worker claimed from the work queue and runs "
                f"in-process (Client.enqueue, then chongming-task worker with the thread "
                f"executor); task {self._task_id!r} is not one"
            )
        return self._children

    # ------------------------------------------------------------ data

    @property
    def upstream(self) -> Mapping[str, JSONValue]:
        """Results of the *succeeded* upstream nodes by node id (empty outside pipelines)."""
        return self._upstream

    def input(self, node_id: str, default: Any = None) -> Any:
        """The result of upstream node ``node_id``, or ``default`` if it has none."""
        return self._upstream.get(node_id, default)

    @property
    def artifact_dir(self) -> Path:
        """This attempt's own directory, ``<artifact_dir>/<task_id>/attempt-<n>`` (created).

        Raises:
            ArtifactDirUnavailable: the run was created without ``artifact_dir=``; a
                ``ConfigurationError`` and an ``AttributeError``, so ``hasattr()``
                answers ``False`` instead of raising.
        """
        if self._artifact_dir is None:
            if self._artifact_root is None:
                raise ArtifactDirUnavailable(
                    f"task {self._task_id!r} has no artifact directory: pass "
                    "artifact_dir=... to TaskRun or run_task to enable ctx.artifact_dir"
                )
            safe_id = _UNSAFE_PATH.sub("_", self._task_id).strip(".") or "_"
            path = self._artifact_root / safe_id / f"attempt-{self._attempt}"
            path.mkdir(parents=True, exist_ok=True)
            self._artifact_dir = path
        return self._artifact_dir

    def __repr__(self) -> str:
        return f"TaskContext(task_id={self._task_id!r}, attempt={self._attempt})"


def _level(level: int | str) -> int:
    if isinstance(level, int) and not isinstance(level, bool):
        return level
    if isinstance(level, str):
        value = logging.getLevelName(level.upper())
        if isinstance(value, int):
            return value
    raise ConfigurationError(f"log level must be an int or a level name like 'INFO', got {level!r}")


#: The public name task authors use; the same class as ``RuntimeContext``.
TaskContext = RuntimeContext
