"""A store named by one string, so that a test can hand it to another process.

The cross-process tests start children that open the test's store themselves; they
name it on the command line as ``sqlite:PATH`` or ``postgres:DSN``
(tests/conftest.py's ``store_spec`` fixture makes one for each backend). Tests and
child scripts alike open it with :func:`open_store`.
"""

from __future__ import annotations

from chongming_task import Clock, PostgresTaskStore, SqliteTaskStore
from chongming_task.stores import TaskStore


def open_store(spec: str, clock: Clock | None = None) -> TaskStore:
    """The store ``spec`` names, on ``clock`` (the system clock by default)."""
    kind, _, target = spec.partition(":")
    if kind == "sqlite":
        return SqliteTaskStore(target, clock=clock)
    return PostgresTaskStore(target, clock=clock)
