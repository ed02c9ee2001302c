"""Huey on a SQLite file with an in-process consumer: the durable peer.

This is how a user would run Huey without a server: ``SqliteHuey`` on a file and the
consumer with 2 worker threads. The consumer runs in this process (its own threads)
so that both sides pay the same interpreter and GIL costs, and nothing but the queue
implementation differs.

Fairness: Huey's workers *poll* the queue, sleeping ``initial_delay`` and backing off
up to ``max_delay`` when it is empty. Its defaults (0.1 s, up to 10 s) would make any
latency figure meaningless, so we give it a 1 ms poll capped at 10 ms: the most
favourable setting for Huey that does not turn into a busy loop. ``synchronous``
sets SQLite's pragma on Huey's connection; Huey itself only offers FULL (its default
through SQLite's) or OFF, so matching our store's NORMAL needs this one line. Completion is
observed through Huey's ``SIGNAL_COMPLETE`` (emitted in the worker right after the
task ran and its result was stored), not through result polling, so no poll delay
of ours is charged to Huey either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core import Unavailable

POLL_INITIAL_S = 0.001
POLL_MAX_S = 0.01


def huey_version() -> str | None:
    """Installed Huey version, or None."""
    try:
        import huey

        return str(getattr(huey, "__version__", "?"))
    except ImportError:
        return None


def _noop() -> None:
    return None


class HueyOnSqlite:
    """A started Huey consumer on ``path`` with ``workers`` threads and a no-op task."""

    def __init__(
        self,
        path: Path,
        *,
        workers: int = 2,
        synchronous: str | None = None,
        body: Callable[[], object] = _noop,
    ):
        try:
            from huey import SqliteHuey, signals
            from huey.consumer import Consumer
        except ImportError as exc:
            raise Unavailable(f"huey not installed ({exc}); pip install '.[bench]'") from exc

        class _QuietConsumer(Consumer):  # type: ignore[misc]
            """Consumer that leaves the host process's signal handlers alone."""

            def _set_signal_handlers(self) -> None:
                return None

        self.huey = SqliteHuey(name="bench", filename=str(path), results=True)
        self._cond = threading.Condition()
        self._completed = 0

        @self.huey.signal(signals.SIGNAL_COMPLETE)
        def _on_complete(signal: object, task: object, *args: object, **kw: object) -> None:
            with self._cond:
                self._completed += 1
                self._cond.notify_all()

        if synchronous is not None:
            # Huey keeps one shared connection; set the pragma on it before any worker runs.
            self.huey.storage.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.task: Any = self.huey.task(name="bench_body")(body)
        self.consumer = _QuietConsumer(
            self.huey,
            workers=workers,
            worker_type="thread",
            periodic=False,
            initial_delay=POLL_INITIAL_S,
            backoff=1.15,
            max_delay=POLL_MAX_S,
            check_worker_health=False,
        )
        self.consumer.start()

    @property
    def completed(self) -> int:
        """Tasks completed so far."""
        with self._cond:
            return self._completed

    def wait_completed(self, count: int, timeout: float) -> None:
        """Block until ``count`` tasks completed; TimeoutError after ``timeout`` s."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._completed >= count, timeout):
                raise TimeoutError(f"huey completed {self._completed}/{count} in {timeout}s")

    def settings(self) -> dict[str, str]:
        """The SQLite pragmas Huey's connection runs with."""
        conn = self.huey.storage.conn
        sync = str(conn.execute("PRAGMA synchronous").fetchone()[0])
        names = {"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}
        return {
            "journal_mode": str(conn.execute("PRAGMA journal_mode").fetchone()[0]),
            "synchronous": f"{names.get(sync, '?')} ({sync})",
            "poll": f"{POLL_INITIAL_S * 1000:g} ms initial, {POLL_MAX_S * 1000:g} ms max",
        }

    def close(self) -> None:
        """Stop the workers (after their current task) and close the database."""
        self.consumer.stop(graceful=True)
        self.huey.storage.close()
