"""Executors: where a task body runs (``inline``, ``thread``, ``process``).

``Executor`` is the protocol every executor implements; ``ProcessExecutor`` is resolved
on first access (it loads ``multiprocessing``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports
from chongming_task.runtime.executors._base import AsyncCarrier, Executor

if TYPE_CHECKING:
    from chongming_task.runtime.executors._asyncio import ASYNCIO
    from chongming_task.runtime.executors._loop import LOOP
    from chongming_task.runtime.executors._process import ProcessExecutor

_LAZY: dict[str, str] = {
    "ASYNCIO": "chongming_task.runtime.executors._asyncio",
    "LOOP": "chongming_task.runtime.executors._loop",
    "ProcessExecutor": "chongming_task.runtime.executors._process",
}

__getattr__, __dir__ = lazy_exports("chongming_task.runtime.executors", globals(), _LAZY)

__all__ = ["ASYNCIO", "LOOP", "AsyncCarrier", "Executor", "ProcessExecutor"]
