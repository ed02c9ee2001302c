"""Task bodies for the pipeline tests (importable, so a ProcessExecutor can run them)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from chongming_task.runtime import TaskSkipped

#: Named gates a test opens to let a waiting body go on (thread executors only).
GATES: dict[str, threading.Event] = {}


def gate(name: str) -> threading.Event:
    return GATES.setdefault(name, threading.Event())


def fetch(ctx: Any, day: str) -> dict[str, Any]:
    ctx.checkpoint()
    return {"day": day, "rows": [1, 2, 3, 4, 5, 6]}


def transform(ctx: Any, index: int) -> int:
    fetched = ctx.input("fetch", {"rows": []})
    return sum(fetched["rows"][index::3])


def load(ctx: Any) -> int:
    return sum(ctx.upstream.values())


def audit(ctx: Any) -> list[str]:
    return sorted(ctx.upstream)


def value(ctx: Any, result: Any = None) -> Any:
    ctx.checkpoint()
    return result


def boom(ctx: Any, message: str = "boom") -> None:
    raise RuntimeError(message)


def skip_me(ctx: Any) -> None:
    raise TaskSkipped("nothing to do")


def upstream_view(ctx: Any) -> dict[str, Any]:
    """What the node saw: its upstream mapping and one ctx.input lookup with a default."""
    return {"upstream": dict(ctx.upstream), "input_a": ctx.input("a", "missing")}


def hold(ctx: Any, name: str = "") -> str:
    """Work (checkpointing) until gate ``name`` opens, or until stopped/cancelled."""
    event = gate(name)
    while not event.is_set():
        ctx.checkpoint()
        time.sleep(0.002)
    ctx.checkpoint()
    return name


def fail_when(ctx: Any, name: str, message: str = "boom") -> None:
    """Work until gate ``name`` opens, then fail."""
    event = gate(name)
    while not event.is_set():
        ctx.checkpoint()
        time.sleep(0.002)
    raise RuntimeError(message)


def increment(ctx: Any, previous: str | None = None) -> int:
    """One more than the previous node's value (counting a non-number as 0)."""
    value = ctx.input(previous, 0) if previous else 0
    return (value if isinstance(value, int) else 0) + 1


def flaky_transform(ctx: Any, index: int) -> int:
    """Shard 1 fails when gate "fail" opens; the others work until gate "shards" opens."""
    if index == 1:
        fail_when(ctx, "fail", "shard 1: corrupt input")
    hold(ctx, "shards")
    return transform(ctx, index)


TASKS: dict[str, Callable[..., Any]] = {
    "increment": increment,
    "flaky_transform": flaky_transform,
    "fetch": fetch,
    "transform": transform,
    "load": load,
    "audit": audit,
    "value": value,
    "boom": boom,
    "skip_me": skip_me,
    "upstream_view": upstream_view,
    "hold": hold,
    "fail_when": fail_when,
}
