"""Task module of the child-task tests: parents that enqueue children and wait."""

from __future__ import annotations

import time

from chongming_task import task


@task
def leaf(ctx, n: int) -> int:  # type: ignore[no-untyped-def]
    """A child: ten times ``n``."""
    return n * 10


@task
def fan_out(ctx, n: int) -> list[int]:  # type: ignore[no-untyped-def]
    """Enqueue ``leaf(1)`` and ``leaf(n)``, wait for both, return their values."""
    ctx.enqueue("leaf", 1)
    ctx.enqueue("leaf", n=n)
    return [outcome.value for outcome in ctx.wait_children(timeout=60)]


@task
def spin(ctx) -> None:  # type: ignore[no-untyped-def]
    """Run until stopped (a checkpoint every 20 ms)."""
    while True:
        ctx.checkpoint()
        time.sleep(0.02)


@task
def spawner(ctx) -> None:  # type: ignore[no-untyped-def]
    """A child that runs and one due in an hour (still queued), then wait for them."""
    ctx.enqueue("spin", task_id=f"{ctx.task_id}.running")
    ctx.enqueue("spin", task_id=f"{ctx.task_id}.queued", delay=3600)
    ctx.wait_children()
