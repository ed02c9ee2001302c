"""``Worker``: a Controller left running to take queued tasks (the CLI's ``worker``).

Life of a worker:

1. ``start()`` reconciles (§8.11: tasks of a dead predecessor become ``lost`` or are
   reported ``adoptable``), starts the scheduler when one is attached, and starts
   the intake thread.
2. The intake thread claims queued tasks of its buckets from the store's work queue
   (``worker._queue``) while the worker has a free slot, highest ``priority`` first
   and oldest first within one priority, and hands each to the controller; the
   controller's own poller serves stop/pause/resume for the tasks it holds.
3. ``shutdown()`` (or ``close()``; SIGTERM under the CLI) drains: the intake stops
   first (queued tasks stay for another worker), running tasks get up to
   ``drain_timeout`` to finish (a countdown is logged), then what is left is stopped
   at its next checkpoint within ``timeout``. A task the shutdown stopped goes back to
   the queue, unheld, when its definition is idempotent or the worker requeues on
   shutdown (a paused one stays paused); otherwise it ends ``stopped``. The report
   says, task by task, what became of each.

The intake takes work only while ``active + queued < max_parallel``: a worker that
grabbed every queued task would queue them in its memory while other workers idle,
and would have to stop them all on shutdown.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from chongming_task._drain import DEFAULT_DRAIN_TIMEOUT, DEFAULT_STOP_TIMEOUT, SHUTDOWN_REASON
from chongming_task._model import Failure, FailureKind
from chongming_task._public import public
from chongming_task._service import BackgroundService
from chongming_task._validation import check_global_limits, check_seconds
from chongming_task.core import SystemClock
from chongming_task.core.state_machine import Triggers
from chongming_task.errors import ConfigurationError, InvalidState
from chongming_task.states import OCCUPYING, TERMINAL, TaskStatus
from chongming_task.stores._base import TaskQuery
from chongming_task.stores._capabilities import require_commands, require_queue
from chongming_task.stores._queue_records import recipe_of
from chongming_task.worker._logtail import LogTail
from chongming_task.worker._queue import WorkQueueDuty, is_idempotent
from chongming_task.worker._report import ShutdownReport, StoppedTask

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot, Transition
    from chongming_task.controller import Controller, ReconcileReport
    from chongming_task.run import TaskRun

__all__ = ["Worker"]

log = logging.getLogger("chongming_task.worker")

#: Seconds between two "draining: ..." countdown lines.
DRAIN_LOG_EVERY: Final = 5.0

#: The trigger of the ``-> lost`` transitions of tasks abandoned at shutdown.
ABANDONED_TRIGGER: Final = "worker:shutdown_abandoned"

_TERMINAL: Final = frozenset(status.value for status in TERMINAL)

#: Transitions logged at INFO (the rest, but terminal ones, at DEBUG).
_LOGGED: Final = frozenset({TaskStatus.RUNNING, TaskStatus.PAUSED, TaskStatus.STOPPING})


@public
class Worker:
    """Runs queued tasks of the store on ``controller`` until shut down.

    Args:
        controller: A controller with a store, its tasks registered.
        max_parallel: Free slots the intake fills; match the controller's limit.
        poll_interval: Longest wait between intake polls (commands also wake it).
        scheduler: Optional ``chongming_task.schedule._scheduler.Scheduler`` (anything
            with ``start()`` and ``close()``) started after reconcile and closed first
            on shutdown, so no firing starts while the worker stops its tasks.
        log_tail: Keep each task's last log lines in its stored metadata, so
            ``status`` in another process can show them (:class:`LogTail`).
        global_limits: Tag -> how many tasks carrying it may run at once across every
            worker of the store (``{"db": 4}``); a queued task whose limit is full
            stays queued until a slot frees (lease-backed slots, docs/queue.md).
        drain_timeout: At shutdown, how long running tasks get to finish by
            themselves before what is left is stopped (0: stop at once).
        requeue_on_shutdown: Hand every task the shutdown stops back to the queue,
            not only those of idempotent definitions (``@task(idempotent=True)``).

    Raises:
        ConfigurationError: The controller has no store, or one without commands or
            a work queue (``CommandStore``, ``QueueStore``: nothing could reach the
            worker), ``global_limits`` is malformed (a name that is not a tag, a number
            that is not an integer >= 1), or the store keeps no global slots.
    """

    def __init__(
        self,
        controller: Controller,
        *,
        max_parallel: int = 1,
        poll_interval: float = 0.5,
        scheduler: Any | None = None,
        log_tail: bool = True,
        heartbeat_interval: float = 1.0,
        reconcile_interval: float | None = None,
        global_limits: Mapping[str, int] | None = None,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        requeue_on_shutdown: bool = False,
    ) -> None:
        if controller.store is None:
            raise ConfigurationError("a Worker needs a Controller with a store")
        if max_parallel < 1:
            raise ConfigurationError(f"max_parallel must be >= 1, got {max_parallel!r}")
        require_commands(controller.store, "a Worker (it takes stop/pause/resume commands)")
        queue = require_queue(controller.store, "a Worker (it claims queued tasks)")
        limits = check_global_limits(global_limits)
        self.drain_timeout = check_seconds(drain_timeout, "drain_timeout", allow_zero=True)
        self.requeue_on_shutdown = bool(requeue_on_shutdown)
        # Set at every transition of a held task (and by stop_now): the drain and the
        # stop look again then, instead of polling.
        self._changed = threading.Event()
        self._stop_now = threading.Event()
        if limits and not queue.supports_global_limits:
            raise ConfigurationError(
                f"global_limits need a store that keeps global slots; "
                f"{type(queue).__name__} does not (QueueStore.supports_global_limits)"
            )
        self.global_limits: Mapping[str, int] = MappingProxyType(limits)
        """Tag -> holders allowed across every worker of the store (docs/queue.md)."""
        self.controller = controller
        self.store = controller.store
        self.owner: str = controller.owner
        self.max_parallel = max_parallel
        self.poll_interval = poll_interval
        self.scheduler = scheduler
        # Real seconds, whatever the controller's clock: the intake waits for other
        # processes' writes and for its own tasks, not for task time.
        self._intake = BackgroundService(
            f"chongming-worker[{self.owner}]",
            self._intake_pass,
            clock=SystemClock(),
            on_error=self._intake_failed,
        )
        self._want_log_tail = log_tail
        self._log_tail: LogTail | None = None
        self.heartbeat_interval = float(heartbeat_interval)
        self.reconcile_interval = (
            float(reconcile_interval)
            if reconcile_interval is not None
            else max(0.2, min(5.0, controller.lease_ttl / 2))
        )
        self.claimed = 0
        """Queued tasks this worker claimed from the work queue."""
        self._queue = WorkQueueDuty(self, queue)
        self._unsubscribe = controller.subscribe(self._on_transition)
        self._store_error: str | None = None  # the last intake poll's failure, if it failed

    # ------------------------------------------------------------ lifecycle

    def start(self) -> ReconcileReport:
        """Reconcile, then start the scheduler and the intake; returns the reconcile report.

        A shutdown requested meanwhile (a signal during reconcile) leaves the intake
        unstarted: :meth:`wait` returns at once and :meth:`shutdown` reports as usual.

        Raises:
            InvalidState: The worker was started already (one intake per worker).
        """
        if self._intake.started:
            raise InvalidState(f"worker {self.owner} is already started")
        report = self.controller.reconcile()
        self._queue.heartbeat()
        if self._want_log_tail and self._log_tail is None:
            self._log_tail = LogTail(self.controller)
        if self.scheduler is not None:
            self.scheduler.start()
        self._intake.ensure_started()
        return report

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`request_shutdown`; True when it was requested."""
        return self._intake.stop_event.wait(timeout)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)`` for a liveness/readiness probe (``/healthz``).

        Healthy while the worker is started, not shutting down, its intake thread is
        alive and its last look at the store succeeded. ``details`` says which of
        these failed, plus the tasks held (a JSON-ready mapping).
        """
        started = self._intake.started
        alive = self._intake.alive
        stopping = self._intake.stopping
        details: dict[str, Any] = {
            "owner": self.owner,
            "started": started,
            "intake_alive": alive,
            "shutting_down": stopping,
            "store_error": self._store_error,
            "active": self.controller.active_count,
            "queued": self.controller.queued_count,
            "max_parallel": self.max_parallel,
        }
        healthy = started and alive and not stopping and self._store_error is None
        details["status"] = "ok" if healthy else "unhealthy"
        return healthy, details

    def request_shutdown(self) -> None:
        """Ask the worker to stop taking work (safe from a signal handler)."""
        self._intake.request_stop()

    def stop_now(self) -> None:
        """Cut the drain short: stop what is left at once (a second SIGTERM; safe from a
        signal handler). The stop itself stays bounded by ``shutdown(timeout=)``."""
        self._intake.request_stop()
        self._stop_now.set()
        self._changed.set()

    def close(self) -> ShutdownReport:
        """:meth:`shutdown` with the worker's drain and the default stop window."""
        return self.shutdown()

    def shutdown(
        self,
        *,
        reason: str = SHUTDOWN_REASON,
        timeout: float = DEFAULT_STOP_TIMEOUT,
        drain_timeout: float | None = None,
    ) -> ShutdownReport:
        """Drain, then stop what is left within ``timeout``, and report task by task.

        1. Nothing new is claimed: the intake and the scheduler stop at once.
        2. Running tasks get ``drain_timeout`` (default: the worker's) to finish by
           themselves; "draining: N task(s) running, S s left" is logged every few
           seconds. :meth:`stop_now` (a second SIGTERM) ends this step at once, as
           does the end of every task that was not paused.
        3. What is left is stopped at its next checkpoint. A task this stop ends goes
           back to the queue, unheld, for another worker, when its definition is
           idempotent (``@task(idempotent=True)``) or the worker requeues on shutdown
           and it was enqueued through the queue (it has a recipe to run from): from
           ``stopping`` to ``queued`` (trigger ``worker:shutdown_requeue``), or, paused
           by an operator, still ``paused`` (``worker:shutdown_paused``), resumable by
           anyone. Otherwise it ends ``stopped`` with ``reason``. A task an operator
           was already stopping ends as that stop says.
        4. A task that does not reach a checkpoint within ``timeout`` is abandoned: it
           is marked ``lost`` at once (trigger ``worker:shutdown_abandoned``); its body
           may have been cut off mid-way. A task that changed under the write (it
           finished at the last moment) keeps its own ending.
        """
        clock = self.controller.clock
        self._intake.request_stop()
        if self.scheduler is not None:
            self.scheduler.close()  # first: no firing may start while we stop tasks
        self._intake.join(timeout)
        held = [run for run in self.controller.runs() if not run.done]
        before = {run.task_id: run.status.value for run in held}
        drain = self.drain_timeout if drain_timeout is None else drain_timeout
        self._drain(check_seconds(drain, "drain_timeout", allow_zero=True))
        internal = self.controller._internal
        internal.hold_queue()  # a slot freed from now on starts nothing
        deadline = clock.monotonic() + timeout
        stopping = self._stop_left(reason)
        self._await(lambda: all(run.done or run.handed_back for run in stopping), deadline)
        handed = {run.task_id for run in held if run.handed_back}
        for task_id in handed:
            internal.let_go(task_id)
        left = max(0.0, deadline - clock.monotonic())
        self.controller.close(reason=reason, timeout=left, close_store=False)
        if self._log_tail is not None:
            self._log_tail.close()
            self._log_tail = None
        after = {run.task_id: run.status.value for run in held}
        unfinished = [
            task_id
            for task_id, status in after.items()
            if status not in _TERMINAL and task_id not in handed
        ]
        if unfinished:
            after.update(self._mark_abandoned(unfinished, timeout))
            for task_id in unfinished:  # else they would count until their lease passes
                self._queue.release_slots(task_id)
        for task_id in handed:
            self._queue.release_slots(task_id)
        if handed:
            self._queue.wake_workers()
        self._queue.heartbeat(stopped=True)
        tasks = tuple(
            StoppedTask(
                task_id=run.task_id,
                name=run.name,
                before=before[run.task_id],
                after=after[run.task_id],
                handed_back=run.task_id in handed,
            )
            for run in held
        )
        return ShutdownReport(reason=reason, tasks=tasks)

    def _drain(self, seconds: float) -> None:
        """Wait up to ``seconds`` (clock time) for the tasks that run to end by themselves."""
        clock = self.controller.clock
        now = clock.monotonic()
        deadline = now + seconds
        next_log = now
        next_beat = now + self.heartbeat_interval
        while not self._stop_now.is_set():
            self._changed.clear()
            running = [run for run in self._live() if run.status is not TaskStatus.PAUSED]
            now = clock.monotonic()
            if not running or now >= deadline:
                return
            if now >= next_log:
                next_log = now + DRAIN_LOG_EVERY
                log.info(
                    "draining: %d task(s) running, %.0f s left (nothing new is claimed)",
                    len(running),
                    deadline - now,
                )
            if now >= next_beat:  # others must not take a draining worker for dead
                next_beat = now + self.heartbeat_interval
                self._queue.heartbeat()
            clock.wait(self._changed, min(deadline, next_log, next_beat) - now)

    def _await(self, done: Any, deadline: float) -> None:
        """Wait until ``done()`` or the ``deadline`` (clock time), woken by transitions."""
        clock = self.controller.clock
        while True:
            self._changed.clear()
            now = clock.monotonic()
            if done() or now >= deadline:
                return
            clock.wait(self._changed, deadline - now)

    def _live(self) -> list[TaskRun]:
        return [run for run in self.controller.runs() if not run.done]

    def _stop_left(self, reason: str) -> list[TaskRun]:
        """Hand back or stop every task still held; returns them."""
        live = self._live()
        for run in live:
            if not (self._may_requeue(run) and run.hand_back(reason, actor=self.owner)):
                run.stop(reason, actor=self.owner)
        return live

    def _may_requeue(self, run: TaskRun) -> bool:
        """Whether a task this shutdown stops may run again on another worker."""
        if recipe_of(run.snapshot) is None:
            return False  # not enqueued through the queue: no worker could claim it
        if self.requeue_on_shutdown:
            return True
        try:
            definition = self.controller.registry.require(run.name)
        except ConfigurationError:
            return False
        return is_idempotent(definition.fn)

    def _mark_abandoned(self, task_ids: list[str], timeout: float) -> dict[str, str]:
        """Mark the tasks that did not stop in time ``lost``; their new statuses by id."""
        message = (
            f"abandoned at worker shutdown: did not stop within {timeout:g}s; the body may "
            f"have been cut off mid-way (worker {self.owner})"
        )

        def failure(_: object) -> Failure:
            return Failure(kind=FailureKind.LOST, message=message, retryable=True)

        try:
            marks = self.store.mark_lost_many(
                TaskQuery(task_ids=frozenset(task_ids), statuses=OCCUPYING),
                clock=self.controller.clock,
                actor=self.owner,
                trigger=ABANDONED_TRIGGER,
                failure=failure,
            )
        except Exception as exc:  # the store may be what failed: report, do not hide
            log.warning("could not mark abandoned tasks lost: %s", exc)
            return {}
        result: dict[str, str] = {}
        for mark in marks:
            if mark.transition is not None:
                result[mark.task_id] = TaskStatus.LOST.value
                log.warning("%s lost: %s", mark.task_id, message)
        return result

    # ------------------------------------------------------------ intake

    def free_slots(self) -> int:
        """How many more queued tasks this worker may take right now."""
        busy = self.controller.active_count + self.controller.queued_count
        return max(0, self.max_parallel - busy)

    def poll_once(self) -> int:
        """Claim queued tasks for the free slots and start them; returns how many."""
        return self._queue.claim(self.free_slots())

    def _intake_pass(self) -> float:
        tail = self._log_tail
        if tail is not None:
            tail.flush()
        self._queue.periodic()
        if not self.free_slots():
            # Full: wait for a task to end (it wakes us) or for shutdown, not for work.
            return self.poll_interval
        taken = self.poll_once()
        self._store_error = None
        if taken:
            return 0.0  # there may be more
        try:
            self._queue.queue.wait_for_work(self.poll_interval)
        except Exception as exc:
            log.warning("waiting for commands failed: %s: %s", type(exc).__name__, exc)
            return self.poll_interval
        return 0.0

    def _intake_failed(self, exc: Exception, failures: int) -> float:
        """Logged, not raised: a store hiccup must not end a long-lived worker."""
        self._store_error = f"{type(exc).__name__}: {exc}"
        log.warning("claiming queued tasks failed: %s: %s", type(exc).__name__, exc)
        return self.poll_interval

    def _on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        self._changed.set()  # a draining or stopping shutdown looks again
        status = transition.to_status
        if status.is_terminal:
            self._queue.release_slots(transition.task_id)
            self._intake.wake()
        shown = (
            status in _LOGGED or status.is_terminal or transition.trigger == Triggers.HANDED_BACK
        )
        level = logging.INFO if shown else logging.DEBUG
        if log.isEnabledFor(level):
            source = transition.from_status.value if transition.from_status else "-"
            extra = f" by {transition.actor}" if transition.actor else ""
            if transition.reason:
                extra += f": {transition.reason}"
            log.log(
                level,
                "%s %s -> %s (%s%s)",
                transition.task_id,
                source,
                status.value,
                transition.trigger,
                extra,
                extra={"task_id": transition.task_id, "task_name": snapshot.name},
            )
