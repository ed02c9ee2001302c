"""PostgreSQL for the benchmarks: where it is, a fresh schema per use, its settings.

Every measurement that touches PostgreSQL gets its own schema (``search_path`` set
through libpq's ``options``, the same way the test suite isolates runs) and drops it
afterwards, so a benchmark never leaves tables behind in a shared database.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

from harness.core import Unavailable

ENV = "CHONGMING_TEST_POSTGRES"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"

#: Server settings that decide what a commit costs; recorded with every result.
DURABILITY_SETTINGS = (
    "server_version",
    "synchronous_commit",
    "fsync",
    "wal_sync_method",
    "full_page_writes",
    "commit_delay",
    "wal_level",
    "shared_buffers",
)


def base_dsn() -> str:
    """The DSN from CHONGMING_TEST_POSTGRES, else the local default."""
    return os.environ.get(ENV) or DEFAULT_DSN


def dsn_with_schema(base: str, schema: str) -> str:
    """``base`` with ``search_path`` pointing at ``schema``."""
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}options={quote(f'-csearch_path={schema}')}"


def check(dsn: str) -> None:
    """Raise Unavailable (with the reason) unless the server answers."""
    try:
        import psycopg
    except ImportError as exc:
        raise Unavailable(f"psycopg not installed ({exc})") from exc
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        raise Unavailable(f"PostgreSQL not reachable at {_redact(dsn)}: {exc}") from exc


@contextmanager
def fresh_schema(base: str, prefix: str = "ct_bench") -> Iterator[str]:
    """Yield a DSN on a new, empty schema; drop the schema on exit."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield dsn_with_schema(base, schema)
    finally:
        drop_schema(base, schema)


def drop_schema(base: str, schema: str) -> None:
    """Drop ``schema`` and everything in it (idempotent)."""
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def server_settings(dsn: str) -> dict[str, str]:
    """The durability-relevant settings of the server (empty if unreachable)."""
    try:
        import psycopg

        with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
            out: dict[str, str] = {}
            for name in DURABILITY_SETTINGS:
                row = conn.execute(f"SHOW {name}").fetchone()
                out[name] = str(row[0]) if row else "?"
            return out
    except Exception:
        return {}


def _redact(dsn: str) -> str:
    """Hide a password in a DSN before printing it."""
    if "@" not in dsn or "://" not in dsn:
        return dsn
    scheme, rest = dsn.split("://", 1)
    creds, host = rest.split("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}@{host}"


def redacted(dsn: str) -> str:
    """Public form of ``_redact`` for reports."""
    return _redact(dsn)
