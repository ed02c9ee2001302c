"""The child process of the crash cases: pause a task, say so, die by SIGKILL.

It lives at module level so ``multiprocessing``'s *spawn* start method can import it
(spawn, not fork: forking a threaded test process is unsafe). The report goes through
a pipe, written synchronously, and the process kills itself on the next line: nothing
the controller might still have deferred gets a chance to reach the store after
``pause()`` returned True.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Final

from chongming_task._model import JSONValue
from chongming_task.controller import Controller
from chongming_task.runtime import TaskContext
from chongming_task.stores._base import TaskStore

__all__ = ["BLOCKER", "CHILD_LEASE_TTL", "CHILD_OWNER", "TARGET", "pause_then_die"]

CHILD_OWNER: Final = "contract-crashing-child"
#: The child's lease: the parent reconciles as if this much (and more) had passed.
CHILD_LEASE_TTL: Final = 30.0
TARGET: Final = "crash-target"
BLOCKER: Final = "crash-blocker"
_DEADLINE: Final = 10.0
_TICK: Final = 0.002


def pause_then_die(factory: Callable[[], TaskStore], mode: str, report: Connection) -> None:
    """Submit :data:`TARGET`, pause it until confirmed, report, then SIGKILL itself.

    ``mode`` ``"running"``: the target runs (a body that checkpoints) and is paused in
    place. ``"queued"``: :data:`BLOCKER` takes the only slot and the target is paused
    while queued. Reports ``("paused", task_id)`` or ``("error", traceback)``.
    """
    try:
        store = factory()
        controller = Controller(
            store,
            max_parallel=1,
            owner=CHILD_OWNER,
            lease_ttl=CHILD_LEASE_TTL,
            pause_timeout=_DEADLINE,
        )
        entered: dict[str, threading.Event] = {
            TARGET: threading.Event(),
            BLOCKER: threading.Event(),
        }
        never = threading.Event()

        def hold(ctx: TaskContext) -> JSONValue:
            entered[ctx.task_id].set()
            while not never.wait(_TICK):
                ctx.checkpoint()
            return None

        controller.register("hold", hold)
        first = TARGET if mode == "running" else BLOCKER
        controller.submit("hold", task_id=first)
        if not entered[first].wait(_DEADLINE):
            raise TimeoutError(f"the body of {first} did not begin within {_DEADLINE}s")
        if mode != "running":
            controller.submit("hold", task_id=TARGET)
        deadline = time.monotonic() + _DEADLINE
        while not controller.pause(TARGET, timeout=1.0):
            if time.monotonic() > deadline:
                raise TimeoutError(f"pause({TARGET!r}) was not confirmed within {_DEADLINE}s")
    except BaseException:
        report.send(("error", traceback.format_exc()))
        return
    report.send(("paused", TARGET))
    os.kill(os.getpid(), signal.SIGKILL)
