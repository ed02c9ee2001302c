"""The codec's JSON of snapshots and transitions, built as one string.

``dumps(snapshot.to_dict())`` builds a 27-key dict, nine ISO strings and then walks the
dict again in the JSON encoder: about 12 µs a snapshot, the largest single cost of a
store write (``reconcile()`` after the crash of a busy node writes tens of thousands).
Most fields have a known type (validated when the snapshot was built), so their JSON
is written directly into one f-string; only the free-form JSON values (``outcome``,
``metadata``, ``progress``) and fields the model does not type-check (``label``,
``owner``...) go through ``dumps``. The text is exactly ``dumps(obj.to_dict())``, byte
for byte (``tests/model/test_fastjson.py`` checks it over generated snapshots), so
stored documents do not depend on which path wrote them.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

from chongming_task.model import FORMAT_VERSION, Failure, TaskSnapshot, Transition, dumps

__all__ = [
    "TransitionsJson",
    "array_json",
    "failure_json",
    "iso_text",
    "snapshot_json",
    "transition_json",
]

#: The encoder ``json.dumps(ensure_ascii=False)`` uses for strings (the C one when built).
#: Statuses and failure kinds are ``StrEnum`` members, so it quotes their text directly
#: (``.value`` is a Python-level property, read six times per write otherwise).
_quote: Final[Callable[[str], str]] = json.encoder.encode_basestring


def _text(value: Any) -> str:
    """A field that is text by convention, not checked by the model (``owner``, ``label``)."""
    if value is None:
        return "null"
    return _quote(value) if type(value) is str else dumps(value)


def _instant(value: datetime | None) -> str:
    # ISO-8601 of a datetime is digits and "-:T+." only: nothing to escape.
    return "null" if value is None else f'"{value.isoformat()}"'


#: Recently formatted instants: ``id(datetime) -> (the datetime, its JSON text)``.
#: Each entry holds its datetime, so an id in the table cannot be reused by another
#: object while the entry lives, and a hit is checked by identity. Bounded by clearing.
_RECENT: Final[dict[int, tuple[datetime, str]]] = {}
_RECENT_MAX: Final = 1024


def _instants(*values: datetime | None) -> list[str]:
    """``_instant`` of each, formatting a datetime *object* once.

    A transition takes one clock reading for all its timestamps (``updated_at`` and
    ``finished_at`` of a terminal state, ``created_at`` and ``queued_at`` of a
    submission), the decoder shares one object between equal texts, and a task's
    later snapshots keep the very objects of its earlier ones (``created_at``,
    ``queued_at``, ``started_at``...; leases are shared within a millisecond), so
    most instants of a write were formatted by the previous write of the same task;
    an aware ``isoformat`` costs about a microsecond, a hit here a tenth of that.
    Identity, not equality: equal instants in two offsets print apart.
    """
    texts: list[str] = []
    recent = _RECENT
    for value in values:
        if value is None:
            texts.append("null")
            continue
        entry = recent.get(id(value))
        if entry is not None and entry[0] is value:
            texts.append(entry[1])
            continue
        text = f'"{value.isoformat()}"'
        if len(recent) >= _RECENT_MAX:
            recent.clear()
        recent[id(value)] = (value, text)
        texts.append(text)
    return texts


def iso_text(value: datetime | None) -> str | None:
    """``value.isoformat()`` (``None`` for ``None``), through the same cache as the documents.

    A task row carries ``heartbeat_at`` and ``lease_until`` as text beside the document
    that holds them too: formatted once for both.
    """
    if value is None:
        return None
    return _instants(value)[0][1:-1]


def _int(value: int | None) -> str:
    return "null" if value is None else int.__repr__(value)


def _failure(failure: Failure | None) -> str:
    if failure is None:
        return "null"
    return (
        f'{{"kind":{_quote(failure.kind)},"message":{_text(failure.message)},'
        f'"retryable":{"true" if failure.retryable else "false"},'
        f'"exception_type":{_text(failure.exception_type)},'
        f'"traceback":{_text(failure.traceback)}}}'
    )


def failure_json(failure: Failure) -> str:
    """``dumps(failure.to_dict())``: the member SQLite's ``mark_lost_many`` sets in place."""
    return _failure(failure)


def snapshot_json(s: TaskSnapshot) -> str:
    """``dumps(s.to_dict())``, without the dict.

    Raises:
        TypeError, ValueError: ``outcome``/``metadata`` (or an unchecked field) is not
            JSON, exactly as ``dumps`` would.
    """
    progress = s.progress
    tags = s.tags
    metadata = s.metadata
    created, updated, queued, started, first, finished, beat, lease = _instants(
        s.created_at,
        s.updated_at,
        s.queued_at,
        s.started_at,
        s.first_started_at,
        s.finished_at,
        s.last_heartbeat_at,
        s.lease_until,
    )
    return (
        f'{{"v":{FORMAT_VERSION},"task_id":{_quote(s.task_id)},"name":{_quote(s.name)},'
        f'"label":{_text(s.label)},"status":{_quote(s.status)},'
        f'"status_version":{int.__repr__(s.status_version)},'
        f'"attempt":{int.__repr__(s.attempt)},"max_attempts":{int.__repr__(s.max_attempts)},'
        f'"created_at":{created},"updated_at":{updated},'
        f'"queued_at":{queued},"started_at":{started},'
        f'"first_started_at":{first},"finished_at":{finished},'
        f'"progress":{"null" if progress is None else dumps(progress.to_dict())},'
        f'"last_heartbeat_at":{beat},'
        f'"lease_owner":{_text(s.lease_owner)},"lease_until":{lease},'
        f'"failure":{_failure(s.failure)},'
        f'"outcome":{"null" if s.outcome is None else dumps(s.outcome)},'
        f'"tags":[{",".join(map(_quote, sorted(tags))) if tags else ""}],'
        f'"bucket":{_int(s.bucket)},"bucket_key":{_text(s.bucket_key)},'
        f'"priority":{int.__repr__(s.priority)},"owner":{_text(s.owner)},'
        f'"pid":{_int(s.pid)},"metadata":{dumps(dict(metadata)) if metadata else "{}"}}}'
    )


def transition_json(t: Transition) -> str:
    """``dumps(t.to_dict())``, without the dict."""
    source = "null" if t.from_status is None else _quote(t.from_status)
    return (
        f'{{"v":{FORMAT_VERSION},"task_id":{_quote(t.task_id)},'
        f'"from":{source},'
        f'"to":{_quote(t.to_status)},"trigger":{_quote(t.trigger)},'
        f'"version":{int.__repr__(t.version)},"at":{_instant(t.at)},'
        f'"actor":{_text(t.actor)},"reason":{_text(t.reason)},'
        f'"attempt":{int.__repr__(t.attempt)}}}'
    )


class TransitionsJson:
    """``transition_json`` of many transitions sharing target, trigger, instant and actor.

    A bulk write (``mark_lost_many``: tens of thousands of ``-> lost`` records in one
    call) would otherwise format the same instant and quote the same actor, trigger and
    reasons once per record; here the shared parts are built once and each distinct
    reason is quoted once. The text is exactly ``transition_json`` (a test checks it).
    """

    __slots__ = ("_after_version", "_reasons", "_to")

    def __init__(self, *, to_status: str, trigger: str, at: datetime, actor: str | None) -> None:
        self._to = f',"to":{_quote(to_status)},"trigger":{_quote(trigger)},"version":'
        self._after_version = f',"at":{_instant(at)},"actor":{_text(actor)},"reason":'
        self._reasons: dict[str | None, str] = {}

    def __call__(
        self, task_id: str, from_status: str, version: int, reason: str | None, attempt: int
    ) -> str:
        """The record's JSON; ``from_status`` is never ``None`` (not a creation record)."""
        quoted = self._reasons.get(reason)
        if quoted is None:
            quoted = self._reasons[reason] = _text(reason)
        return (
            f'{{"v":{FORMAT_VERSION},"task_id":{_quote(task_id)},"from":{_quote(from_status)}'
            f"{self._to}{int.__repr__(version)}{self._after_version}{quoted},"
            f'"attempt":{int.__repr__(attempt)}}}'
        )


def array_json(values: Sequence[Any]) -> str:
    """``dumps(list(values))``; a list of strings (tags, ids) without the encoder's setup."""
    if all(type(value) is str for value in values):
        return f"[{','.join(map(_quote, values))}]"
    return dumps(list(values))
