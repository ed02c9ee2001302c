"""The resolved global options of one invocation and the resources they open.

Global options may come from flags (before or after the subcommand) or from
``CHONGMING_*`` environment variables; flags win. Resolution happens before anything
is opened, so a bad value is refused before the store is touched.

A query or control command opens the store without creating it: running ``ps``
against a mistyped path must say so, not leave an empty database behind.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from chongming_task._redact import mask_dsn
from chongming_task.cli._errors import CommandFailed, UsageError
from chongming_task.cli._parsing import env, parse_bucket_ranges
from chongming_task.cli._render import Output

if TYPE_CHECKING:
    from chongming_task.controller import Controller
    from chongming_task.stores._base import TaskStore

__all__ = ["DEFAULT_DB", "GlobalOptions", "Session", "check_db_value", "is_postgres_url"]

T = TypeVar("T")

#: The SQLite file used when neither ``--db``/``--dsn`` nor the environment names one.
DEFAULT_DB = "chongming.db"
DEFAULT_NUM_BUCKETS = 64
#: Seconds to wait for PostgreSQL: an unreachable server must not hang a shell command.
POSTGRES_CONNECT_TIMEOUT = 5.0


def is_postgres_url(value: str) -> bool:
    """Whether ``--db`` names a PostgreSQL server rather than a SQLite file."""
    return value.startswith(("postgresql://", "postgres://"))


#: A mistyped PostgreSQL URL (``postgresql//``, ``postgres:/``, ``postgresql:app@``) and
#: any other URL (a scheme followed by ``:/``): neither is ever a SQLite path.
_POSTGRES_TYPO = re.compile(r"^\s*postgres(?:ql)?\s*[:/]", re.IGNORECASE)
_OTHER_URL = re.compile(r"^\s*[A-Za-z][A-Za-z0-9+.-]+:/")


def check_db_value(db: str, option: str) -> None:
    """Refuse a ``--db``/``--dsn`` that is a mistyped or foreign URL, not a file path.

    ``postgresql//app:pw@db/prod`` would otherwise be taken as a relative SQLite path
    (and echoed, password included, in "directory does not exist"). The value is not
    quoted: a mistyped URL is where ``mask_dsn`` cannot find the password.
    """
    if is_postgres_url(db):
        return
    if _POSTGRES_TYPO.match(db):
        raise UsageError(
            f"{option} looks like a mistyped PostgreSQL URL (not shown: it may hold a "
            "password); did you mean postgresql://USER@HOST/DATABASE? A SQLite database "
            "is a file path"
        )
    if _OTHER_URL.match(db):
        # Only a well-formed URL is shown (masked): mask_dsn finds its password.
        shown = f" {mask_dsn(db)!r}" if "://" in db else " (not shown: it may hold a password)"
        raise UsageError(
            f"{option} is a URL chongming-task cannot use{shown}; give a postgresql:// URL "
            "or the path of a SQLite file"
        )


def _int_option(value: Any, option: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"{option} must be a positive integer, got {value!r}") from None
    if number < 1:
        raise UsageError(f"{option} must be a positive integer, got {number}")
    return number


@dataclass(frozen=True, slots=True, kw_only=True)
class GlobalOptions:
    """Global options after flags and ``CHONGMING_*`` fallbacks are merged."""

    db: str
    """A SQLite file path or a PostgreSQL URL."""
    num_buckets: int
    owned_buckets: frozenset[int] | None
    """``None``: this process does not restrict itself to a bucket subset."""
    owner: str | None
    """``None``: the controller's default (``hostname:pid``)."""

    @property
    def shown_db(self) -> str:
        """``db`` as it may be shown: a URL's password as ``***`` (``mask_dsn``)."""
        return mask_dsn(self.db)

    @property
    def is_postgres(self) -> bool:
        return is_postgres_url(self.db)

    @property
    def partitions(self) -> bool:
        """True when ``--owned-buckets`` covers only part of the buckets (§8.14)."""
        return self.owned_buckets is not None and len(self.owned_buckets) < self.num_buckets

    @classmethod
    def resolve(cls, args: argparse.Namespace) -> GlobalOptions:
        """Merge flags and environment; raise ``UsageError`` on a bad value."""
        db_flag = getattr(args, "db", None)
        dsn_flag = getattr(args, "dsn", None)
        if db_flag and dsn_flag:
            raise UsageError("give either --db or --dsn, not both")
        if dsn_flag:
            check_db_value(dsn_flag, "--dsn")
            if not is_postgres_url(dsn_flag):
                raise UsageError(f"--dsn must be a postgresql:// URL, got {mask_dsn(dsn_flag)!r}")
        db = dsn_flag or db_flag or env("DSN") or env("DB") or DEFAULT_DB
        check_db_value(db, "--db" if db_flag else "CHONGMING_DSN / CHONGMING_DB")
        num_raw = getattr(args, "num_buckets", None) or env("NUM_BUCKETS")
        num_buckets = (
            _int_option(num_raw, "--num-buckets") if num_raw is not None else DEFAULT_NUM_BUCKETS
        )
        owned_raw = getattr(args, "owned_buckets", None) or env("OWNED_BUCKETS")
        owned = parse_bucket_ranges(owned_raw, num_buckets=num_buckets) if owned_raw else None
        owner = getattr(args, "owner", None) or env("OWNER")
        return cls(db=db, num_buckets=num_buckets, owned_buckets=owned, owner=owner)


class Session:
    """One invocation's output and the store/controllers it opened (closed at the end)."""

    def __init__(self, args: argparse.Namespace, output: Output) -> None:
        self.args = args
        self.output = output
        self.options = GlobalOptions.resolve(args)
        self._stores: list[TaskStore] = []
        self._controllers: list[Controller] = []
        self._closeables: list[Any] = []

    @property
    def json(self) -> bool:
        """Whether ``--json`` was given."""
        return bool(getattr(self.args, "json", False))

    @property
    def issuer(self) -> str:
        """Who this process is in commands it writes (``--owner`` or ``cli@host:pid``)."""
        return self.options.owner or f"cli@{socket.gethostname()}:{os.getpid()}"

    def open_store(self, *, create: bool, read_only: bool = False) -> TaskStore:
        """Open the store named by the global options.

        Args:
            create: Whether a missing SQLite file may be created (``run``, ``worker``,
                ``submit``). Query and control commands pass ``False``.
            read_only: What the read commands (``ps``, ``status``, ``history``,
                ``stats``) pass: no DDL ever (a database without the schema says
                "no chongming-task schema here"), and SQLite is opened ``mode=ro``,
                so a read-only file or mount works.

        Raises:
            CommandFailed: The file is missing (when not creating), is a directory, or
                holds another application's tables (when creating, unless
                ``--create-schema``).
            StoreError: The database cannot be opened or read.
        """
        db = self.options.db
        store: TaskStore
        if self.options.is_postgres:
            try:
                from chongming_task.stores._postgres import PostgresTaskStore
            except ImportError as exc:
                raise CommandFailed(
                    'PostgreSQL needs the driver: pip install "chongming-task[postgres]"'
                ) from exc
            store = PostgresTaskStore(
                db, connect_timeout=POSTGRES_CONNECT_TIMEOUT, create_schema=not read_only
            )
        else:
            path = Path(db).expanduser()
            if path.is_dir():
                raise CommandFailed(
                    f"--db {mask_dsn(db)!r} is a directory; give a database file path"
                )
            if not create and not path.exists():
                raise CommandFailed(
                    f"no database at {mask_dsn(db)!r} (--db / CHONGMING_DB): nothing has been run "
                    "there yet, or the path is mistyped"
                )
            if create and not path.parent.exists():
                parent = mask_dsn(str(path.parent))
                raise CommandFailed(f"--db {mask_dsn(db)!r}: directory {parent!r} does not exist")
            from chongming_task.stores._sqlite import SqliteTaskStore

            if read_only:
                store = SqliteTaskStore(_read_only_uri(path), create_schema=False)
            else:
                if create and not getattr(self.args, "create_schema", False):
                    _refuse_foreign_file(path, db)
                store = SqliteTaskStore(str(path), create_schema=create)
        self._stores.append(store)
        return store

    def track(self, controller: Controller) -> Controller:
        """Close ``controller`` (and its store) when the session ends."""
        self._controllers.append(controller)
        return controller

    def on_close(self, resource: T) -> T:
        """Close ``resource`` (anything with ``close()``) first when the session ends."""
        self._closeables.append(resource)
        return resource

    def close(self) -> None:
        """Close extra resources, then controllers, then stores (each idempotent)."""
        for resource in reversed(self._closeables):
            resource.close()
        self._closeables.clear()
        for controller in reversed(self._controllers):
            controller.close(close_store=False)
        for store in reversed(self._stores):
            store.close()
        self._controllers.clear()
        self._stores.clear()


def _read_only_uri(path: Path) -> str:
    from urllib.parse import quote

    return f"file:{quote(str(path.resolve()))}?mode=ro"


def _refuse_foreign_file(path: Path, db: str) -> None:
    """Refuse to add the schema to a SQLite file that holds tables, none of them ours.

    Read through a read-only connection, so a refused file is left exactly as it was
    (journal mode included). A missing or empty file is a new store; a file with
    ``ct_meta`` is one of ours (perhaps to migrate).
    """
    import sqlite3

    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        conn = sqlite3.connect(_read_only_uri(path), uri=True, timeout=5.0)
        try:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
                )
            ]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise CommandFailed(
            f"--db {mask_dsn(db)!r} cannot be read as a SQLite database ({exc}): it is not "
            "one, or it is damaged; give the path of a chongming-task database or a new file"
        ) from None
    if not tables or "ct_meta" in tables:
        return
    shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
    raise CommandFailed(
        f"--db {mask_dsn(db)!r} holds other tables ({shown}) and no chongming-task schema: "
        "it looks like another application's database, left unchanged; give a file of its "
        "own, or pass --create-schema to add the chongming-task tables to it deliberately"
    )
