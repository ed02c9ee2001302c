"""The task module the queue benchmark's ``chongming-task worker`` processes load."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from chongming_task import task


@task
def noop(ctx) -> None:  # type: ignore[no-untyped-def]
    """Nothing: the queue's own cost is all that is measured."""
    return None


@task
def hold(ctx, gate: str) -> None:  # type: ignore[no-untyped-def]
    """Run until ``gate`` exists (the recovery figure kills the worker meanwhile)."""
    while not Path(gate).exists():
        ctx.checkpoint()
        time.sleep(0.01)


@task
async def nap(ctx, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """Await ``seconds`` between two checkpoints (bench/async_bench.py: bodies that wait)."""
    await ctx.acheckpoint()
    await asyncio.sleep(seconds)
    await ctx.acheckpoint()
