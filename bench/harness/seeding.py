"""Populations of stored tasks for W5, written as fast as the store allows.

Seeding is set-up, never timed. The public ``create_many`` encodes every snapshot,
which costs more than writing it (about 100 s per million rows here); the fast path
encodes one template row per status with the store's own codec, substitutes id and
instants per row, and hands the rows to the store's own batch step. A read-back
check proves the rows are what ``create`` would have stored.
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
    return ours.probe("chongming_task._model:TaskSnapshot", "chongming_task.states:TaskStatus")


def _status_for(i: int) -> str:
    """1% running, 1% queued, the rest succeeded, spread evenly over the ids."""
    r = i % 100
    return "running" if r == 0 else "queued" if r == 50 else "succeeded"


_BASE = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(days=1)
_EXPIRED = _BASE + dt.timedelta(hours=23)


def snapshot_at(i: int, status_name: str) -> Any:
    """The i-th seeded snapshot (deterministic: created ``i`` ms after a fixed base)."""
    snapshot_cls = ours.require("chongming_task._model", "TaskSnapshot")
    status = ours.require("chongming_task.states", "TaskStatus")(status_name)
    created = _BASE + dt.timedelta(milliseconds=i)
    leased = status_name in ("running", "queued")
    return snapshot_cls(
        task_id=task_id(i),
        name="seeded",
        status=status,
        status_version={"queued": 2, "running": 4}.get(status_name, 5),
        created_at=created,
        updated_at=created,
        attempt=0 if status_name == "queued" else 1,
        queued_at=created,
        started_at=None if status_name == "queued" else created,
        finished_at=created if status.is_terminal else None,
        owner=DEAD_OWNER,
        lease_owner=DEAD_OWNER if leased else None,
        lease_until=_EXPIRED if leased else None,
        tags=frozenset({"seed"}),
    )


def snapshots(n: int, status_of: Callable[[int], str] = _status_for) -> Iterator[Any]:
    """``n`` snapshots in id order, created one millisecond apart in the past."""
    for i in range(n):
        yield snapshot_at(i, status_of(i))


BATCH = 20_000

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
    for status in {status_of(i) for i in range(min(n, 100))}:
        snap = dataclasses.replace(snapshot_at(0, status), task_id=_TEMPLATE_ID)
        templates[status] = (_row_params(store, snap), snap.created_at.isoformat())
    batch: list[Any] = []
    for i in range(n):
        params, token = templates[status_of(i)]
        created = _BASE + dt.timedelta(milliseconds=i)
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


def seed(store: Any, n: int, status_of: Callable[[int], str] = _status_for) -> None:
    """Write ``n`` seeded snapshots into ``store``, then check a sample reads back exactly.

    Fast path: rows from ``_fast_rows`` (the store's own codec, substituted per row)
    handed to the store's ``create_many`` batch step (``executemany`` on SQLite, ``COPY``
    on PostgreSQL). If the store has no such step, the public ``create_many`` is used.
    """
    t0 = time.perf_counter()
    create_batch = getattr(store, "_create_batch", None)
    if create_batch is None or not hasattr(store, "_instant"):
        store.create_many(snapshots(n, status_of))
    else:
        done = 0
        for params in _fast_rows(store, n, status_of):
            done += create_batch(params)
            if done % 200_000 == 0:
                rate = done / (time.perf_counter() - t0)
                stderr_log(f"  seeded {done:,}/{n:,} ({rate:,.0f}/s)")
    _verify(store, n, status_of)
    stderr_log(f"  seeded {n:,} tasks in {time.perf_counter() - t0:.1f} s")


def _verify(store: Any, n: int, status_of: Callable[[int], str]) -> None:
    """Sampled tasks read back equal to their snapshots, and the count is right."""
    for i in {0, 1, n // 2, n - 1}:
        expected, got = snapshot_at(i, status_of(i)), store.get(task_id(i))
        if got != expected:
            raise RuntimeError(f"seeding failed: {task_id(i)} reads back {got!r}, not {expected!r}")
    total = sum(store.count_by_status().values())
    if total != n:
        raise RuntimeError(f"seeding failed: the store holds {total} tasks, expected {n}")


def open_seeded(kind: str, n: int, dsn: str | None) -> tuple[Any, Callable[[], None]]:
    """A ``kind`` store holding the big population, and the function that removes it."""
    cls = ours.require(*ours.STORE_CLASSES[kind].split(":"))
    if kind == "sqlite":
        tmp = tempfile.TemporaryDirectory(prefix="ct-bench-w5-")
        store = cls(str(Path(tmp.name) / "big.db"))
        cleanup: Callable[[], None] = tmp.cleanup
    else:
        assert dsn is not None
        import uuid

        schema = f"ct_bench_w5_{uuid.uuid4().hex[:10]}"
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        store = cls(pg.dsn_with_schema(dsn, schema))

        def cleanup() -> None:
            pg.drop_schema(dsn, schema)

    try:
        seed(store, n)
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
