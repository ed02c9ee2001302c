"""What one SQL database does its own way, held by the one SQL store (``_sql.SqlStore``).

The SQL store writes every method once; a :class:`Dialect` supplies what differs
between SQLite and PostgreSQL: the SQL itself (``sql/<name>.sql``, the same section and
parameter names in both), connections and transactions (``run``: SQLite's writer
connection with group commit and a reader pool, PostgreSQL's pool), how instants and
lists are bound, how a task row and its history are written, how commands wake a
waiter (SQLite polls a counter row, PostgreSQL LISTENs), and the two bulk paths of
restart recovery (SQLite marks tasks lost by group, PostgreSQL pipelines the writes).
A dialect holds no task logic: each hook has one job, and the defaults here are what
both would otherwise repeat.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from chongming_task.core import Clock
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_task.stores._signal import CommandSignal
from chongming_task.stores._sqlfile import load_sections

if TYPE_CHECKING:
    from chongming_task.stores._base import SnapshotWrite
    from chongming_task.stores._lost import Marking
    from chongming_task.stores._records import LostMark
    from chongming_task.stores._sql import SqlStore

__all__ = [
    "SCHEMA_VERSION",
    "Cursor",
    "Dialect",
    "History",
    "driver_connection",
    "refuse_connection",
    "schema_missing",
    "stored_schema_version",
]

#: The schema this code reads and writes. 1: tasks, history, commands. 2: schedules and
#: firing claims. 3: an index to claim commands by action (a controller's poller reads
#: stop/pause/resume without walking a backlog of submissions). 4: a priority column on
#: commands, claimed highest first (workers take urgent submissions before older ones),
#: and the action index rebuilt on (action, priority DESC, seq) over claimable rows.
#: 5: the work queue. 6: checkpoint gaps. 7: global slots. 8: unique work. 9: fleet
#: limits (declared limits and the starts rate limits count). 10: paused queues.
#: 11: 64-bit task priorities (PostgreSQL). 12: child tasks (meta_parent). 13: each
#: transition's instant and charted status as indexed columns (charts).
#: 14: worker submission commands retired, the pending ones queued as tasks (_legacy);
#: commands lose their priority column (claimed oldest first, index on (action, seq)).
#: 15: a partial index of the work queue's waiting tasks by bucket and age (health),
#: and the finished tasks' counts kept by triggers (the dashboard at a million tasks).
#: Older databases are migrated on open; newer ones are refused.
SCHEMA_VERSION: Final = 15

T = TypeVar("T")

#: Transitions as ``insert_transition`` parameters (``task_id``, ``version``, ``doc``,
#: ``occurred_at`` in microseconds and ``charted``: the target status if a chart counts it).
History = list[dict[str, Any]]


class Cursor(Protocol):
    """The DB-API subset both drivers provide."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Mapping[str, Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, params: Sequence[Mapping[str, Any]], /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Dialect(ABC):
    """One database's SQL, connections and wake-ups, for :class:`~._sql.SqlStore`."""

    #: ``sql/<name>.sql`` holds its statements.
    name: str
    #: The NOTIFY channel of command wake-ups (PostgreSQL); empty where there is none.
    channel: str = ""
    #: ``write_task`` is one statement (the row and its transitions together), atomic
    #: on its own: a write that settles no pipeline node needs no ``BEGIN``/``COMMIT``
    #: around it (two round trips of three on every transition).
    single_statement_writes: bool = False

    def __init__(self, clock: Clock) -> None:
        #: The store's clock (the migration to version 14 dates what it completes by it).
        self.clock = clock
        self.sql: Mapping[str, str] = load_sections(self.name)
        #: Same-process wake-ups of ``wait_for_commands`` (plus the dialect's own).
        self.signal = CommandSignal()
        self.closed = False

    def check_open(self) -> None:
        """Refuse a call on a closed store.

        Raises:
            StoreError: ``close()`` was called.
        """
        if self.closed:
            raise StoreError("the store is closed")

    # ------------------------------------------------------------ connections

    @abstractmethod
    def run(self, fn: Callable[[Cursor], T], *, write: bool, atomic: bool = False) -> T:
        """Call ``fn`` with a cursor; driver errors become ``StoreError``.

        ``write`` selects the write path; ``atomic`` wraps ``fn`` in one transaction
        (rolled back if it raises). Without it each statement commits on its own.
        """

    @abstractmethod
    def close_resources(self) -> None:
        """Close connections and threads (``closed`` is already set)."""

    @property
    @abstractmethod
    def open_connections(self) -> int:
        """Connections currently open (the contract's teardown checks it drops to 0)."""

    # ------------------------------------------------------------ binding

    @abstractmethod
    def instant(self, value: datetime) -> Any:
        """Bind an instant column (ordering/expiry)."""

    @abstractmethod
    def instant_out(self, raw: Any) -> datetime:
        """Read an instant column back as an aware datetime."""

    @abstractmethod
    def span(self, value: timedelta) -> Any:
        """Bind a duration in the unit of a difference of two instant columns."""

    @abstractmethod
    def array(self, values: Sequence[Any]) -> Any:
        """Bind a list parameter (``json_each`` text or a native array)."""

    @abstractmethod
    def is_unique_violation(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the driver's unique-constraint error."""

    # ------------------------------------------------------------ task rows

    def write_task(
        self,
        cur: Cursor,
        statement: str,
        params: dict[str, Any],
        history: History,
        *,
        wake: bool = False,
    ) -> int:
        """Insert or update one task row plus its transitions; returns rows affected.

        ``wake``: the write also wakes the workers (``notify_work``), as part of it.
        The caller holds a transaction when there is history or a wake-up. An update first tries
        ``update_task_hot`` when the dialect has it: it sets only the columns that
        change on every transition and matches only if the rarely changing ones (name,
        tags, owner...) are unchanged, so SQLite rewrites two indexes instead of nine;
        otherwise the full ``update_task`` runs.
        """
        affected = 0
        if statement == "update_task" and "update_task_hot" in self.sql:
            cur.execute(self.sql["update_task_hot"], params)
            affected = cur.rowcount
        if not affected:
            cur.execute(self.sql[statement], params)
            affected = cur.rowcount
        if affected and history:
            cur.executemany(self.sql["insert_transition"], history)
        if affected and wake:
            cur.execute(self.sql["notify_work"], {"channel": self.channel})
        return affected

    def insert_rows(self, cur: Cursor, batch: list[dict[str, Any]]) -> None:
        """Insert many task rows without history (``create_many``)."""
        cur.executemany(self.sql["insert_task"], batch)

    def lock_slots(self, cur: Cursor) -> None:
        """Serialise slot-taking claims across processes (inside the claim's transaction).

        Nothing by default: a database whose write transactions are serialised
        (SQLite's ``BEGIN IMMEDIATE``) needs no more.
        """
        return

    def lock_unique(self, cur: Cursor, key: str) -> None:
        """Serialise the enqueues of unique key ``key`` (inside their transaction).

        Nothing by default: SQLite's ``BEGIN IMMEDIATE`` already serialises writers.
        """
        return

    def lock_pipeline(self, cur: Cursor, run: str) -> None:
        """Serialise the transactions that settle nodes of pipeline run ``run``.

        Nothing by default: SQLite's ``BEGIN IMMEDIATE`` already serialises writers.
        """
        return

    # ------------------------------------------------------------ command wake-ups

    def before_claim(self) -> None:
        """Remember what "nothing new" looks like before claiming (see ``wait``)."""
        self.signal.mark_seen()

    def wait(self, clock: Clock, timeout: float, *, commands_only: bool = False) -> None:
        """Block up to ``timeout`` (of ``clock``) until a command (or, unless
        ``commands_only``, queued work) may have arrived."""
        self.signal.wait(clock, timeout, commands_only=commands_only)

    def run_in(self, connection: object, fn: Callable[[Cursor], T]) -> T:
        """``fn`` with a cursor on the caller's ``connection``, inside its open transaction.

        The write commits or rolls back with the caller's transaction; a failure inside
        ``fn`` undoes only ``fn``'s statements (a savepoint), so the caller's
        transaction stays usable. Nothing is committed here.

        Raises:
            ConfigurationError: ``connection`` is not a connection of this database's
                driver to the store's database, or has no transaction to join.
            StoreError: The database failed.
        """
        raise ConfigurationError(
            f"enqueue(connection=...) writes through the store's database driver; the "
            f"{self.name} store cannot share a transaction"
        )

    # ------------------------------------------------------------ restart recovery

    def mark_lost_grouped(self, store: SqlStore, marking: Marking) -> list[LostMark] | None:
        """Mark ``marking.query``'s tasks lost by a path of the dialect's own.

        ``None`` (the default): the store's path (read, state machine, guarded writes).
        """
        return None

    def save_distinct(
        self, store: SqlStore, writes: Sequence[SnapshotWrite]
    ) -> list[ConcurrencyConflict | StoreError | None]:
        """``save_many`` of writes to distinct tasks (restart recovery's writes)."""
        return store.save_many(writes)


def driver_connection(connection: object) -> object:
    """The DB-API connection under ``connection``: an SQLAlchemy ``Connection``'s
    driver connection (duck-typed, SQLAlchemy is not a dependency), else ``connection``.

    An SQLAlchemy connection with no transaction begins one, as its first ``execute``
    would (autobegin), so its ``commit()`` / ``rollback()`` ends the task's write too.

    Raises:
        ConfigurationError: An SQLAlchemy connection that cannot hand out its driver
            connection (closed, invalidated).
    """
    if type(connection).__module__.split(".", 1)[0] != "sqlalchemy":
        return connection
    try:
        if not connection.in_transaction():  # type: ignore[attr-defined]
            connection.begin()  # type: ignore[attr-defined]
        proxied = connection.connection  # type: ignore[attr-defined]
        driver: object = getattr(proxied, "driver_connection", None) or proxied.dbapi_connection
    except Exception as exc:  # SQLAlchemy's own errors, reported as they are
        raise ConfigurationError(
            f"enqueue(connection=...): cannot reach the driver connection of {connection!r}: "
            f"{exc}; pass an open connection inside its transaction"
        ) from None
    return driver


def refuse_connection(connection: object, needs: str) -> ConfigurationError:
    """The error for a ``connection=`` of the wrong kind (or to another database)."""
    return ConfigurationError(
        f"enqueue(connection=...) got {type(connection).__module__}."
        f"{type(connection).__qualname__}: {needs}; nothing was enqueued"
    )


def schema_missing(found: int, expected: int) -> str:
    """The message of ``SchemaMissing``: what was found, and how to get the schema."""
    if found == 0:
        return (
            "no chongming-task schema here: nothing has been run against this database, "
            "or it is the wrong one (check --db / CHONGMING_DB); a worker, run or submit "
            "creates the tables"
        )
    return (
        f"the chongming-task schema here is at version {found}, this version needs "
        f"{expected}; read commands never migrate: start a worker or run once to migrate"
    )


def stored_schema_version(found: Any, where: str) -> int:
    """The schema version a ``schema_version`` row holds (``None``: no row, 0).

    Raises:
        StoreError: The row holds something other than a whole number >= 0: the
            ``ct_meta`` table was written by something other than chongming-task, and
            no command can tell which schema the tables have.
    """
    if found is None:
        return 0
    raw = found[0]
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    text = str(raw)
    shown = text if len(text) <= 40 else f"{text[:37]}..."
    raise StoreError(
        f"{where} records schema version {shown!r}, which is not a version number: its "
        "ct_meta table was changed by something other than chongming-task; restore the "
        "database from a backup, or point --db / the store at the right one"
    )
