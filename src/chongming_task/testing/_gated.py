"""An executor whose carriers begin only when a test says so.

``Controller.submit()`` and ``TaskRun.start()`` return while the run is ``starting``:
what happens to a stop, a pause or a timeout in that window depends on whether the
carrier was quicker than the caller. ``GatedExecutor`` makes the window as long as a
test needs, so such races are tested on purpose instead of by luck.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chongming_task.runtime import Attempt, AttemptEnd, TaskCall
    from chongming_task.runtime.executors import Executor

__all__ = ["GatedExecutor"]


class GatedExecutor:
    """Wraps an executor; each launch waits for :attr:`go` before its carrier begins.

    ``GatedExecutor(ThreadExecutor())``; submit, act on the ``starting`` run, then
    ``executor.go.set()``. Everything else is the wrapped executor's.
    """

    def __init__(self, inner: Executor, *, patience: float = 30.0) -> None:
        self.inner = inner
        self.name = inner.name
        self.supports_pause = inner.supports_pause
        self.kill_after = inner.kill_after
        self.go = threading.Event()
        """Set it to let every held launch (and every later one) begin."""
        self._patience = patience

    def check(self, call: TaskCall) -> None:
        self.inner.check(call)

    def launch(self, drive: Callable[[], None], *, name: str) -> None:
        def later() -> None:
            if not self.go.wait(self._patience):
                raise TimeoutError(f"GatedExecutor: go was not set within {self._patience}s")
            self.inner.launch(drive, name=name)

        threading.Thread(target=later, name=f"{name} (gated)", daemon=True).start()

    def run_attempt(self, attempt: Attempt) -> AttemptEnd:
        return self.inner.run_attempt(attempt)

    def terminate(self, attempt: Attempt) -> bool:
        return self.inner.terminate(attempt)

    def kill(self, attempt: Attempt) -> None:
        self.inner.kill(attempt)
