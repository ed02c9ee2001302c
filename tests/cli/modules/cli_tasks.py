"""Task definitions the CLI tests load with ``--tasks`` (as a file path or a module)."""

from __future__ import annotations

import time
from typing import Any

from chongming_task import task


# The decorator's type wants a context no keyword can reach; **values could take ``ctx=``.
@task(tags={"quick"})  # type: ignore[arg-type]
def echo(ctx: Any, **values: Any) -> dict[str, Any]:
    """Return the keyword arguments it was given, to check argument parsing."""
    return {key: [value, type(value).__name__] for key, value in values.items()}


@task
def add(ctx: Any, a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


@task(tags={"slow", "io"})
def loop(ctx: Any, steps: int = 100_000, delay: float = 0.01) -> int:
    """Checkpoint in a loop until done or stopped; progress per step."""
    for step in range(1, steps + 1):
        ctx.checkpoint()
        ctx.progress(step, total=steps, unit="steps")
        time.sleep(delay)
    return steps


@task
def fail(ctx: Any, message: str = "boom") -> None:
    """Raise, so the task fails."""
    raise RuntimeError(message)


@task
def chatty(ctx: Any, lines: int = 3, secret: str = "") -> int:
    """Log some lines (one with a secret that must be redacted), then return."""
    for index in range(lines):
        ctx.log(f"line {index}")
    if secret:
        ctx.log(f"connecting with password={secret}")
    return lines


@task
def stubborn(ctx: Any, seconds: float = 60.0) -> None:
    """Never checkpoint: a stop cannot take effect (the guide's 'lost' case)."""
    ctx.checkpoint()
    time.sleep(seconds)
