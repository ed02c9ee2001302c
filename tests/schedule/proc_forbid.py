"""A scheduler node for the crashed-node test: one ``overlap="forbid"`` schedule.

    python proc_forbid.py STORE OWNER CLOCK_FILE WORK_DIR [--hang]

Registers ``slow`` (every minute, ``overlap="forbid"``), prints ``ready``, then ticks
once for every new value of the shared fake time and acknowledges it in
``WORK_DIR/OWNER.ack``. With ``--hang`` each run's body blocks until the process is
killed (the test kills it with SIGKILL mid-run); otherwise it returns at once. Stops
when ``WORK_DIR/stop`` appears.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from pathlib import Path

from chongming_task import Controller, TaskContext
from chongming_task.schedule import CronTrigger, Schedule, Scheduler

DEADLINE = 60.0
FileClock = importlib.import_module("file_clock").FileClock
open_store = importlib.import_module("proc_scheduler").open_store

HANG = "--hang" in sys.argv


def slow(ctx: TaskContext) -> str:
    if HANG:
        threading.Event().wait(DEADLINE)  # until SIGKILL
    return "done"


def main() -> int:
    spec, owner, clock_arg, work = sys.argv[1:5]
    work_dir = Path(work)
    clock = FileClock(clock_arg)
    store = open_store(spec, clock)
    controller = Controller(store, clock=clock, owner=owner, lease_ttl=20)
    controller.register("slow", slow)
    scheduler = Scheduler(controller, tick=1.0, misfire_tolerance=5)
    scheduler.add(
        Schedule(name="slow", task="slow", trigger=CronTrigger("* * * * *"), overlap="forbid")
    )
    print("ready", flush=True)
    stop = work_dir / "stop"
    ack = work_dir / f"{owner}.ack"
    deadline = time.monotonic() + DEADLINE
    last: float | None = None
    while not stop.exists() and time.monotonic() < deadline:
        now = clock.monotonic()
        if now != last:
            scheduler.tick()
            last = now
            scratch = ack.with_suffix(f".{os.getpid()}.tmp")
            scratch.write_text(repr(now))
            os.replace(scratch, ack)
            continue
        threading.Event().wait(0.002)
    scheduler.close()
    controller.close(close_store=True, timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
