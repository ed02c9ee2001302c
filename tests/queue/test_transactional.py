"""``enqueue(..., connection=conn)``: the task is written inside the caller's transaction.

On SQLite (a ``sqlite3.Connection`` to the store's file) and PostgreSQL (a psycopg 3
connection to the store's database, with another ``search_path``), each directly and
through an SQLAlchemy ``Connection``: what the *store* holds is read through the
store's own connections (committed data only), the workers' claim query is run while
the caller's transaction is open, and the wake-up is observed where workers observe it
(SQLite's ``commands_rev`` counter, PostgreSQL's NOTIFY channel). A real in-process
``Worker`` whose poll interval is far longer than the test runs the task after commit,
so only the committed wake-up can have woken it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task import (
    AsyncClient,
    Client,
    InMemoryTaskStore,
    SqliteTaskStore,
    TaskStatus,
)
from chongming_task.controller import Controller
from chongming_task.controller._registry import OPTION_NAMES, TaskRegistry
from chongming_task.errors import ConfigurationError, DuplicateTaskId
from chongming_task.queue._client import EnqueueOptions
from chongming_task.stores._base import TaskStore
from chongming_task.stores._capabilities import require_queue
from chongming_task.worker import Worker

S = TaskStatus
DEADLINE = 20.0
ran: list[tuple[str, int]] = []


def add(ctx: Any, a: int, b: int = 0) -> int:
    ran.append((ctx.task_id, a + b))
    return a + b


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


class Caller:
    """The application's side: its own connection to the store's database and an
    ``orders`` table, and how the workers' wake-up is observed on that store."""

    def __init__(self, store: TaskStore, connect: Callable[[], Any], kind: str) -> None:
        self.store = store
        self.connect = connect
        self.kind = kind

    def woken(self) -> Any:
        """A token of the committed wake-up state (SQLite: the counter workers poll)."""
        if self.kind == "sqlite":
            return self.store._dialect._commands_rev()  # type: ignore[attr-defined]
        return None


def _table(conn: Any, sqlalchemy: bool) -> None:
    """Create the caller's ``orders`` table (a temporary one on PostgreSQL)."""
    statement = "CREATE TEMP TABLE orders (id int)"
    if sqlalchemy:
        import sqlalchemy as sa

        conn.execute(sa.text(statement))
        conn.commit()
    else:
        conn.execute(statement)
        conn.commit()


def execute(conn: Any, statement: str) -> Any:
    """``statement`` on the caller's connection (DB-API or SQLAlchemy)."""
    if type(conn).__module__.startswith("sqlalchemy"):
        import sqlalchemy as sa

        return conn.execute(sa.text(statement))
    return conn.execute(statement)


@pytest.fixture(
    params=[
        "sqlite",
        "sqlite+sqlalchemy",
        pytest.param("postgres", marks=pytest.mark.external_service),
        pytest.param("postgres+sqlalchemy", marks=pytest.mark.external_service),
    ]
)
def caller(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Caller]:
    kind, _, wrapper = request.param.partition("+")
    sqlalchemy = wrapper == "sqlalchemy"
    sa: Any = pytest.importorskip("sqlalchemy") if sqlalchemy else None
    store: TaskStore
    if kind == "sqlite":
        path = tmp_path / "app.db"
        store = SqliteTaskStore(path)
        if sqlalchemy:
            engine = sa.create_engine(f"sqlite:///{path}", poolclass=sa.pool.NullPool)
            connect: Callable[[], Any] = engine.connect
        else:
            connect = lambda: sqlite3.connect(path)  # noqa: E731
    else:
        import psycopg

        from chongming_task.stores._postgres import PostgresTaskStore
        from conftest import postgres_base_dsn

        store = PostgresTaskStore(request.getfixturevalue("postgres_dsn"))
        base = postgres_base_dsn()  # the caller's search_path is the default one
        if sqlalchemy:
            url = "postgresql+psycopg://" + base.split("://", 1)[1]
            engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
            connect = engine.connect
        else:
            connect = lambda: psycopg.connect(base)  # noqa: E731
    opened: list[Any] = []

    def connect_app() -> Any:
        conn = connect()
        opened.append(conn)
        _table(conn, sqlalchemy)
        return conn

    with store:
        yield Caller(store, connect_app, kind)
        for conn in opened:
            conn.close()


@pytest.fixture
def client(caller: Caller) -> Client:
    registry = TaskRegistry()
    registry.register("add", add)
    return Client(caller.store, tasks=registry, poll_interval=0.02)


class Listener:
    """PostgreSQL: a LISTEN on the store's channel, as workers wake (else nothing)."""

    def __init__(self, caller: Caller, dsn: str | None) -> None:
        self.conn: Any = None
        if caller.kind == "postgres":
            import psycopg

            assert dsn is not None
            self.conn = psycopg.connect(dsn, autocommit=True)
            channel = caller.store._dialect.channel  # type: ignore[attr-defined]
            self.conn.execute(f'LISTEN "{channel}"')

    def heard(self, timeout: float) -> list[str]:
        if self.conn is None:
            return []
        return [n.payload for n in self.conn.notifies(timeout=timeout, stop_after=1)]

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


@pytest.fixture
def listener(caller: Caller, request: pytest.FixtureRequest) -> Iterator[Listener]:
    dsn = request.getfixturevalue("postgres_dsn") if caller.kind == "postgres" else None
    heard = Listener(caller, dsn)
    yield heard
    heard.close()


def claimable(store: TaskStore) -> list[str]:
    """What a worker's claim takes now (then handed back: the claim is only a probe)."""
    lease = datetime.now(UTC) + timedelta(minutes=5)
    taken = store.claim_queued("probe", buckets=None, limit=10, lease_until=lease)  # type: ignore[attr-defined]
    return [s.task_id for s in taken]


def stored_ids(store: TaskStore) -> list[str]:
    return sorted(s.task_id for s in store.query())


# ------------------------------------------------------------ rollback and commit


def test_a_rollback_leaves_no_task_and_wakes_nobody(
    caller: Caller, client: Client, listener: Listener
) -> None:
    conn = caller.connect()
    before = caller.woken()
    execute(conn, "INSERT INTO orders VALUES (1)")
    one = client.enqueue("add", 1, 2, connection=conn, unique_key="order:1")
    many = client.enqueue_many("add", [(3,), (4,)], connection=conn)
    assert one.created
    assert all(h.created for h in many)
    # Uncommitted: the store's own connections (and so every worker) see nothing.
    assert stored_ids(caller.store) == []
    if caller.kind == "postgres":  # SQLite: the claim waits for the caller's write lock
        assert claimable(caller.store) == []
    conn.rollback()
    assert stored_ids(caller.store) == []
    assert caller.woken() == before
    assert listener.heard(timeout=0.3) == []
    # The key was never taken: a plain enqueue creates its task.
    assert client.enqueue("add", 5, unique_key="order:1").created


def test_a_commit_stores_the_tasks_and_wakes_the_workers(
    caller: Caller, client: Client, listener: Listener
) -> None:
    conn = caller.connect()
    before = caller.woken()
    execute(conn, "INSERT INTO orders VALUES (1)")
    one = client.enqueue("add", 1, 2, connection=conn, concurrency_key="tenant:1")
    many = client.enqueue_many("add", [(3,), {"a": 4, "b": 1}], connection=conn)
    assert listener.heard(timeout=0.3) == []  # nothing before the commit
    assert caller.woken() == before
    conn.commit()
    ids = sorted([one.task_id, *(h.task_id for h in many)])
    assert stored_ids(caller.store) == ids
    for task_id in ids:
        snapshot = caller.store.get(task_id)
        assert snapshot is not None
        assert (snapshot.status, snapshot.owner) == (S.QUEUED, None)
        assert [t.to_status for t in caller.store.history(task_id)] == [S.PENDING, S.QUEUED]
    assert one.snapshot.metadata["recipe"]["concurrency_key"] == "tenant:1"
    if caller.kind == "sqlite":
        assert caller.woken() != before
    else:
        assert listener.heard(timeout=DEADLINE) == ["queue"]
    assert sorted(claimable(caller.store)) == ids


def test_a_worker_runs_the_task_only_after_the_commit(caller: Caller, client: Client) -> None:
    controller = Controller(store=caller.store, owner="w1", max_parallel=2)
    controller.register("add", add)
    # Polls only every minute: the committed wake-up is what makes it claim in time.
    worker = Worker(controller, max_parallel=2, poll_interval=60.0)
    worker.start()
    try:
        # Once this ran, the worker is past its start (PostgreSQL: LISTENing).
        assert client.enqueue("add", 0).wait(DEADLINE).status is S.SUCCEEDED
        ran.clear()
        conn = caller.connect()
        handle = client.enqueue("add", 20, 1, connection=conn)
        assert caller.store.get(handle.task_id) is None
        assert ran == []
        conn.commit()
        outcome = handle.wait(DEADLINE)
        assert (outcome.status, outcome.value) == (S.SUCCEEDED, 21)
        assert ran == [(handle.task_id, 21)]
        assert outcome.snapshot.owner == "w1"
    finally:
        # Wakes the intake now, not at its next poll a minute later.
        require_queue(caller.store, "test").notify_work()
        worker.shutdown(timeout=10)


def test_unique_keys_count_the_tasks_of_the_same_transaction(
    caller: Caller, client: Client
) -> None:
    conn = caller.connect()
    first = client.enqueue("add", 1, connection=conn, unique_key="report:7")
    again = client.enqueue("add", 2, connection=conn, unique_key="report:7")
    batch = client.enqueue_many(
        "add", [(3,), (4,)], unique_keys=["report:7", "report:8"], connection=conn
    )
    assert (first.created, again.created) == (True, False)
    assert again.task_id == first.task_id == batch[0].task_id
    assert [h.created for h in batch] == [False, True]
    conn.commit()
    assert stored_ids(caller.store) == sorted([first.task_id, batch[1].task_id])
    later = client.enqueue("add", 5, unique_key="report:7")  # the store's own path
    assert (later.created, later.task_id) == (False, first.task_id)


def test_a_refused_enqueue_leaves_the_callers_transaction_usable(
    caller: Caller, client: Client
) -> None:
    conn = caller.connect()
    execute(conn, "INSERT INTO orders VALUES (1)")
    kept = client.enqueue("add", 1, task_id="order-1-email", connection=conn)
    with pytest.raises(DuplicateTaskId, match="order-1-email"):
        client.enqueue("add", 2, task_id="order-1-email", connection=conn)
    with pytest.raises(ConfigurationError, match="only JSON"):
        client.enqueue("add", datetime.now(UTC), connection=conn)
    execute(conn, "INSERT INTO orders VALUES (2)")
    conn.commit()
    assert stored_ids(caller.store) == [kept.task_id]
    assert kept.snapshot.metadata["recipe"]["args"] == [1]
    assert execute(conn, "SELECT count(*) FROM orders").fetchone()[0] == 2


# ------------------------------------------------------------ PostgreSQL: schema, search_path


@pytest.mark.external_service
def test_postgres_writes_to_the_stores_schema_whatever_the_callers_search_path(
    request: pytest.FixtureRequest,
) -> None:
    psycopg = pytest.importorskip("psycopg")
    from chongming_task.stores._postgres import PostgresTaskStore
    from conftest import postgres_base_dsn

    base = postgres_base_dsn()
    decoy = f"ct_decoy_{uuid.uuid4().hex[:10]}"
    with PostgresTaskStore(request.getfixturevalue("postgres_dsn")) as store:
        with psycopg.connect(base) as conn:
            # The caller's own schema has a table named like the store's.
            conn.execute(f'CREATE SCHEMA "{decoy}"')
            conn.execute(f'CREATE TABLE "{decoy}".ct_tasks (task_id text)')
            conn.execute(f'SET search_path TO "{decoy}"')
            conn.commit()
            try:
                handle = Client(store).enqueue("add", 1, unique_key="k", connection=conn)
                assert conn.execute("SHOW search_path").fetchone()[0] == decoy
                conn.commit()
                assert conn.execute("SELECT count(*) FROM ct_tasks").fetchone()[0] == 0
                assert conn.execute("SHOW search_path").fetchone()[0] == decoy
                assert [s.task_id for s in store.query()] == [handle.task_id]
            finally:
                conn.rollback()
                conn.execute(f'DROP SCHEMA "{decoy}" CASCADE')
                conn.commit()


# ------------------------------------------------------------ refusals


@pytest.mark.external_service
def test_postgres_refuses_other_databases_drivers_and_no_transaction(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    psycopg = pytest.importorskip("psycopg")
    from chongming_task.stores._postgres import PostgresTaskStore
    from conftest import postgres_base_dsn

    base = postgres_base_dsn()
    other_db = base.rsplit("/", 1)[0] + "/postgres"
    with PostgresTaskStore(request.getfixturevalue("postgres_dsn")) as store:
        client = Client(store)
        with psycopg.connect(other_db) as other:
            with pytest.raises(ConfigurationError, match=r"database 'postgres'.*nothing was"):
                client.enqueue("add", 1, connection=other)
        with psycopg.connect(base, autocommit=True) as auto:
            with pytest.raises(ConfigurationError, match="autocommit mode"):
                client.enqueue("add", 1, connection=auto)
            with auto.transaction():  # an explicit transaction is joined
                joined = client.enqueue("add", 1, connection=auto)
        with psycopg.connect(base) as failed:
            with pytest.raises(psycopg.errors.DivisionByZero):
                failed.execute("SELECT 1 / 0")
            with pytest.raises(ConfigurationError, match=r"inerror.*roll back"):
                client.enqueue("add", 1, connection=failed)
        with (
            closing(sqlite3.connect(tmp_path / "x.db")) as lite,
            pytest.raises(ConfigurationError, match=r"sqlite3\.Connection: a PostgresTaskStore"),
        ):
            client.enqueue("add", 1, connection=lite)
        assert [s.task_id for s in store.query()] == [joined.task_id]


def test_sqlite_refuses_other_files_drivers_and_autocommit(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        client = Client(store)
        other = sqlite3.connect(tmp_path / "other.db")
        with pytest.raises(ConfigurationError, match=r"other\.db'.*the store on .*tasks\.db"):
            client.enqueue("add", 1, connection=other)
        with (
            closing(sqlite3.connect(":memory:")) as memory,
            pytest.raises(ConfigurationError, match="in-memory database"),
        ):
            client.enqueue("add", 1, connection=memory)
        auto = sqlite3.connect(tmp_path / "tasks.db", isolation_level=None)
        with pytest.raises(ConfigurationError, match=r"autocommit mode.*BEGIN"):
            client.enqueue("add", 1, connection=auto)
        auto.execute("BEGIN")  # an explicit transaction is joined
        joined = client.enqueue("add", 1, connection=auto)
        auto.execute("COMMIT")
        closed = sqlite3.connect(tmp_path / "tasks.db")
        closed.close()
        with pytest.raises(ConfigurationError, match="cannot be used here"):
            client.enqueue("add", 1, connection=closed)
        for wrong in ("tasks.db", store, object()):
            with pytest.raises(ConfigurationError, match="a SqliteTaskStore joins"):
                client.enqueue("add", 1, connection=wrong)
        with pytest.raises(ConfigurationError, match="a SqliteTaskStore joins"):
            client.enqueue_many("add", [(1,)], connection="tasks.db")
        assert [s.task_id for s in store.query()] == [joined.task_id]
        for conn in (other, auto):
            conn.close()


def test_stores_without_a_database_refuse_a_connection(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "app.db")
    with InMemoryTaskStore() as store:
        with pytest.raises(ConfigurationError, match="InMemoryTaskStore is not in a database"):
            Client(store).enqueue("add", 1, connection=conn)
        assert store.query() == []
    with SqliteTaskStore(":memory:") as store:
        with pytest.raises(ConfigurationError, match="in-memory SQLite store"):
            Client(store).enqueue("add", 1, connection=conn)
        assert store.query() == []
    conn.close()


def test_async_client_with_a_connection_of_another_thread_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path) as store:
        conn = sqlite3.connect(path)  # check_same_thread: AsyncClient writes in a thread
        with pytest.raises(ConfigurationError, match=r"cannot be used here.*thread"):
            asyncio.run(AsyncClient(store).enqueue("add", 1, connection=conn))
        shared = sqlite3.connect(path, check_same_thread=False)
        handle = asyncio.run(AsyncClient(store).enqueue("add", 1, connection=shared))
        assert store.get(handle.task_id) is None
        shared.commit()
        assert store.get(handle.task_id) is not None
        for opened in (conn, shared):
            opened.close()


# ------------------------------------------------------------ "connection" is an option name


def test_connection_is_an_option_name_like_delay(tmp_path: Path) -> None:
    assert {"delay", "not_before", "unique_key", "unique_for", "concurrency_key"} < OPTION_NAMES
    assert "connection" in OPTION_NAMES
    assert EnqueueOptions.__optional_keys__ <= OPTION_NAMES  # every option of enqueue

    def keyword_only(ctx: Any, *, connection: str) -> str:
        return connection

    def positional(ctx: Any, connection: str) -> str:
        return connection

    registry = TaskRegistry()
    with pytest.raises(ConfigurationError, match=r"keyword-only.*\['connection'\].*Rename it"):
        registry.register("keyword_only", keyword_only)
    registry.register("positional", positional)  # set positionally: enqueue(name, "dsn")
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        client = Client(store, tasks=registry)
        handle = client.enqueue("positional", "postgresql://db")
        assert handle.snapshot.metadata["recipe"]["args"] == ["postgresql://db"]
        with pytest.raises(ConfigurationError, match="a SqliteTaskStore joins"):
            client.enqueue("positional", "dsn", connection="postgresql://db")
        assert [s.task_id for s in store.query()] == [handle.task_id]


@pytest.mark.parametrize("name", ["connection", "delay", "not_before", "concurrency_key"])
def test_the_cli_refuses_an_enqueue_option_name_as_a_task_argument_of_submit(name: str) -> None:
    # ``submit`` enqueues, so ``--arg delay=5`` would be taken as the enqueue's delay:
    # refused. ``run`` submits in-process, where these are no options: passed on.
    from chongming_task.cli._errors import UsageError
    from chongming_task.cli._parsing import parse_task_kwargs, refuse_enqueue_options

    assert parse_task_kwargs([f"{name}=5"], None) == {name: 5}
    with pytest.raises(UsageError, match=f"--arg '{name}' is an option of the queue's enqueue"):
        refuse_enqueue_options(parse_task_kwargs([f"{name}=5"], None))
    with pytest.raises(UsageError, match=f"--arg '{name}' is an option of the queue's enqueue"):
        refuse_enqueue_options(parse_task_kwargs(None, f'{{"{name}": 5}}'))


def test_with_options_carries_the_connection(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    registry = TaskRegistry()
    registry.register("add", add)
    with SqliteTaskStore(path) as store:
        conn = sqlite3.connect(path)
        handle = Client(store, tasks=registry).with_options(connection=conn).enqueue("add", 1)
        assert store.get(handle.task_id) is None
        conn.commit()
        assert store.get(handle.task_id) is not None
        conn.close()


def test_current_connection_names_the_transaction_when_none_is_given(tmp_path: Path) -> None:
    """``Client(current_connection=fn)``: ``fn()`` is the connection of an enqueue that
    gives none (``None``: the store's own, committed at once); ``connection=`` wins."""
    path = tmp_path / "tasks.db"
    registry = TaskRegistry()
    registry.register("add", add)
    with SqliteTaskStore(path) as store, closing(sqlite3.connect(path)) as conn:
        open_transaction: list[sqlite3.Connection] = []
        client = Client(
            store,
            tasks=registry,
            current_connection=lambda: open_transaction[0] if open_transaction else None,
        )
        at_once = client.enqueue("add", 1)
        assert store.get(at_once.task_id) is not None
        open_transaction.append(conn)
        held = client.enqueue("add", 2)
        [batched] = client.enqueue_many("add", [(3,)])
        assert store.get(held.task_id) is None
        assert store.get(batched.task_id) is None
        conn.rollback()
        assert store.get(held.task_id) is None
        assert store.get(batched.task_id) is None
        with closing(sqlite3.connect(path)) as other:
            given = client.enqueue("add", 4, connection=other)
            other.commit()
        assert store.get(given.task_id) is not None
        with pytest.raises(ConfigurationError, match="current_connection must be a callable"):
            Client(store, current_connection="postgresql://db")  # type: ignore[arg-type]
