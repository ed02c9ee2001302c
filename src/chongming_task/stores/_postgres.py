"""PostgreSQL: one store and one command channel shared by many machines.

Same semantics and API as :class:`~chongming_task.stores._sqlite.SqliteTaskStore`
(both run the shared contract suite). Three differences from SQLite matter:

1. **Connection pool.** A ``psycopg_pool.ConnectionPool`` serves every thread; each
   connection autocommits, and every write that touches two tables is a single
   statement (a data-modifying CTE), so a ``save`` is one round trip. A connection
   killed while idle (``pg_terminate_backend``, a server restart) is detected on
   checkout without a round trip and replaced, so the call goes through.
   A read that loses its connection mid-flight is retried once on a fresh one; a
   write is not (it may have committed) and raises ``StoreError``.
2. **Row locks instead of a file lock.** Claims use ``FOR UPDATE SKIP LOCKED``:
   concurrent claimers on any machine never wait on, nor double-claim, a command.
   Optimistic ``save`` relies on row locks plus the version predicate, so exactly one
   of two writers with the same ``expect_version`` wins.
3. **Native types and notifications.** Instants are ``timestamptz``, tags a ``text[]``
   (GIN-indexed), documents ``json`` (exact text; ``jsonb`` would rewrite numbers such
   as ``1e300``). ``wait_for_commands`` is LISTEN/NOTIFY: ``submit_command`` notifies
   in its own statement, so a waiter on another machine wakes within milliseconds.

The schema is created on first connect under an advisory lock (several processes may
start at once). A role without DDL rights works as long as the tables exist at the
current version. Importing this module needs no driver; constructing the store without
``psycopg`` raises ``ConfigurationError`` naming ``pip install "chongming-task[postgres]"``.
"""

from __future__ import annotations

import hashlib
import logging
import select
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from chongming_task._public import public
from chongming_task._redact import scrub_dsn
from chongming_task.core import Clock, SystemClock
from chongming_task.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    SchemaMissing,
    StoreError,
)
from chongming_task.stores._base import SnapshotWrite
from chongming_task.stores._dag import settles_a_node
from chongming_task.stores._dialect import (
    SCHEMA_VERSION,
    Cursor,
    Dialect,
    History,
    driver_connection,
    refuse_connection,
    schema_missing,
    stored_schema_version,
)
from chongming_task.stores._legacy import SUBMISSIONS_RETIRED, adopt_submissions
from chongming_task.stores._pg_listener import CommandListener
from chongming_task.stores._sql import SqlStore
from chongming_task.stores._sqlrows import TASK_COLUMNS

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["INSTALL_HINT", "PostgresDialect", "PostgresTaskStore"]

T = TypeVar("T")

_log = logging.getLogger("chongming_task.stores.postgres")

INSTALL_HINT: Final = 'pip install "chongming-task[postgres]"'
#: PostgreSQL truncates identifiers (channel names) beyond 63 bytes.
_MAX_IDENTIFIER: Final = 63


def _import_driver() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ConfigurationError(
            f"PostgresTaskStore needs the psycopg 3 driver and its pool: {INSTALL_HINT}"
        ) from exc
    return psycopg, psycopg_pool


def _dead_while_idle(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server closed this pooled connection while it sat idle.

    An idle connection has nothing to read unless the server sent an error and hung up
    (``pg_terminate_backend``, shutdown), so a readable socket means "dead". One
    ``select`` call, no round trip; the caller closes it so the pool replaces it.
    """
    if conn.closed or conn.broken:
        return True
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    return bool(readable)


def _scalar(row: tuple[Any, ...] | None) -> Any:
    """The first column of a one-row result (``None`` for no row)."""
    return None if row is None else row[0]


def _plain_cursor(psycopg: Any, conn: psycopg.Connection[Any]) -> Any:
    """A cursor on the caller's ``conn`` that binds and reads as the store's own do.

    The caller's connection may carry a cursor class and loaders of its own: Django's
    binds on the client side, loads ``jsonb`` as text and ``timestamptz`` in its
    ``TIME_ZONE`` (naive without ``USE_TZ``). The store's statements get psycopg's
    server-side ``Cursor`` and psycopg's loaders for the types they read.
    """
    from psycopg.types.datetime import TimestamptzLoader
    from psycopg.types.json import JsonbLoader, JsonLoader

    cur = psycopg.Cursor(conn, row_factory=psycopg.rows.tuple_row)
    cur.adapters.register_loader("timestamptz", TimestamptzLoader)
    cur.adapters.register_loader("json", JsonLoader)
    cur.adapters.register_loader("jsonb", JsonbLoader)
    return cur


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Pool ``configure``: instants come back in UTC whatever the server's default."""
    conn.execute("SET TIME ZONE 'UTC'")


@public
class PostgresTaskStore(SqlStore):
    """A :class:`~chongming_task.stores._base.TaskStore` in a PostgreSQL database.

    The SQL store with :class:`PostgresDialect` (pool, listener, schema).

    Args:
        dsn: a libpq connection string or URL; tables live in the first schema of the
            role's ``search_path``.
        clock: time source for leases and timestamps (``SystemClock`` by default).
        min_connections / max_connections: pool bounds; ``max_connections`` caps how
            many threads hit the database at once (others queue for ``connect_timeout``).
        connect_timeout: seconds to wait for a connection before ``StoreError``.
        prepare_threshold: psycopg's server-side prepare threshold; ``None`` disables
            prepared statements (needed behind PgBouncer in transaction mode).
        application_name: shown in ``pg_stat_activity``.
        create_schema: ``False``: never run DDL; a database without the current
            schema raises ``SchemaMissing`` (what the CLI's read commands use).

    Raises:
        ConfigurationError: psycopg is not installed, or bad pool bounds.
        SchemaMissing: ``create_schema=False`` and the schema is missing or older.
        StoreError: The database cannot be reached or prepared.
    """

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock | None = None,
        min_connections: int = 1,
        max_connections: int = 8,
        connect_timeout: float = 10.0,
        prepare_threshold: int | None = 5,
        application_name: str = "chongming-task",
        create_schema: bool = True,
    ) -> None:
        self._dialect: PostgresDialect
        clock = clock if clock is not None else SystemClock()
        dialect = PostgresDialect(
            dsn,
            clock=clock,
            min_connections=min_connections,
            max_connections=max_connections,
            connect_timeout=connect_timeout,
            prepare_threshold=prepare_threshold,
            application_name=application_name,
            create_schema=create_schema,
        )
        super().__init__(dialect, clock=clock)

    def __repr__(self) -> str:
        closed = self._dialect.closed
        return f"PostgresTaskStore(channel={self._dialect.channel!r}, closed={closed})"


class PostgresDialect(Dialect):
    """PostgreSQL's pool, listener, schema and single-statement writes (module docstring)."""

    name = "postgres"
    single_statement_writes = True

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock,
        min_connections: int,
        max_connections: int,
        connect_timeout: float,
        prepare_threshold: int | None,
        application_name: str,
        create_schema: bool,
    ) -> None:
        driver, pool_module = _import_driver()
        if min_connections < 0 or max_connections < max(1, min_connections):
            raise ConfigurationError(
                "need 0 <= min_connections <= max_connections and max_connections >= 1, got "
                f"{min_connections} and {max_connections}"
            )
        super().__init__(clock)
        self._psycopg = driver
        self._dsn = dsn
        self._connect_kwargs: dict[str, Any] = {
            "application_name": application_name,
            "connect_timeout": max(1, round(connect_timeout)),
        }
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._create_schema = create_schema
        self._listener: CommandListener | None = None
        self._listener_lock = threading.Lock()
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        #: The store's schema, and (database, server start time) identifying its database.
        self.schema = ""
        self._identity: tuple[str, datetime] = ("", datetime.min.replace(tzinfo=UTC))
        self.channel = self._prepare_schema()
        digest = hashlib.blake2b(f"slots:{self.channel}".encode(), digest_size=8)
        self._slot_lock = int.from_bytes(digest.digest(), "big", signed=True)
        self._pool = pool_module.ConnectionPool(
            dsn,
            kwargs={
                **self._connect_kwargs,
                "autocommit": True,
                "prepare_threshold": prepare_threshold,
            },
            min_size=min_connections,
            max_size=max_connections,
            timeout=connect_timeout,
            configure=_configure,
            name=f"chongming-task-{uuid.uuid4().hex[:8]}",
            open=True,
        )

    # ------------------------------------------------------------ schema

    def _prepare_schema(self) -> str:
        """Create or migrate the schema if needed; returns the NOTIFY channel name."""
        psycopg = self._psycopg
        try:
            with psycopg.connect(self._dsn, autocommit=True, **self._connect_kwargs) as conn:
                schema = _scalar(conn.execute(self.sql["current_schema"]).fetchone())
                if schema is None:
                    raise StoreError(
                        "PostgreSQL has no current schema for this role (empty search_path?); "
                        "set search_path to a schema the role can use"
                    )
                database, started, _ = conn.execute(self.sql["database_identity"]).fetchone()
                self._identity = (database, started)
                self.schema = schema
                version = self._schema_version(conn)
                if version != SCHEMA_VERSION and not self._create_schema:
                    raise SchemaMissing(schema_missing(version, SCHEMA_VERSION))
                if version != SCHEMA_VERSION:
                    self._refuse_newer(version)
                    self._migrate(conn, schema)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StoreError(
                "this PostgreSQL role cannot create or migrate the chongming-task tables "
                f"(schema version {SCHEMA_VERSION}); run once with a role that has CREATE on "
                f"the schema, then this role can use them as they are: {self._scrub(exc)}"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(f"cannot prepare the PostgreSQL store: {self._scrub(exc)}") from None
        channel = f"chongming_task_commands.{schema}"
        if len(channel.encode("utf-8")) > _MAX_IDENTIFIER:
            digest = hashlib.blake2b(channel.encode("utf-8"), digest_size=8).hexdigest()
            channel = f"chongming_task_commands.{digest}"
        return channel

    def _scrub(self, error: object) -> str:
        """An error's text without this store's password (drivers quote the DSN)."""
        return scrub_dsn(str(error), self._dsn)

    def _schema_version(self, conn: psycopg.Connection[Any]) -> int:
        if not _scalar(conn.execute(self.sql["schema_exists"]).fetchone()):
            return 0
        found = conn.execute(self.sql["schema_version"]).fetchone()
        return stored_schema_version(found, "the PostgreSQL schema")

    def _migrate(self, conn: psycopg.Connection[Any], schema: str) -> None:
        with conn.transaction():
            conn.execute(self.sql["migration_lock"])
            version = self._schema_version(conn)  # another process may have done it
            self._refuse_newer(version)
            for step in range(version + 1, SCHEMA_VERSION + 1):
                conn.execute(self.sql[f"migrate_{step}"])
            if 0 < version < SUBMISSIONS_RETIRED:
                with conn.cursor() as cur:
                    adopt_submissions(cur, self, self.clock)
            if version < SCHEMA_VERSION:
                conn.execute(self.sql["set_schema_version"], {"version": SCHEMA_VERSION})

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the PostgreSQL schema is at version {version}, newer than this "
                f"chongming-task understands ({SCHEMA_VERSION}); upgrade chongming-task "
                "(older versions must not write to it)"
            )

    # ------------------------------------------------------------ connections

    def run(self, fn: Callable[[Cursor], T], *, write: bool, atomic: bool = False) -> T:
        psycopg = self._psycopg
        retried = False
        # Every idle connection may be dead (a server restart): try each once, plus one.
        for _ in range(self._max_connections + 1):
            self.check_open()
            assert self._pool is not None
            lost = False
            try:
                with self._pool.connection() as conn:
                    if _dead_while_idle(conn):
                        conn.close()  # returned closed, so the pool replaces it
                        continue
                    try:
                        with conn.cursor() as cur:
                            if atomic:
                                with conn.transaction():
                                    return fn(cur)
                            return fn(cur)
                    except psycopg.OperationalError:
                        lost = conn.closed or conn.broken
                        raise
            except psycopg.Error as exc:
                if lost and not write and not retried:
                    retried = True  # a read is safe to repeat on a fresh connection
                    continue
                raise StoreError(f"PostgreSQL store failed: {self._scrub(exc)}") from exc
        raise StoreError("PostgreSQL store failed: no live connection in the pool")

    def run_in(self, connection: object, fn: Callable[[Cursor], T]) -> T:
        """``fn`` in the caller's transaction on a psycopg 3 connection (``Dialect.run_in``).

        The caller's ``search_path`` may name other schemas (or none of the store's), so
        the store's statements run with ``search_path`` set to the store's schema for
        the rest of the transaction (``set_config(..., true)``, like ``SET LOCAL``),
        and the caller's value is set back before returning; all inside a savepoint,
        so a failure rolls back to it and the caller's transaction goes on.
        ``pg_notify`` is transactional: the workers' wake-up is sent on commit only.
        """
        psycopg = self._psycopg
        conn = driver_connection(connection)
        if not isinstance(conn, psycopg.Connection):
            raise refuse_connection(
                conn,
                "a PostgresTaskStore joins the transaction of a psycopg 3 Connection, or of "
                "an SQLAlchemy Connection on the postgresql+psycopg dialect",
            )
        status = conn.info.transaction_status
        idle = psycopg.pq.TransactionStatus.IDLE
        if conn.closed or status not in (idle, psycopg.pq.TransactionStatus.INTRANS):
            state = "closed" if conn.closed else status.name.lower()
            raise refuse_connection(
                conn,
                f"the connection is {state} (not idle nor in a transaction); roll back "
                "or reconnect",
            )
        if status is idle and conn.autocommit:
            raise refuse_connection(
                conn,
                "it is in autocommit mode outside a transaction, so the task would commit at "
                "once; enqueue inside `with conn.transaction():`",
            )
        try:
            with _plain_cursor(psycopg, conn) as cur:
                # Starts the caller's transaction if it is not yet (not autocommit).
                database, started, search_path = cur.execute(
                    self.sql["database_identity"]
                ).fetchone()
                self._require_same_database(database, started)
                with conn.transaction():  # a savepoint: the caller's transaction is open
                    cur.execute(self.sql["set_search_path"], {"search_path": self._path()})
                    result = fn(cur)
                    cur.execute(self.sql["set_search_path"], {"search_path": search_path})
                return result
        except psycopg.Error as exc:
            raise StoreError(
                f"PostgreSQL store failed in the caller's transaction: {self._scrub(exc)}"
            ) from exc

    def _path(self) -> str:
        """The store's schema as a ``search_path`` value (a quoted identifier)."""
        return '"' + self.schema.replace('"', '""') + '"'

    def _require_same_database(self, database: str, started: datetime) -> None:
        if started != self._identity[1]:
            # Another server, or the store's restarted since it was opened: read anew.
            found = self.run(
                lambda cur: cur.execute(self.sql["database_identity"]).fetchone(), write=False
            )
            self._identity = (found[0], found[1])
        if (database, started) != self._identity:
            where = f"database {database!r}" + (
                "" if started == self._identity[1] else " on another server"
            )
            raise ConfigurationError(
                f"enqueue(connection=...): the connection is to {where}, the store's "
                f"tables are in database {self._identity[0]!r} (schema {self.schema!r}); "
                "connect to the store's database; nothing was enqueued"
            )

    def write_task(
        self,
        cur: Cursor,
        statement: str,
        params: dict[str, Any],
        history: History,
        *,
        wake: bool = False,
    ) -> int:
        """One data-modifying statement writes the row and its transitions (and, for an
        insert with ``wake``, sends the workers' NOTIFY on its commit)."""
        if statement.startswith("update_task"):
            cur.execute(self.sql[statement], _with_transitions(params, history))
            return int(cur.fetchone()[0])
        params = {**params, "wake": wake, "channel": self.channel}
        cur.execute(self.sql[statement], _with_transitions(params, history))
        return 1

    def save_distinct(
        self, store: SqlStore, writes: Sequence[SnapshotWrite]
    ) -> list[ConcurrencyConflict | StoreError | None]:
        """Restart recovery's writes (distinct tasks), every statement in one pipeline.

        ``save_many`` waits for each task's statement before sending the next: after
        the crash of a busy node that is tens of thousands of round trips, most of
        reconcile's time on PostgreSQL. The tasks of one call are distinct, so their
        statements do not depend on each other's results and can all be sent at once:
        the same statement per task as ``save`` (the row and its transitions), in one
        transaction; a task whose version moved gets its conflict, read after the
        others were written (nothing else in the batch touches its row).
        """
        params: list[dict[str, Any]] = []
        for write in writes:
            snapshot, version, transitions = write
            params.append(_with_transitions(*store._update_params(snapshot, version, transitions)))

        settling = [write.snapshot for write in writes if settles_a_node(write.snapshot)]

        def apply(cur: Cursor) -> list[ConcurrencyConflict | StoreError | None]:
            store._lock_runs(cur, settling)
            driver: Any = cur
            driver.executemany(self.sql["update_task"], params, returning=True)
            written: list[bool] = []
            while True:
                written.append(bool(driver.fetchone()[0]))
                if not driver.nextset():
                    break
            if settling:
                stored = {w.snapshot.task_id for w, ok in zip(writes, written, strict=True) if ok}
                store._settle_dag(cur, [s for s in settling if s.task_id in stored])
            return [
                None if ok else store._conflict(cur, write.snapshot, write.expect_version)
                for ok, write in zip(written, writes, strict=True)
            ]

        return store._run(apply, write=True, atomic=True)

    def insert_rows(self, cur: Cursor, batch: list[dict[str, Any]]) -> None:
        copy_cursor: Any = cur
        with copy_cursor.copy(f"COPY ct_tasks ({', '.join(TASK_COLUMNS)}) FROM STDIN") as copy:
            for row in batch:
                copy.write_row([row[column] for column in TASK_COLUMNS])

    def lock_slots(self, cur: Cursor) -> None:
        # READ COMMITTED lets two claims count the same holders: one advisory lock per
        # schema (its NOTIFY channel names it) makes the count-then-insert a critical
        # section.
        cur.execute(self.sql["lock_slots"], {"key": self._slot_lock})

    def lock_unique(self, cur: Cursor, key: str) -> None:
        cur.execute(self.sql["unique_lock"], {"unique_key": key})

    def lock_pipeline(self, cur: Cursor, run: str) -> None:
        cur.execute(self.sql["pipeline_lock"], {"run": run})

    def instant(self, value: datetime) -> datetime:
        return value

    def instant_out(self, raw: Any) -> datetime:
        value: datetime = raw
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

    def span(self, value: timedelta) -> timedelta:
        return value

    def array(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def is_unique_violation(self, exc: BaseException) -> bool:
        return isinstance(exc, self._psycopg.errors.UniqueViolation)

    def _ensure_listener(self) -> CommandListener:
        """Start LISTENing (once) and wait until it is in place."""
        with self._listener_lock:
            self.check_open()
            listener = self._listener
            if listener is None:
                listener = self._listener = CommandListener(
                    self._dsn, self.channel, self.signal, self._connect_kwargs, notify=self._wake
                )
        if not listener.wait_ready(self._connect_timeout):
            # The listener reports its own failures (rate-limited); this is only detail.
            _log.debug("LISTEN is not established yet; waits fall back to their timeout")
        return listener

    def before_claim(self) -> None:
        self._ensure_listener()
        super().before_claim()

    def wait(self, clock: Clock, timeout: float, *, commands_only: bool = False) -> None:
        # A claim just got an answer: a listener backing off from an outage re-connects
        # now, so waiters are woken by NOTIFY again at once, not a backoff later.
        self._ensure_listener().retry_now()
        super().wait(clock, timeout, commands_only=commands_only)

    @property
    def open_connections(self) -> int:
        """Pooled plus listener connections currently open (0 after ``close``)."""
        pooled = (
            0 if self._pool is None or self._pool.closed else self._pool.get_stats()["pool_size"]
        )
        listening = 1 if self._listener is not None and self._listener.connected else 0
        return int(pooled) + listening

    def _wake(self, channel: str) -> None:
        """A NOTIFY on ``channel`` through the pool (the listener's close, which comes
        after the store is marked closed, so not through :meth:`run`)."""
        pool = self._pool
        if pool is None or pool.closed:
            return
        with pool.connection(timeout=1.0) as conn:
            conn.execute(self.sql["notify_work"], {"channel": channel})

    def close_resources(self) -> None:
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if self._pool is not None:
            self._pool.close()


def _with_transitions(params: dict[str, Any], history: History) -> dict[str, Any]:
    """``params`` plus the row's transitions as one JSON array.

    One statement writes the row and its transitions (see postgres.sql); the transition
    documents are joined, not re-encoded.
    """
    params["transitions"] = "[" + ",".join(entry["doc"] for entry in history) + "]"
    return params
