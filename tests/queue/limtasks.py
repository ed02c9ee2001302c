"""Task module of the global-limit tests: bodies that meet, via files."""

from __future__ import annotations

import time
from pathlib import Path

from chongming_task import TaskContext, task

#: How long a body waits for its peers before going on alone.
MEET_DEADLINE = 20.0


def _active(root: Path) -> int:
    started = {p.name[8:] for p in root.glob("started-*")}
    done = {p.name[5:] for p in root.glob("done-*")}
    return len(started - done)


@task(tags=["db"])
def meet(ctx: TaskContext, gates: str, peers: int, linger: float) -> str:
    """Wait until ``peers`` db tasks run at once, then up to ``linger`` seconds for one more.

    The first wait makes the limit's bound reached (no timing involved); the second
    leaves room for a task over the limit to start, which the test would then see.
    """
    root = Path(gates)
    (root / f"started-{ctx.task_id}").write_text("1")
    for wanted, seconds in ((peers, MEET_DEADLINE), (peers + 1, linger)):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and _active(root) < wanted:
            ctx.checkpoint()
            time.sleep(0.02)
    (root / f"done-{ctx.task_id}").write_text("1")
    return ctx.task_id


@task(tags=["db"])
def hold(ctx: TaskContext, gates: str) -> str:
    """Record the start, wait for the release file."""
    root = Path(gates)
    (root / f"started-{ctx.task_id}").write_text("1")
    while not (root / "release").exists():
        ctx.checkpoint()
        time.sleep(0.02)
    return ctx.task_id


@task
def free(ctx: TaskContext) -> str:
    return "free"
