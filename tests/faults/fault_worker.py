"""Processes of the fault suite.

    python fault_worker.py work STORE OWNER --tasks N [--parallel P] [--lease-ttl S]
    python fault_worker.py reconcile STORE OWNER

``work`` submits ``OWNER-0`` .. ``OWNER-(N-1)``: short tasks (a few checkpoints with
progress) mixed with long ones (until stopped), prints ``READY`` and runs until the
test kills it or every task is terminal. ``reconcile`` runs one ``reconcile()`` and
prints its report as JSON. ``STORE`` is ``sqlite:PATH`` or ``postgres:DSN``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path

from chongming_task import Controller, TaskContext

# Run as a script, this file's directory is on sys.path; tests/, with the helpers the
# tests share, goes there too.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _store_spec import open_store


def short(ctx: TaskContext, steps: int) -> int:
    for step in range(steps):
        ctx.checkpoint()
        ctx.progress(step + 1, total=steps)
        time.sleep(0.005)
    return steps


def long(ctx: TaskContext) -> None:
    while True:
        ctx.checkpoint()
        time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["work", "reconcile"])
    parser.add_argument("store")
    parser.add_argument("owner")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--lease-ttl", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--long-only", action="store_true")
    args = parser.parse_args()
    store = open_store(args.store)
    controller = Controller(
        store=store, max_parallel=args.parallel, owner=args.owner, lease_ttl=args.lease_ttl
    )
    if args.mode == "reconcile":
        report = controller.reconcile()
        print(json.dumps({"lost": report.lost, "adoptable": report.adoptable}), flush=True)
        controller.close(close_store=True)
        return 0
    rng = random.Random(args.seed)
    controller.register("short", short)
    controller.register("long", long)
    for index in range(args.tasks):
        if args.long_only or rng.random() < 0.3:
            controller.submit("long", task_id=f"{args.owner}-{index}")
        else:
            controller.submit("short", rng.randint(1, 40), task_id=f"{args.owner}-{index}")
    print("READY", flush=True)
    threading.Event().wait()  # until killed (or stopped by another process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
