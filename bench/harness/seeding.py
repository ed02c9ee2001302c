"""Populations of stored tasks for W5, written as fast as the store allows.

Seeding is set-up, never timed. The generic path goes through ``store.create`` (the
public contract), which is exact but slow for a million rows; when the store helper's
``bench/store_bench.py`` offers a bulk seeder, it is used instead.
"""

from __future__ import annotations

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


def _bulk_seeder() -> Callable[..., Any] | None:
    """The store helper's bulk seeder, if bench/store_bench.py provides one."""
    try:
        import store_bench  # type: ignore[import-not-found]
    except ImportError:
        return None
    for name in ("bulk_seed", "seed_bulk", "seed"):
        fn = getattr(store_bench, name, None)
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    return None


def seed(store: Any, n: int, status_of: Callable[[int], str] = _status_for) -> None:
    """Write ``n`` seeded snapshots into ``store``."""
    t0 = time.perf_counter()
    for i, snap in enumerate(snapshots(n, status_of)):
        store.create(snap)
        if i and i % 100_000 == 0:
            stderr_log(f"  seeded {i:,}/{n:,} ({i / (time.perf_counter() - t0):,.0f}/s)")
    stderr_log(f"  seeded {n:,} tasks in {time.perf_counter() - t0:.1f} s")


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
