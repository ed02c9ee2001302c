"""The floor of W1 on SQLite, against Huey: ``python bench/floor_sqlite.py [--rounds R]``.

W1's SQLite target is three times Huey's throughput, measured in the same run. This
script measures the most that *any* Python implementation keeping the store contract
could reach on this machine, with nothing of the library in the measured path, and
Huey and the library beside it, rounds alternated:

- the bare semantics of ``bench/floor.py`` (a frozen snapshot copied per transition, a
  transition record, the run's own lock, a queue hand-off to two worker threads);
- on the library's own SQLite schema (the file is made by ``SqliteTaskStore``, then
  only raw ``sqlite3`` touches it), WAL, ``synchronous=NORMAL`` like Huey's side;
- the **fewest commits the contract allows**: ``submit()`` returns with the task
  stored, so each submission is one commit (its row and the ``pending`` and
  ``queued`` records, as Huey's enqueue is one); ``-> starting`` is stored before the
  body, so each start is one commit, and it takes along the previous task's
  ``running`` and terminal records and row (the library's fifth pass does the same);
  a carrier's last terminal write is its own commit;
- every generous shortcut the library cannot take: one writer connection under one
  Python lock (no SQLite busy waits), the ``running`` row update folded into the
  terminal one, documents built by ``json.dumps`` of a flat dict, no leases, no
  events, no supervision, no validation.

The library's own W1 side on SQLite runs in the same rounds, so its distance to the
floor is measured too. If this floor stays below ``3 × Huey``, the target is out of
reach for the library by construction, whatever its code does; the ratio says by how
much. It is evidence for docs/performance.md, not a workload: the library is not
compared against it by a target.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from floor import Record, Run, Snapshot, hand_off, positive_int, step

_INSERT_TASK = (
    "INSERT INTO ct_tasks (task_id, name, status, status_version, created_at, updated_at,"
    " priority, owner, tags, lease_owner, pid, doc)"
    " VALUES (?, ?, ?, ?, ?, ?, 0, 'floor', '[]', 'floor', ?, ?)"
)
_UPDATE_TASK = (
    "UPDATE ct_tasks SET status = ?, status_version = ?, updated_at = ?, doc = ? WHERE task_id = ?"
)
_INSERT_RECORD = "INSERT INTO ct_transitions (task_id, version, doc) VALUES (?, ?, ?)"


def _micros(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def _row_doc(snapshot: Snapshot) -> str:
    """The stored form of a snapshot: every field the library's codec writes.

    The instants a real run sets later (started, finished) stay null, so the floor's
    document is a little shorter than the library's: in the floor's favour.
    """
    return json.dumps(
        {
            "v": 1,
            "task_id": snapshot.task_id,
            "name": snapshot.name,
            "label": None,
            "status": snapshot.status,
            "status_version": snapshot.version,
            "attempt": 1 if snapshot.version >= 2 else 0,
            "max_attempts": 1,
            "created_at": snapshot.created_at.isoformat(),
            "updated_at": snapshot.updated_at.isoformat(),
            "queued_at": snapshot.created_at.isoformat(),
            "started_at": None,
            "first_started_at": None,
            "finished_at": None,
            "progress": None,
            "last_heartbeat_at": None,
            "lease_owner": "floor",
            "lease_until": None,
            "failure": None,
            "outcome": None,
            "tags": [],
            "bucket": None,
            "bucket_key": None,
            "priority": 0,
            "owner": "floor",
            "pid": 0,
            "metadata": {},
        }
    )


def _record_doc(record: Record) -> str:
    return json.dumps(
        {
            "v": 1,
            "task_id": record.task_id,
            "from": record.from_status,
            "to": record.to_status,
            "trigger": record.trigger,
            "version": record.version,
            "at": record.at.isoformat(),
            "actor": None,
            "reason": None,
            "attempt": 1 if record.version >= 2 else 0,
        }
    )


def _record_rows(records: list[Record]) -> list[tuple[object, ...]]:
    return [(r.task_id, r.version, _record_doc(r)) for r in records]


class SqliteFloorStore:
    """One writer connection under one lock; each call below is exactly one commit."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.lock = threading.Lock()
        self.commits = 0

    def create(self, run: Run) -> None:
        """The submission: the row as ``queued`` and both records, durable on return."""
        snapshot = run.snapshot
        row = (
            snapshot.task_id,
            snapshot.name,
            snapshot.status,
            snapshot.version,
            _micros(snapshot.created_at),
            _micros(snapshot.updated_at),
            0,
            _row_doc(snapshot),
        )
        self._transaction([(_INSERT_TASK, [row]), (_INSERT_RECORD, _record_rows(run.records))])

    def commit(self, rows: list[Snapshot], records: list[Record]) -> None:
        """Rows' latest states and their new records, in one transaction."""
        updates = [
            (s.status, s.version, _micros(s.updated_at), _row_doc(s), s.task_id) for s in rows
        ]
        self._transaction([(_UPDATE_TASK, updates), (_INSERT_RECORD, _record_rows(records))])

    def _transaction(self, writes: list[tuple[str, list[tuple[object, ...]]]]) -> None:
        """Each statement with each of its parameter rows, in one committed transaction."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            for statement, rows in writes:
                self.conn.executemany(statement, rows)
            self.conn.execute("COMMIT")
            self.commits += 1

    def count_succeeded(self) -> int:
        with self.lock:
            row = self.conn.execute(
                "SELECT count(*) FROM ct_tasks WHERE status = 'succeeded'"
            ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self.conn.close()


def _submit(store: SqliteFloorStore, index: int) -> Run:
    now = datetime.now(UTC)
    run = Run(Snapshot(f"t{index}", "noop", "pending", 0, now, now))
    step(run, "queued", "submitted")
    store.create(run)
    return run


def _schema_file(directory: Path, *, indexes: bool = True) -> Path:
    """A file with the library's schema, made by the library's own store and closed.

    ``indexes=False`` drops the task table's secondary indexes (what ``ps`` filters and
    sorts with; the unique task id, which ``get`` uses, stays), to show what they cost.
    """
    from chongming_task.stores._sqlite import SqliteTaskStore

    path = directory / "floor.db"
    SqliteTaskStore(path).close()
    if not indexes:
        conn = sqlite3.connect(str(path))
        names = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ct_tasks'"
            " AND sql IS NOT NULL"
        ).fetchall()
        for (name,) in names:
            conn.execute(f'DROP INDEX "{name}"')  # names read from the schema, not input
        conn.commit()
        conn.close()
    return path


class _SqliteCarrier:
    """A worker's side: ``-> starting`` committed before the body, the previous end along."""

    def __init__(self, store: SqliteFloorStore) -> None:
        self.store = store
        self.rows: list[Snapshot] = []
        self.records: list[Record] = []

    def carry(self, run: Run) -> None:
        starting, record = step(run, "starting", "admitted")
        self.store.commit([*self.rows, starting], [*self.records, record])
        _, running = step(run, "running", "started")
        done, end = step(run, "succeeded", "returned")
        self.rows, self.records = [done], [running, end]

    def finish(self) -> None:
        """The last end this worker carried, in a commit of its own."""
        if self.rows:
            self.store.commit(self.rows, self.records)
            self.rows, self.records = [], []


def floor_round(tasks: int, slots: int = 2, *, indexes: bool = True) -> tuple[float, float]:
    """Tasks per second and commits per task, first submission to the last terminal commit."""
    with tempfile.TemporaryDirectory(prefix="ct-floor-sqlite-") as tmp:
        store = SqliteFloorStore(_schema_file(Path(tmp), indexes=indexes))
        try:
            elapsed = hand_off(
                tasks, slots, lambda index: _submit(store, index), lambda: _SqliteCarrier(store)
            )
            succeeded = store.count_succeeded()
            commits = store.commits
        finally:
            store.close()
    if succeeded != tasks:
        raise RuntimeError(f"floor: expected {tasks} succeeded rows, the file holds {succeeded}")
    return tasks / elapsed, commits / tasks


def ours_round(tasks: int) -> float:
    """The library's own W1 side on SQLite, as ``bench/workloads/w1_throughput.py`` runs it."""
    from workloads.w1_throughput import Throughput

    return Throughput()._ours("sqlite", tasks, None, None)["tasks_per_s"]


def huey_round(tasks: int) -> float:
    """Huey on a SQLite file, 2 worker threads, synchronous=NORMAL: W1's durable peer."""
    from workloads.w1_throughput import Throughput

    return Throughput()._huey(tasks, "NORMAL")["tasks_per_s"]


def _note(commits: list[float], rate: float, commits_per_task: float) -> float:
    """Keep a round's commits per task (the last round's is printed) and pass its rate on."""
    commits.append(commits_per_task)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=positive_int, default=2000, help="tasks a round")
    parser.add_argument("--rounds", type=positive_int, default=5, help="rounds of each side")
    parser.add_argument("--no-huey", action="store_true", help="leave Huey out")
    parser.add_argument(
        "--no-indexes",
        action="store_true",
        help="the floor without the task table's secondary indexes (what they cost)",
    )
    args = parser.parse_args()
    indexes = not args.no_indexes
    commits: list[float] = []
    sides: dict[str, Callable[[int], float]] = {
        "floor": lambda n: _note(commits, *floor_round(n, indexes=indexes)),
        "ours": ours_round,
    }
    if not args.no_huey:
        try:
            import huey
        except ImportError:
            parser.error("huey is not installed: pip install -e '.[bench]' (or pass --no-huey)")
        sides["huey"] = huey_round
    for side in sides.values():  # warm-up, not counted
        side(max(1, args.tasks // 10))
    figures: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):  # A B A B ...
        for name, side in sides.items():
            figures[name].append(side(args.tasks))
    floor = statistics.median(figures["floor"])
    schema = "the library's schema" if indexes else "no secondary index"
    print(
        f"floor of W1 on SQLite ({schema}): {floor:,.0f} tasks/s median "
        f"({min(figures['floor']):,.0f}-{max(figures['floor']):,.0f}) over {args.rounds} rounds "
        f"of {args.tasks}, {commits[-1]:.3f} commits a task"
    )
    ours = statistics.median(figures["ours"])
    print(
        f"chongming-task on SQLite: {ours:,.0f} tasks/s median "
        f"({min(figures['ours']):,.0f}-{max(figures['ours']):,.0f}): "
        f"{ours / floor:.2f}x the floor"
    )
    if "huey" in figures:
        huey = statistics.median(figures["huey"])
        print(
            f"huey on SQLite: {huey:,.0f} tasks/s median "
            f"({min(figures['huey']):,.0f}-{max(figures['huey']):,.0f}), same rounds alternated"
        )
        print(
            f"floor / huey: {floor / huey:.2f}x; the target, 3x huey, is {3 * huey:,.0f} tasks/s: "
            f"the floor reaches {floor / (3 * huey):.0%} of it"
        )


if __name__ == "__main__":
    main()
