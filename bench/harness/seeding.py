"""Populations of stored tasks for W5, written as fast as the store allows.

Seeding is set-up, never timed. ``store.create`` (the public contract) writes one
task per transaction, which would take many minutes for a million rows, so the SQL
stores are fed in bulk with rows encoded by the store's own codec.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness import ours, pg
from harness.runner import stderr_log

DEAD_OWNER = "dead-node:1"


def task_id(i: int) -> str:
    """The id of the i-th seeded task."""
    return f"w5-{i:07d}"


def probe(kind: str) -> str | None:
    """Why seeding a ``kind`` store cannot work here, or None."""
    return ours.probe("chongming_task.model:TaskSnapshot", "chongming_task.states:TaskStatus")


def _status_for(i: int) -> str:
    """1% running, 1% queued, the rest succeeded, spread evenly over the ids."""
    r = i % 100
    return "running" if r == 0 else "queued" if r == 50 else "succeeded"


def snapshots(n: int, status_of: Callable[[int], str] = _status_for) -> Iterator[Any]:
    """``n`` snapshots in id order, created one millisecond apart in the past."""
    snapshot_cls = ours.require("chongming_task.model", "TaskSnapshot")
    status_cls = ours.require("chongming_task.states", "TaskStatus")
    base = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    expired = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    for i in range(n):
        status = status_cls(status_of(i))
        created = base + dt.timedelta(milliseconds=i)
        running = status == status_cls.RUNNING
        yield snapshot_cls(
            task_id=task_id(i),
            name="seeded",
            status=status,
            status_version={"queued": 2, "running": 4}.get(status.value, 5),
            created_at=created,
            updated_at=created,
            attempt=0 if status.value == "queued" else 1,
            queued_at=created,
            started_at=None if status.value == "queued" else created,
            finished_at=created if status.is_terminal else None,
            owner=DEAD_OWNER,
            lease_owner=DEAD_OWNER if running or status.value == "queued" else None,
            lease_until=expired if running or status.value == "queued" else None,
            tags=frozenset({"seed"}),
        )


BATCH = 20_000
#: Columns of a task row in both SQL stores, in the order of their insert statement.
_COLUMNS = (
    "task_id, name, status, status_version, created_at, updated_at, priority, bucket, "
    "owner, meta_schedule, meta_pipeline, tags, progress, heartbeat_at, lease_owner, "
    "lease_until, pid, doc"
)


_TEMPLATE_ID = "w5-TEMPLATE"


def _row_params(store: Any, snap: Any) -> dict[str, Any]:
    """The store's own row encoding of ``snap`` (private helpers, used read-only)."""
    rows = ours.require("chongming_task.stores._sqlrows")
    params: dict[str, Any] = rows.task_params(snap, store._instant, store._array)
    params["transitions"] = "[]"
    return params


def _fast_rows(store: Any, n: int, status_of: Callable[[int], str]) -> Iterator[list[Any]]:
    """Batches of row parameters, ``n`` in all, identical to ``_row_params`` of each snapshot.

    Encoding a million snapshots one by one costs more than writing them, so one
    template row per status is encoded by the store's codec and copied with the task id
    and the instants substituted (each appears in the template as a unique token).
    """
    templates: dict[str, tuple[dict[str, Any], str]] = {}
    first = next(snapshots(1, status_of))
    for status in {status_of(i) for i in range(min(n, 100))}:
        snap = next(snapshots(1, lambda _i, status=status: status))
        snap = dataclasses.replace(snap, task_id=_TEMPLATE_ID)
        templates[status] = (_row_params(store, snap), snap.created_at.isoformat())
    base = first.created_at
    batch: list[Any] = []
    for i in range(n):
        params, token = templates[status_of(i)]
        created = base + dt.timedelta(milliseconds=i)
        task = task_id(i)
        row = dict(params)
        row["task_id"] = task
        row["created_at"] = row["updated_at"] = store._instant(created)
        row["doc"] = params["doc"].replace(_TEMPLATE_ID, task).replace(token, created.isoformat())
        batch.append(row)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def seed(
    store: Any, n: int, status_of: Callable[[int], str] = _status_for, *, dsn: str = ""
) -> None:
    """Write ``n`` seeded snapshots into ``store`` as fast as its kind allows.

    The rows are encoded by the store's own codec (``_sqlrows.task_params``), so they are
    exactly what ``create`` would have written; only the transport differs: batched
    ``executemany`` transactions for SQLite, ``COPY`` for PostgreSQL, ``create`` for
    anything else.
    """
    t0 = time.perf_counter()
    kind = store.__class__.__name__
    done = 0
    if kind == "SqliteTaskStore" or (kind == "PostgresTaskStore" and dsn):
        for params in _fast_rows(store, n, status_of):
            if kind == "SqliteTaskStore":
                _insert_sqlite(store, params)
            else:
                _copy_postgres(dsn, params)
            done += len(params)
            if done % 200_000 == 0:
                rate = done / (time.perf_counter() - t0)
                stderr_log(f"  seeded {done:,}/{n:,} ({rate:,.0f}/s)")
    else:
        for snap in snapshots(n, status_of):
            store.create(snap)
    if kind == "PostgresTaskStore" and dsn:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE ct_tasks")
    stderr_log(f"  seeded {n:,} tasks in {time.perf_counter() - t0:.1f} s")


def _insert_sqlite(store: Any, params: list[dict[str, Any]]) -> None:
    sql = store._sql["insert_task"]
    store._run(lambda cur: cur.executemany(sql, params), write=True, atomic=True)


def _copy_postgres(dsn: str, params: list[dict[str, Any]]) -> None:
    import psycopg

    names = [c.strip() for c in _COLUMNS.split(",")]
    with (
        psycopg.connect(dsn) as conn,
        conn.cursor() as cur,
        cur.copy(f"COPY ct_tasks ({_COLUMNS}) FROM STDIN") as copy,
    ):
        for p in params:
            copy.write_row([p[name] for name in names])


def open_seeded(kind: str, n: int, dsn: str | None) -> tuple[Any, Callable[[], None]]:
    """A ``kind`` store holding the big population, and the function that removes it."""
    cls = ours.require(*ours.STORE_CLASSES[kind].split(":"))
    if kind == "sqlite":
        tmp = tempfile.TemporaryDirectory(prefix="ct-bench-w5-")
        store = cls(str(Path(tmp.name) / "big.db"))
        cleanup: Callable[[], None] = tmp.cleanup
        schema_dsn = ""
    else:
        assert dsn is not None
        import uuid

        schema = f"ct_bench_w5_{uuid.uuid4().hex[:10]}"
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        schema_dsn = pg.dsn_with_schema(dsn, schema)
        store = cls(schema_dsn)

        def cleanup() -> None:
            pg.drop_schema(dsn, schema)

    try:
        seed(store, n, dsn=schema_dsn)
    except BaseException:
        store.close()
        cleanup()
        raise
    return store, cleanup


def seed_dead_owner(path: Path, n: int) -> None:
    """A SQLite file whose ``n`` tasks belong to a crashed owner: half running, half queued."""
    cls = ours.require(*ours.STORE_CLASSES["sqlite"].split(":"))
    store = cls(str(path))
    try:
        seed(store, n, lambda i: "running" if i % 2 == 0 else "queued")
    finally:
        store.close()
