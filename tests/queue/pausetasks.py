"""Task module of the paused-queue tests: ``noop`` (optionally gated) and ``other``."""

from __future__ import annotations

import time
from pathlib import Path

from chongming_task import TaskContext, task


@task
def noop(ctx: TaskContext, gates: str = "") -> str:
    """Return at once; with ``gates``, record the start and wait for the release file."""
    if gates:
        root = Path(gates)
        (root / f"started-{ctx.task_id}").write_text("1")
        while not (root / "release").exists():
            ctx.checkpoint()
            time.sleep(0.02)
    return "noop"


@task
def other(ctx: TaskContext) -> str:
    return "other"
