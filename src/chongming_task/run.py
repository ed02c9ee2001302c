"""``TaskRun`` and ``run_task``: one task supervised from submission to its final state.

``run_task`` is the one-liner that blocks until the end (guide §3.1). ``TaskRun`` is the
handle for everything in between (§3.2): ``start``, ``stop``, ``pause``, ``resume``,
``wait``, and the ``snapshot`` / ``transitions`` to watch. It is thread-safe: every
state-machine write happens under one lock, and listeners hear every transition in
order, outside that lock.

The pieces behind it live in ``chongming_task.runtime``: the driver runs attempts on
the executor's carrier, the supervisor watches deadlines on the injected clock.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic

from chongming_task._decorator import RESERVED_OPTIONS, reserved_collisions, spec_of
from chongming_task._model import Failure, JSONValue, TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task._validation import check_timeout
from chongming_task.core import Clock, SystemClock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError, InvalidState
from chongming_task.policies import RetryPolicy, Timeout
from chongming_task.runtime import (
    Driver,
    LogEntry,
    Outbox,
    QueueOwnerEdges,
    RunControls,
    RunState,
    Supervision,
    Supervisor,
    TaskCall,
    as_args,
    as_kwargs,
    as_upstream,
    callable_name,
    check_executor,
    check_options,
    check_signature,
)
from chongming_task.runtime.executors import Executor
from chongming_task.states import TaskStatus

__all__ = ["TaskOutcome", "TaskRun", "run_task"]

S = TaskStatus

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    #: What the task returns; ``Any`` when not known (a bare ``TaskOutcome``, an
    #: enqueue by name).
    R_co = TypeVar("R_co", covariant=True, default=Any)
else:  # TypeVar defaults need Python 3.13 at run time; only type checkers read them
    from typing import TypeVar

    R_co = TypeVar("R_co", covariant=True)

#: Shared by every run created without ``clock=``, so they share one timer thread.
_SYSTEM_CLOCK = SystemClock()
_DEFAULT_EXECUTOR: Executor | None = None
#: The policy of a run without one (frozen, so every such run can share it).
_NO_RETRY = RetryPolicy()


def default_executor() -> Executor:
    """The executor of every run created without one: one shared ``ThreadExecutor``."""
    global _DEFAULT_EXECUTOR  # noqa: PLW0603 - one stateless default, created lazily
    if _DEFAULT_EXECUTOR is None:
        from chongming_task.runtime.executors.thread import ThreadExecutor

        _DEFAULT_EXECUTOR = ThreadExecutor()
    return _DEFAULT_EXECUTOR


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOutcome(Generic[R_co]):
    """How a run ended (guide §3.3).

    ``TaskOutcome[int]``: ``value`` is typed as what the task returns (from a typed
    ``enqueue``/``submit`` of the task function); ``TaskOutcome`` alone is
    ``TaskOutcome[Any]``.
    """

    ok: bool
    """Whether the run ``succeeded``."""
    status: TaskStatus
    value: R_co
    """What the body returned; ``None`` unless the run succeeded (check ``ok`` first)."""
    failure: Failure | None
    snapshot: TaskSnapshot
    """The final snapshot: attempts, timestamps, progress, failure."""


@public
class TaskRun(RunControls, QueueOwnerEdges, Generic[R_co]):
    """A handle on one task run: start it, control it, watch it, wait for it.

    Control (``stop``, ``pause``, ``resume``, ``cancel``) comes from
    :class:`~chongming_task.runtime._controls.RunControls`; the queue owner's edges
    (``enqueue``, ``block``, ``release``, ``skip``) from
    :class:`~chongming_task.runtime._orchestration.QueueOwnerEdges`.
    """

    # Slots: a busy controller holds many queued runs at once.
    __slots__ = ("__weakref__", "_driver", "_pause_timeout", "_state", "_supervisor")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: Iterable[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        task_id: str | None = None,
        name: str | None = None,
        label: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        executor: Executor | None = None,
        graceful_stop: float = 5.0,
        artifact_dir: str | os.PathLike[str] | None = None,
        clock: Clock | None = None,
        tags: Iterable[str] | None = None,
        priority: int = 0,
        bucket: int | None = None,
        bucket_key: str | None = None,
        owner: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        upstream: Mapping[str, JSONValue] | None = None,
        pause_timeout: float = 5.0,
        stored: TaskSnapshot | None = None,
    ) -> None:
        """Create the run in ``pending``; nothing executes before :meth:`start`.

        With ``stored`` (a worker running a task it claimed from the work queue) the
        run continues that stored ``queued`` task instead: same id, history and
        versions; the identity options (name, tags, bucket...) come from it.

        Raises:
            ConfigurationError: ``fn`` is not callable or the arguments do not fit its
                signature, an option has the wrong type, or the executor cannot run
                this call (the ProcessExecutor names what to change).
        """
        if not callable(fn):
            raise ConfigurationError(f"a task must be callable, got {fn!r}")
        spec = spec_of(fn)
        run_name = name or (spec.name if spec else None) or callable_name(fn)
        retry = retry if retry is not None else (spec.retry if spec else None) or _NO_RETRY
        timeout = timeout if timeout is not None else (spec.timeout if spec else None)
        check_options(retry, timeout, graceful_stop, pause_timeout)
        if tags is None:
            tags = spec.tags if spec else ()
        elif isinstance(tags, str):
            raise ConfigurationError(f"tags must be a collection of strings, not {tags!r}")
        executor = executor or default_executor()
        check_executor(executor)
        call = TaskCall(fn, as_args(args), as_kwargs(kwargs), as_upstream(upstream))
        check_signature(fn, call, run_name)
        route = getattr(executor, "for_call", None)
        if route is not None:  # the ThreadExecutor sends async def tasks to the shared loop
            executor = route(call)
        executor.check(call)
        clock = clock or _SYSTEM_CLOCK
        if stored is not None:
            if stored.status is not S.QUEUED:
                raise ConfigurationError(
                    f"only a queued task can be continued, {stored.task_id!r} is "
                    f"{stored.status.value}"
                )
            machine = StateMachine(
                stored.replace(
                    owner=owner, max_attempts=max(stored.max_attempts, retry.max_attempts)
                ),
                (),
                clock=clock,
            )
        else:
            machine = StateMachine.create(
                task_id if task_id is not None else uuid.uuid4().hex,
                run_name,
                max_attempts=retry.max_attempts,
                label=label,
                tags=tags,
                priority=priority,
                bucket=bucket,
                bucket_key=bucket_key,
                owner=owner,
                metadata=metadata,
                clock=clock,
            )
        self._pause_timeout = float(pause_timeout)
        lock = threading.Lock()  # the run's lock, shared with its outbox
        self._state = RunState(
            machine=machine,
            call=call,
            executor=executor,
            clock=clock,
            retry=retry,
            timeout=None if timeout is None or timeout.is_unlimited else timeout,
            graceful_stop=float(graceful_stop),
            artifact_root=None if artifact_dir is None else Path(artifact_dir),
            outbox=Outbox(self, lock=lock),
            lock=lock,
        )
        self._state.managed = stored is not None
        self._supervisor = Supervisor(self._state)
        self._driver = Driver(self._state, self._supervisor)

    # ------------------------------------------------------------ reading

    @property
    def task_id(self) -> str:
        return self._state.machine.task_id

    @property
    def name(self) -> str:
        return self._state.machine.snapshot.name

    @property
    def status(self) -> TaskStatus:
        return self._state.machine.status

    @property
    def done(self) -> bool:
        """Whether the run is in a terminal state."""
        return self._state.machine.status.is_terminal

    @property
    def snapshot(self) -> TaskSnapshot:
        """The current snapshot; safe to read at any time from any thread."""
        with self._state.lock:
            self._state.sync_heartbeat_locked()
            return self._state.machine.snapshot

    def _supervision(self) -> Supervision:
        """Policies and pending deadlines on the wall clock (``Controller.explain``)."""
        with self._state.lock:
            return self._state.supervision_locked()

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """Every transition so far, oldest first."""
        with self._state.lock:
            return self._state.machine.transitions

    @property
    def machine(self) -> StateMachine:
        """The run's state machine, for reading only: write through this handle."""
        return self._state.machine

    @property
    def logs(self) -> list[LogEntry]:
        """The last 200 entries the task logged through ``ctx.log`` and friends."""
        return self._state.log_entries()

    @property
    def executor(self) -> Executor:
        return self._state.executor

    @property
    def outcome(self) -> TaskOutcome[R_co] | None:
        """The outcome once the run is terminal, else ``None`` (never blocks)."""
        snapshot = self.snapshot
        if not snapshot.status.is_terminal:
            return None
        ok = snapshot.status is S.SUCCEEDED
        value: Any = self._state.value if ok else None  # typed as the body's return
        return TaskOutcome(
            ok=ok,
            status=snapshot.status,
            value=value,
            failure=snapshot.failure,
            snapshot=snapshot,
        )

    def wait(self, timeout: float | None = None) -> TaskOutcome[R_co]:
        """Block until the run is terminal and every listener has heard it.

        ``timeout`` is in real seconds (a caller's patience, not task time).

        Raises:
            TimeoutError: Still not terminal after ``timeout``. Nothing about the run
                changes: call :meth:`stop` to end it.
            ConfigurationError: ``timeout`` is not ``None`` or seconds >= 0.
        """
        if not self._state.outbox.wait_done(check_timeout(timeout)):
            raise TimeoutError(
                f"task {self.task_id!r} is still {self.status.value} after {timeout}s; "
                "wait() changes nothing, call stop() to end it"
            )
        outcome = self.outcome
        assert outcome is not None
        return outcome

    # ------------------------------------------------------------ listeners

    def add_listener(self, fn: Callable[[Transition, TaskSnapshot], None]) -> None:
        """Call ``fn(transition, snapshot)`` for every later transition, in order.

        Listeners run outside the run's lock, in whichever thread made the transition
        (or one that is delivering before it). Their exceptions are logged, never
        raised into the run. Do not ``wait()`` inside one.
        """
        self._state.outbox.add_listener(fn)

    def add_done_callback(self, fn: Callable[[TaskRun], None]) -> None:
        """Call ``fn(run)`` once the terminal transition reached the listeners (or now)."""
        self._state.outbox.add_done_callback(fn)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start supervised execution (``queued -> starting -> running``) and return at once.

        With the InlineExecutor it returns when the run is over.

        Raises:
            ConfigurationError: The run is not pending or queued, or is already running
                (a run executes once: create a new ``TaskRun`` to run again).
        """
        self._prepare_start()()

    def _prepare_start(self) -> Callable[[], None]:
        """Take ``-> starting`` now and return the call that launches the body.

        For a queue owner that must store the ``starting`` state before anything can
        run (the controller creates an at-once admitted task directly in ``starting``:
        one write instead of two). Until the returned call is made nothing executes;
        a stop or pause meanwhile is seen by the body's first check, as with
        :meth:`start`.

        Raises:
            ConfigurationError: As :meth:`start`.
        """
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            status = machine.status
            # A managed run re-queued between attempts (paused in retry_wait, then
            # resumed: guide §4.3) may still have its carrier parked in the attempt
            # loop: the next attempt is handed to that carrier instead of a second one.
            parked = (
                state.driving
                and state.managed
                and status is S.QUEUED
                and (state.attempt is None or not state.attempt.live)
            )
            if (state.driving and not parked) or status not in (S.PENDING, S.QUEUED):
                raise InvalidState(
                    f"task {self.task_id!r} cannot start: it is {status.value}"
                    + (" and already running" if state.driving else "")
                    + "; a TaskRun executes once, create a new one to run again"
                )
            if status is S.PENDING:
                state.apply(machine.mark_queued)
            state.started = True
            state.driving = True
            self._driver.begin_attempt_locked()
        return self._wake_parked_when_delivered if parked else self._launch_when_delivered

    def _wake_parked_when_delivered(self) -> None:
        self._state.outbox.after_delivery(self._wake_parked)

    def _wake_parked(self) -> None:
        with self._state.lock:
            self._state.wake_locked()

    def _launch_when_delivered(self) -> None:
        # The body launches once -> starting reached the listeners (the controller
        # stores it there), even when this start runs inside a delivery of this run.
        self._state.outbox.after_delivery(self._launch)

    def _launch(self) -> None:
        try:
            self._driver.launch(f"chongming-task:{self.task_id}")
        except Exception as exc:  # e.g. "can't start new thread"
            self._driver.fail_internally(exc)

    def __repr__(self) -> str:
        snap = self._state.machine.snapshot
        return (
            f"TaskRun(task_id={snap.task_id!r}, name={snap.name!r}, status={snap.status.value}, "
            f"attempt={snap.attempt}/{snap.max_attempts})"
        )


@public
def run_task(
    fn: Callable[..., Any],
    /,
    *task_args: Any,
    args: Iterable[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    task_id: str | None = None,
    name: str | None = None,
    label: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
    executor: Executor | None = None,
    graceful_stop: float = 5.0,
    artifact_dir: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    tags: Iterable[str] | None = None,
    priority: int = 0,
    bucket_key: str | None = None,
    **task_kwargs: Any,
) -> TaskOutcome:
    """Run ``fn`` to its terminal state and return the outcome (guide §3.1).

    Positional arguments and unknown keywords go to the task; the keywords above are
    options. A task with a parameter named like an option must be called with explicit
    ``args=(...)`` / ``kwargs={...}`` instead, so the two never mix. Blocks until the
    end: use :class:`TaskRun` to intervene meanwhile.

    Raises:
        ConfigurationError: Bad options or arguments, or a task parameter that
            collides with an option name.
    """
    if args is not None or kwargs is not None:
        if task_args or task_kwargs:
            raise ConfigurationError(
                "pass the task's arguments either directly or through args=/kwargs=, not both"
            )
        call_args: Iterable[Any] = args or ()
        call_kwargs: Mapping[str, Any] = kwargs or {}
    else:
        collisions = reserved_collisions(fn, RESERVED_OPTIONS | {"args", "kwargs"})
        if collisions:
            raise ConfigurationError(
                f"task {callable_name(fn)!r} has parameter(s) {', '.join(collisions)} named "
                "like run_task options; call run_task(fn, args=(...), kwargs={...}) so the "
                "task's arguments and the options cannot be confused"
            )
        call_args, call_kwargs = task_args, task_kwargs
    run = TaskRun(
        fn,
        call_args,
        call_kwargs,
        task_id=task_id,
        name=name,
        label=label,
        retry=retry,
        timeout=timeout,
        executor=executor,
        graceful_stop=graceful_stop,
        artifact_dir=artifact_dir,
        clock=clock,
        tags=tags,
        priority=priority,
        bucket_key=bucket_key,
    )
    run.start()
    return run.wait()
