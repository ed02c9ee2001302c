"""Where a run's span gets its parent: the trace context of the submission.

The span of a run is built on the controller's event thread, long after ``submit``
returned, so the submitter's context has to be kept somewhere. In order of precedence:

1. the W3C ``traceparent`` in the task's metadata (put there by the caller with
   :func:`~chongming_task.observability._trace_context.inject_trace_context`, or by
   :meth:`SubmitContexts.inject` when the controller offers ``submit_hooks``);
   it is stored with the task, so it survives a hand-over to another process;
2. the context that was current in the submitting thread, read by an inline
   subscriber at the creation record (the controller publishes that record in the
   thread that called ``submit``) and kept in memory for this process;
3. nothing: the run starts a new trace.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from chongming_task._model import JSONValue, TaskSnapshot, Transition
from chongming_task.observability._trace_context import (
    TRACEPARENT,
    extract_trace_context,
    inject_trace_context,
    require_otel,
)

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = ["SubmitContexts"]

#: Contexts kept for runs the span builder has not seen yet (oldest dropped beyond it).
MAX_CAPTURED: Final = 10_000


class SubmitContexts:
    """Captures submission contexts of one controller and answers "whose child is this run?"."""

    def __init__(self) -> None:
        self._trace = require_otel()
        self._lock = threading.Lock()
        self._captured: dict[str, Any] = {}
        self._unsubscribe: Callable[[], None] | None = None
        self._hooks: list[Any] | None = None

    def attach(self, controller: Controller) -> None:
        """Capture inline, and write into metadata if the controller has ``submit_hooks``.

        ``submit_hooks`` (when a controller offers it) is a list of ``fn(name, metadata)``
        that ``submit`` calls before the task is created, so the context is persisted.
        """
        self._unsubscribe = controller.subscribe(self.capture, inline=True)
        hooks = getattr(controller, "submit_hooks", None)
        if isinstance(hooks, list):
            hooks.append(self.inject)
            self._hooks = hooks

    def close(self) -> None:
        """Stop capturing and forget what was captured (idempotent)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._hooks is not None:
            with contextlib.suppress(ValueError):
                self._hooks.remove(self.inject)
            self._hooks = None
        with self._lock:
            self._captured.clear()

    def inject(self, name: str, metadata: dict[str, JSONValue]) -> None:
        """Submit hook: add the current context to ``metadata`` (the caller's own wins)."""
        if TRACEPARENT not in metadata:
            metadata.update(inject_trace_context())

    def capture(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Inline subscriber: remember the submitting thread's span for a new task."""
        if transition.from_status is not None:
            return
        from opentelemetry import context as otel_context

        current = otel_context.get_current()
        if not self._trace.get_current_span(current).get_span_context().is_valid:
            return
        with self._lock:
            self._captured[transition.task_id] = current
            while len(self._captured) > MAX_CAPTURED:
                del self._captured[next(iter(self._captured))]

    def parent_of(self, snapshot: TaskSnapshot) -> Any:
        """The ``Context`` to start ``snapshot``'s run span in (empty: a new trace)."""
        from opentelemetry.context import Context

        with self._lock:
            captured = self._captured.pop(snapshot.task_id, None)
        stored = extract_trace_context(snapshot.metadata)
        if stored is not None:
            return stored
        return captured if captured is not None else Context()
