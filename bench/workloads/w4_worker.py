"""W4 worker process: holds looping tasks so another process can stop them.

Run as ``python w4_worker.py sqlite PATH BEACON`` or ``python w4_worker.py postgres DSN
BEACON`` (BEACON: the file every task body marks at each check, see ``w4_bodies``).
Protocol on stdin/stdout, one line each: the parent sends ``start TASK_ID``; the
worker submits the looping task, waits until it runs, and answers ``running TASK_ID``.
``quit`` closes the controller and exits. ``ready`` is printed once at start.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from harness import ours  # noqa: E402

from workloads.w4_bodies import PERIOD_S, checkpoint_loop  # noqa: E402


def _open_store(kind: str, where: str) -> object:
    cls = ours.require(*ours.STORE_CLASSES[kind].split(":"))
    return cls(where)


def main(argv: list[str]) -> int:
    """Serve start requests until ``quit``."""
    kind, where, beacon = argv[0], argv[1], argv[2]
    store = _open_store(kind, where)
    ctl = ours.controller(store, max_parallel=4, owner="w4-worker")
    ctl.register("loop", checkpoint_loop)
    print("ready", flush=True)
    try:
        while line := sys.stdin.readline():
            command, _, task_id = line.strip().partition(" ")
            if command == "quit":
                break
            if command == "start":
                run = ctl.submit("loop", task_id=task_id, beacon=beacon)
                deadline = time.monotonic() + 10
                while str(run.status) != "running" and time.monotonic() < deadline:
                    time.sleep(0.001)
                time.sleep(PERIOD_S * 2)  # let the body enter its loop
                print(f"running {task_id}", flush=True)
    finally:
        ctl.close(close_store=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
