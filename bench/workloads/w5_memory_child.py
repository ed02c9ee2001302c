"""W5 memory probe, run in a fresh interpreter: ``python w5_memory_child.py SIDE N``.

SIDE is ``ours`` (a Controller with 2 slots on an in-memory store) or ``threadpool``
(``ThreadPoolExecutor(2)``). Both first occupy their 2 slots with blocked tasks, then
queue N more; the child prints one JSON line with the resident-set growth caused by
the N queued tasks and the process's thread count, then exits without draining.
A fresh process per measurement keeps one side's garbage out of the other's figure.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1]
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

RELEASE = threading.Event()


def rss_mb() -> float:
    """Current resident set size of this process in MiB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def blocked(ctx: Any = None) -> None:
    """Holds a slot until the process exits."""
    while not RELEASE.wait(0.05):
        if ctx is not None:
            ctx.checkpoint()


def noop(ctx: Any = None) -> None:
    """A queued task's body (never reached during the measurement)."""
    return None


def _ours(n: int) -> tuple[float, float, int]:
    from harness import ours

    store_cls = ours.require(*ours.STORE_CLASSES["memory"].split(":"))
    ctl = ours.controller(store_cls(), max_parallel=2)
    ctl.register("blocked", blocked)
    ctl.register("noop", noop)
    for i in range(2):
        ctl.submit("blocked", task_id=f"blocked-{i}")
    deadline = time.monotonic() + 10
    while ctl.active_count < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    gc.collect()
    before = rss_mb()
    t0 = time.perf_counter()
    for i in range(n):
        ctl.submit("noop", task_id=f"q-{i}")
    seconds = time.perf_counter() - t0
    if ctl.queued_count != n:
        raise RuntimeError(f"expected {n} queued, controller says {ctl.queued_count}")
    gc.collect()
    return rss_mb() - before, seconds, threading.active_count()


def _threadpool(n: int) -> tuple[float, float, int]:
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(2)
    for _ in range(2):
        pool.submit(blocked)
    gc.collect()
    before = rss_mb()
    t0 = time.perf_counter()
    futures = [pool.submit(noop) for _ in range(n)]
    seconds = time.perf_counter() - t0
    gc.collect()
    assert len(futures) == n
    return rss_mb() - before, seconds, threading.active_count()


def main(argv: list[str]) -> None:
    """Measure, print one JSON line, exit at once (queued work is abandoned on purpose)."""
    side, n = argv[0], int(argv[1])
    delta, seconds, threads = (_ours if side == "ours" else _threadpool)(n)
    print(json.dumps({"rss_mb": delta, "threads": threads, "submit_s": seconds}), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
