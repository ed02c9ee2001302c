"""Core building blocks: the clock and the state machine (no I/O, no threads).

``Clock`` and ``SystemClock`` are time, injected everywhere; the state machine is its
own public module, ``chongming_task.core.state_machine``.
"""

from __future__ import annotations

from chongming_task.core._clock import Clock, SystemClock, utc_now

__all__ = ["Clock", "SystemClock", "utc_now"]
