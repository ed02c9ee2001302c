"""Module-level tasks for the ProcessExecutor tests (a child process imports them)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

from chongming_task import task
from chongming_task.runtime._context import TaskContext


def count(ctx: TaskContext, n: int) -> dict[str, Any]:
    for index in range(n):
        ctx.checkpoint()
        ctx.progress(index + 1, total=n, unit="items")
    ctx.log("counted in the child")
    ctx.warning("a warning from the child")
    return {"n": n, "pid": os.getpid(), "upstream": dict(ctx.upstream), "logs": len(ctx.logs)}


def cooperative(ctx: TaskContext) -> None:
    while True:
        ctx.checkpoint()
        time.sleep(0.002)


def ignores_stop(ctx: TaskContext) -> None:
    ctx.checkpoint()
    while True:  # never checks again: only a hard stop ends it
        time.sleep(0.01)


def segfault(ctx: TaskContext) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def exits(ctx: TaskContext, code: int) -> None:
    os._exit(code)


def fails(ctx: TaskContext, message: str) -> None:
    raise ValueError(message)


def fails_until(ctx: TaskContext, marker: str) -> int:
    """Fails on the first attempt (leaves a marker file), succeeds on the next."""
    if not os.path.exists(marker):
        with open(marker, "w") as handle:
            handle.write(str(os.getpid()))
        raise RuntimeError("first attempt fails")
    return os.getpid()


def returns_set(ctx: TaskContext) -> Any:
    return {1, 2, 3}


def returns_unpicklable_json(ctx: TaskContext) -> Any:
    return {"ok": True}


async def async_loop(ctx: TaskContext) -> int:
    rounds = 0
    while True:
        await ctx.acheckpoint()
        rounds += 1
        await asyncio.sleep(0.002)


class Unpicklable(Exception):
    def __init__(self, message: str, handle: object) -> None:
        super().__init__(message)
        self.handle = handle

    def __reduce__(self) -> Any:
        raise TypeError("cannot pickle Unpicklable")


def raises_unpicklable(ctx: TaskContext) -> None:
    raise Unpicklable("password=hunter2 went wrong", object())


@task
def resize(ctx: TaskContext, path: str) -> str:
    """Module level, picklable arguments: fine for the ProcessExecutor (guide §7.4)."""
    ctx.checkpoint()
    return path.upper()


def fetch_all(ctx: TaskContext) -> list[int]:
    return [1, 2, 3]


def until_stop_requested(ctx: TaskContext) -> int:
    """Return how many rounds it did once a stop is requested (guide §4.5's worker)."""
    rounds = 0
    while not ctx.is_stop_requested:
        ctx.checkpoint()
        rounds += 1
        time.sleep(0.002)
    return rounds
