"""Task module of the retry tests: a body that fails until its flag file exists."""

from __future__ import annotations

import os
from pathlib import Path

from chongming_task import task


@task
def flaky(ctx, flag: str) -> int:  # type: ignore[no-untyped-def]
    """Fail the first time (and leave the flag); succeed once the flag is there."""
    path = Path(flag)
    if not path.exists():
        path.write_text("failed once")
        raise RuntimeError(f"{ctx.task_id}: the first run fails")
    return os.getpid()
