"""procrastinate on PostgreSQL: the work-queue peer (job status kept in PostgreSQL).

The closest peer to our work queue: jobs are rows in PostgreSQL, claimed by worker
processes with ``FOR UPDATE SKIP LOCKED`` and woken by LISTEN/NOTIFY, and every job
keeps its status (``procrastinate_jobs``) and events (``procrastinate_events``, with
timestamps), so a run can be measured from the database exactly as ours is measured
from the store. Each worker is a separate process (``python procrastinate_peer.py
worker DSN N``) running ``app.run_worker(concurrency=N, wait=False)``: it takes jobs
until the queue is empty, then exits. The task is a plain (sync) no-op.
"""

from __future__ import annotations

from typing import Any

from harness.core import Unavailable


def procrastinate_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("procrastinate")
    except Exception:
        return None


def make_app(dsn: str) -> Any:
    """An app on ``dsn`` (its ``search_path`` picks the schema) with the no-op task."""
    try:
        import procrastinate
    except ImportError as exc:
        raise Unavailable(
            f"procrastinate not installed ({exc}); pip install -e '.[bench]'"
        ) from exc
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    def noop() -> None:
        return None

    return app


def prepare(dsn: str, jobs: int, schema: bool = True) -> None:
    """Apply procrastinate's schema to the (fresh) schema and defer ``jobs`` no-op jobs."""
    app = make_app(dsn)
    with app.open():
        if schema:
            app.schema_manager.apply_schema()
        task = app.tasks["noop"]
        batch = 500
        for start in range(0, jobs, batch):
            task.batch_defer(*({} for _ in range(min(batch, jobs - start))))


def window(dsn: str) -> tuple[int, float]:
    """(jobs succeeded, seconds from the first start to the last success), from events."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE type = 'succeeded'),"
            " extract(epoch FROM max(at) FILTER (WHERE type = 'succeeded')"
            "  - min(at) FILTER (WHERE type = 'started'))"
            " FROM procrastinate_events"
        ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1] or 0.0)


#: The jobs not finished yet; the bench polls it on one reused connection, as it polls
#: our side (``queue_bench.Poller``), so neither side pays a connection per poll.
REMAINING_SQL = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"


def worker(dsn: str, concurrency: int, wait: bool = False) -> None:
    """One worker process: take jobs until none is left (``wait``: until killed)."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    app = make_app(dsn)
    with app.open():
        app.run_worker(concurrency=concurrency, wait=wait, install_signal_handlers=False)
