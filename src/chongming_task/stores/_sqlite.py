"""SQLite: the default store, one file shared by every process on the machine.

Connections and threads
    Writes go through one connection guarded by a lock: SQLite admits one writer at a
    time anyway, and a Python lock hands over in microseconds where SQLite's busy
    handler sleeps in milliseconds. Writes that arrive while another is in progress
    are committed together (group commit, ``_sqlite_group``): each still returns only
    after its own data is committed. Reads use a small pool of extra connections (one
    per concurrently reading thread), which WAL lets run beside the writer. Other
    processes contend through SQLite's own locking with a busy timeout (``timeout``).
    ``":memory:"`` has a single connection (a second one would be a different
    database), so there everything is serialised by the lock.

Durability
    ``journal_mode=WAL`` with ``synchronous=NORMAL`` (the default): a commit is
    durable against a crash of the *process* as soon as ``save`` returns; after a
    power loss or OS crash the last transactions may roll back, but the file is never
    corrupt. Pass ``synchronous="FULL"`` to fsync on every commit if that matters more
    than write throughput.

Checkpoints
    A thread of the store copies the WAL back into the database file every few hundred
    commits (``PASSIVE``, on its own connection), so no writer pays for it inside its
    commit; SQLite's own automatic checkpoint stays on as a safety valve at a larger
    WAL (``_sqlite_checkpoint``).

Cross-process command wake-ups
    SQLite has no notifications, so ``wait_for_commands`` reads one counter row
    (``commands_rev``, bumped by triggers when a command becomes claimable or work is
    queued) when the database's files are written (inotify on Linux, ``_file_watch``;
    at least every 0.25 s) or, where there is no such watch, every
    ``command_poll_interval`` seconds; plus an in-process signal for same-process
    submits.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from contextlib import closing, suppress
from datetime import datetime, timedelta
from typing import Any, Final, Literal, TypeVar

from chongming_task._model import dumps, parse_datetime
from chongming_task._public import public
from chongming_task._validation import check_seconds
from chongming_task.core import Clock, SystemClock
from chongming_task.errors import ConfigurationError, SchemaMissing, StoreError
from chongming_task.stores import _sqlite_lost
from chongming_task.stores._codec import from_micros, to_micros
from chongming_task.stores._dialect import (
    SCHEMA_VERSION,
    Cursor,
    Dialect,
    driver_connection,
    refuse_connection,
    schema_missing,
    stored_schema_version,
)
from chongming_task.stores._file_watch import SAFETY_POLL, FileWatch
from chongming_task.stores._file_watch import watch as watch_files
from chongming_task.stores._legacy import SUBMISSIONS_RETIRED, adopt_submissions
from chongming_task.stores._lost import Marking
from chongming_task.stores._records import LostMark
from chongming_task.stores._sql import SqlStore
from chongming_task.stores._sqlfile import split_statements
from chongming_task.stores._sqlite_checkpoint import VALVE, Checkpointer
from chongming_task.stores._sqlite_group import GroupCommitter

__all__ = ["SqliteDialect", "SqliteTaskStore"]

T = TypeVar("T")

#: ``ALTER TABLE <table> ADD|DROP COLUMN <column> ...`` in a migration script: SQLite has
#: no ``IF [NOT] EXISTS`` for them, so the store skips an ADD whose column exists and a
#: DROP whose column is gone.
_ALTER_COLUMN: Final = re.compile(
    r"^\s*ALTER\s+TABLE\s+(\w+)\s+(ADD|DROP)\s+COLUMN\s+(\w+)\b", re.IGNORECASE
)

#: RETURNING (claims) needs 3.35; json_each is built in from 3.38 and in practice before.
_MIN_SQLITE: Final = (3, 35, 0)
#: Page cache per connection (KiB) and memory-mapped I/O size: a warm million-task
#: database answers ``ps`` from the OS page cache shared by every connection.
_CACHE_KIB: Final = 16 * 1024
_MMAP_BYTES: Final = 256 * 1024 * 1024


def _lease_expired(lease_until: object, cutoff_micros: object) -> int:
    """SQL ``ct_lease_expired(lease_until, cutoff)``: the exact test behind the filter.

    ``filter_lease_expired`` calls it only for the leases ``julianday()`` cannot settle
    (the same millisecond as the cutoff, or an offset with seconds). A corrupt value
    raises, which fails the query like any corrupt row.
    """
    parsed = parse_datetime(lease_until, "lease_until")
    return int(parsed is None or to_micros(parsed) <= int(cutoff_micros))  # type: ignore[call-overload]


@public
class SqliteTaskStore(SqlStore):
    """A :class:`~chongming_task.stores._base.TaskStore` in a SQLite file (or ``":memory:"``).

    The SQL store with :class:`SqliteDialect` (connections, group commit, schema).

    Args:
        path: the database file, ``":memory:"``, or a ``file:`` URI (e.g. ``?mode=ro``).
        clock: time source for leases and timestamps (``SystemClock`` by default).
        timeout: seconds to wait for another process's write lock before ``StoreError``.
        synchronous: ``"NORMAL"`` (durable against process crashes) or ``"FULL"``.
        command_poll_interval: how often ``wait_for_commands`` looks for commands and
            work from other processes where the database's files cannot be watched
            (inotify, Linux); with a watch it looks when they are written, and at
            least every ``max(command_poll_interval, 0.25)`` seconds.
        create_schema: ``False``: never run DDL; a file without the current schema
            raises ``SchemaMissing`` (read-only access, e.g. a ``file:...?mode=ro`` URI).

    Raises:
        ConfigurationError: SQLite older than 3.35, or a bad ``synchronous``.
        SchemaMissing: ``create_schema=False`` and the schema is missing or older.
        StoreError: The file cannot be opened, or its schema is newer than this library.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        timeout: float = 5.0,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        command_poll_interval: float = 0.01,
        create_schema: bool = True,
    ) -> None:
        self._dialect: SqliteDialect
        clock = clock if clock is not None else SystemClock()
        dialect = SqliteDialect(
            path,
            clock=clock,
            timeout=timeout,
            synchronous=synchronous,
            command_poll_interval=command_poll_interval,
            create_schema=create_schema,
        )
        super().__init__(dialect, clock=clock)
        self._path = dialect.path

    def __repr__(self) -> str:
        return f"SqliteTaskStore({self._path!r})"


class SqliteDialect(Dialect):
    """SQLite's connections, group commit, schema and wake-ups (see the module docstring)."""

    name = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock,
        timeout: float,
        synchronous: Literal["NORMAL", "FULL"],
        command_poll_interval: float,
        create_schema: bool,
    ) -> None:
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise ConfigurationError(
                f"SqliteTaskStore needs SQLite >= 3.35 (RETURNING); this Python links "
                f"{sqlite3.sqlite_version}. Upgrade Python or use PostgresTaskStore."
            )
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigurationError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        super().__init__(clock)
        self.path = os.fspath(path)
        self._uri = self.path.startswith("file:")
        self._memory = self.path in ("", ":memory:") or "mode=memory" in self.path
        self._timeout = timeout
        self._synchronous = synchronous
        self._command_poll_interval = check_seconds(command_poll_interval, "command_poll_interval")
        self._create_schema = create_schema
        self._write_lock = threading.Lock()
        self._pool_lock = threading.Lock()
        self.connections: list[sqlite3.Connection] = []
        self._idle: list[sqlite3.Connection] = []
        self._local = threading.local()
        #: Wakes waiters when another process writes the database (False: not started).
        self._watch: FileWatch | Literal[False] | None = False
        # A store dropped without close() (``Controller(store=SqliteTaskStore(...))``
        # as the guide writes it: a controller closes only a store it made) closes its
        # connections when it is collected, instead of leaving them to sqlite3's own
        # finalizer, which warns (Python 3.13). Not at interpreter exit: daemon threads
        # (a scheduler loop, a command poller) may still be inside a statement then,
        # and closing a connection under them crashes the process.
        self._checkpointer: Checkpointer | None = None
        if not self._memory:
            self._checkpointer = _checkpointer_of(self)
        weakref.finalize(
            self, _close_all, self.connections, self._pool_lock, self._checkpointer
        ).atexit = False
        self.writer = self._connect(writer=True)
        self.group = GroupCommitter(
            self.writer,
            self._write_lock,
            self._describe,
            after_commit=None if self._checkpointer is None else self._checkpointer.committed,
        )
        try:
            self._migrate()
            self._enable_wal()
            #: The database file, absolute ("" in memory): enqueue(connection=...) compares it.
            self.file = _main_file(self.writer)
        except BaseException:
            self.closed = True
            self.close_resources()
            raise

    def _enable_wal(self) -> None:
        """Switch the file to WAL, once its schema is known to be ours (``_migrate``).

        The journal mode is the one setting that persists in the file: a file this store
        refuses (another application's database, a corrupt one) keeps its own.
        """
        if self._memory:
            return
        with suppress(sqlite3.OperationalError):  # a read-only file keeps its mode
            self.writer.execute("PRAGMA journal_mode=WAL")

    # ------------------------------------------------------------ connections

    def _connect(self, *, writer: bool) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._timeout,
                isolation_level=None,
                check_same_thread=False,
                uri=self._uri,
                cached_statements=256,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        try:
            conn.create_function("ct_lease_expired", 2, _lease_expired, deterministic=True)
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
            if not self._memory:
                conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
            if writer and not self._memory:
                conn.execute(f"PRAGMA wal_autocheckpoint={VALVE}")
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"cannot configure SQLite database {self.path!r}: {exc}") from exc
        with self._pool_lock:
            self.connections.append(conn)
        return conn

    def _discard(self, conn: sqlite3.Connection) -> None:
        with self._pool_lock:
            if conn in self.connections:
                self.connections.remove(conn)
        conn.close()

    def _acquire_reader(self) -> sqlite3.Connection:
        with self._pool_lock:
            if self._idle:
                return self._idle.pop()
        return self._connect(writer=False)

    def _release_reader(self, conn: sqlite3.Connection) -> None:
        with self._pool_lock:
            if not self.closed:
                self._idle.append(conn)
                return
        self._discard(conn)

    @property
    def open_connections(self) -> int:
        with self._pool_lock:
            return len(self.connections)

    def run(self, fn: Callable[[Cursor], T], *, write: bool, atomic: bool = False) -> T:
        if write or self._memory:
            return self.group.run(fn, atomic, self.check_open)
        self.check_open()
        conn = self._acquire_reader()
        try:
            return self._call(conn, fn, False)
        finally:
            self._release_reader(conn)

    def _call(self, conn: sqlite3.Connection, fn: Callable[[Cursor], T], atomic: bool) -> T:
        try:
            if atomic:
                conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn.cursor())
                if atomic:
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
            return result
        except sqlite3.Error as exc:
            raise self._describe(exc) from exc

    def run_in(self, connection: object, fn: Callable[[Cursor], T]) -> T:
        """``fn`` in the caller's transaction on a ``sqlite3.Connection`` to the store's
        file (``Dialect.run_in``), inside a savepoint.

        A connection in Python's default (legacy) transaction handling that has not
        written yet is not in a transaction: ``BEGIN`` opens the one the driver would
        open before its first write, and the caller's ``commit()`` / ``rollback()``
        ends it. One in autocommit mode outside a transaction is refused. The first
        statement takes the file's write lock (as the store's own ``BEGIN IMMEDIATE``),
        so unique keys are read and written under it; the workers' wake-up is the
        ``commands_rev`` counter they poll, committed with the task.
        """
        conn = driver_connection(connection)
        if not isinstance(conn, sqlite3.Connection):
            raise refuse_connection(
                conn,
                "a SqliteTaskStore joins the transaction of a sqlite3.Connection to its "
                "file, or of an SQLAlchemy Connection on the sqlite dialect",
            )
        if self._memory:
            raise refuse_connection(
                conn,
                "an in-memory SQLite store is reachable from no other connection; use a "
                "SqliteTaskStore on a file",
            )
        try:
            theirs = _main_file(conn)
        except sqlite3.Error as exc:  # closed, or made in another thread
            raise refuse_connection(conn, f"it cannot be used here ({exc})") from None
        if not _same_file(theirs, self.file):
            raise refuse_connection(
                conn,
                f"it is open on {theirs or 'an in-memory database'!r}, the store on "
                f"{self.file!r}; connect to the store's file",
            )
        if not conn.in_transaction and (
            conn.isolation_level is None or getattr(conn, "autocommit", None) is True
        ):
            raise refuse_connection(
                conn,
                "it is in autocommit mode outside a transaction, so the task would commit "
                "at once; execute BEGIN first",
            )
        try:
            if not conn.in_transaction:
                conn.execute("BEGIN")  # what the driver does before the first write
            cur = conn.cursor()
            cur.row_factory = None
            cur.execute("SAVEPOINT chongming_enqueue")
            try:
                cur.execute(self.sql["take_write_lock"])
                result = fn(cur)
            except BaseException:
                with suppress(sqlite3.Error):
                    cur.execute("ROLLBACK TO chongming_enqueue")
                    cur.execute("RELEASE chongming_enqueue")
                raise
            cur.execute("RELEASE chongming_enqueue")
            return result
        except sqlite3.Error as exc:
            raise StoreError(
                f"SQLite store {self.path!r} failed in the caller's transaction: {exc}"
            ) from exc

    def _describe(self, exc: BaseException) -> StoreError:
        error = StoreError(f"SQLite store {self.path!r} failed: {exc}")
        error.__cause__ = exc
        return error

    # ------------------------------------------------------------ binding

    def instant(self, value: datetime) -> int:
        return to_micros(value)

    def instant_out(self, raw: Any) -> datetime:
        return from_micros(int(raw))

    def span(self, value: timedelta) -> int:
        return value // timedelta(microseconds=1)

    def array(self, values: Sequence[Any]) -> str:
        return dumps(list(values))

    def is_unique_violation(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in str(exc)

    # ------------------------------------------------------------ command wake-ups

    def _commands_rev(self) -> int:
        found = self.run(
            lambda cur: cur.execute(self.sql["commands_rev"], {}).fetchone(), write=False
        )
        return int(found[0])

    def before_claim(self) -> None:
        super().before_claim()
        if not self._memory:
            self._local.commands_rev = self._commands_rev()

    def wait(self, clock: Clock, timeout: float, *, commands_only: bool = False) -> None:
        poll = self._poll_commands()
        watch = None if poll is None else self._file_watch()
        interval = self._command_poll_interval
        self.signal.wait(
            clock,
            timeout,
            poll=poll,
            poll_interval=interval if watch is None else max(interval, SAFETY_POLL),
            watch=watch,
            commands_only=commands_only,
        )

    def _file_watch(self) -> FileWatch | None:
        """The database files' watch (started by the first waiter; ``_file_watch``)."""
        with self._pool_lock:
            if self._watch is False:
                self._watch = None if self.closed else watch_files(self.file)
                if self._watch is not None:  # a store collected without close(), too
                    weakref.finalize(self, self._watch.close).atexit = False
            return self._watch

    def _poll_commands(self) -> Callable[[], bool] | None:
        if self._memory:
            return None
        if getattr(self._local, "commands_rev", None) is None:
            # This thread never claimed: "new" means new from now on.
            self._local.commands_rev = self._commands_rev()

        def changed() -> bool:
            try:
                current = self._commands_rev()
            except StoreError:
                return True  # closed (or broken): stop waiting, the caller will find out
            seen = self._local.commands_rev
            self._local.commands_rev = current
            return bool(seen != current)

        return changed

    def mark_lost_grouped(self, store: SqlStore, marking: Marking) -> list[LostMark] | None:
        return _sqlite_lost.mark_lost_grouped(store, marking)

    def close_resources(self) -> None:
        with self._pool_lock:
            watch, self._watch = self._watch, None
        if watch:
            watch.close()
        checkpointer: Checkpointer | None = getattr(self, "_checkpointer", None)
        if checkpointer is not None:  # first: it closes a connection of the dialect's
            checkpointer.stop()
        with self._write_lock, self._pool_lock:
            doomed = [*self._idle, self.writer] if hasattr(self, "writer") else []
            self._idle.clear()
            for conn in doomed:
                if conn in self.connections:
                    self.connections.remove(conn)
        for conn in doomed:
            conn.close()

    # ------------------------------------------------------------ schema

    def _schema_version(self) -> int:
        conn = self.writer
        if not conn.execute(self.sql["schema_exists"]).fetchone()[0]:
            return 0
        found = conn.execute(self.sql["schema_version"]).fetchone()
        return stored_schema_version(found, f"SQLite database {self.path!r}")

    def _migrate(self) -> None:
        try:
            version = self._schema_version()
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot read SQLite database {self.path!r} ({exc}): it is not a SQLite "
                "database, or it is damaged"
            ) from exc
        try:
            if version == SCHEMA_VERSION:
                return
            if not self._create_schema:
                raise SchemaMissing(schema_missing(version, SCHEMA_VERSION))
            self._refuse_newer(version)
            self.writer.execute("BEGIN IMMEDIATE")
            try:
                version = self._schema_version()  # another process may have migrated
                self._refuse_newer(version)
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in split_statements(self.sql[f"migrate_{step}"]):
                        if not self._done_already(statement):
                            self.writer.execute(statement)
                if 0 < version < SUBMISSIONS_RETIRED:
                    with closing(self.writer.cursor()) as cur:
                        adopt_submissions(cur, self, self.clock)
                if version < SCHEMA_VERSION:
                    self.writer.execute(self.sql["set_schema_version"], {"version": SCHEMA_VERSION})
                self.writer.execute("COMMIT")
            except BaseException:
                with suppress(sqlite3.Error):
                    self.writer.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot create or migrate the schema of SQLite database {self.path!r} "
                f"to version {SCHEMA_VERSION}: {exc}"
            ) from exc

    def _done_already(self, statement: str) -> bool:
        """Whether ``statement`` adds a column that is already there, or drops one that
        is gone (then it is skipped).

        Keeps every migration idempotent: a file whose recorded version is older than
        its tables (restored ``ct_meta``, an interrupted manual upgrade, the tests'
        rewound files) must migrate, not fail on "duplicate column name".
        """
        code = "\n".join(
            line for line in statement.splitlines() if not line.lstrip().startswith("--")
        )
        found = _ALTER_COLUMN.match(code)
        if found is None:
            return False
        table, verb, column = found.groups()
        row = self.writer.execute(
            "SELECT count(*) FROM pragma_table_info(?) WHERE name = ?", (table, column)
        ).fetchone()
        return bool(row[0]) == (verb.upper() == "ADD")

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"SQLite database {self.path!r} has schema version {version}, newer than "
                f"this chongming-task understands ({SCHEMA_VERSION}); upgrade chongming-task "
                "(older versions must not write to it)"
            )


def _main_file(conn: sqlite3.Connection) -> str:
    """The absolute path of ``conn``'s main database file ("" in memory or temporary)."""
    for _, name, file in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(file or "")
    return ""


def _same_file(theirs: str, ours: str) -> bool:
    if not theirs or not ours:
        return False
    try:
        return os.path.samefile(theirs, ours)
    except OSError:
        return False


def _checkpointer_of(dialect: SqliteDialect) -> Checkpointer:
    """The dialect's checkpointer, holding only a weak reference to it (see the module
    ``_sqlite_checkpoint``): its connection is one of the dialect's, closed with them."""
    ref = weakref.ref(dialect)
    connections, lock = dialect.connections, dialect._pool_lock

    def connect() -> sqlite3.Connection:
        alive = ref()
        if alive is None or alive.closed:
            raise StoreError("the store was closed")
        return alive._connect(writer=False)

    def release(conn: sqlite3.Connection) -> None:
        with lock:
            if conn in connections:
                connections.remove(conn)
        with suppress(sqlite3.Error):
            conn.close()

    return Checkpointer(connect, release)


def _close_all(
    connections: list[sqlite3.Connection],
    lock: threading.Lock,
    checkpointer: Checkpointer | None,
) -> None:
    """Close every connection of a store that was collected without ``close()``."""
    if checkpointer is not None:  # it closes its own connection, not under its feet
        checkpointer.stop(timeout=1.0)
    with lock:
        doomed = list(connections)
        connections.clear()
    for conn in doomed:
        with suppress(sqlite3.Error):
            conn.close()
