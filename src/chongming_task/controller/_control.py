"""The one control path: ``stop`` / ``pause`` / ``resume`` of any task, from any process.

``Controller``, ``Client``, the CLI and the dashboard all call :func:`control_task`;
where the action goes depends only on who holds the task, read from the store:

- **held here** (``held(task_id)`` finds the run): applied to the run in place;
- **held by nobody** (no ``owner`` nor ``lease_owner``: a queued task no worker took
  yet, or one paused while queued): one version-guarded write of the transition
  (:func:`~chongming_task.stores._capabilities.save_unheld`), e.g. ``queued ->
  stopped``, ``queued -> paused``, ``paused -> queued``. When a worker claims the task
  between the read and the write, the guard fails and the task is read and routed
  again (now it has a holder);
- **held by another process**: a command addressed to that holder, which its poller
  applies through the same run methods.

A command addressed to no holder is never written: nobody would ever apply it.
Commands older versions wrote that way are settled by the first poller that claims
them, through this same function (``CommandPoller``).

A **stop reaches the task's children** (tasks it enqueued with ``ctx.enqueue``, found
by the indexed parent link): once the stop of the task is applied, handed to its
holder, or found the task finished already, every unfinished child is stopped through
this same routing (a guarded write while unheld, a command to its holder otherwise),
with the reason ``parent X stopped``, and so on down to the grandchildren. A parent
that ends by itself (succeeds, fails, times out) leaves its children alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from chongming_task._model import JSONValue, TaskSnapshot
from chongming_task._validation import check_lookup
from chongming_task.core import Clock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, InvalidTransition
from chongming_task.states import TaskStatus
from chongming_task.stores._base import Command, TaskNotFound, TaskStore
from chongming_task.stores._capabilities import require_commands, save_unheld, wake_workers
from chongming_task.stores._queue_records import children_query

__all__ = ["ACTIONS", "Controllable", "Controlled", "check_action", "control_task"]

log = logging.getLogger("chongming_task.controller")

#: Task actions: the only ones a poller claims and applies.
ACTIONS: Final = frozenset({"stop", "pause", "resume"})
#: Reads and routes before giving up on a task that keeps changing under us.
_ATTEMPTS: Final = 20
#: Outcomes of a stop after which the task's children are stopped too.
_REACHES_CHILDREN: Final = frozenset({"applied", "requested", "finished"})

Outcome = Literal["applied", "requested", "refused", "finished", "not_found", "not_held"]


class Controllable(Protocol):
    """The part of ``TaskRun`` an action is applied through."""

    def stop(self, reason: str | None = None, *, actor: str | None = None) -> bool: ...

    def pause(
        self, timeout: float | None = None, *, actor: str | None = None, reason: str | None = None
    ) -> bool: ...

    def resume(self, *, actor: str | None = None, reason: str | None = None) -> bool: ...


@dataclass(frozen=True, slots=True)
class Controlled:
    """What :func:`control_task` did.

    ``outcome``: ``applied`` (stored now, or applied to the run held here),
    ``requested`` (a command for the holder, who applies it later), ``refused`` (the
    task's state does not allow the action), ``finished`` (terminal: nothing to do),
    ``not_found``, or ``not_held`` (recorded under the caller's own name, which does
    not hold it: an earlier process with that name; run ``reconcile()``).
    """

    outcome: Outcome
    accepted: bool
    """The action was applied or handed to the holder (``finished`` counts: found)."""
    confirmed: bool
    """Its effect is true now (a held pause: what the run confirmed)."""
    snapshot: TaskSnapshot | None = None
    """The task as stored after the call (``None`` for a run held here or unknown)."""


def check_action(action: str) -> None:
    """Refuse a task action no poller applies, naming the ones it does.

    Raises:
        ConfigurationError: ``action`` is not one of ``ACTIONS``.
    """
    if action not in ACTIONS:
        raise ConfigurationError(
            f"unknown task action {action!r}; valid actions are {', '.join(sorted(ACTIONS))}"
        )


def control_task(
    store: TaskStore,
    task_id: str,
    action: str,
    *,
    actor: str,
    clock: Clock,
    reason: str | None = None,
    held: Callable[[str], Controllable | None] | None = None,
    pause_timeout: float | None = None,
) -> Controlled:
    """Apply ``action`` to ``task_id`` wherever it is: the one control path.

    Args:
        held: This process's runs (a controller's), tried first; ``None``: it holds none.
        pause_timeout: How long a pause of a run held here waits for confirmation.

    A ``stop`` then stops the task's unfinished children, recursively (see above).

    Raises:
        ConfigurationError: ``action`` is not one of ``ACTIONS``, or a command is needed
            and the store keeps none.
        ConcurrencyConflict: the task changed on every one of many reads in a row.
    """
    check_action(action)
    check_lookup(task_id)
    done = _route(
        store,
        task_id,
        action,
        actor=actor,
        clock=clock,
        reason=reason,
        held=held,
        pause_timeout=pause_timeout,
    )
    if action == "stop" and done.outcome in _REACHES_CHILDREN:
        _stop_children(store, task_id, actor=actor, clock=clock, held=held)
    return done


def _stop_children(
    store: TaskStore,
    task_id: str,
    *,
    actor: str,
    clock: Clock,
    held: Callable[[str], Controllable | None] | None,
) -> None:
    """Stop every unfinished descendant of ``task_id``, each as ``parent X stopped``.

    A child that cannot be stopped (it keeps changing, or it needs a command the store
    cannot keep) is logged and passed over: the parent's stop stands either way.
    """
    seen = {task_id}
    parents = [task_id]
    while parents:
        parent = parents.pop()
        for child in store.query(children_query(parent)):
            if child.task_id in seen:
                continue
            seen.add(child.task_id)
            if child.is_terminal:
                parents.append(child.task_id)  # its own children may still run
                continue
            try:
                done = _route(
                    store,
                    child.task_id,
                    "stop",
                    actor=actor,
                    clock=clock,
                    reason=f"parent {parent} stopped",
                    held=held,
                    pause_timeout=None,
                )
            except (ConcurrencyConflict, ConfigurationError) as exc:
                log.warning("could not stop %s, a child of %s: %s", child.task_id, parent, exc)
                continue
            if done.outcome in _REACHES_CHILDREN:
                parents.append(child.task_id)


def _route(
    store: TaskStore,
    task_id: str,
    action: str,
    *,
    actor: str,
    clock: Clock,
    reason: str | None,
    held: Callable[[str], Controllable | None] | None,
    pause_timeout: float | None,
) -> Controlled:
    """Apply ``action`` to ``task_id`` alone, routed by who holds it."""
    last: int | None = None
    for _ in range(_ATTEMPTS):
        run = held(task_id) if held is not None else None
        if run is not None:
            return _apply_held(run, action, actor=actor, reason=reason, timeout=pause_timeout)
        snapshot = store.get(task_id)
        if snapshot is None:
            return Controlled("not_found", accepted=False, confirmed=False)
        if snapshot.is_terminal:
            return Controlled("finished", accepted=True, confirmed=False, snapshot=snapshot)
        holder = snapshot.lease_owner or snapshot.owner
        if holder is None:
            done = _write_unheld(store, snapshot, action, actor=actor, clock=clock, reason=reason)
            if done is not None:
                return done
            last = snapshot.status_version
            continue  # claimed or changed meanwhile: read and route again
        if holder == actor:
            log.warning(
                "task %s is recorded as held by %s, but this controller does not hold it "
                "(an earlier process with the same owner?); run reconcile()",
                task_id,
                actor,
            )
            return Controlled("not_held", accepted=False, confirmed=False, snapshot=snapshot)
        _issue_command(store, snapshot, holder, action, actor=actor, clock=clock, reason=reason)
        return Controlled("requested", accepted=True, confirmed=False, snapshot=snapshot)
    current = store.get(task_id)
    raise ConcurrencyConflict(task_id, last, current.status_version if current else None)


def _apply_held(
    run: Controllable, action: str, *, actor: str, reason: str | None, timeout: float | None
) -> Controlled:
    if action == "stop":
        run.stop(reason, actor=actor)
        return Controlled("applied", accepted=True, confirmed=True)
    if action == "pause":
        confirmed = run.pause(timeout, actor=actor, reason=reason)
        return Controlled("applied", accepted=confirmed, confirmed=confirmed)
    resumed = run.resume(actor=actor, reason=reason)
    return Controlled("applied", accepted=resumed, confirmed=resumed)


def _write_unheld(
    store: TaskStore,
    snapshot: TaskSnapshot,
    action: str,
    *,
    actor: str,
    clock: Clock,
    reason: str | None,
) -> Controlled | None:
    """The guarded write for a task nobody holds; ``None`` when the guard failed."""
    machine = StateMachine(snapshot, clock=clock)
    try:
        if action == "stop":
            machine.request_stop(actor=actor, reason=reason)
        elif action == "pause":
            machine.request_pause(actor=actor, reason=reason)
        else:
            machine.resume(actor=actor, reason=reason)
    except InvalidTransition:
        return Controlled("refused", accepted=False, confirmed=False, snapshot=snapshot)
    if snapshot.status.occupies_slot or machine.snapshot.status.occupies_slot:
        # Running (or paused in place) with nobody holding it: lost, not controllable.
        # reconcile() settles it; an action now would leave it waiting for nobody.
        return Controlled("refused", accepted=False, confirmed=False, snapshot=snapshot)
    try:
        save_unheld(
            store,
            machine.snapshot,
            expect_version=snapshot.status_version,
            transitions=machine.transitions,
        )
    except (ConcurrencyConflict, TaskNotFound):
        return None
    if machine.snapshot.status is TaskStatus.QUEUED:
        wake_workers(store)  # resumed: claimable again
    return Controlled("applied", accepted=True, confirmed=True, snapshot=machine.snapshot)


def _issue_command(
    store: TaskStore,
    snapshot: TaskSnapshot,
    holder: str,
    action: str,
    *,
    actor: str,
    clock: Clock,
    reason: str | None,
) -> Command:
    """Write a task command addressed to ``holder`` (never to nobody)."""
    payload: dict[str, JSONValue] = {}
    if reason is not None:
        payload["reason"] = reason
    command = Command.new(
        kind="task",
        target=snapshot.task_id,
        action=action,
        issued_by=actor,
        issued_at=clock.now(),
        payload=payload,
        target_owner=holder,
    )
    commands = require_commands(store, f"{action} of a task another controller holds")
    return commands.submit_command(command)
