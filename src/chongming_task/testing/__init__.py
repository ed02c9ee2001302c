"""Test support that ships with the library: deterministic time, polling helpers, and
an executor that holds launches back (``GatedExecutor``, for the ``starting`` window).

``chongming_task.testing.store_contract.StoreContract`` is the store contract suite.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from chongming_task.testing._fake_clock import FakeClock
from chongming_task.testing._gated import GatedExecutor

__all__ = ["FakeClock", "GatedExecutor", "wait_until"]

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    *,
    timeout: float = 10.0,
    interval: float = 0.005,
    message: str = "condition",
) -> T:
    """Poll ``condition`` until it returns a truthy value, then return that value.

    For tests that cross threads or processes: they wait on an observable condition
    with a deadline instead of sleeping a guessed amount. Raises ``TimeoutError``
    naming ``message`` when the deadline passes.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
