"""Group commit for SQLite: concurrent writes share one transaction and one commit.

SQLite admits one writer at a time and a commit costs far more than the statements in
it. So a writing thread queues its operation and takes the write lock; whoever holds
the lock (the *leader*) runs every queued operation in one ``BEGIN IMMEDIATE`` ...
``COMMIT``. An *atomic* operation (a task write with its history: several statements
that stand or fall together) runs inside its own ``SAVEPOINT`` so that its failure
rolls back only that operation. A non-atomic one (``touch``, a lease renewal, a claim)
is a statement, or statements that would each commit on their own when alone: SQLite
rolls a failed statement back whole and keeps the transaction, so it needs no
savepoint (two round trips fewer). Threads whose operation a leader already ran find
it done when they get the lock and return at once.

Nothing is acknowledged before its commit: a caller returns only after the COMMIT that
contains its write, so durability is exactly that of a lone write. A lone operation
(no concurrency) runs as before, without savepoints.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from chongming_task.errors import StoreError
from chongming_task.stores._dialect import Cursor

__all__ = ["GroupCommitter"]

T = TypeVar("T")


@dataclass(slots=True)
class _Operation:
    fn: Callable[[Cursor], Any]
    atomic: bool
    done: bool = False
    result: Any = None
    error: BaseException | None = None


class GroupCommitter:
    """Runs write operations on one connection, batching those that arrive together."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        lock: threading.Lock,
        describe: Callable[[BaseException], StoreError],
        *,
        after_commit: Callable[[], None] | None = None,
    ) -> None:
        """``after_commit``: called after each commit, under the write lock (the
        checkpointer counts them)."""
        self._conn = conn
        self._after_commit = after_commit
        self._lock = lock
        self._describe = describe
        self._queue: list[_Operation] = []
        self._queue_lock = threading.Lock()

    def run(self, fn: Callable[[Cursor], T], atomic: bool, check_open: Callable[[], None]) -> T:
        """Run ``fn`` in a committed transaction (maybe shared); its result or its error."""
        operation = _Operation(fn, atomic)
        with self._queue_lock:
            self._queue.append(operation)
        with self._lock:
            if not operation.done:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                try:
                    check_open()
                except StoreError as exc:
                    for queued in batch:
                        queued.error, queued.done = exc, True
                else:
                    self._execute(batch)
        if operation.error is not None:
            raise operation.error
        result: T = operation.result
        return result

    def _execute(self, batch: list[_Operation]) -> None:
        try:
            if len(batch) == 1:
                self._alone(batch[0])
            else:
                self._together(batch)
        finally:
            for operation in batch:
                if not operation.done:
                    operation.error = operation.error or StoreError("group commit interrupted")
                    operation.done = True

    def _alone(self, operation: _Operation) -> None:
        conn = self._conn
        try:
            if operation.atomic:
                conn.execute("BEGIN IMMEDIATE")
            operation.result = operation.fn(conn.cursor())
            if operation.atomic:
                conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            operation.error = self._describe(exc) if isinstance(exc, sqlite3.Error) else exc
        else:
            if self._after_commit is not None:
                self._after_commit()
        operation.done = True

    def _together(self, batch: list[_Operation]) -> None:
        conn = self._conn
        applied: list[_Operation] = []
        pending = list(batch)
        while pending:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                error = self._describe(exc)
                for operation in pending:
                    operation.error, operation.done = error, True
                return
            while pending:
                operation = pending.pop(0)
                atomic = operation.atomic
                try:
                    if atomic:
                        conn.execute("SAVEPOINT ct_op")
                    operation.result = operation.fn(conn.cursor())
                    if atomic:
                        conn.execute("RELEASE ct_op")
                    applied.append(operation)
                except BaseException as exc:
                    if isinstance(exc, sqlite3.Error):
                        exc = self._describe(exc)
                    operation.error, operation.done = exc, True
                    if conn.in_transaction:
                        if atomic:
                            with suppress(sqlite3.Error):
                                conn.execute("ROLLBACK TO ct_op")
                                conn.execute("RELEASE ct_op")
                    else:
                        # SQLite rolled the whole transaction back (I/O error, disk
                        # full...): what this batch applied so far is gone too.
                        self._lost(applied, exc)
                        break
            else:
                self._commit(applied)
                return

    def _commit(self, applied: list[_Operation]) -> None:
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            self._lost(applied, self._describe(exc))
            return
        for operation in applied:
            operation.done = True
        applied.clear()
        if self._after_commit is not None:
            self._after_commit()

    def _lost(self, applied: list[_Operation], cause: BaseException) -> None:
        for operation in applied:
            operation.result = None
            operation.error = StoreError(f"write rolled back with its commit group: {cause}")
            operation.error.__cause__ = cause
            operation.done = True
        applied.clear()

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            with suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
