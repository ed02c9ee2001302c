"""A worker process for the cross-process tests: runs tasks until they are stopped.

    python proc_worker.py STORE OWNER --running N [--queued M] [--lease-ttl S] [--crash]

``STORE`` is ``sqlite:PATH`` or ``postgres:DSN``. The worker submits ``job-1`` ..
``job-(N+M)`` with ``max_parallel=N`` (so N run and M wait), each spinning on
``ctx.checkpoint()`` until stopped. Without ``--crash`` it waits until every task has
settled (other processes stop them), closes and exits 0; with ``--crash`` it just
keeps running until the test kills it.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from chongming_task import Controller, TaskContext

# Run as a script, this file's directory is on sys.path; tests/, with the helpers the
# tests share, goes there too.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _store_spec import open_store

DEADLINE = 60.0


def spin(ctx: TaskContext) -> None:
    while True:
        ctx.checkpoint()
        time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("owner")
    parser.add_argument("--running", type=int, required=True)
    parser.add_argument("--queued", type=int, default=0)
    parser.add_argument("--lease-ttl", type=float, default=30.0)
    parser.add_argument("--crash", action="store_true")
    args = parser.parse_args()

    store = open_store(args.store)
    controller = Controller(
        store=store, max_parallel=args.running, owner=args.owner, lease_ttl=args.lease_ttl
    )
    controller.register("spin", spin)
    for index in range(1, args.running + args.queued + 1):
        controller.submit("spin", task_id=f"job-{index}")
    print("READY", flush=True)
    if args.crash:
        threading.Event().wait(DEADLINE)
        return 1
    outcomes = controller.wait_all(timeout=DEADLINE)
    controller.close(close_store=True)
    print(" ".join(f"{o.snapshot.task_id}={o.status.value}" for o in outcomes), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
