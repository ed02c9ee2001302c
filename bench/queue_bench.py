"""The work queue's figures: enqueue -> start latency, throughput with 1/2/4 workers, recovery.

Run ``make bench-queue`` (or ``python bench/queue_bench.py``; ``--quick`` for a short
look). PostgreSQL comes from ``CHONGMING_TEST_POSTGRES`` (or ``--postgres DSN``); every
measurement gets a fresh schema, dropped afterwards. procrastinate (the ``bench``
extra) is measured in the same run, on the same server, with the same number of
worker processes and slots.

What is measured, and how (performance claims live here, never in tests):

* **latency**: one ``chongming-task worker`` process, idle; the client enqueues one
  no-op task at a time (``Client.enqueue``), waits for its end, pauses, and repeats.
  A sample is the time from the task's ``pending -> queued`` transition (stamped by
  the client before its commit) to its ``starting -> running`` transition (stamped by
  the worker just before the body is called), both read from the stored history, on
  one machine's wall clock. PostgreSQL wakes the worker by LISTEN/NOTIFY; SQLite by
  reading the file's change counter when the database's files are written (inotify,
  Linux; the counter is also read every 0.25 s) or every 10 ms where they cannot be
  watched.
* **throughput** (rounds interleaved, the order alternating; medians): N no-op tasks
  enqueued first (``enqueue_many``), then K worker
  processes (4 slots each) started; the figure is N over the time from the first
  task's start to the last task's end, read from the store (``first_started_at``,
  ``finished_at``), so process start-up is outside the window for the first worker,
  as it is for procrastinate, whose window comes from ``procrastinate_events`` (first
  ``started`` to last ``succeeded``) with K ``run_worker(concurrency=4)`` processes.
  While a run goes on, the bench polls both sides the same cheap way: one
  ``count(*)`` of the unfinished rows every 50 ms on one connection opened before the
  workers start and reused (``Poller``), so neither side pays a new connection per
  poll (an earlier version opened one per poll on procrastinate's side only).
* **cpu**: worker CPU per task, both sides: one worker process (4 slots) is started
  and warmed up (20 tasks), its user + sys time is read from ``/proc/PID/stat``, N
  no-op tasks are enqueued, and when the last has finished the time is read again;
  the figure is the difference over N (start-up excluded). The same worker then sits
  idle for ``IDLE_SECONDS``; its CPU over that time, as a share of one core, is the
  idle figure (ours on PostgreSQL and SQLite, procrastinate on PostgreSQL).
* **recovery**: a worker with ``--lease-ttl L`` runs a task that never ends; a second
  worker (another bucket) reconciles every L/2 by default. The first is SIGKILLed;
  the figure is the time from the kill to the stored ``running -> lost`` transition,
  against the bound L + L/2 (lease TTL plus one reconcile period).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "src"))

from harness import pg  # noqa: E402
from harness.core import Unavailable  # noqa: E402
from peers import procrastinate_peer  # noqa: E402

from chongming_task import Client, TaskStatus  # noqa: E402
from chongming_task.policies import BucketPolicy  # noqa: E402
from chongming_task.stores._base import TaskStore  # noqa: E402

TASKS = str(BENCH / "peers" / "queue_tasks.py")
SLOTS = 4  # per worker process, ours and procrastinate's
DEADLINE = 300.0


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(BENCH)])
    return env


def _until(condition: Callable[[], Any], timeout: float = DEADLINE, step: float = 0.005) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not finish in time")
        time.sleep(step)


@contextlib.contextmanager
def _workers(
    db: str,
    count: int,
    *,
    log_dir: Path,
    options: tuple[str, ...] = (),
    worker: tuple[str, ...] = (),
    name: str = "w",
) -> Iterator[list[Any]]:
    """``count`` ``chongming-task worker`` processes (global ``options``, ``worker`` ones)."""
    procs = []
    for i in range(count):
        owner = f"bench-{name}{i}"
        with (log_dir / f"{owner}.log").open("ab") as out:
            command = [sys.executable, "-m", "chongming_task.cli", "--db", db, "--owner", owner]
            command += [*options, "worker", "--tasks", TASKS, "--log-level", "warning", *worker]
            procs.append(
                subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=_env())
            )
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _open(db: str) -> TaskStore:
    if db.startswith(("postgres://", "postgresql://")):
        from chongming_task import PostgresTaskStore

        return PostgresTaskStore(db)
    from chongming_task import SqliteTaskStore

    return SqliteTaskStore(db)


class Poller:
    """One ``count(*)`` query on one reused PostgreSQL connection: the bench's wait."""

    def __init__(self, dsn: str, sql: str) -> None:
        import psycopg

        self._conn = psycopg.connect(dsn, autocommit=True)
        self._sql = sql

    def __call__(self) -> int:
        row = self._conn.execute(self._sql).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self._conn.close()


#: Our unfinished rows, counted as procrastinate's are (``REMAINING_SQL``).
OURS_REMAINING_SQL = "SELECT count(*) FROM ct_tasks WHERE status NOT IN ({})".format(
    ", ".join(f"'{s.value}'" for s in TaskStatus if s.is_terminal)
)

IDLE_SECONDS = 10.0


def _cpu_seconds(pid: int) -> float:
    """User + sys CPU of process ``pid`` (all its threads) so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ----------------------------------------------------------------- latency


def latency(db: str, samples: int, log_dir: Path) -> dict[str, float]:
    """Enqueue -> body start of one task at a time on an idle worker (ms)."""
    slots = ("--max-parallel", str(SLOTS))
    with _open(db) as store, _workers(db, 1, worker=slots, log_dir=log_dir):
        client = Client(store)
        _until(store.list_workers, timeout=60)
        for _ in range(5):  # warm-up: imports, connections, prepared statements
            client.enqueue("noop").wait(60)
        found: list[float] = []
        claimed: list[float] = []  # queued -> starting: commit, wake-up, claim
        for _ in range(samples):
            handle = client.enqueue("noop")
            handle.wait(60)
            at = {t.to_status: t.at for t in handle.transitions}
            queued = at[TaskStatus.QUEUED]
            found.append((at[TaskStatus.RUNNING] - queued).total_seconds() * 1000)
            claimed.append((at[TaskStatus.STARTING] - queued).total_seconds() * 1000)
            time.sleep(0.05)  # unloaded: the worker is back waiting before the next one
    return {
        "p50_ms": statistics.median(found),
        "p50_to_starting_ms": statistics.median(claimed),
        "p90_ms": _pct(found, 0.9),
        "p99_ms": _pct(found, 0.99),
        "min_ms": min(found),
        "samples": len(found),
    }


def breakdown(dsn: str, samples: int) -> dict[str, float]:
    """Where PostgreSQL's enqueue -> claim time goes, in one process (ms, medians).

    ``Client.enqueue`` (the task's commit, then its NOTIFY), the wake-up of a second
    store handle waiting in ``wait_for_work`` (its LISTEN thread), and that
    handle's ``claim_queued`` of the task (one transaction).
    """
    import threading
    from datetime import timedelta

    parts: dict[str, list[float]] = {"enqueue": [], "wake": [], "claim": []}
    with _open(dsn) as client_store, _open(dsn) as worker_store:
        client = Client(client_store)

        def lease() -> datetime:
            return datetime.now(UTC) + timedelta(seconds=30)

        worker_store.wait_for_work(0.01)  # LISTEN in place
        for _ in range(samples):
            got: dict[str, float] = {}

            def wait_and_claim(got: dict[str, float] = got) -> None:
                worker_store.claim_queued("w", buckets=None, limit=1, lease_until=lease())
                worker_store.wait_for_work(5.0)
                got["woke"] = time.perf_counter()
                worker_store.claim_queued("w", buckets=None, limit=1, lease_until=lease())
                got["claimed"] = time.perf_counter()

            waiter = threading.Thread(target=wait_and_claim)
            waiter.start()
            time.sleep(0.05)  # the waiter is waiting
            t0 = time.perf_counter()
            client.enqueue("noop")
            t1 = time.perf_counter()
            waiter.join()
            parts["enqueue"].append(t1 - t0)
            parts["wake"].append(got["woke"] - t1)
            parts["claim"].append(got["claimed"] - got["woke"])
    return {f"{name}_ms": statistics.median(values) * 1000 for name, values in parts.items()}


def store_calls(dsn: str, tasks: int) -> dict[str, float]:
    """Store round trips per task of a worker (in this process), by the calling method.

    Counts ``PostgresTaskStore._run`` calls (one transaction or statement each) while
    an in-process :class:`~chongming_task.worker.Worker` with 4 slots runs ``tasks``
    queued no-op tasks, by the store method that made them.
    """
    import collections
    import traceback

    from peers.queue_tasks import noop

    from chongming_task import Controller, PostgresTaskStore
    from chongming_task.worker import Worker

    counts: collections.Counter[str] = collections.Counter()
    original = PostgresTaskStore._run

    def counted(self: Any, fn: Any, *, write: bool, atomic: bool = False) -> Any:
        if counting:  # named after the innermost public store method on the stack
            frames = reversed(traceback.extract_stack(limit=8)[:-1])
            name = next(
                (f.name for f in frames if f.name[0] != "_" and hasattr(TaskStore, f.name)),
                "other",
            )
            counts[name] += 1
        return original(self, fn, write=write, atomic=atomic)

    counting = False
    PostgresTaskStore._run = counted  # type: ignore[method-assign]
    try:
        with _open(dsn) as client_store, _open(dsn) as worker_store:
            Client(client_store).enqueue_many("noop", [() for _ in range(tasks)])
            controller = Controller(store=worker_store, owner="counted")
            controller.register("noop", noop)
            worker = Worker(controller, max_parallel=SLOTS)
            counting = True
            worker.start()
            _until(
                lambda: client_store.count_by_status().get(TaskStatus.SUCCEEDED, 0) >= tasks,
                step=0.05,
            )
            counting = False
            worker.shutdown(timeout=10)
    finally:
        PostgresTaskStore._run = original  # type: ignore[method-assign]
    counts.pop("count_by_status", None)  # the benchmark's own polling
    return {name: n / tasks for name, n in counts.most_common()}


# ----------------------------------------------------------------- throughput


def throughput_ours(dsn: str, workers: int, tasks: int, log_dir: Path) -> dict[str, float]:
    with _open(dsn) as store:
        client = Client(store)
        for start in range(0, tasks, 500):
            client.enqueue_many("noop", [() for _ in range(min(500, tasks - start))])
        poll = Poller(dsn, OURS_REMAINING_SQL)
        try:
            with _workers(dsn, workers, worker=("--max-parallel", str(SLOTS)), log_dir=log_dir):
                _until(lambda: poll() == 0, step=0.05)
        finally:
            poll.close()
        done = store.query_heads()
        assert len(done) == tasks
        snapshots = store.query()
    first = min(s.first_started_at or s.started_at for s in snapshots)  # type: ignore[type-var]
    last = max(s.finished_at for s in snapshots)  # type: ignore[type-var]
    seconds = (last - first).total_seconds()  # type: ignore[operator]
    owners = {s.owner for s in snapshots}
    return {"tasks_per_s": tasks / seconds, "seconds": seconds, "workers_used": len(owners)}


def throughput_procrastinate(dsn: str, workers: int, tasks: int) -> dict[str, float]:
    procrastinate_peer.prepare(dsn, tasks)
    env = _env()
    # Imported, not run as __main__: procrastinate wants its app in an importable module.
    code = f"from peers.procrastinate_peer import worker; worker({dsn!r}, {SLOTS})"
    poll = Poller(dsn, procrastinate_peer.REMAINING_SQL)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(workers)]
    try:
        _until(lambda: poll() == 0, step=0.05)
        for proc in procs:
            proc.wait(60)
    finally:
        poll.close()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    succeeded, seconds = procrastinate_peer.window(dsn)
    assert succeeded == tasks, (succeeded, tasks)
    return {"tasks_per_s": tasks / seconds, "seconds": seconds}


# ----------------------------------------------------------------- cpu


def _cpu_figures(
    pid: int, enqueue: Callable[[int], None], remaining: Callable[[], int], tasks: int
) -> dict[str, float]:
    """CPU per task of worker ``pid`` over ``tasks`` tasks, then its idle share of a core."""
    enqueue(20)  # warm-up: imports, connections, prepared statements
    _until(lambda: remaining() == 0, timeout=120)
    before = _cpu_seconds(pid)
    enqueue(tasks)
    _until(lambda: remaining() == 0, step=0.05)
    busy = _cpu_seconds(pid) - before
    time.sleep(1.0)  # the last task's bookkeeping is over
    before, started = _cpu_seconds(pid), time.monotonic()
    time.sleep(IDLE_SECONDS)
    idle = (_cpu_seconds(pid) - before) / (time.monotonic() - started)
    return {"cpu_ms_per_task": busy / tasks * 1000, "idle_core_share": idle}


def cpu_ours(db: str, tasks: int, log_dir: Path) -> dict[str, float]:
    with (
        _open(db) as store,
        _workers(
            db, 1, worker=("--max-parallel", str(SLOTS)), log_dir=log_dir, name="cpu"
        ) as procs,
    ):
        client = Client(store)
        _until(store.list_workers, timeout=60)

        def enqueue(n: int) -> None:
            for start in range(0, n, 500):
                client.enqueue_many("noop", [() for _ in range(min(500, n - start))])

        def remaining() -> int:
            counts = store.count_by_status()
            return sum(n for status, n in counts.items() if not status.is_terminal)

        return _cpu_figures(procs[0].pid, enqueue, remaining, tasks)


def cpu_procrastinate(dsn: str, tasks: int) -> dict[str, float]:
    procrastinate_peer.prepare(dsn, 0)
    code = f"from peers.procrastinate_peer import worker; worker({dsn!r}, {SLOTS}, wait=True)"
    proc = subprocess.Popen([sys.executable, "-c", code], env=_env())
    poll = Poller(dsn, procrastinate_peer.REMAINING_SQL)
    try:
        return _cpu_figures(
            proc.pid, lambda n: procrastinate_peer.prepare(dsn, n, schema=False), poll, tasks
        )
    finally:
        poll.close()
        proc.kill()
        proc.wait(5)


# ----------------------------------------------------------------- recovery


def recovery(db: str, lease_ttl: float, rounds: int, log_dir: Path) -> list[dict[str, float]]:
    policy = BucketPolicy(num_buckets=2)
    key = next(k for k in (f"k{i}" for i in range(100)) if policy.bucket_for(k) == 0)
    worker_args = ("--max-parallel", "1", "--lease-ttl", str(lease_ttl))

    def owner(bucket: str, name: str) -> contextlib.AbstractContextManager[list[Any]]:
        """One worker owning ``bucket`` of the two."""
        return _workers(
            db,
            1,
            options=("--num-buckets", "2", "--owned-buckets", bucket),
            worker=worker_args,
            log_dir=log_dir,
            name=name,
        )

    results = []
    for _ in range(rounds):
        gate = log_dir / f"gate-{uuid.uuid4().hex}"
        with _open(db) as store:
            client = Client(store, num_buckets=2)
            with owner("1", "reconciler"), owner("0", "victim") as (victim,):
                handle = client.enqueue("hold", str(gate), bucket_key=key)
                _until(lambda h=handle: h.status is TaskStatus.RUNNING, timeout=60)
                time.sleep(lease_ttl / 3)  # somewhere inside a lease, as a real crash is
                killed = datetime.now(UTC)
                victim.send_signal(signal.SIGKILL)
                victim.wait(10)
                _until(lambda h=handle: h.status is TaskStatus.LOST, timeout=10 * lease_ttl)
                lost = next(t.at for t in handle.transitions if t.to_status is TaskStatus.LOST)
                gate.write_text("done")
        results.append(
            {
                "seconds": (lost - killed).total_seconds(),
                "bound_s": lease_ttl * 1.5,
            }
        )
    return results


# ----------------------------------------------------------------- main


def _sqlite_db(tmp: Path, name: str) -> str:
    return str(tmp / f"{name}.db")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=None, help="DSN (default CHONGMING_TEST_POSTGRES)")
    parser.add_argument("--quick", action="store_true", help="fewer samples and tasks")
    parser.add_argument("--tasks", type=int, default=None, help="tasks per throughput run")
    parser.add_argument("--rounds", type=int, default=None, help="throughput rounds per side")
    parser.add_argument(
        "--only",
        choices=("calls", "latency", "throughput", "cpu", "recovery"),
        action="append",
        default=None,
        help="measure only these (repeatable; default all)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    samples = 30 if args.quick else 200
    tasks = args.tasks or (500 if args.quick else 3000)
    lease_ttl, rounds = 2.0, (1 if args.quick else 3)
    args.rounds = args.rounds or (1 if args.quick else 3)
    only = set(args.only or ("calls", "latency", "throughput", "cpu", "recovery"))
    base = args.postgres or pg.base_dsn()
    try:
        pg.check(base)
    except Unavailable as exc:
        print(f"PostgreSQL unavailable: {exc}", file=sys.stderr)
        return 1
    figures: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "procrastinate": procrastinate_peer.procrastinate_version(),
        "postgres": pg.server_settings(base),
        "slots_per_worker": SLOTS,
        "tasks_per_run": tasks,
    }
    with tempfile.TemporaryDirectory(prefix="queue-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if "calls" in only:
            with pg.fresh_schema(base) as dsn:
                figures["store_calls_per_task"] = calls = store_calls(dsn, min(tasks, 1000))
            shown = ", ".join(f"{name} {n:.2f}" for name, n in calls.items())
            print(f"store round trips per task (one worker, PostgreSQL): {shown}", flush=True)
        if "latency" in only:
            with pg.fresh_schema(base) as dsn:
                figures["latency_postgres"] = latency(dsn, samples, tmp)
            print("latency PostgreSQL (NOTIFY):", _fmt(figures["latency_postgres"]), flush=True)
            with pg.fresh_schema(base) as dsn:
                figures["breakdown_postgres"] = parts = breakdown(dsn, samples)
            print(
                "  in one process: "
                + ", ".join(f"{k[:-3]} {v:.2f} ms" for k, v in parts.items())
                + " (medians)",
                flush=True,
            )
            figures["latency_sqlite"] = latency(_sqlite_db(tmp, "latency"), samples, tmp)
            print("latency SQLite (file watch):", _fmt(figures["latency_sqlite"]), flush=True)
        for workers in (1, 2, 4) if "throughput" in only else ():
            runs: dict[str, list[float]] = {"ours": [], "procrastinate": []}
            for round_ in range(args.rounds):
                # Interleaved, the order alternating: a machine that slows down or
                # speeds up during the run charges both sides alike.
                sides = ["ours", "procrastinate"] if round_ % 2 == 0 else ["procrastinate", "ours"]
                for side in sides:
                    with pg.fresh_schema(base) as dsn:
                        if side == "ours":
                            found = throughput_ours(dsn, workers, tasks, tmp)
                        else:
                            found = throughput_procrastinate(dsn, workers, tasks)
                    runs[side].append(found["tasks_per_s"])
            ours, peer = statistics.median(runs["ours"]), statistics.median(runs["procrastinate"])
            figures[f"throughput_{workers}"] = {
                "ours_median": ours,
                "procrastinate_median": peer,
                "rounds": runs,
            }
            shown = {side: " ".join(f"{v:.0f}" for v in values) for side, values in runs.items()}
            print(
                f"throughput, {workers} worker(s): ours {ours:.0f} tasks/s, procrastinate "
                f"{peer:.0f} tasks/s ({ours / peer:.2f}x; medians of rounds: ours "
                f"{shown['ours']}, procrastinate {shown['procrastinate']})",
                flush=True,
            )
        if "cpu" in only:
            with pg.fresh_schema(base) as dsn:
                ours = figures["cpu_ours_postgres"] = cpu_ours(dsn, tasks, tmp)
            with pg.fresh_schema(base) as dsn:
                peer = figures["cpu_procrastinate"] = cpu_procrastinate(dsn, tasks)
            lite = figures["cpu_ours_sqlite"] = cpu_ours(_sqlite_db(tmp, "cpu"), tasks, tmp)
            print(
                f"worker CPU per task (PostgreSQL): ours {ours['cpu_ms_per_task']:.3f} ms, "
                f"procrastinate {peer['cpu_ms_per_task']:.3f} ms "
                f"({ours['cpu_ms_per_task'] / peer['cpu_ms_per_task']:.2f}x); "
                f"SQLite ours {lite['cpu_ms_per_task']:.3f} ms",
                flush=True,
            )
            print(
                f"idle worker, share of one core: ours PostgreSQL "
                f"{ours['idle_core_share']:.2%}, SQLite {lite['idle_core_share']:.2%}; "
                f"procrastinate {peer['idle_core_share']:.2%}",
                flush=True,
            )
        if "recovery" in only:
            with pg.fresh_schema(base) as dsn:
                figures["recovery_postgres"] = recovery(dsn, lease_ttl, rounds, tmp)
            db = _sqlite_db(tmp, "recovery")
            figures["recovery_sqlite"] = recovery(db, lease_ttl, rounds, tmp)
        for store in ("postgres", "sqlite") if "recovery" in only else ():
            shown = ", ".join(f"{r['seconds']:.2f}s" for r in figures[f"recovery_{store}"])
            print(f"recovery {store}: {shown} (bound {lease_ttl * 1.5:g}s)", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return 0


def _fmt(found: dict[str, float]) -> str:
    return (
        f"p50 {found['p50_ms']:.2f} ms, p90 {found['p90_ms']:.2f} ms, "
        f"p99 {found['p99_ms']:.2f} ms ({found['samples']:.0f} samples; "
        f"p50 to starting {found['p50_to_starting_ms']:.2f} ms)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
