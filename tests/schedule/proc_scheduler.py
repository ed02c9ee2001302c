"""A scheduler process for the multi-process tests.

    python proc_scheduler.py STORE OWNER CLOCK_FILE WORK_DIR   # driven by a shared fake time
    python proc_scheduler.py STORE OWNER --real WORK_DIR       # real time, background loop

``STORE`` is ``sqlite:PATH`` or ``postgres:DSN``. The process registers the schedule
``beat`` (every second, 6-field cron) and ``report`` (hourly, for manual runs), prints
``ready`` and then:

- with a clock file: ticks once for every new value of the shared time and writes the
  value it ticked at to ``WORK_DIR/OWNER.ack``, so the test knows both schedulers
  decided every second;
- with ``--real``: runs the scheduler's own loop on the system clock.

It stops when ``WORK_DIR/stop`` appears, then prints its claim counts as JSON.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from chongming_task import Controller, TaskContext
from chongming_task.core._clock import Clock, SystemClock
from chongming_task.schedule import CronTrigger, Schedule, Scheduler

# Run as a script, this file's directory is on sys.path; tests/, with the helpers the
# tests share, goes there too.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _store_spec import open_store

DEADLINE = 60.0

# Run as a script, this file's directory is on sys.path: the shared clock is a sibling
# module (imported by name, so the test package needs no install).
FileClock = importlib.import_module("file_clock").FileClock


def beat(ctx: TaskContext) -> str:
    return "beat"


def report(ctx: TaskContext, month: str) -> str:
    return f"report for {month}"


def main() -> int:
    spec, owner, clock_arg, work = sys.argv[1:5]
    work_dir = Path(work)
    real = clock_arg == "--real"
    clock: Clock = SystemClock() if real else FileClock(clock_arg)
    store = open_store(spec, clock)
    controller = Controller(store, clock=clock, owner=owner)
    controller.register("beat", beat)
    controller.register("report", report)
    scheduler = Scheduler(controller, tick=0.05 if real else 1.0, misfire_tolerance=5)
    scheduler.add(Schedule(name="beat", task="beat", trigger=CronTrigger("* * * * * *")))
    scheduler.add(
        Schedule(
            name="report",
            task="report",
            trigger=CronTrigger("0 * * * *"),
            kwargs={"month": "2026-01"},
        )
    )
    print("ready", flush=True)
    stop = work_dir / "stop"
    ack = work_dir / f"{owner}.ack"
    deadline = time.monotonic() + DEADLINE
    if real:
        scheduler.start()
    last: float | None = None
    while not stop.exists() and time.monotonic() < deadline:
        if not real:
            now = clock.monotonic()
            if now != last:
                scheduler.tick()
                # The beat finishes before this second is acknowledged: the next second
                # must not meet it unfinished (overlap="forbid" would skip that firing).
                controller.wait_all(timeout=DEADLINE)
                last = now
                scratch = ack.with_suffix(f".{os.getpid()}.tmp")
                scratch.write_text(repr(now))
                os.replace(scratch, ack)
                continue
        threading.Event().wait(0.002)
    scheduler.close()
    controller.close(close_store=True, timeout=10)
    print(json.dumps({"won": scheduler.claims_won, "lost": scheduler.claims_lost}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
