"""The submission protocol: how ``chongming-task submit`` hands a task to a worker.

A submission is a store command with ``kind="task"``, ``action="submit"``,
``target`` = the task id, ``target_owner=None`` (any worker may take it) and
``payload = {name, args, kwargs, task_id, tags, priority, bucket_key, label}``: only
a registered name and JSON cross the store, never code (guide §8.5). Its
``command_id`` is derived from the task id, so a submission can be found, and a
duplicate refused, by task id before any worker has taken it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from chongming_task._model import JSONValue, ensure_json
from chongming_task._public import public
from chongming_task._validation import check_priority, check_text
from chongming_task.errors import ConfigurationError, DuplicateTaskId
from chongming_task.stores._base import Command

if TYPE_CHECKING:
    from chongming_task.stores._base import TaskStore

__all__ = [
    "SUBMIT_ACTION",
    "Submission",
    "SubmitFields",
    "describe_submission",
    "find_submission",
    "submission_command_id",
    "submit_options",
]

#: The command action that hands a task to a worker.
SUBMIT_ACTION: Final = "submit"

#: uuid5 namespace of submission command ids (stable forever: ids are looked up by it).
_SUBMISSION_NAMESPACE: Final = uuid.UUID("6f1c0e55-0d1e-4a53-9a43-2f1d8b5c7a10")


def submission_command_id(task_id: str) -> str:
    """The command id of the submission of ``task_id`` (32 hex digits, like uuid4)."""
    return uuid.uuid5(_SUBMISSION_NAMESPACE, task_id).hex


class SubmitFields(Protocol):
    """What a submission says besides its name and arguments (a ``Submission``, ``run``'s)."""

    @property
    def task_id(self) -> str | None: ...
    @property
    def tags(self) -> Sequence[str]: ...
    @property
    def priority(self) -> int | None: ...
    @property
    def bucket_key(self) -> str | None: ...
    @property
    def label(self) -> str | None: ...


def submit_options(
    given: SubmitFields, metadata: Mapping[str, JSONValue] | None = None
) -> dict[str, Any]:
    """The ``Controller.submit`` options of ``given`` and ``metadata``, unset ones left out."""
    options = {
        "task_id": given.task_id,
        "tags": list(given.tags) or None,
        "priority": given.priority,
        "bucket_key": given.bucket_key,
        "label": given.label,
        "metadata": dict(metadata or {}) or None,
    }
    return {key: value for key, value in options.items() if value is not None}


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class Submission:
    """A task handed to "some worker": a registered name plus JSON arguments."""

    name: str
    task_id: str
    args: tuple[JSONValue, ...] = ()
    kwargs: Mapping[str, JSONValue] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    priority: int | None = None
    bucket_key: str | None = None
    label: str | None = None
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    """Task metadata to submit with (``traceparent`` of the submitter's trace)."""

    def __post_init__(self) -> None:
        for value, what in ((self.name, "name"), (self.task_id, "task_id")):
            if not isinstance(value, str) or not value:
                raise ConfigurationError(f"submission {what} must be a non-empty string")
            check_text(value, f"submission {what}")
        ensure_json(list(self.args), "submission args")
        ensure_json(dict(self.kwargs), "submission kwargs")
        ensure_json(dict(self.metadata), "submission metadata")
        if self.priority is not None:
            check_priority(self.priority, "submission priority")

    def options(self) -> dict[str, Any]:
        """The ``Controller.submit`` options of this submission (unset ones left out)."""
        return submit_options(self, self.metadata)

    def to_payload(self) -> dict[str, JSONValue]:
        return {
            "name": self.name,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "task_id": self.task_id,
            "tags": list(self.tags),
            "priority": self.priority,
            "bucket_key": self.bucket_key,
            "label": self.label,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Submission:
        """Parse a command payload; anything malformed is a ``ConfigurationError``."""
        try:
            return cls(
                name=payload["name"],
                task_id=payload["task_id"],
                args=tuple(payload.get("args") or ()),
                kwargs=dict(payload.get("kwargs") or {}),
                tags=tuple(payload.get("tags") or ()),
                priority=payload.get("priority"),
                bucket_key=payload.get("bucket_key"),
                label=payload.get("label"),
                metadata=dict(payload.get("metadata") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"malformed submission payload: {exc!r}") from exc

    def command(self, *, issued_by: str, store: TaskStore) -> Command:
        """The pending store command that carries this submission (not yet written)."""
        return Command(
            command_id=submission_command_id(self.task_id),
            kind="task",
            target=self.task_id,
            action=SUBMIT_ACTION,
            payload=self.to_payload(),
            issued_by=issued_by,
            issued_at=store.clock.now(),
            target_owner=None,
        )

    def submit(self, store: TaskStore, *, issued_by: str) -> Command:
        """Write this submission for a worker to take.

        Raises:
            ConfigurationError: The task id is already used by a task or a submission
                (nothing is written then).
        """
        if store.get(self.task_id) is not None:
            raise DuplicateTaskId(
                self.task_id, f"task id {self.task_id!r} already exists; choose another --task-id"
            )
        if store.get_command(submission_command_id(self.task_id)) is not None:
            raise ConfigurationError(
                f"task id {self.task_id!r} was already submitted; choose another --task-id"
            )
        command = self.command(issued_by=issued_by, store=store)
        return store.submit_command(command)


def find_submission(store: TaskStore, task_id: str) -> Command | None:
    """The submission command of ``task_id``, if one was ever written."""
    command = store.get_command(submission_command_id(task_id))
    if command is None or command.action != SUBMIT_ACTION:
        return None
    return command


def describe_submission(command: Command) -> str:
    """One honest sentence about a submission whose task is not (yet) in the store."""
    when = command.issued_at.isoformat(timespec="seconds")
    if command.status == "pending":
        return (
            f"is submitted (by {command.issued_by} at {when}) but no worker has taken it yet; "
            "is a worker running with these tasks and this task's bucket?"
        )
    if command.status == "claimed":
        return f"is being taken by worker {command.claimed_by} (submitted at {when})"
    result = command.result if isinstance(command.result, Mapping) else {}
    error = result.get("error")
    if error:
        return f"was refused by worker {command.claimed_by}: {error}"
    return f"was taken by worker {command.claimed_by} but is not in the store (pruned?)"
