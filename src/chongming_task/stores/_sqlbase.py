"""What a SQL dialect provides, and what both SQL stores share underneath it.

A dialect subclass supplies the SQL (``sql/<dialect>.sql``), a way to run a function
with a cursor (``_run``: connection handling, transactions, error mapping), and how
instants and lists are bound. ``_sqlcontrol`` (commands, schedules) and ``_sql``
(tasks) implement every ``TaskStore`` method once on top of these hooks.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final, Protocol, TypeVar

from chongming_task.core.clock import Clock
from chongming_task.errors import StoreError
from chongming_task.stores._sqlfile import load_sections
from chongming_task.stores.base import TaskStore
from chongming_task.stores.signal import CommandSignal

__all__ = ["SCHEMA_VERSION", "Cursor", "SqlBase"]

#: The schema this code reads and writes. 1: tasks, history, commands. 2: schedules and
#: firing claims. 3: an index to claim commands by action (a controller's poller reads
#: stop/pause/resume without walking a backlog of submissions). 4: a priority column on
#: commands, claimed highest first (workers take urgent submissions before older ones),
#: and the action index rebuilt on (action, priority DESC, seq) over claimable rows.
#: Older databases are migrated on open; newer ones are refused.
SCHEMA_VERSION: Final = 7

T = TypeVar("T")


class Cursor(Protocol):
    """The DB-API subset both drivers provide."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Mapping[str, Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, params: Sequence[Mapping[str, Any]], /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SqlBase(TaskStore):
    """Dialect hooks plus the lifecycle both SQL stores share."""

    dialect: ClassVar[str]

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._sql = load_sections(self.dialect)
        self._signal = CommandSignal()
        self._closed = False

    # ------------------------------------------------------------ dialect hooks

    @abstractmethod
    def _run(self, fn: Callable[[Cursor], T], *, write: bool, atomic: bool = False) -> T:
        """Call ``fn`` with a cursor; driver errors become ``StoreError``.

        ``write`` selects the write path; ``atomic`` wraps ``fn`` in one transaction
        (rolled back if it raises). Without it each statement commits on its own.
        """

    @abstractmethod
    def _instant(self, value: datetime) -> Any:
        """Bind an instant column (ordering/expiry)."""

    @abstractmethod
    def _instant_out(self, raw: Any) -> datetime:
        """Read an instant column back as an aware datetime."""

    @abstractmethod
    def _array(self, values: Sequence[Any]) -> Any:
        """Bind a list parameter (``json_each`` text or a native array)."""

    @abstractmethod
    def _is_unique_violation(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the driver's unique-constraint error."""

    @abstractmethod
    def _close_resources(self) -> None:
        """Close connections and threads."""

    # ------------------------------------------------------------ lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._signal.close()
        self._close_resources()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed
