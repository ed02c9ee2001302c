"""Module-level task functions of the guide's samples (guide §4.5, §7.4, §8.10).

A ProcessExecutor child imports its function by module and name, and the CLI loads
task definitions from a module with ``--tasks``; so these live in an importable
module instead of inside the tests. ``register(controller)`` is the CLI's entry
point (guide §8.10): only names registered here can be run from the shell.
"""

from __future__ import annotations

import os
import time
from typing import Any

from chongming_task import task


def fetch_all(ctx: Any) -> dict[str, int]:
    """§7.4 ``run_task(fetch_all, executor=ProcessExecutor())``: reports its own pid."""
    ctx.checkpoint()
    return {"pid": os.getpid(), "parent": os.getppid()}


@task
def resize(ctx, path: str) -> str:  # type: ignore[no-untyped-def]  # ✅ 模块级、参数可 pickle
    return f"{path}@2x"


def never_checkpoints(ctx: Any, seconds: float = 60.0) -> str:
    """Ignores stop requests; only a process executor can really end it."""
    time.sleep(seconds)
    return "finished anyway"


def crashes(ctx: Any) -> None:
    """A native crash: the child dies by a signal, the supervisor survives."""
    ctx.checkpoint()
    os.abort()


def checkpoints_forever(ctx: Any) -> None:
    """Cooperative: stop and pause reach it across the process boundary."""
    while True:
        ctx.checkpoint()
        time.sleep(0.005)


def spawns_a_process(ctx: Any) -> None:
    """A child is a daemon process: it may not start processes of its own."""
    import multiprocessing

    helper = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0,))
    helper.start()
    helper.join()


def square(ctx: Any, n: int) -> int:
    return n * n


@task
def worker(ctx, source: str) -> int:  # type: ignore[no-untyped-def]
    """§4.5's resident worker, as written (the CLI runs it in the foreground)."""
    processed = 0
    while not ctx.is_stop_requested:  # ← 优雅收尾的写法
        ctx.checkpoint()  # ← 不调用它 = 停不掉
        processed += 1
        ctx.progress(processed, unit="batch")
        time.sleep(0.02)
    ctx.log(f"收到停止请求，本次共处理 {processed} 批")
    return processed  # 正常返回 → 终态 succeeded，返回值保留


@task
def demo(ctx: Any, steps: int = 100_000) -> int:
    """§8.10's ``demo-1``: checkpoints until stopped."""
    for step in range(1, steps + 1):
        ctx.checkpoint()
        ctx.progress(step, total=steps, unit="steps")
        time.sleep(0.01)
    return steps


@task
def broken(ctx: Any) -> None:
    """Fails, so ``run`` exits with 3 (the command worked, the task did not)."""
    raise RuntimeError("the task failed on purpose")


def register(controller: Any) -> None:
    """The CLI's whitelist: exactly these names can be run (guide §8.5, §8.10)."""
    controller.register_all(worker, demo, broken)
