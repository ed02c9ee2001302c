"""``BackgroundService``: the one lifecycle of every long-lived thread the library runs.

The command poller, the lease keeper, the write retrier, the event dispatcher, the
scheduler loop, the worker's intake, the bucket declaration, retention, the timer
thread, the metrics server and PostgreSQL's LISTEN relay each need the same few
things, and each used to write them by hand, slightly differently: start once, be
woken early, stop idempotently and join with a deadline, keep going when a pass fails
(and say so), and refuse to come back after a stop. Written once, those promises hold
the same way everywhere, and a thread that misbehaves is found by its name.

The owner keeps its own loop body, ``step``: one pass, returning how long to wait
before the next one:

- a number of seconds (``0``: go again at once), waited through the injected clock
  on the service's wake event, so :meth:`wake` and :meth:`stop` cut the wait short and
  a ``FakeClock`` drives it;
- ``None``: wait until woken;
- :data:`FINISHED`: nothing left to do; the thread ends unless it was woken meanwhile,
  and :meth:`ensure_started` starts it again when there is work (a thread that lives
  only while it has something to do: write retries, timers, events).

A pass that raises is counted (:attr:`errors`, :attr:`last_error`) and handed to
``on_error``, which reports it and says how long to wait before the next pass
(default: logged with its traceback, then :data:`ERROR_DELAY`). The thread never dies
of an ``Exception``: a dead keeper would let every lease run out in silence. Anything
else (``SystemExit``, a ``BaseException``) ends it loudly, logged and re-raised.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal

from chongming_task.errors import ControllerClosed, InvalidState

if TYPE_CHECKING:
    from chongming_task.core import Clock

__all__ = ["ERROR_DELAY", "FINISHED", "BackgroundService", "Step", "StepResult"]

log = logging.getLogger("chongming_task.service")


class _Finished(enum.Enum):
    FINISHED = "finished"


#: What a step returns when nothing is left to do (the thread may end).
FINISHED: Final = _Finished.FINISHED

#: What one pass of a service returns: seconds to wait, ``None`` (until woken), or
#: :data:`FINISHED`.
StepResult = float | None | Literal[_Finished.FINISHED]
Step = Callable[[], StepResult]

#: Seconds between a failed pass and the next one when ``on_error`` does not say.
ERROR_DELAY: Final = 1.0


class BackgroundService:
    """One daemon thread running ``step`` until stopped (see the module docstring).

    Args:
        name: The thread's name (``chongming-leases[node-1]``): what ``py-spy`` and
            the logs show.
        step: One pass of the loop; returns the wait before the next.
        clock: Times the waits (``FakeClock`` in tests).
        on_error: ``on_error(exc, failures)`` for a pass that raised (``failures``:
            consecutive failed passes, 1 for the first); reports it and returns the
            wait before the next pass. Default: logged, then :data:`ERROR_DELAY`.
        final: Called once in the thread after the last pass (a last flush).
        initial_wait: Seconds (of the clock) the thread waits before its first pass.
        linger: Real seconds a thread whose step returned :data:`FINISHED` stays, in
            case it is woken, before it ends: work that comes in bursts (a schedule
            firing every second) does not start a thread each time. Real time, not the
            clock's: an idle thread is no sleeper of a ``FakeClock``.
    """

    def __init__(
        self,
        name: str,
        step: Step,
        *,
        clock: Clock,
        on_error: Callable[[Exception, int], float | None] | None = None,
        final: Callable[[], None] | None = None,
        initial_wait: float = 0.0,
        linger: float = 0.0,
    ) -> None:
        self.name = name
        self._step = step
        self._clock = clock
        self._on_error = on_error
        self._final = final
        self._initial_wait = initial_wait
        self._linger = linger
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False
        self.errors = 0
        """Passes that raised so far (each one reported)."""
        self.last_error: str | None = None
        """``ExceptionType: message`` of the last failed pass; ``None`` after a good one."""

    # ------------------------------------------------------------ state

    @property
    def started(self) -> bool:
        """Whether the thread was ever started."""
        return self._started

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` (or :meth:`request_stop`) was called; a step that
        blocks for long checks it."""
        return self._stop.is_set()

    @property
    def stop_event(self) -> threading.Event:
        """Set once stopping: for a step that waits on something of its own and must
        end that wait at a stop (but not at a mere :meth:`wake`)."""
        return self._stop

    @property
    def alive(self) -> bool:
        """Whether the thread is running right now."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    @property
    def running(self) -> bool:
        """Started, not asked to stop, and not finished."""
        return self._thread is not None and not self._stop.is_set()

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the thread.

        Raises:
            InvalidState: It was started already (use :meth:`ensure_started` where
                every caller may be the first).
            ControllerClosed: It was stopped; a stopped service is not restarted.
        """
        with self._lock:
            if self._stop.is_set():
                raise ControllerClosed(f"{self.name} was stopped; it cannot be restarted")
            if self._started:
                raise InvalidState(f"{self.name} is already started")
            self._launch()

    def ensure_started(self) -> bool:
        """Start the thread unless it runs (or it was stopped); whether it runs now.

        A running thread is woken instead: a service whose step returned
        :data:`FINISHED` looks again before it ends.
        """
        with self._lock:
            if self._stop.is_set():
                return False
            if self._thread is None:
                self._launch()
            else:
                self._wake.set()
            return True

    def wake(self) -> None:
        """Cut the current wait short: the next pass runs now."""
        self._wake.set()

    def request_stop(self) -> None:
        """Ask the thread to end after its current pass; returns at once (idempotent,
        safe from a signal handler)."""
        self._stop.set()
        self._wake.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait (real seconds) for the thread to end; whether it has (or never ran).

        From the service's own thread (a step that stops its service) it returns
        ``False`` at once instead of waiting for itself.
        """
        thread = self._thread
        if thread is None:
            return True
        if thread is threading.current_thread():
            return False
        thread.join(timeout)
        return not thread.is_alive()

    def stop(self, timeout: float | None = 5.0) -> bool:
        """Stop and join within ``timeout``; whether the thread has ended (idempotent).

        Stopping a service never started makes a later :meth:`start` fail.
        """
        self.request_stop()
        return self.join(timeout)

    # ------------------------------------------------------------ the thread

    def _launch(self) -> None:
        """Start a thread (hold the lock)."""
        self._started = True
        self._wake.clear()
        thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread = thread
        thread.start()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException:
            log.critical("%s ended by an uncaught exception", self.name, exc_info=True)
            raise
        finally:
            if self._final is not None and self._stop.is_set():
                try:
                    self._final()
                except Exception:
                    log.exception("%s: its last pass failed", self.name)

    def _loop(self) -> None:
        failures = 0
        if self._initial_wait > 0:
            self._clock.wait(self._stop, self._initial_wait)
        while not self._stop.is_set():
            self._wake.clear()
            try:
                delay = self._step()
            except Exception as exc:
                if self._stop.is_set():
                    return  # what it used is closing with it (a store, a socket)
                failures += 1
                delay = self._failed(exc, failures)
            else:
                failures = 0
                self.last_error = None
            if delay is FINISHED:
                if self._linger > 0 and self._wake.wait(self._linger):
                    continue  # woken while lingering: there is work again
                with self._lock:
                    if self._stop.is_set():
                        return
                    if not self._wake.is_set():  # not woken since the pass began
                        self._thread = None  # ensure_started starts a new one
                        return
                continue
            if self._stop.is_set():
                return
            if delay is None or delay > 0:
                self._clock.wait(self._wake, delay)

    def _failed(self, exc: Exception, failures: int) -> float | None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        if self._on_error is None:
            log.error("%s: a pass failed; retrying", self.name, exc_info=exc)
            return ERROR_DELAY
        try:
            return self._on_error(exc, failures)
        except Exception:
            log.exception("%s: reporting a failed pass failed too", self.name)
            return ERROR_DELAY

    def __repr__(self) -> str:
        state = "stopping" if self.stopping else "running" if self.alive else "idle"
        return f"<BackgroundService {self.name} {state}>"
