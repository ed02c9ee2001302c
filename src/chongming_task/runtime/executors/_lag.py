"""Loop blocks: each step an ``async def`` body takes on the shared loop, timed.

One loop means one thread for every async body, so a body that blocks (``time.sleep``,
a synchronous HTTP call, a CPU-bound loop without an ``await``) stalls *every* async
task of the process meanwhile. That is not hidden: each body runs behind a trampoline
(:class:`_Timed`) that times every step it takes on the loop (the code between two
``await`` suspensions). A step of ``threshold`` seconds or more is a *loop block*:

- counted in the run's checkpoint-gap profile (``loop_blocks``, ``loop_block_max``),
  stored with the task and shown by ``explain`` and ``tasks --checkpoints``;
- logged as a warning in the task's own log naming the task, for the attempt's first
  block and each longer one (a body blocking a thousand times logs a few lines);
- seen while it lasts by the loop's watch thread (``_loop``), which warns once per
  step that the loop is blocked right now and by which task: a block that never ends
  (a deadlock) is reported too, not only the ones that finish.

The durations are real seconds (the loop's thread is really stalled), whatever clock
the run was given; a ``FakeClock`` does not move them.

Tasks a body spawns (``asyncio.create_task``, ``gather``) belong to it: their steps are
timed on its account (the loop's task factory wraps them, :func:`spawned`), and those
still running when the body ends are cancelled and awaited (up to ``STRAY_GRACE``), as
``asyncio.run`` did when each body had a loop of its own, so nothing a finished task
started lingers on the shared loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import Awaitable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from chongming_task._checkpoint_gaps import format_seconds
from chongming_task.core import SystemClock

if TYPE_CHECKING:
    from chongming_task.runtime._attempt import Attempt

__all__ = ["STRAY_GRACE", "BodyScope", "StepWatch", "now", "scope_now", "spawned", "timed"]

T = TypeVar("T")

#: Seconds stray tasks of an ended body get to finish after they were cancelled.
STRAY_GRACE: Final = 1.0

#: Loop blocks are real time: the loop's thread is stalled, whatever the run's clock.
_REAL: Final = SystemClock()
#: Real monotonic seconds: what every loop block and the watch measure.
now = _REAL.monotonic

#: The body whose code (or a task it spawned) is running: set in each body's context.
_SCOPE: contextvars.ContextVar[BodyScope | None] = contextvars.ContextVar(
    "chongming_task_body", default=None
)


class BodyScope:
    """One attempt's body on the loop: its step timing, its warnings, its spawned tasks."""

    __slots__ = ("attempt", "children", "logged", "reported", "started", "threshold")

    def __init__(self, attempt: Attempt, threshold: float) -> None:
        self.attempt = attempt
        self.threshold = threshold
        self.started = 0.0
        """Real monotonic time the running step began."""
        self.reported = False
        """The watch warned about the running step already."""
        self.logged = 0.0
        """The longest block reported in a warning so far (0: none)."""
        self.children: weakref.WeakSet[asyncio.Task[Any]] | None = None

    def describe(self) -> str:
        attempt = self.attempt
        return f"async def task {attempt.task_name!r} ({attempt.task_id})"

    def blocked(self, seconds: float) -> None:
        """A step of the body held the loop ``seconds``: profile it, warn if it is news."""
        gaps = self.attempt.control.gaps
        if gaps is not None:
            gaps.add_loop_block(seconds)
        if seconds > self.logged:
            self.logged = seconds
            self.attempt.report_log(
                logging.WARNING,
                f"{self.describe()} blocked the event loop for {format_seconds(seconds)} "
                "without awaiting: every async task of this process waited meanwhile; "
                "move the blocking call off the loop (await asyncio.to_thread(...)) or "
                "make the task a plain def",
            )

    def watched(self, seconds: float) -> None:
        """The watch found the running step at ``seconds`` and counting."""
        self.reported = True
        self.attempt.report_log(
            logging.WARNING,
            f"{self.describe()} is blocking the event loop: {format_seconds(seconds)} "
            "so far without awaiting; every async task of this process waits for it",
        )


class StepWatch(Protocol):
    """Where the running step is published for the watch thread (the ``SharedLoop``)."""

    current: BodyScope | None


def scope_now() -> BodyScope | None:
    """The body the running code belongs to (a task it spawned included), if any."""
    return _SCOPE.get()


class _Timed:
    """Awaits a body's coroutine step by step, timing each step it holds the loop."""

    __slots__ = ("_coro", "_loop", "_scope")

    def __init__(self, coro: Awaitable[Any], scope: BodyScope, loop: StepWatch) -> None:
        self._coro = coro
        self._scope = scope
        self._loop = loop

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._coro.__await__()
        scope, shared = self._scope, self._loop
        value: Any = None
        error: BaseException | None = None
        while True:
            shared.current = scope
            scope.started = started = now()
            try:
                signal = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as stop:
                self._ended(started)
                return stop.value
            except BaseException:
                self._ended(started)
                raise
            self._ended(started)
            try:
                value, error = (yield signal), None
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as exc:  # thrown in: a cancellation, to the body
                value, error = None, exc

    def _ended(self, started: float) -> None:
        held = now() - started
        scope = self._scope
        self._loop.current = None
        scope.reported = False
        if held >= scope.threshold:
            scope.blocked(held)


async def timed(coro: Awaitable[T], scope: BodyScope, loop: StepWatch) -> T:
    """Run the body ``coro`` on ``loop``, its steps timed and its spawned tasks its own."""
    _SCOPE.set(scope)
    try:
        result: T = await _Timed(coro, scope, loop)
        return result
    finally:
        await _cancel_strays(scope)


async def spawned(coro: Coroutine[Any, Any, T], scope: BodyScope, loop: StepWatch) -> T:
    """A task a body spawned: its steps hold the loop on the body's account."""
    result: T = await _Timed(coro, scope, loop)
    return result


async def _cancel_strays(scope: BodyScope) -> None:
    children = scope.children
    if not children:
        return
    stray = [task for task in children if not task.done()]
    for task in stray:
        task.cancel()
    if stray:
        await asyncio.wait(stray, timeout=STRAY_GRACE)
