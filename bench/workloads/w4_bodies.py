"""Task bodies for W4, in an importable module so spawned processes can find them.

Every body has the same shape: check for a stop, then sleep ``PERIOD_S``; a stop is
therefore noticed at the next check, on average half a period after it was asked for.
That half period is the floor for every side; the rest is what the machinery costs.
"""

from __future__ import annotations

import time
from typing import Any

PERIOD_S = 0.01


def checkpoint_loop(ctx: Any) -> None:
    """Ours: loop on ``ctx.checkpoint()`` + sleep until stopped."""
    while True:
        ctx.checkpoint()
        time.sleep(PERIOD_S)


def event_loop(stop: Any, entered: Any) -> None:
    """Baseline: the same loop on a bare Event (threading or multiprocessing)."""
    entered.set()
    while not stop.is_set():
        time.sleep(PERIOD_S)
