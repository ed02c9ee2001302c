"""The child side of the ProcessExecutor: run one attempt, talk to the parent over a pipe.

The child builds an ordinary ``TaskContext`` over a local ``Control``. A small I/O
thread applies the parent's requests to that control the moment they arrive (stop,
pause, resume) and sends the body's beats and progress back at most every
:data:`FLUSH_INTERVAL`, so a tight loop of checkpoints costs no pipe traffic. Logs,
the pause confirmation and the result are sent at once, in order.

Messages, parent -> child: ``("run", payload)``, ``("stop", reason, source)``,
``("pause", seq)``, ``("resume",)``. Child -> parent: ``("started", pid)``,
``("beat",)``, ``("progress", done, total, unit, message)``, ``("log", level, text)``,
``("gaps", new_counts, max)`` (checkpoint gaps counted since the last one),
``("paused", seq)``, then one of ``("returned", value)``, ``("raised", error, tb)``,
``("invalid", message)``.

The child always ends with ``os._exit`` right after its last message: a non-daemon
thread left behind by the body must not keep the process (and the run) alive. If
the parent disappears, the pipe closes and the child exits too: no orphans.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import threading
import time
from collections import deque
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final, NoReturn

from chongming_task._checkpoint_gaps import GapRecorder
from chongming_task._model import Progress, ensure_json
from chongming_task.errors import (
    ChildError,
    ConfigurationError,
)
from chongming_task.runtime._context import LOG_KEEP, LogEntry, RuntimeContext
from chongming_task.runtime._control import Control
from chongming_task.runtime._failures import end_traceback, format_traceback, qualified_name
from chongming_task.runtime.executors._base import call_body, checkpoint_before_body

__all__ = ["FLUSH_INTERVAL", "ChildError", "ChildPayload", "child_main"]

#: Longest delay before a beat or a progress report reaches the parent.
FLUSH_INTERVAL: Final = 0.02
#: Exit code of a child whose parent went away (EX_SOFTWARE).
EXIT_ORPHANED: Final = 70


class ChildPayload:
    """What the parent sends for one attempt (pickled once, on the parent side)."""

    def __init__(
        self,
        *,
        fn: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        upstream: dict[str, Any],
        task_id: str,
        task_name: str,
        attempt: int,
        artifact_root: Path | None,
        stop: tuple[str | None, str] | None = None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.upstream = upstream
        self.task_id = task_id
        self.task_name = task_name
        self.attempt = attempt
        self.artifact_root = artifact_root
        self.stop = stop
        """``(reason, source)`` of a stop requested before the child started: the body
        must see it from its first instruction, not whenever the pipe delivers it."""


class _Channel:
    """The child's end of the pipe: ordered sends, coalesced beats and progress."""

    def __init__(self, conn: Connection, control: Control, attempt: int) -> None:
        self._conn = conn
        self._control = control
        self._attempt = attempt
        self._send_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending: Progress | None = None
        self._sent_beat = control.beat
        self._sent_gaps = [] if control.gaps is None else control.gaps.snapshot_counts()
        self._logs: deque[LogEntry] = deque(maxlen=LOG_KEEP)

    def send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            self._conn.send(message)

    # -- ContextHost ---------------------------------------------------------

    def report_progress(self, progress: Progress) -> None:
        with self._pending_lock:
            self._pending = progress

    def report_log(self, level: int, message: str) -> None:
        self._logs.append(LogEntry(datetime.now(UTC), level, message, self._attempt))
        self.flush()
        self.send(("log", level, message))

    def recent_logs(self) -> list[LogEntry]:
        return list(self._logs)

    def paused(self, seq: int) -> bool:
        self.flush()
        self.send(("paused", seq))
        return True

    # -- pumping ---------------------------------------------------------------

    def flush(self) -> None:
        """Send the latest beat and progress if they changed."""
        with self._pending_lock:
            progress, self._pending = self._pending, None
        beat = self._control.beat
        with self._send_lock:
            if beat != self._sent_beat:
                self._sent_beat = beat
                self._conn.send(("beat",))
            if progress is not None:
                self._conn.send(
                    ("progress", progress.done, progress.total, progress.unit, progress.message)
                )
            gaps = self._control.gaps
            counts = [] if gaps is None else gaps.snapshot_counts()
            if gaps is not None and counts != self._sent_gaps:
                delta = [now - sent for now, sent in zip(counts, self._sent_gaps, strict=True)]
                self._sent_gaps = counts
                self._conn.send(("gaps", delta, gaps.max))

    def pump(self) -> None:
        """Apply the parent's requests as they arrive; flush beats and progress."""
        conn, control = self._conn, self._control
        try:
            while True:
                if conn.poll(FLUSH_INTERVAL):
                    message = conn.recv()
                    kind = message[0]
                    if kind == "stop":
                        control.request_stop(message[1], message[2])
                    elif kind == "pause":
                        control.request_pause(message[1])
                    elif kind == "resume":
                        control.cancel_pause()
                self.flush()
        except (EOFError, OSError):
            _exit(EXIT_ORPHANED)  # the parent is gone: nobody will ever read our result


def child_main(conn: Connection) -> None:
    """Entry point of the child process (``multiprocessing`` spawn target)."""
    try:
        message = conn.recv()
        # The bytes come from our own parent over a private pipe, never from outside.
        payload = pickle.loads(message[1])  # noqa: S301
    except BaseException as exc:
        _send_quietly(conn, ("raised", _portable(_load_error(exc)), format_traceback(exc)))
        _exit(1)
    assert isinstance(payload, ChildPayload)
    started = time.monotonic()
    control = Control(beat=started, gaps=GapRecorder(started))
    if payload.stop is not None:
        control.request_stop(*payload.stop)
    channel = _Channel(conn, control, payload.attempt)
    control.on_pause = channel.paused
    threading.Thread(target=channel.pump, name="chongming-task-pipe", daemon=True).start()
    ctx = RuntimeContext(
        task_id=payload.task_id,
        task_name=payload.task_name,
        attempt=payload.attempt,
        control=control,
        monotonic=time.monotonic,
        host=channel,
        upstream=payload.upstream,
        artifact_root=payload.artifact_root,
    )
    channel.send(("started", os.getpid()))
    try:
        checkpoint_before_body(ctx, control)  # what arrived while starting
        value = call_body(payload.fn, ctx, payload.args, payload.kwargs)
    except BaseException as exc:
        end: tuple[Any, ...] = ("raised", _portable(exc), end_traceback(exc))
    else:
        end = _result_message(value, payload.task_name)
    channel.flush()
    try:
        channel.send(end)
    except Exception:
        error = end[1] if end[0] == "raised" else None
        text = f"{type(error).__name__}: {error}" if error is not None else "unsendable result"
        channel.send(("raised", ChildError(text), end[2] if end[0] == "raised" else None))
    _exit(0)


def _result_message(value: Any, task_name: str) -> tuple[Any, ...]:
    try:
        ensure_json(value, f"the result of task {task_name!r}")
        pickle.dumps(value)
    except ConfigurationError as exc:
        return ("invalid", str(exc))
    except Exception as exc:
        return ("invalid", f"the result of task {task_name!r} cannot leave its process: {exc}")
    return ("returned", value)


def _portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling, else a :class:`ChildError` with its text."""
    try:
        pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes, a round-trip test
    except Exception:
        return ChildError(f"{type(error).__name__}: {error}", qualified_name(error))
    return error


def _load_error(exc: BaseException) -> ConfigurationError:
    return ConfigurationError(
        f"the child process could not load the task: {type(exc).__name__}: {exc}; the task "
        "must be a module-level function of an importable module, and its arguments must "
        "unpickle in a fresh interpreter"
    )


def _send_quietly(conn: Connection, message: tuple[Any, ...]) -> None:
    with contextlib.suppress(Exception):
        conn.send(message)


def _exit(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
