"""The execution layer: task context, supervision and executors.

Task authors need two names from here, both also exported at the top level:
``TaskContext`` (what a body receives) and ``TaskSkipped`` (raise it to end a run as
``skipped``). The rest is what ``run.py`` and the controller build a run from; it is
resolved on first access, so a task module that imports ``TaskContext`` loads no
driver, supervisor or timer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports
from chongming_task.runtime._context import (
    ChildTasks,
    LogEntry,
    RuntimeContext,
    TaskContext,
    TaskSkipped,
)

if TYPE_CHECKING:  # type checkers see the real names; runtime resolves them lazily
    from chongming_task.runtime._attempt import Attempt, AttemptEnd, TaskCall
    from chongming_task.runtime._controls import RunControls
    from chongming_task.runtime._driver import Driver
    from chongming_task.runtime._events import Outbox
    from chongming_task.runtime._options import (
        as_args,
        as_kwargs,
        as_upstream,
        callable_name,
        check_executor,
        check_options,
        check_signature,
        signature_of,
    )
    from chongming_task.runtime._orchestration import QueueOwnerEdges
    from chongming_task.runtime._state import RunState, Supervision
    from chongming_task.runtime._supervisor import Supervisor

_LAZY: dict[str, str] = {
    "Attempt": "chongming_task.runtime._attempt",
    "AttemptEnd": "chongming_task.runtime._attempt",
    "TaskCall": "chongming_task.runtime._attempt",
    "RunControls": "chongming_task.runtime._controls",
    "Driver": "chongming_task.runtime._driver",
    "Outbox": "chongming_task.runtime._events",
    "as_args": "chongming_task.runtime._options",
    "as_kwargs": "chongming_task.runtime._options",
    "as_upstream": "chongming_task.runtime._options",
    "callable_name": "chongming_task.runtime._options",
    "check_executor": "chongming_task.runtime._options",
    "check_options": "chongming_task.runtime._options",
    "check_signature": "chongming_task.runtime._options",
    "signature_of": "chongming_task.runtime._options",
    "QueueOwnerEdges": "chongming_task.runtime._orchestration",
    "RunState": "chongming_task.runtime._state",
    "Supervision": "chongming_task.runtime._state",
    "Supervisor": "chongming_task.runtime._supervisor",
}

__getattr__, __dir__ = lazy_exports("chongming_task.runtime", globals(), _LAZY)

__all__ = [
    "Attempt",
    "AttemptEnd",
    "ChildTasks",
    "Driver",
    "LogEntry",
    "Outbox",
    "QueueOwnerEdges",
    "RunControls",
    "RunState",
    "RuntimeContext",
    "Supervision",
    "Supervisor",
    "TaskCall",
    "TaskContext",
    "TaskSkipped",
    "as_args",
    "as_kwargs",
    "as_upstream",
    "callable_name",
    "check_executor",
    "check_options",
    "check_signature",
    "signature_of",
]
