"""Shared fixtures: the PostgreSQL DSN policy and per-test isolated schemas, and the
stores built on them (``store``, ``shared_store``, ``store_spec``). A module whose
``store`` must read a fake clock overrides ``store_clock``.

PostgreSQL tests are marked ``external_service``. Without ``CHONGMING_TEST_POSTGRES``
they are skipped locally and fail in CI (``CI`` set), so CI can never pass by
silently skipping them.

This folder is on ``sys.path`` (pytest's default import mode puts it there for this
file), so the tests import the helpers beside it by name: ``_workers``,
``_store_spec``, ``_status``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest

if TYPE_CHECKING:
    from chongming_task import Clock
    from chongming_task.stores import TaskStore

POSTGRES_ENV = "CHONGMING_TEST_POSTGRES"


def postgres_base_dsn() -> str:
    """The DSN from the environment, or skip (locally) / fail (in CI)."""
    dsn = os.environ.get(POSTGRES_ENV)
    if not dsn:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_ENV} must be set in CI; PostgreSQL tests may not be skipped")
        pytest.skip(f"{POSTGRES_ENV} is not set")
    return dsn


def dsn_with_schema(base: str, schema: str) -> str:
    """``base`` with ``search_path`` set to ``schema`` through libpq's ``options``."""
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture
def postgres_dsn() -> Iterator[str]:
    """A DSN whose search_path is a fresh schema, dropped after the test."""
    psycopg = pytest.importorskip("psycopg")
    base = postgres_base_dsn()
    schema = f"ct_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield dsn_with_schema(base, schema)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _open(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, clock: Clock | None = None
) -> tuple[TaskStore, str]:
    """A store of ``kind`` (on ``clock``) and the ``--db`` by which another process opens it."""
    from chongming_task import InMemoryTaskStore, PostgresTaskStore, SqliteTaskStore

    if kind == "memory":
        return InMemoryTaskStore(clock=clock), ""
    if kind == "sqlite":
        db = str(tmp_path / "tasks.db")
        return SqliteTaskStore(db, clock=clock), db
    dsn: str = request.getfixturevalue("postgres_dsn")
    return PostgresTaskStore(dsn, clock=clock), dsn


@pytest.fixture
def store_clock() -> Clock | None:
    """The clock of the ``store`` fixture's stores: ``None``, the system clock."""
    return None


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.external_service)]
)
def store(
    request: pytest.FixtureRequest, tmp_path: Path, store_clock: Clock | None
) -> Iterator[TaskStore]:
    """Each store in turn: memory, SQLite, PostgreSQL, closed after the test (for the
    tests that ask for a ``store`` where neither their module nor folder has one)."""
    made, _ = _open(request.param, request, tmp_path, store_clock)
    with made:
        yield made


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TaskStore, str]]:
    """A store that other processes open too (SQLite, PostgreSQL), with the ``--db``
    by which they open it; closed after the test."""
    made, db = _open(request.param, request, tmp_path)
    with made:
        yield made, db


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store named for another process: ``sqlite:PATH`` or ``postgres:DSN``
    (``_store_spec.open_store`` opens it)."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'tasks.db'}"
    return f"postgres:{request.getfixturevalue('postgres_dsn')}"
