"""Shared helpers for the controller tests (a gate for task bodies, transition paths)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from chongming_task._model import Transition
from chongming_task.runtime._context import TaskContext
from chongming_task.states import TaskStatus


class Gate:
    """Lets tests hold task bodies at a checkpoint loop until opened."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def open(self) -> None:
        self.event.set()

    def hold(self, ctx: TaskContext) -> None:
        while not self.event.is_set():
            ctx.checkpoint()
            time.sleep(0.005)


def path(transitions: Iterable[Transition]) -> list[str]:
    """The statuses a task went through, creation included."""
    return [t.to_status.value for t in transitions]


S = TaskStatus
