"""A worker's CPU per task and throughput, this tree against another, in one run.

``python bench/worker_ab.py --base /path/to/other/checkout [--tasks 3000] [--rounds 3]
[--one-at-a-time] [--dsn postgresql://postgres@127.0.0.1:5432/postgres]``

Each round runs both sides in turn (base, then this tree) on a fresh PostgreSQL
database: one ``chongming-task worker`` process starts on the empty queue, then
``--tasks`` no-op tasks are enqueued (``Client.enqueue_many`` in batches of 500, or one
``Client.enqueue`` each with ``--one-at-a-time``, as a web application does) while it
runs them. The worker's CPU time (user + system, from ``/proc``) from the first
enqueue to the last success, per task, is the figure; the wall time gives tasks per
second. Ratios are taken round by round, so load on the machine weighs on both sides.
Make the base checkout with ``git worktree add /tmp/base <commit>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = str(ROOT / "bench" / "peers" / "queue_tasks.py")

ENQUEUE = """
import sys
from chongming_task import Client, PostgresTaskStore
count, single = int(sys.argv[2]), sys.argv[3] == "1"
with PostgresTaskStore(sys.argv[1]) as store:
    client = Client(store)
    for _ in range(0, count, 500):
        if single:
            for _ in range(500):
                client.enqueue("noop")
        else:
            client.enqueue_many("noop", [()] * 500)
"""

FINISHED = """
import sys, time
from chongming_task import PostgresTaskStore, TaskStatus
with PostgresTaskStore(sys.argv[1]) as store:
    while store.count_by_status().get(TaskStatus.SUCCEEDED, 0) < int(sys.argv[2]):
        time.sleep(0.05)
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fresh_database(admin_dsn: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin_dsn.rpartition("/")
    return f"{base}/{name}"


def one_side(src: str, admin_dsn: str, label: str, tasks: int, single: bool) -> tuple[float, float]:
    """(worker CPU ms per task, tasks per second) of the tree whose package is in ``src``."""
    dsn = _fresh_database(admin_dsn, f"worker_ab_{label}")
    env = {**os.environ, "PYTHONPATH": src}
    command = [sys.executable, "-m", "chongming_task.cli", "--db", dsn, "--owner", "ab"]
    command += ["worker", "--tasks", TASKS, "--log-level", "warning"]
    worker = subprocess.Popen(command, env=env)
    try:
        time.sleep(4)  # started: imports, schema, LISTEN
        before, started = _cpu_seconds(worker.pid), time.monotonic()
        flag = "1" if single else "0"
        subprocess.run([sys.executable, "-c", ENQUEUE, dsn, str(tasks), flag], env=env, check=True)
        subprocess.run([sys.executable, "-c", FINISHED, dsn, str(tasks)], env=env, check=True)
        used, wall = _cpu_seconds(worker.pid) - before, time.monotonic() - started
    finally:
        worker.terminate()
        worker.wait(30)
    return used / tasks * 1000, tasks / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the other checkout (its src/ is used)")
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one-at-a-time", action="store_true", help="Client.enqueue per task")
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    sides = {"base": str(Path(args.base) / "src"), "this": str(ROOT / "src")}
    found: dict[str, list[tuple[float, float]]] = {label: [] for label in sides}
    for _ in range(args.rounds):
        for label, src in sides.items():
            cpu, rate = one_side(src, args.dsn, label, args.tasks, args.one_at_a_time)
            found[label].append((cpu, rate))
            print(f"{label}: {cpu:.3f} ms CPU per task, {rate:.0f} tasks/s", flush=True)
    for label, runs in found.items():
        cpu = statistics.median(c for c, _ in runs)
        rate = statistics.median(r for _, r in runs)
        print(f"{label}: median {cpu:.3f} ms CPU per task, {rate:.0f} tasks/s")
    pairs = list(zip(found["this"], found["base"], strict=True))
    print("CPU per task, this / base, by round:", [round(t[0] / b[0], 3) for t, b in pairs])
    print("tasks/s, this / base, by round:", [round(t[1] / b[1], 3) for t, b in pairs])


if __name__ == "__main__":
    main()
