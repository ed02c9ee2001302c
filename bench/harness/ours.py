"""The one place the benchmarks touch chongming-task.

Workloads call these helpers instead of the library directly, so an API that is
still landing is detected in one spot (``Unavailable`` with the reason) and an API
change is adapted in one spot. Stores are opened with their *default* settings: the
numbers describe what a user gets out of the box.
"""

from __future__ import annotations

import importlib
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

from harness import pg
from harness.core import Unavailable

STORE_KINDS = ("memory", "sqlite", "postgres")


def require(module: str, name: str | None = None) -> Any:
    """Import ``module`` (and ``name`` from it) or raise Unavailable saying what is missing."""
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise Unavailable(f"{module} has not landed ({exc})") from exc
    if name is None:
        return mod
    try:
        return getattr(mod, name)  # a lazy name of the package imports its module here
    except (AttributeError, ImportError) as exc:
        raise Unavailable(f"{module}.{name} has not landed ({exc})") from exc


def probe(*features: str) -> str | None:
    """None when every feature is importable, else the first reason it is not."""
    try:
        for feature in features:
            module, _, name = feature.partition(":")
            require(module, name or None)
    except Unavailable as exc:
        return str(exc)
    return None


# The public namespace: the same spelling on both sides of an A/B (bench/ab.py), whatever
# the internal modules are called on either.
CONTROLLER = "chongming_task:Controller"
RUNTIME = "chongming_task:TaskRun"
RUN_TASK = "chongming_task:run_task"
THREAD_EXECUTOR = "chongming_task:ThreadExecutor"
PROCESS_EXECUTOR = "chongming_task:ProcessExecutor"
STORE_CLASSES = {
    "memory": "chongming_task:InMemoryTaskStore",
    "sqlite": "chongming_task:SqliteTaskStore",
    "postgres": "chongming_task:PostgresTaskStore",
}


def store_probe(kind: str, dsn: str | None = None) -> str | None:
    """Why a store of ``kind`` cannot be used here, or None (``dsn`` None: Postgres off)."""
    reason = probe(STORE_CLASSES[kind])
    if reason is None and kind == "postgres":
        if dsn is None:
            return "PostgreSQL disabled (--postgres off)"
        try:
            pg.check(dsn)
        except Unavailable as exc:
            return str(exc)
    return reason


def _cls(feature: str) -> Any:
    module, _, name = feature.partition(":")
    return require(module, name)


@contextmanager
def open_store(
    kind: str, *, dsn: str | None = None, path: Path | None = None, **options: Any
) -> Iterator[Any]:
    """A fresh, empty store of ``kind``, closed (and its schema dropped) on exit.

    SQLite uses a file (``path`` or a new temporary directory) because the file-backed
    store with its default WAL settings is what the durable comparison is about.
    ``options`` go to the SQLite store's constructor (e.g. ``synchronous="FULL"``).
    """
    with ExitStack() as stack:
        cls = _cls(STORE_CLASSES[kind])
        if kind == "memory":
            store = cls()
        elif kind == "sqlite":
            if path is None:
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="ct-bench-"))
                path = Path(tmp) / "tasks.db"
            store = cls(str(path), **options)
        else:
            schema_dsn = stack.enter_context(pg.fresh_schema(dsn or pg.base_dsn()))
            store = cls(schema_dsn)
        stack.callback(store.close)
        yield store


def controller(store: Any, *, max_parallel: int = 2, owner: str = "bench") -> Any:
    """A Controller on ``store`` with ``max_parallel`` slots."""
    cls = _cls(CONTROLLER)
    return cls(store=store, max_parallel=max_parallel, owner=owner)


def close_controller(ctl: Any) -> None:
    """Close a controller without closing the store (``open_store`` owns it)."""
    ctl.close(close_store=False)


def running(
    kind: str, *, max_parallel: int = 2, dsn: str | None = None
) -> AbstractContextManager[tuple[Any, Any]]:
    """``with running("sqlite") as (ctl, store):`` a controller on a fresh store."""

    @contextmanager
    def _cm() -> Iterator[tuple[Any, Any]]:
        with open_store(kind, dsn=dsn) as store:
            ctl = controller(store, max_parallel=max_parallel)
            try:
                yield ctl, store
            finally:
                close_controller(ctl)

    return _cm()


def sqlite_settings(store: Any, path: str | None = None) -> dict[str, str]:
    """journal_mode / synchronous / busy_timeout the SQLite store actually runs with.

    ``synchronous`` is a per-connection setting, so it is read from the store's own
    connection when the store exposes one; ``journal_mode`` persists in the file.
    """
    out: dict[str, str] = {}
    conn = _find_connection(store)
    if conn is not None:
        for pragma in ("journal_mode", "synchronous", "busy_timeout"):
            try:
                row = conn.execute(f"PRAGMA {pragma}").fetchone()
                out[pragma] = str(row[0]) if row else "?"
            except Exception as exc:
                out[pragma] = f"unreadable ({type(exc).__name__})"
    elif path:
        with sqlite3.connect(path) as probe_conn:
            out["journal_mode"] = str(probe_conn.execute("PRAGMA journal_mode").fetchone()[0])
        out["synchronous"] = "unknown (per-connection; store exposes no connection)"
    if "synchronous" in out and out["synchronous"].isdigit():
        names = {"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}
        out["synchronous"] = f"{names.get(out['synchronous'], '?')} ({out['synchronous']})"
    return out


def _find_connection(store: Any) -> sqlite3.Connection | None:
    """The store's writer connection, found by looking for a sqlite3.Connection attribute."""
    for name in dir(store):
        if not name.startswith("_") or name.startswith("__"):
            continue
        try:
            value = getattr(store, name)
        except Exception:
            continue
        if isinstance(value, sqlite3.Connection):
            return value
        conn = getattr(value, "connection", None) or getattr(value, "conn", None)
        if isinstance(conn, sqlite3.Connection):
            return conn
    return None
