"""A scripted controller port: node tasks move only when the test says so.

It implements :class:`chongming_task.pipeline._port.ControllerPort` on plain state
machines, so orchestrator tests choose every interleaving (which branch is running,
which one fails first) without threads racing real task bodies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from chongming_task._joins import skip_failure
from chongming_task._model import Failure, FailureKind, JSONValue, TaskSnapshot, Transition
from chongming_task.core._clock import Clock, SystemClock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.pipeline._port import NodeSubmission
from chongming_task.states import TaskStatus

S = TaskStatus
Subscriber = Callable[[Transition, TaskSnapshot], None]


class ScriptedPort:
    def __init__(self, registered: set[str], clock: Clock | None = None) -> None:
        self.registered = set(registered)
        self._clock = clock or SystemClock()
        self.lock = threading.RLock()
        self.machines: dict[str, StateMachine] = {}
        self.upstream: dict[str, dict[str, JSONValue]] = {}
        self.submitted: list[tuple[str, tuple[Any, ...], dict[str, Any], bool]] = []
        self.actions: list[tuple[str, str]] = []
        self.subscribers: list[Subscriber] = []
        self.refuse: set[str] = set()
        #: (action, task id) pairs the port refuses with an error, like a controller would.
        self.refuse_actions: set[tuple[str, str]] = set()
        #: task id -> what happens (in another task, say) while that node is released.
        self.during_release: dict[str, Callable[[], None]] = {}

    # ---------------------------------------------------------------- the port

    def is_registered(self, name: str) -> bool:
        return name in self.registered

    def preflight(self, task_name: str, options: Mapping[str, Any]) -> None:
        if options.get("bucket_key") == "not-mine":
            raise ConfigurationError("bucket not owned")

    def exists(self, task_id: str) -> bool:
        return task_id in self.machines

    def submit(self, node: NodeSubmission) -> StateMachine:
        if node.task_name in self.refuse:
            raise ValueError(f"refused {node.task_name}")
        task_id = node.task_id
        with self.lock:
            machine = StateMachine.create(
                task_id, node.task_name, metadata=node.metadata, clock=self._clock
            )
            self.machines[task_id] = machine
            self.submitted.append((task_id, node.args, dict(node.kwargs), node.blocked))
            if node.blocked:
                self._do(task_id, machine.mark_blocked)
            else:
                self._do(task_id, machine.mark_queued)
            return machine

    def release(self, task_id: str, upstream: Mapping[str, JSONValue]) -> None:
        self._check("release", task_id)
        with self.lock:
            self.actions.append(("release", task_id))
            self.upstream[task_id] = dict(upstream)
            self._do(task_id, self.machines[task_id].mark_queued)
            hook = self.during_release.pop(task_id, None)
            if hook is not None:
                hook()

    def skip(self, task_id: str, reason: str) -> None:
        self._check("skip", task_id)
        with self.lock:
            self.actions.append(("skip", task_id))
            machine = self.machines[task_id]
            self._do(
                task_id, lambda: machine.mark_skipped(reason=reason, failure=skip_failure(reason))
            )

    def cancel(self, task_id: str, reason: str) -> None:
        with self.lock:
            self.actions.append(("cancel", task_id))
            machine = self.machines[task_id]
            self._do(task_id, lambda: machine.mark_cancelled(reason=reason))

    def stop(self, task_id: str, reason: str) -> None:
        with self.lock:
            self.actions.append(("stop", task_id))
            machine = self.machines[task_id]
            self._do(task_id, lambda: machine.request_stop(reason=reason))

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self.subscribers.append(fn)
        return lambda: self.subscribers.remove(fn) if fn in self.subscribers else None

    # ---------------------------------------------------------------- the script

    def _check(self, action: str, task_id: str) -> None:
        if (action, task_id) in self.refuse_actions:
            raise RuntimeError(f"{action} refused for {task_id}")

    def _do(self, task_id: str, action: Callable[[], object]) -> None:
        machine = self.machines[task_id]
        before = len(machine.transitions)
        action()
        for transition in machine.transitions[before:]:
            for fn in list(self.subscribers):
                fn(transition, machine.snapshot)

    def task(self, run_id: str, node_id: str) -> StateMachine:
        return self.machines[f"{run_id}/{node_id}"]

    def start(self, task_id: str) -> None:
        with self.lock:
            machine = self.machines[task_id]
            self._do(task_id, machine.mark_starting)
            self._do(task_id, machine.mark_running)

    def succeed(self, task_id: str, value: JSONValue = None) -> None:
        with self.lock:
            machine = self.machines[task_id]
            if machine.status is S.QUEUED:
                self.start(task_id)
            self._do(task_id, lambda: machine.mark_succeeded(outcome=value))

    def fail(self, task_id: str, message: str = "boom") -> None:
        with self.lock:
            machine = self.machines[task_id]
            if machine.status is S.QUEUED:
                self.start(task_id)
            failure = Failure(kind=FailureKind.EXCEPTION, message=message)
            self._do(task_id, lambda: machine.mark_failed(failure))

    def stopped(self, task_id: str) -> None:
        """Confirm a pending stop (stopping -> stopped), as a body reaching checkpoint."""
        with self.lock:
            machine = self.machines[task_id]
            self._do(task_id, lambda: machine.mark_stopped(reason="confirmed"))

    def path(self, task_id: str) -> list[str]:
        """The whole trajectory as status values, creation first."""
        return [t.to_status.value for t in self.machines[task_id].transitions]
