"""The flags a task body reads at its checkpoints, and the waits built on them.

One :class:`Control` belongs to one attempt. The supervisor writes it (stop, pause,
resume); the body reads it in ``ctx.checkpoint()``. Reads are plain attribute reads,
so a checkpoint with nothing requested costs two boolean checks; every write happens
under a condition so that a paused body wakes exactly when it should.

The same class serves the ProcessExecutor's child: there a small I/O thread applies the
parent's messages to a local ``Control`` instead of the supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from chongming_task._checkpoint_gaps import GapRecorder
from chongming_task.errors import TaskCancelled

__all__ = ["Control", "StopSource"]

#: Who asked the body to stop: a person (``stop``), a timeout, or orchestration (``cancel``).
StopSource = str

Message = tuple[Any, ...]


class Control:
    """Stop and pause requests for one attempt, plus its last heartbeat."""

    __slots__ = (
        "_cond",
        "_forward",
        "_wakers",
        "beat",
        "gaps",
        "offload",
        "on_pause",
        "pause_requested",
        "pause_seq",
        "stop_reason",
        "stop_requested",
        "stop_source",
    )

    #: Serialises the lazy creation of a control's condition (see :meth:`_condition`);
    #: made anew in a forked child, where the thread that held it does not exist.
    _making: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        *,
        beat: float = 0.0,
        on_pause: Callable[[int], bool] | None = None,
        gaps: GapRecorder | None = None,
    ) -> None:
        self.stop_requested = False
        self.pause_requested = False
        self.stop_reason: str | None = None
        self.stop_source: StopSource = "stop"
        self.pause_seq = 0
        #: Monotonic time of the last checkpoint or ``heartbeat.beat()``.
        self.beat = beat
        #: Where checkpoints count the gaps between them (the run's recorder).
        self.gaps = gaps
        # Made on the first request or wait (see :meth:`_condition`): most attempts
        # never get one, and a Condition with its lock, waiter deque and bound methods
        # was the costliest part of setting an attempt up.
        self._cond: threading.Condition | None = None
        # Called when the body reaches a checkpoint with a pause pending; it confirms the
        # pause (pausing -> paused) and says whether the body should block.
        self.on_pause = on_pause
        #: How ``await_while_paused`` runs ``on_pause`` (a store write) off the event
        #: loop's thread: set for a body on the shared loop, where blocking would stall
        #: every async task; ``None``: call it in place (a loop of the body's own).
        self.offload: Callable[[Callable[[], bool]], Awaitable[bool]] | None = None
        self._wakers: list[Callable[[], None]] = []
        self._forward: Callable[[Message], None] | None = None

    def _condition(self) -> threading.Condition:
        """The condition every request and wait goes through, made on first use.

        Double-checked under a module lock, so two threads asking at once share one.
        An RLock: a Condition on a plain Lock probes it for three methods it lacks,
        one AttributeError each.
        """
        cond = self._cond
        if cond is None:
            with Control._making:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition(threading.RLock())
        return cond

    # ------------------------------------------------------------ requests (supervisor side)

    def request_stop(self, reason: str | None, source: StopSource = "stop") -> bool:
        """Ask the body to stop at its next checkpoint. False if a stop was already asked."""
        with self._condition():
            if self.stop_requested:
                return False
            self.stop_reason = reason
            self.stop_source = source
            self.stop_requested = True
            self._changed_locked(("stop", reason, source))
        return True

    def request_pause(self, seq: int | None = None) -> int:
        """Ask the body to pause at its next checkpoint; returns the request's sequence."""
        with self._condition():
            self.pause_seq = self.pause_seq + 1 if seq is None else seq
            self.pause_requested = True
            self._changed_locked(("pause", self.pause_seq))
            return self.pause_seq

    def cancel_pause(self) -> None:
        """Withdraw a pause request (resume, or abort of an unconfirmed pause)."""
        with self._condition():
            if not self.pause_requested:
                return
            self.pause_requested = False
            self._changed_locked(("resume",))

    def forward_to(self, send: Callable[[Message], None] | None) -> None:
        """Mirror every request to ``send`` (the child process), replaying the current state."""
        with self._condition():
            self._forward = send
            if send is None:
                return
            if self.pause_requested:
                send(("pause", self.pause_seq))
            if self.stop_requested:
                send(("stop", self.stop_reason, self.stop_source))

    def _changed_locked(self, message: Message) -> None:
        self._condition().notify_all()
        for wake in list(self._wakers):
            wake()
        if self._forward is not None:
            self._forward(message)

    # ------------------------------------------------------------ waits (body side)

    def cancelled(self) -> TaskCancelled:
        """The exception a checkpoint raises for the pending stop request."""
        return TaskCancelled(self.stop_reason, self.stop_source)

    def _blocked_locked(self) -> bool:
        return self.pause_requested and not self.stop_requested

    def wait_while_paused(self) -> None:
        """Confirm the pending pause, then block until it is withdrawn or a stop arrives."""
        if self.on_pause is not None and not self.on_pause(self.pause_seq):
            return
        cond = self._condition()
        with cond:
            while self._blocked_locked():
                cond.wait()

    def sleep(self, seconds: float) -> None:
        """Block up to ``seconds``; return at once when a stop or a pause is requested."""
        cond = self._condition()
        with cond:
            if not (self.stop_requested or self.pause_requested):
                cond.wait(max(seconds, 0.0))

    async def await_while_paused(self) -> None:
        """Like :meth:`wait_while_paused` without blocking the event loop's thread."""
        on_pause = self.on_pause
        if on_pause is not None:
            seq = self.pause_seq
            if self.offload is None:
                confirmed = on_pause(seq)
            else:
                confirmed = await self.offload(lambda: on_pause(seq))
            if not confirmed:
                return
        loop = asyncio.get_running_loop()
        while True:
            future: asyncio.Future[None] = loop.create_future()

            def wake(future: asyncio.Future[None] = future) -> None:
                # A closed loop raises RuntimeError: then nobody is waiting any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_resolve, future)

            with self._condition():
                if not self._blocked_locked():
                    return
                self._wakers.append(wake)
            try:
                await future
            finally:
                with self._condition():
                    self._wakers.remove(wake)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _forget_after_fork() -> None:
    Control._making = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
