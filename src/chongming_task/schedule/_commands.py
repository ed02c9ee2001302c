"""Schedule commands from other processes: claim, apply, keep alive, complete.

Commands of ``kind="schedule"`` carry an operator's request for one schedule:
``pause``, ``resume``, ``set`` (payload ``pattern``, optional ``timezone``), ``reset``
and ``run``. A scheduler that has the schedule claims the command; one that does not
hands it back at once so the right one gets it.

A ``run`` is completed only when its task has finished, with the task's result.
Every claimed run is kept alive (``extend_command``) from the moment it is claimed
until it is completed, on every tick: the Go scheduler heartbeats only the dispatch
it is executing, so the other dispatches of its batch can expire and run twice. A
run's task id derives from the command id, so even a re-claim after a crash finds
the run that was already started instead of starting a second one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from chongming_task._consumer import KEEP, RELEASE, CommandConsumer, Complete, Outcome
from chongming_task._model import JSONValue, TaskSnapshot
from chongming_task.errors import ClaimLost, ConfigurationError
from chongming_task.schedule._admin import ScheduleAdmin, manual_runs_disabled
from chongming_task.schedule._control import ScheduleControl
from chongming_task.states import TaskStatus
from chongming_task.stores._base import Command, TaskStore

__all__ = ["ACTIONS", "ScheduleCommands", "run_result"]

log = logging.getLogger("chongming_task.schedule")

#: Schedule actions a scheduler applies.
ACTIONS: Final = frozenset({"pause", "resume", "set", "reset", "run"})
#: Claims per tick; the rest wait for the next one.
_BATCH: Final = 20


@dataclass(frozen=True, slots=True)
class _Inflight:
    command: Command
    task_id: str


def run_result(snapshot: TaskSnapshot) -> dict[str, JSONValue]:
    """The result a completed ``run`` command reports."""
    error = snapshot.failure.message if snapshot.failure is not None else None
    skip = snapshot.metadata.get("skip")
    if error is None and isinstance(skip, dict):
        error = skip.get("reason")
    return {
        "applied": True,
        "task_id": snapshot.task_id,
        "status": snapshot.status.value,
        "ok": snapshot.status is TaskStatus.SUCCEEDED,
        "skipped": snapshot.status is TaskStatus.SKIPPED,
        "error": error,
    }


class ScheduleCommands:
    """The command side of one scheduler; driven by its tick, single-threaded."""

    def __init__(
        self,
        *,
        store: TaskStore,
        owner: str,
        lease: float,
        admin: ScheduleAdmin,
        accepts: Callable[[str], bool],
        start_run: Callable[[ScheduleControl, Command], str],
    ) -> None:
        self._store = store
        # Every action, on purpose (``actions=None``): only schedulers consume schedule
        # commands, so no other consumer waits behind one held here, and an unknown
        # action gets an error result (see ``_apply``) instead of waiting forever
        # unclaimed. What a scheduler does hand back is by schedule (ones it lacks),
        # which an action filter could not tell apart.
        self._consumer = CommandConsumer(
            store,
            owner,
            kinds=("schedule",),
            actions=None,
            lease=lease,
            batch=_BATCH,
            logger=log,
        )
        self._admin = admin
        self._accepts = accepts
        self._start_run = start_run
        self._inflight: dict[str, _Inflight] = {}
        self.released = 0
        """Commands handed back for a schedule this scheduler does not have."""

    @property
    def applied(self) -> int:
        """Commands completed (whatever their result) while their claim was ours."""
        return self._consumer.completed

    @property
    def inflight(self) -> dict[str, str]:
        """Command id -> task id of claimed runs not completed yet."""
        return {key: item.task_id for key, item in self._inflight.items()}

    def release_all(self) -> int:
        """Hand back every claimed run not completed yet (the scheduler is closing).

        Another scheduler (or this one, restarted) claims each again at once instead of
        after its lease: it finds the run by its task id and completes the command.
        """
        released = 0
        for command_id, item in list(self._inflight.items()):
            try:
                released += self._consumer.release(item.command)
            except Exception as exc:  # the lease will run out instead
                log.warning("manual run %s: not handed back on close: %s", command_id, exc)
            del self._inflight[command_id]
        return released

    def poll(self) -> int:
        """Keep claimed runs alive, complete finished ones, claim and apply new commands.

        Raises:
            Exception: The first failure of a command (it was handed back; the rest of
                the batch was still applied), counted by the tick.
        """
        self._keep_alive()
        self._complete_finished()
        return self._consumer.poll(self._handle).claimed

    # -- internals ----------------------------------------------------------------

    def _keep_alive(self) -> None:
        for command_id, item in list(self._inflight.items()):
            try:
                self._consumer.extend(item.command)
            except ClaimLost as exc:
                log.warning(
                    "manual run %s: claim lost, another scheduler took it: %s", command_id, exc
                )
                del self._inflight[command_id]

    def _complete_finished(self) -> None:
        for command_id, item in list(self._inflight.items()):
            snapshot = self._store.get(item.task_id)
            if snapshot is None or not snapshot.is_terminal:
                continue
            self._consumer.complete(item.command, run_result(snapshot))
            del self._inflight[command_id]

    def _handle(self, command: Command) -> Outcome:
        try:
            return self._decide(command)
        except Exception:
            self._inflight.pop(command.command_id, None)  # handed back: not ours any more
            raise

    def _decide(self, command: Command) -> Outcome:
        if not self._accepts(command.target):
            self.released += 1
            return RELEASE
        payload: dict[str, Any] = dict(command.payload)
        operator = payload.get("operator") or command.issued_by
        name = command.target
        try:
            if command.action == "run":
                self._run(command)
                return KEEP
            control = self._apply(command.action, name, payload, operator)
        except ConfigurationError as exc:
            self._inflight.pop(command.command_id, None)
            return Complete({"applied": False, "error": str(exc)})
        return Complete(
            {
                "applied": True,
                "status": control.status,
                "pattern": control.pattern,
                "timezone": control.timezone,
                "definition_revision": control.definition_revision,
            },
        )

    def _apply(
        self, action: str, name: str, payload: dict[str, Any], operator: str
    ) -> ScheduleControl:
        reason = payload.get("reason")
        if action == "pause":
            return self._admin.pause(name, operator=operator, reason=reason)
        if action == "resume":
            return self._admin.resume(name, operator=operator, reason=reason)
        if action == "set":
            pattern = payload.get("pattern")
            if not isinstance(pattern, str):
                raise ConfigurationError("a 'set' command needs a 'pattern' string in its payload")
            return self._admin.set_pattern(
                name, pattern, timezone=payload.get("timezone"), operator=operator
            )
        if action == "reset":
            return self._admin.reset_pattern(name, operator=operator)
        raise ConfigurationError(
            f"unknown schedule action {action!r}; use one of {', '.join(sorted(ACTIONS))}"
        )

    def _run(self, command: Command) -> None:
        control = self._admin.get(command.target)
        if not control.manual_run_enabled:
            raise ConfigurationError(manual_runs_disabled(command.target))
        # Alive from the moment it is claimed: tracked before the run is started.
        self._inflight[command.command_id] = _Inflight(command, "")
        task_id = self._start_run(control, command)
        self._inflight[command.command_id] = _Inflight(command, task_id)
