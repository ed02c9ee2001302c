"""The last log lines of each task a process runs, kept where ``status`` can read them.

``ctx.logs`` lives in the memory of the process that runs the task (guide §8.13), so
``chongming-task status`` in another process could never show what a task said.
:class:`LogTail` keeps each held task's last lines (redacted, one line each) in its
snapshot's ``metadata["logs"]``:

- while the task runs, the tail is copied into the run's snapshot by :meth:`flush`
  (called from the worker's own thread, never from inside a logging call, which may
  come from code holding the run's lock), and reaches the store with the task's next
  state change;
- when the task ends, the final tail is written onto the stored terminal snapshot
  (same version: a terminal task has no later transition that could carry it).

So a running task's newest lines appear after its next pause, stop or end; the
``status`` docs say so. It is not a log store: attach a logging handler for that.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import TYPE_CHECKING, Final

from chongming_task._redact import redact
from chongming_task.controller._document import LOG_TAIL_LINES, stored_tail
from chongming_task.controller._document import LOGS_KEY as METADATA_KEY
from chongming_task.errors import TaskError

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot, Transition
    from chongming_task.controller import Controller

__all__ = ["LOG_TAIL_LINES", "METADATA_KEY", "LogTail", "stored_tail"]

#: Task log records arrive on this logger (``chongming_task.task.<task_id>`` children).
TASK_LOGGER: Final = "chongming_task.task"


class _Handler(logging.Handler):
    def __init__(self, tail: LogTail) -> None:
        super().__init__(logging.INFO)
        self.tail = tail

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.tail.record(record)
        except Exception:  # a log line must never break the task that logged it
            self.handleError(record)


class LogTail:
    """Keeps the last ``lines`` log lines of ``controller``'s tasks in their metadata.

    Args:
        controller: Whose held tasks are followed (others' records are ignored).
        lines: How many lines to keep per task.

    Task records at INFO and above are needed, so the ``chongming_task.task`` logger
    is set to INFO if it was quieter; :meth:`close` restores it.
    """

    def __init__(self, controller: Controller, *, lines: int = LOG_TAIL_LINES) -> None:
        self.controller = controller
        self.lines = lines
        self._lock = threading.Lock()
        self._tails: dict[str, deque[str]] = {}
        self._dirty: set[str] = set()
        self._logger = logging.getLogger(TASK_LOGGER)
        self._old_level = self._logger.level
        if not self._logger.isEnabledFor(logging.INFO):
            self._logger.setLevel(logging.INFO)
        self._handler = _Handler(self)
        self._logger.addHandler(self._handler)
        self._unsubscribe = controller.subscribe(self._on_transition)

    def record(self, record: logging.LogRecord) -> None:
        """Keep ``record`` if it belongs to a task this controller holds."""
        task_id = getattr(record, "task_id", None)
        if not isinstance(task_id, str) or self.controller.run(task_id) is None:
            return
        at = self.controller.clock.now().strftime("%H:%M:%S")
        line = f"{at} {record.levelname} {redact(record.getMessage())}"
        with self._lock:
            self._tails.setdefault(task_id, deque(maxlen=self.lines)).append(line)
            self._dirty.add(task_id)

    def tail(self, task_id: str) -> list[str]:
        with self._lock:
            return list(self._tails.get(task_id, ()))

    def flush(self) -> None:
        """Copy new lines into the held runs' snapshots (call outside any run's lock)."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
        for task_id in dirty:
            run = self.controller.run(task_id)
            if run is None or run.done:
                continue
            metadata = {**run.snapshot.metadata, METADATA_KEY: self.tail(task_id)}
            run._update_fields(metadata=metadata)

    def _on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        if not transition.to_status.is_terminal:
            self.flush()
            return
        with self._lock:
            lines = list(self._tails.pop(transition.task_id, ()))
            self._dirty.discard(transition.task_id)
        if not lines:
            return
        store = self.controller.store
        try:
            stored = store.get(transition.task_id)
            if stored is None or stored.status_version != transition.version:
                return  # written meanwhile (pruned, reconciled): leave it alone
            final = stored.replace(metadata={**stored.metadata, METADATA_KEY: lines})
            store.save(final, expect_version=stored.status_version)
        except TaskError as exc:
            logging.getLogger("chongming_task.worker").warning(
                "could not store the last log lines of %s: %s", transition.task_id, exc
            )

    def close(self) -> None:
        """Stop following (idempotent)."""
        self._unsubscribe()
        self._logger.removeHandler(self._handler)
        self._logger.setLevel(self._old_level)
