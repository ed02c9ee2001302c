"""Store figures: ``ps`` and ``get`` at a million tasks, save throughput from 1 and 4 threads.

Run ``python bench/store_bench.py`` (about two minutes; ``--tasks 100000`` for a quick
look). PostgreSQL figures need ``CHONGMING_TEST_POSTGRES`` (or ``--postgres DSN``); each
run uses a fresh schema and drops it afterwards.

What is measured, and how:

* **Seeding** (set-up, not a figure of merit) is a direct bulk insert: one row per
  status encoded by the store's own codec, copied with the id and instants substituted,
  written through the store's ``insert_task`` statement in batched transactions (a
  sample is read back and compared). The public bulk path, ``create_many``, is timed
  separately on 20,000 more tasks.
* **ps**: ``query(TaskQuery(statuses={RUNNING}, limit=100))`` — the first 100 running
  tasks in creation order, on a store where 1% of the tasks run, 1% queue and the rest
  have finished. Warm cache; median and p95 of repeated calls.
* **get**: ``get(task_id)`` of random ids; median and p95.
* **save**: ``save(snapshot, expect_version=v, transitions=[one transition])`` — what the
  controller writes per state change — each thread advancing its own tasks. Durable
  writes as configured: SQLite WAL with ``synchronous=NORMAL`` (durable against process
  crashes; see docs/store-guide.md), PostgreSQL with the server's settings (printed).
  ``save_many`` shows the same writes committed 50 at a time (group commit).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from chongming_task import TaskSnapshot, TaskStatus, Transition
from chongming_task.stores._base import SnapshotWrite, TaskQuery, TaskStore
from chongming_task.stores._sqlite import SqliteTaskStore

BASE = datetime(2026, 1, 1, tzinfo=UTC)
RUNNING = frozenset({TaskStatus.RUNNING})


def status_of(i: int) -> TaskStatus:
    r = i % 100
    return TaskStatus.RUNNING if r == 0 else TaskStatus.QUEUED if r == 50 else TaskStatus.SUCCEEDED


def seeded_snapshot(i: int) -> TaskSnapshot:
    """The i-th task of the scale store (what ``get`` must return for it)."""
    status = status_of(i)
    created = BASE + timedelta(milliseconds=i)
    return TaskSnapshot(
        task_id=f"task-{i:07d}",
        name="job.sync",
        status=status,
        status_version=5 if status.is_terminal else 3,
        created_at=created,
        updated_at=created,
        attempt=1,
        started_at=created,
        finished_at=created if status.is_terminal else None,
        tags=frozenset({"bench"}),
        owner="node-1",
        metadata={"schedule": "nightly"},
    )


_TOKEN_ID = "task-TEMPLATE"
_TOKEN_AT = datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def seed(store: SqliteTaskStore, n: int, batch: int = 10_000) -> None:
    """The direct bulk-insert path used for seeding (set-up, not a figure of merit).

    ``create_many`` would encode a million snapshots one by one, which takes longer than
    writing them; here one row per status is encoded by the store's own codec
    (``task_params``) and copied with the id and the instant substituted, then written
    through the store's ``insert_task`` statement in batched transactions. Rows are
    exactly what ``create`` writes: ``check_seed`` compares a sample through ``get``.
    """
    from chongming_task.stores._sqlrows import task_params

    templates = {}
    for status in (TaskStatus.RUNNING, TaskStatus.QUEUED, TaskStatus.SUCCEEDED):
        snap = seeded_snapshot({TaskStatus.RUNNING: 0, TaskStatus.QUEUED: 50}.get(status, 1))
        snap = snap.replace(
            task_id=_TOKEN_ID,
            created_at=_TOKEN_AT,
            updated_at=_TOKEN_AT,
            started_at=_TOKEN_AT,
            finished_at=_TOKEN_AT if status.is_terminal else None,
        )
        templates[status] = task_params(snap, store._instant, store._array)
    token = _TOKEN_AT.isoformat()
    rows: list[dict[str, Any]] = []
    for i in range(n):
        template = templates[status_of(i)]
        created = BASE + timedelta(milliseconds=i)
        task_id = f"task-{i:07d}"
        row = dict(template)
        row["task_id"] = task_id
        row["created_at"] = row["updated_at"] = store._instant(created)
        row["doc"] = template["doc"].replace(_TOKEN_ID, task_id).replace(token, created.isoformat())
        rows.append(row)
        if len(rows) == batch:
            store._create_batch(rows)
            rows = []
    if rows:
        store._create_batch(rows)


def check_seed(store: TaskStore, n: int) -> None:
    for i in [0, 1, 50, n - 1, *random.sample(range(n), min(n, 200))]:
        assert store.get(f"task-{i:07d}") == seeded_snapshot(i), i


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def summary(samples: list[float], unit: float, label: str) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"median {statistics.median(ordered) * unit:8.3f} {label}   p95 {p95 * unit:8.3f} {label}"
    )


# ---------------------------------------------------------------- scale


def scale(tasks: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ct-store-bench-") as directory:
        path = Path(directory) / "big.db"
        with SqliteTaskStore(path) as store:
            start = time.perf_counter()
            seed(store, tasks)
            took = time.perf_counter() - start
            check_seed(store, tasks)
            size = path.stat().st_size / 2**20
            print(
                f"seeded {tasks:,} tasks in {took:.1f} s ({tasks / took:,.0f}/s, direct bulk "
                f"insert), file {size:,.0f} MiB"
            )
            bulk = [seeded_snapshot(i).replace(task_id=f"bulk-{i}") for i in range(20_000)]
            start = time.perf_counter()
            store.create_many(bulk)
            print(
                f"create_many (public bulk path): {len(bulk) / (time.perf_counter() - start):,.0f}"
                " tasks/s"
            )
            query = TaskQuery(statuses=RUNNING, limit=100)
            first = timed(lambda: store.query(query), 1)[0]
            found = store.query(query)
            assert len(found) == min(100, tasks // 100)
            assert all(s.status is TaskStatus.RUNNING for s in found)
            assert found == sorted(found, key=lambda s: s.created_at)
            ps = timed(lambda: store.query(query), 200)
            ids = [f"task-{random.randrange(tasks):07d}" for _ in range(5000)]
            it = iter(ids)
            gets = timed(lambda: store.get(next(it)), len(ids))
            counts = timed(store.count_by_status, 3)
            print(f"SQLite, {tasks:,} tasks:")
            print(f"  ps  (first 100 running)  {summary(ps, 1e3, 'ms')}")
            print(f"      first (cold) call    {first * 1e3:8.3f} ms")
            print(f"  get (by id)              {summary(gets, 1e6, 'us')}")
            print(f"  count_by_status (scan)   {summary(counts, 1e3, 'ms')}")


# ---------------------------------------------------------------- save throughput


def save_rate(
    store: TaskStore, threads: int, seconds: float, batch: int = 1, capacity: int = 2_000
) -> float:
    """Saves per second with ``threads`` writers, each advancing its own 10 tasks.

    Each writer gets ``capacity`` prepared writes; a run that exhausts them ends early.
    """
    run = uuid.uuid4().hex[:6]
    plans: list[list[SnapshotWrite]] = []
    for t in range(threads):
        lane = []
        for k in range(10):
            snap = TaskSnapshot(
                task_id=f"save-{run}-{t}-{k}",
                name="job",
                status=TaskStatus.RUNNING,
                status_version=0,
                created_at=BASE,
                updated_at=BASE,
                tags=frozenset({"io"}),
                owner="node-1",
            )
            store.create(snap)
            lane.append(snap)
        # Writes are prepared before the clock starts: we time the store, not the model.
        plan = []
        for n in range(capacity):
            current = lane[n % 10]
            following = current.replace(
                status_version=current.status_version + 1, updated_at=BASE + timedelta(seconds=n)
            )
            step = Transition(
                task_id=current.task_id,
                from_status=TaskStatus.RUNNING,
                to_status=TaskStatus.RUNNING,
                trigger="bench:save",
                version=following.status_version,
                at=following.updated_at,
            )
            plan.append(SnapshotWrite(following, current.status_version, (step,)))
            lane[n % 10] = following
        plans.append(plan)
    barrier = threading.Barrier(threads + 1)
    stop = threading.Event()
    done = [0] * threads

    def writer(index: int) -> None:
        plan = plans[index]
        barrier.wait()
        for start in range(0, len(plan), batch):
            if stop.is_set():
                return
            if batch == 1:
                write = plan[start]
                store.save(
                    write.snapshot,
                    expect_version=write.expect_version,
                    transitions=write.transitions,
                )
            else:
                assert not any(store.save_many(plan[start : start + batch]))
            done[index] += batch

    workers = [threading.Thread(target=writer, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    began = time.perf_counter()
    stop.wait(seconds)  # measure for a fixed time; a slow store just writes fewer
    stop.set()
    for worker in workers:
        worker.join()
    return sum(done) / (time.perf_counter() - began)


def throughput(name: str, make: Callable[[], TaskStore], seconds: float, note: str) -> None:
    print(f"{name} save throughput ({note}):")
    with make() as store:
        # Warm-up (statements prepared, pages cached) that also sizes the prepared plans.
        rate = max(save_rate(store, 1, 0.3), save_rate(store, 1, 0.3, batch=50))
        capacity = int(rate * seconds * 2) + 500
        for threads in (1, 4):
            rates = [save_rate(store, threads, seconds, capacity=capacity) for _ in range(3)]
            print(
                f"  save,      {threads} thread(s):      {statistics.median(rates):8,.0f} saves/s"
            )
        rates = [save_rate(store, 1, seconds, 50, capacity) for _ in range(3)]
        print(f"  save_many, 1 thread, 50/batch: {statistics.median(rates):8,.0f} saves/s")


def postgres_settings(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN "
            "('synchronous_commit', 'fsync', 'server_version')"
        ).fetchall()
    return ", ".join(f"{name}={setting}" for name, setting in rows)


def postgres(dsn: str, seconds: float) -> None:
    import psycopg

    from chongming_task.stores._postgres import PostgresTaskStore

    schema = f"ct_store_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        separator = "&" if "?" in dsn else "?"
        scoped = f"{dsn}{separator}options={quote(f'-csearch_path={schema}')}"
        throughput(
            "PostgreSQL",
            lambda: PostgresTaskStore(scoped, max_connections=4),
            seconds,
            postgres_settings(dsn),
        )
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000, help="tasks in the scale store")
    parser.add_argument("--seconds", type=float, default=1.5, help="length of one save run")
    parser.add_argument("--postgres", default=os.environ.get("CHONGMING_TEST_POSTGRES"))
    args = parser.parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # progress shows while it runs
    import sqlite3

    print(
        f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs"
    )
    began = time.perf_counter()
    scale(args.tasks)
    with tempfile.TemporaryDirectory(prefix="ct-save-bench-") as directory:
        throughput(
            "SQLite",
            lambda: SqliteTaskStore(Path(directory) / "save.db"),
            args.seconds,
            "WAL, synchronous=NORMAL",
        )
    if args.postgres:
        postgres(args.postgres, args.seconds)
    else:
        print("PostgreSQL: skipped (set CHONGMING_TEST_POSTGRES or pass --postgres DSN)")
    print(f"total {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
