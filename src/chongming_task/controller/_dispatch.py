"""The runs a controller holds, and the pump that starts them as slots free up.

The dispatcher reacts to transitions rather than to its own calls, so a run
controlled through its ``TaskRun`` handle (``controller.runs()``) stays accounted for
exactly like one controlled through the controller:

- ``-> queued``: the run waits for a slot (any slot it held is returned first);
- ``queued/retry_wait -> paused`` (a pause before the body started): it leaves the
  queue and gives back any slot; resuming sends it through ``queued`` again;
- ``-> starting`` without an admission (someone called ``run.start()``): the ledger
  records the slot anyway -- it must describe reality;
- terminal: the slot, bucket slot and tag units are returned.

A pause *in place* (``pausing -> paused``) keeps its slot and its tag units (§8.4):
the body's stack is still in memory, and so is whatever resource it holds.

Starting runs happens outside the lock, in whichever thread freed a slot. The pump is
not re-entrant: a run that finishes inside ``start()`` (the ``InlineExecutor``) only
flags another round, so 10,000 inline tasks never recurse 10,000 deep.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from chongming_task._explain import AdmissionFacts, SlotHolder
from chongming_task._model import TaskSnapshot, Transition
from chongming_task.controller._admission import Admission
from chongming_task.errors import DuplicateTaskId
from chongming_task.run import TaskRun
from chongming_task.states import TaskStatus

__all__ = ["Dispatcher"]

log = logging.getLogger("chongming_task.controller")

S = TaskStatus


@dataclass(frozen=True, slots=True)
class _Held:
    """A held run with where it queues: one dict entry per run (100,000 queued runs)."""

    run: TaskRun
    priority: int
    tags: frozenset[str]
    bucket: int | None


class Dispatcher:
    """Held runs, their admission, and the pump."""

    def __init__(
        self,
        *,
        max_parallel: int,
        limits: Mapping[str, int],
        max_parallel_per_bucket: int | None,
        keep_finished: int | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._admission = Admission(
            max_parallel=max_parallel,
            limits=limits,
            max_parallel_per_bucket=max_parallel_per_bucket,
        )
        self._held: dict[str, _Held] = {}
        self._live: dict[str, None] = {}  # non-terminal held ids, in submission order
        self._keep_finished = keep_finished
        # Terminal held ids in the order they finished, kept only under a limit.
        self._finished: dict[str, None] = {}
        self._pumping = False
        self._pump_again = False
        self._closed = False

    # ------------------------------------------------------------ holding

    def hold(
        self,
        run: TaskRun,
        *,
        priority: int,
        tags: Iterable[str],
        bucket: int | None,
        reserve: bool = False,
    ) -> bool:
        """Start accounting for ``run`` (before any of its transitions is seen).

        The id check and the insertion are one step: two submissions racing with one
        id cannot both be held, and the loser's clean-up cannot touch the winner.
        With ``reserve``, also give the run a slot at once if nothing waits (see
        :meth:`_reserve_locked`); returns whether it got one.

        Raises:
            ConfigurationError: This controller already holds a run with that id.
        """
        task_id = run.task_id
        with self._lock:
            if task_id in self._held:
                raise DuplicateTaskId(
                    task_id,
                    f"task id {task_id!r} already exists in this controller; submit under a new id",
                )
            held = self._held[task_id] = _Held(run, priority, frozenset(tags), bucket)
            self._live[task_id] = None
            return reserve and self._reserve_locked(task_id, held)

    def drop(self, task_id: str) -> None:
        """Forget a run (its creation failed, or it was pruned)."""
        with self._lock:
            self._held.pop(task_id, None)
            self._live.pop(task_id, None)
            self._finished.pop(task_id, None)
            self._admission.remove(task_id)
            self._admission.release(task_id)

    def get(self, task_id: str) -> TaskRun | None:
        # One dict lookup is atomic; the lock orders compound changes. Taken here (on
        # every submission and every run's end) it was one more place for a lock convoy
        # between the submitting thread and the carriers to start.
        held = self._held.get(task_id)
        return None if held is None else held.run

    def runs(self) -> list[TaskRun]:
        with self._lock:
            return [held.run for held in self._held.values()]

    def live_runs(self) -> list[TaskRun]:
        """Held runs that are not terminal, in submission order."""
        with self._lock:
            return [self._held[task_id].run for task_id in self._live]

    def live_ids(self) -> list[str]:
        with self._lock:
            return list(self._live)

    def active_snapshots(self) -> list[TaskSnapshot]:
        """Snapshots of the runs holding a slot (paused in place and retry backoff too)."""
        with self._lock:
            runs = [self._held[task_id].run for task_id in self._admission.active_ids()]
        return [run.snapshot for run in runs]

    def terminal_ids(self) -> list[str]:
        with self._lock:
            return [task_id for task_id in self._held if task_id not in self._live]

    # ------------------------------------------------------------ counters

    @property
    def active_count(self) -> int:
        with self._lock:
            return self._admission.active_count

    @property
    def queued_count(self) -> int:
        with self._lock:
            return self._admission.queued_count

    def active_in_bucket(self, bucket: int) -> int:
        with self._lock:
            return self._admission.active_in_bucket(bucket)

    def tag_usage(self, tag: str) -> int:
        with self._lock:
            return self._admission.tag_usage(tag)

    def admission_facts(self, task_id: str) -> AdmissionFacts | None:
        """What admission knows about a held task's wait; ``None`` if not held."""
        with self._lock:
            held = self._held.get(task_id)
            if held is None:
                return None
            admission = self._admission
            claims = admission.claims()
            active = tuple(
                SlotHolder(
                    task_id=holder,
                    tags=self._held[holder].tags if holder in self._held else claim.limited_tags,
                    bucket=claim.bucket,
                )
                for holder, claim in claims.items()
            )
            seq = admission.queue_seq(task_id)
            ahead: list[tuple[int, str]] = []
            higher = 0
            if seq is not None:
                for other in admission.queued_ids():
                    other_seq = admission.queue_seq(other)
                    placement = self._held.get(other)
                    if other == task_id or other_seq is None or placement is None:
                        continue
                    if placement.priority > held.priority:
                        higher += 1
                    elif placement.priority == held.priority and other_seq < seq:
                        ahead.append((other_seq, other))
            return AdmissionFacts(
                max_parallel=admission.max_parallel,
                limits=dict(admission.limits),
                max_parallel_per_bucket=admission.max_parallel_per_bucket,
                active=active,
                queued=seq is not None,
                ahead=tuple(other for _, other in sorted(ahead)),
                higher=higher,
            )

    # ------------------------------------------------------------ reacting

    def on_transition(self, transition: Transition) -> bool:
        """Update the ledger for one transition; ``True`` if a slot or a task came free."""
        task_id = transition.task_id
        target, source = transition.to_status, transition.from_status
        with self._lock:
            placement = self._held.get(task_id)
            if placement is None:
                return False
            admission = self._admission
            if target is S.QUEUED:
                freed = admission.release(task_id)
                admission.push(
                    task_id,
                    priority=placement.priority,
                    tags=placement.tags,
                    bucket=placement.bucket,
                )
                # A pump is only worth it with a slot free: with every slot taken, the
                # run that frees one pumps, and it finds this run queued (pushed under
                # this lock). A submission behind a full queue then costs no pump.
                return freed or admission.active_count < admission.max_parallel
            if target is S.STARTING and not admission.is_active(task_id):
                admission.admit(task_id, tags=placement.tags, bucket=placement.bucket)
                return False
            if target is S.PAUSED and source is not S.PAUSING:
                changed = admission.remove(task_id)
                return admission.release(task_id) or changed
            if target.is_terminal:
                self._live.pop(task_id, None)
                if self._keep_finished is not None:
                    self._finished[task_id] = None
                admission.remove(task_id)
                return admission.release(task_id)
            return False

    def forget_finished(self) -> list[str]:
        """Stop holding the earliest-finished runs beyond ``keep_finished``; their ids.

        Only the memory of this process lets go: the store keeps the tasks, and the
        controller answers for them from it (``get``, ``wait``, remote commands).
        Without a limit nothing is forgotten (guide §8.6: held until ``prune()``).
        """
        keep = self._keep_finished
        if keep is None:
            return []
        with self._lock:
            finished = self._finished
            if len(finished) <= keep:
                return []
            forgotten = []
            while len(finished) > keep:
                task_id = next(iter(finished))
                del finished[task_id]
                self._held.pop(task_id, None)
                forgotten.append(task_id)
            return forgotten

    def _reserve_locked(self, task_id: str, held: _Held) -> bool:
        """Give a just-held run a slot at once if nothing else waits; ``True`` if given.

        The submitting thread then moves the run to ``starting`` before the store has
        it, so the task is created already ``starting`` in one write. Only when the
        queue is empty: a run never overtakes one that was waiting. ``False`` leaves
        the run to the ordinary path (its ``-> queued`` puts it in the queue).
        """
        admission = self._admission
        if self._closed or admission.queued_count:
            return False
        admission.push(task_id, priority=held.priority, tags=held.tags, bucket=held.bucket)
        if admission.pop_eligible() == task_id:
            return True
        admission.remove(task_id)  # no room (global, tag or bucket limit)
        return False

    def unreserve(self, task_id: str) -> None:
        """Return the slot of a reservation that was not used (the start failed)."""
        with self._lock:
            self._admission.release(task_id)

    def close(self) -> None:
        """Admit nothing from now on (queued tasks are about to be stopped)."""
        with self._lock:
            self._closed = True

    def pump(self) -> None:
        """Start queued runs while slots are free; returns when nothing more may start."""
        with self._lock:
            if self._pumping:
                self._pump_again = True
                return
            self._pumping = True
        try:
            while True:
                with self._lock:
                    admitted = [] if self._closed else self._pop_all_locked()
                    if not admitted:
                        if self._pump_again and not self._closed:
                            self._pump_again = False
                            continue
                        self._pumping = False
                        self._pump_again = False
                        return
                    runs = [self._held[task_id].run for task_id in admitted]
                for run in runs:
                    # An async def run's start (its ``starting`` write) goes to a helper
                    # thread: a worker's intake admitting 1,000 of them at once does not
                    # wait for 1,000 commits in turn (they go to the store together).
                    start_soon = getattr(run.executor, "start_soon", None)
                    if start_soon is not None:
                        start_soon(functools.partial(self.start_one, run))
                    else:
                        self.start_one(run)
        except BaseException:
            with self._lock:
                self._pumping = False
            raise

    def _pop_all_locked(self) -> list[str]:
        admitted = []
        while (task_id := self._admission.pop_eligible()) is not None:
            admitted.append(task_id)
        return admitted

    def start_one(self, run: TaskRun) -> None:
        """Start an admitted run; on failure give its slot back."""
        try:
            run.start()
        except Exception:
            self.start_failed(run)

    def start_failed(self, run: TaskRun) -> None:
        """An admitted run could not start: give the slot back.

        Stopped or paused between admission and start (the transition already returned
        the slot), or an executor failure: the slot comes back either way.
        """
        with self._lock:
            self._admission.release(run.task_id)
        if run.status is S.QUEUED:
            log.exception("run %s could not be started and stays queued", run.task_id)
