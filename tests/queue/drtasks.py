"""Task module of the drain tests: bodies that run until a gate file appears."""

from __future__ import annotations

import os
import time
from pathlib import Path

from chongming_task import task


def _run_until_released(ctx, gates: str) -> str:  # type: ignore[no-untyped-def]
    """Record this attempt's start (task, attempt, worker pid), then wait for the gate."""
    root = Path(gates)
    (root / f"started-{ctx.task_id}-{ctx.attempt}").write_text(str(os.getpid()))
    while not (root / "release").exists():
        ctx.checkpoint()
        time.sleep(0.02)
    return f"done by {os.getpid()}"


@task(idempotent=True)
def idem(ctx, gates: str) -> str:  # type: ignore[no-untyped-def]
    """Safe to run again from the start: handed back when a shutdown stops it."""
    return _run_until_released(ctx, gates)


@task
def plain(ctx, gates: str) -> str:  # type: ignore[no-untyped-def]
    """Not declared idempotent: a shutdown that stops it ends it ``stopped``."""
    return _run_until_released(ctx, gates)
