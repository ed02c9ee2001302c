"""Task module of the bucket handoff tests: bodies gated by files, run in workers."""

from __future__ import annotations

import os
import time
from pathlib import Path

from chongming_task import TaskContext, task


@task
def gated(ctx: TaskContext, gates: str) -> str:
    """Record the start (and the worker's pid), wait for the gate file, return."""
    root = Path(gates)
    (root / f"started-{ctx.task_id}").write_text(str(os.getpid()))
    while not (root / "release").exists():
        ctx.checkpoint()
        time.sleep(0.02)
    return ctx.task_id
