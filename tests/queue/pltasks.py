"""Task module of the fleet pipeline tests: values, a body that runs until stopped or
killed (it records its pid first, so the test knows which worker to kill), a fan-in."""

from __future__ import annotations

import os
import time
from pathlib import Path

from chongming_task import task


@task
def emit(ctx, value: int) -> int:  # type: ignore[no-untyped-def]
    return value


@task
def hang(ctx, gates: str) -> int:  # type: ignore[no-untyped-def]
    """Record the worker's pid, then run until stopped (or the worker dies)."""
    (Path(gates) / ctx.task_id.replace("/", "_")).write_text(str(os.getpid()))
    while True:
        ctx.checkpoint()
        time.sleep(0.02)


@task
def total(ctx, names: list[str]) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """The sum of the named upstream values, and which upstream values it saw."""
    return {"sum": sum(ctx.input(name, 0) for name in names), "seen": sorted(ctx.upstream)}
