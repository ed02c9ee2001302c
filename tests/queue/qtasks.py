"""Task module of the work-queue acceptance test: gated bodies, via files."""

from __future__ import annotations

import os
import time
from pathlib import Path

from chongming_task import task


@task
def job(ctx, n: int, gates: str) -> int:  # type: ignore[no-untyped-def]
    """Record the start, wait for the gate file, record the end."""
    root = Path(gates)
    (root / f"started-{ctx.task_id}").write_text(str(os.getpid()))
    release = root / "release"
    while not release.exists():
        ctx.checkpoint()
        time.sleep(0.02)
    (root / f"done-{ctx.task_id}").write_text("ok")
    return n
