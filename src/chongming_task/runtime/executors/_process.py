"""``ProcessExecutor``: each attempt in a child process (guide §7.4).

What a process buys over a thread: a stop that is really enforced (after the graceful
window ``terminate()``, then ``kill()``), true parallelism for CPU-bound work, and
isolation from native crashes (a segfault takes the child, and the run records a
failure naming the signal). So a process-backed run ends ``stopped`` (a stop request)
or ``failed`` (timeout, crash), never ``lost``.

What it costs, checked at submission so the mistake surfaces where it is made:
the function must be importable by name in a fresh interpreter (module level, no
lambda or closure) and the arguments and upstream data must pickle. Children are
started with the ``spawn`` method (a fresh interpreter, safe in a threaded parent)
as daemon processes, which may not start processes of their own. Control crosses the
process boundary through a pipe, with about 20 ms of latency for beats and progress.

One relay thread per running attempt (the run's carrier) reads the child's pipe and
waits for its exit; after the exit the child is joined, so no zombie remains.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import multiprocessing
import pickle
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from chongming_task._model import Progress
from chongming_task._public import public
from chongming_task._validation import check_seconds
from chongming_task.errors import ConfigurationError
from chongming_task.runtime._attempt import (
    Attempt,
    AttemptEnd,
    Exited,
    InvalidResult,
    Raised,
    Returned,
    TaskCall,
)
from chongming_task.runtime._failures import format_traceback
from chongming_task.runtime.executors._process_child import ChildError, ChildPayload, child_main

__all__ = ["ProcessExecutor"]

#: Real seconds a child may take to exit after it sent its result.
_EXIT_GRACE = 5.0


class _Child:
    """The parent's handle on one child process."""

    def __init__(self, process: Any, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.lock = threading.Lock()
        self.started = False

    def send(self, message: tuple[Any, ...]) -> None:
        # OSError/ValueError: the child is gone or the pipe is closed; nobody listens.
        with self.lock, contextlib.suppress(OSError, ValueError):
            self.conn.send(message)

    def terminate(self) -> None:
        with self.lock:
            if self.started and self.process.exitcode is None:
                self.process.terminate()

    def kill(self) -> None:
        with self.lock:
            if self.started and self.process.exitcode is None:
                self.process.kill()


@public
class ProcessExecutor:
    """Runs each attempt in a spawned child process that can really be stopped."""

    name = "process"
    supports_pause = True

    def __init__(self, *, kill_after: float = 2.0) -> None:
        """``kill_after``: seconds between ``terminate()`` and ``kill()`` of a child."""
        check_seconds(kill_after, "kill_after", allow_zero=True)
        self.kill_after = float(kill_after)
        self._context = multiprocessing.get_context("spawn")

    # ------------------------------------------------------------ submission

    def check(self, call: TaskCall) -> None:
        """Refuse what a fresh interpreter could not load, naming the fix."""
        _check_target(call.fn)
        for index, value in enumerate(call.args, start=1):
            _check_pickle(value, f"positional argument {index}")
        for key, value in call.kwargs.items():
            _check_pickle(value, f"keyword argument {key!r}")
        for key, value in call.upstream.items():
            _check_pickle(value, f"upstream value {key!r}")

    # ------------------------------------------------------------ running

    def launch(self, drive: Callable[[], None], *, name: str) -> None:
        threading.Thread(target=drive, name=f"{name} (relay)", daemon=True).start()

    def run_attempt(self, attempt: Attempt) -> AttemptEnd:
        control = attempt.control
        call = attempt.call
        payload = ChildPayload(
            fn=call.fn,
            args=call.args,
            kwargs=dict(call.kwargs),
            upstream=dict(call.upstream),
            task_id=attempt.task_id,
            task_name=attempt.task_name,
            attempt=attempt.number,
            artifact_root=attempt.artifact_root,
            stop=(control.stop_reason, control.stop_source) if control.stop_requested else None,
        )
        try:
            data = pickle.dumps(payload)
        except Exception as exc:
            error = ConfigurationError(f"the task's arguments no longer pickle: {exc}")
            return Raised(error, format_traceback(exc))
        parent_conn, child_conn = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=child_main,
            args=(child_conn,),
            name=f"chongming-task:{attempt.task_id}#{attempt.number}",
            daemon=True,
        )
        child = _Child(process, parent_conn)
        attempt.handle = child
        with child.lock:
            # A person's stop is answered by the body (checkpoint_before_body); a
            # cancel or a start timeout ends the attempt before it costs a process.
            if attempt.hard_stopped or (control.stop_requested and control.stop_source != "stop"):
                parent_conn.close()
                child_conn.close()
                return Raised(control.cancelled())
            process.start()
            child.started = True
        child_conn.close()
        if process.pid is not None:
            attempt.set_pid(process.pid)
        child.send(("run", data))
        control.forward_to(child.send)
        try:
            return self._relay(attempt, child)
        finally:
            control.forward_to(None)
            parent_conn.close()
            if process.exitcode is None:  # only if relaying failed: never leave it behind
                child.kill()
            process.join()
            process.close()

    def _relay(self, attempt: Attempt, child: _Child) -> AttemptEnd:
        conn, process = child.conn, child.process
        sentinel = process.sentinel
        end: AttemptEnd | None = None
        while True:
            ready = wait([conn, sentinel], timeout=None if end is None else _EXIT_GRACE)
            if not ready:  # the result came but the child does not exit: make it
                child.kill()
                continue
            open_pipe = True
            while open_pipe and conn in ready:
                try:
                    if not conn.poll():
                        break
                    message = conn.recv()
                except (EOFError, OSError):
                    open_pipe = False
                    break
                except Exception as exc:  # an object that does not unpickle here
                    message = ("raised", ChildError(f"unreadable message from child: {exc}"), None)
                end = _apply(attempt, message) or end
            if sentinel in ready or not open_pipe:
                process.join()
                break
        if end is None:
            return Exited(process.exitcode, process.pid)
        return end

    # ------------------------------------------------------------ hard stop

    def terminate(self, attempt: Attempt) -> bool:
        child = attempt.handle
        if isinstance(child, _Child):
            child.terminate()
        return True  # not spawned yet: run_attempt sees hard_stopped and never spawns

    def kill(self, attempt: Attempt) -> None:
        child = attempt.handle
        if isinstance(child, _Child):
            child.kill()

    def __repr__(self) -> str:
        return f"ProcessExecutor(kill_after={self.kill_after:g})"


def _apply(attempt: Attempt, message: tuple[Any, ...]) -> AttemptEnd | None:
    kind = message[0]
    if kind == "started":
        attempt.mark_running()
    elif kind == "beat":
        attempt.report_beat()
    elif kind == "progress":
        attempt.report_progress(
            Progress(done=message[1], total=message[2], unit=message[3], message=message[4])
        )
    elif kind == "gaps":
        attempt.report_gaps(message[1], message[2])
    elif kind == "log":
        attempt.report_log(message[1], message[2])
    elif kind == "paused":
        attempt.confirm_pause(message[1])
    elif kind == "returned":
        return Returned(message[1])
    elif kind == "raised":
        return Raised(message[1], message[2])
    elif kind == "invalid":
        return InvalidResult(message[1])
    return None


# ---------------------------------------------------------------- submission checks


def _check_target(fn: Callable[..., Any]) -> None:
    target = inspect.unwrap(fn) if inspect.isfunction(fn) else fn
    if inspect.isfunction(target):
        qualname = target.__qualname__
        module = target.__module__
        if "<lambda>" in qualname:
            raise ConfigurationError(
                f"ProcessExecutor cannot run a lambda ({qualname}): a child process finds "
                "functions by module and name; define it with def at module level"
            )
        if "<locals>" in qualname:
            raise ConfigurationError(
                f"ProcessExecutor cannot run the local function {qualname}: a child process "
                "cannot import it; move it to module level of an importable module"
            )
        _check_module(module, qualname)
    try:
        pickle.dumps(fn)
    except Exception as exc:
        raise ConfigurationError(
            f"ProcessExecutor cannot send task {fn!r} to a child process: {exc}; use a "
            "module-level function (a @task-decorated one is fine)"
        ) from exc


def _check_module(module: str, qualname: str) -> None:
    if module == "__main__":
        main = sys.modules.get("__main__")
        if getattr(main, "__file__", None) is None:
            raise ConfigurationError(
                f"ProcessExecutor cannot run {qualname}: it is defined in an interactive "
                "session, which a child process cannot import; put it in a module file"
            )
        return
    try:
        importlib.import_module(module)
    except Exception as exc:
        raise ConfigurationError(
            f"ProcessExecutor cannot run {module}.{qualname}: its module does not import "
            f"({exc}); a child process must be able to import it"
        ) from exc


def _check_pickle(value: object, what: str) -> None:
    try:
        pickle.dumps(value)
    except Exception as exc:
        raise ConfigurationError(
            f"ProcessExecutor cannot send the {what} ({type(value).__name__}) to a child "
            f"process: {exc}; pass plain data (paths, ids, JSON) and open files, "
            "connections or locks inside the task"
        ) from exc
