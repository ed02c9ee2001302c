"""What an executor is, and the in-process way to run one attempt.

An executor decides *where* a task body runs (the caller's thread, a thread of its
own, a child process) and how hard it can be stopped. The run decides everything
else: states, retries, timeouts. The contract:

- :meth:`Executor.check` runs at submission and refuses, with a ``ConfigurationError``
  naming the fix, what this executor cannot run (the ProcessExecutor needs picklable,
  importable things);
- :meth:`Executor.launch` starts the run's attempt loop on a carrier and returns
  (the InlineExecutor runs it to the end first: that is its point);
- :meth:`Executor.run_attempt` runs one attempt on the carrier and says how it ended;
- :meth:`Executor.terminate` / :meth:`Executor.kill` end a carrier that ignored a stop
  past its graceful window; ``terminate`` returns False when the executor cannot
  (threads), and the run then reports ``lost`` instead of pretending; so does a
  ``kill`` that returns False (an asyncio body that ignored its cancellation).

An executor that runs ``async def`` bodies on the shared event loop is also an
:class:`AsyncCarrier`: the run's attempt loop is then a task of that loop too
(``Driver.adrive``), and no thread waits for the body.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

from chongming_task.runtime._attempt import Attempt, AttemptEnd, Raised, Returned, TaskCall
from chongming_task.runtime._context import RuntimeContext
from chongming_task.runtime._control import Control
from chongming_task.runtime._failures import end_traceback

__all__ = ["AsyncCarrier", "Executor", "call_body", "run_in_this_thread"]

T = TypeVar("T")


@runtime_checkable
class Executor(Protocol):
    """Where a task body runs. Implementations: inline, thread, process."""

    name: str
    """Short name recorded on the ``starting`` transition (``thread``, ``process``...)."""
    supports_pause: bool
    """Whether a running body can be paused in place (the InlineExecutor cannot)."""
    kill_after: float
    """Seconds between ``terminate()`` and ``kill()`` when a carrier ignores both."""

    def check(self, call: TaskCall) -> None:
        """Refuse at submission what this executor cannot run (``ConfigurationError``)."""
        ...

    def launch(self, drive: Callable[[], None], *, name: str) -> None:
        """Run ``drive`` (the run's attempt loop) on a carrier."""
        ...

    def run_attempt(self, attempt: Attempt) -> AttemptEnd:
        """Run one attempt on the current carrier and report how it ended."""
        ...

    def terminate(self, attempt: Attempt) -> bool:
        """End the attempt's carrier gently by force; False if this executor cannot."""
        ...

    def kill(self, attempt: Attempt) -> bool | None:
        """End the attempt's carrier unconditionally (after ``terminate`` did not).

        False: it could not, and the run is given up as ``lost``.
        """
        ...


class AsyncCarrier(Protocol):
    """An executor whose attempts are awaited on the shared event loop."""

    def launch_async(
        self, drive: Callable[[AsyncCarrier], Coroutine[Any, Any, None]], *, name: str
    ) -> None:
        """Run ``drive(self)`` (the run's attempt loop) as a task of the event loop."""
        ...

    async def arun_attempt(self, attempt: Attempt) -> AttemptEnd:
        """Run one attempt on the event loop and report how it ended."""
        ...

    def offload(self, fn: Callable[..., T], /, *args: Any) -> Awaitable[T]:
        """``fn(*args)`` on a helper thread, awaited without blocking the loop."""
        ...


#: Result types that are never awaitable (exact types: a subclass may define ``__await__``).
_NEVER_AWAITABLE: Final = frozenset({type(None), bool, int, float, str, bytes, dict, list, tuple})


def call_body(
    fn: Callable[..., Any],
    ctx: RuntimeContext,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> Any:
    """Call the task; an awaitable result runs to completion on a loop of its own.

    That is the path of an ``async def`` task on the inline executor, in a process
    executor's child, and of a plain ``def`` that returns a coroutine; the thread
    executor sends ``async def`` tasks to the shared loop instead (``_asyncio``).
    """
    result = fn(ctx, *args, **kwargs)
    # Most bodies return None or a plain JSON value; ``isawaitable`` on those ends in
    # an ABC instance check, the costliest step of a no-op attempt's call.
    if type(result) in _NEVER_AWAITABLE or not inspect.isawaitable(result):
        return result
    return asyncio.run(_await(result))


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def checkpoint_before_body(ctx: RuntimeContext, control: Control) -> None:
    """Honour what arrived while the run was ``starting``, before the body is called.

    A pause confirms here, and a stop from a start timeout or a cancel (an upstream
    failed) ends the attempt without running the body: nothing was asked of it yet.
    A person's ``stop()`` does not: it is a request the body answers (guide §4.4 and
    §4.5), so the body runs, sees ``ctx.is_stop_requested`` and may return what it
    has (``stopping -> succeeded``, value kept) or stop at its first checkpoint
    (``stopped``). ``Controller.submit()`` returns while the run is ``starting``, so
    "submit, then stop" must not depend on whether the carrier was quicker.
    """
    if control.stop_requested and control.stop_source == "stop":
        return
    ctx.checkpoint()


def run_in_this_thread(attempt: Attempt) -> AttemptEnd:
    """Run ``attempt`` in the calling thread (the thread and inline executors)."""
    ctx = attempt.make_context()
    call = attempt.call
    try:
        attempt.mark_running(pid=os.getpid())
        checkpoint_before_body(ctx, attempt.control)
        value = call_body(call.fn, ctx, call.args, call.kwargs)
    except BaseException as exc:
        return Raised(exc, end_traceback(exc))
    return Returned(value)
