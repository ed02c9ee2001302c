"""The stable JSON documents printed by ``--json`` (documented in docs/cli.md).

Every document is an object whose ``schema`` names its kind and version
(``chongming-task.ps.v1``). Fields are only ever added within a version; a rename or
removal would bump the version. A task and a transition are the one view the
dashboard's API shows too (``chongming_task.controller._document``, redacted there);
the builders are explicit field lists, not ``to_dict()`` passthroughs, so a change in
the storage codec cannot silently change what scripts parse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from chongming_task.controller._document import (
    failure_doc,
    progress_doc,
    task_doc,
    transition_doc,
)

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot

__all__ = [
    "SCHEMA_VERSION",
    "counts_doc",
    "document",
    "failure_doc",
    "progress_doc",
    "task_doc",
    "tasks_docs",
    "transition_doc",
]

#: Version suffix of every document's ``schema`` field.
SCHEMA_VERSION: Final = 1


def document(kind: str, **fields: Any) -> dict[str, Any]:
    """A top-level document: ``{"schema": "chongming-task.<kind>.v1", **fields}``."""
    return {"schema": f"chongming-task.{kind}.v{SCHEMA_VERSION}", **fields}


def tasks_docs(snapshots: Iterable[TaskSnapshot]) -> list[dict[str, Any]]:
    """``task_doc`` of each snapshot, in order."""
    return [task_doc(snapshot) for snapshot in snapshots]


def counts_doc(counts: Mapping[Any, int]) -> dict[str, int]:
    """Status -> count with string keys (statuses are ``StrEnum`` values)."""
    return {str(key): int(value) for key, value in counts.items()}
