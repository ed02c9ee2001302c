"""A schedule as declared in code: what to run, when, and under which policy.

The limits are the Go scheduler's (``validateTaskRegistration``), and so are the
messages, in this library's words: a bad definition fails when it is declared, not
at 02:00 when it first fires. Arguments must be JSON because they are persisted in
the control record and may be fired by another process (names, not code, cross
process boundaries).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, Literal

from chongming_task._model import JSONValue, ensure_json
from chongming_task._public import public
from chongming_task.errors import ConfigurationError
from chongming_task.policies import FixedBackoff, RetryPolicy, Timeout
from chongming_task.schedule._triggers import (
    CronTrigger,
    DstPolicy,
    IntervalTrigger,
    Trigger,
    validate_dst,
)

__all__ = [
    "DESCRIPTION_MAX",
    "MAX_RUNTIME_LIMIT",
    "NAME_MAX",
    "RETRY_ATTEMPTS_LIMIT",
    "RETRY_BACKOFF_LIMIT",
    "Misfire",
    "Overlap",
    "RunPolicy",
    "Schedule",
    "validate_schedule_name",
]

NAME_MAX: Final = 191
DESCRIPTION_MAX: Final = 1000
MAX_RUNTIME_LIMIT: Final = 86400
RETRY_ATTEMPTS_LIMIT: Final = 10
RETRY_BACKOFF_LIMIT: Final = 86400
#: The longest catch-up window: a catch-up enumerates the missed firings inside it.
MISFIRE_GRACE_LIMIT: Final = 86400

Overlap = Literal["forbid", "allow"]
Misfire = Literal["skip", "run_once"]

_NAME_RE: Final = re.compile(r"[\w][\w.:@/+-]*")
_NAME_HELP: Final = (
    "letters, digits and . _ - : / @ + (no spaces), starting with a letter, digit or _"
)


def validate_schedule_name(name: object) -> str:
    """Return ``name`` if it is a valid schedule name.

    Raises:
        ConfigurationError: empty, longer than 191 characters, or outside the charset.
    """
    if not isinstance(name, str) or not name or len(name) > NAME_MAX:
        raise ConfigurationError(
            f"schedule name must contain 1-{NAME_MAX} characters, got {name!r}"
        )
    if _NAME_RE.fullmatch(name) is None:
        raise ConfigurationError(f"schedule name {name!r} may contain only {_NAME_HELP}")
    return name


def _seconds(name: str, what: str, value: object, low: float, high: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or not low <= value <= high
    ):
        raise ConfigurationError(
            f"schedule {name!r} {what} seconds must be between {low:g} and {high:g}, got {value!r}"
        )
    return value


class RunPolicy:
    """The policy of a schedule's runs, from its three fields (a definition's, a record's)."""

    __slots__ = ()

    max_runtime: float
    retry_attempts: int
    retry_backoff: float

    @property
    def retry_policy(self) -> RetryPolicy:
        """``retry_attempts`` beyond the first, ``retry_backoff`` apart (no jitter)."""
        return RetryPolicy(
            max_attempts=1 + self.retry_attempts, backoff=FixedBackoff(self.retry_backoff)
        )

    @property
    def timeout(self) -> Timeout:
        """``max_runtime`` over the whole run: ``Timeout(total=...)``, never retried."""
        return Timeout(total=self.max_runtime)


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule(RunPolicy):
    """A named binding of a registered task, JSON arguments and a trigger, plus policy.

    Raises:
        ConfigurationError: on construction, for any value outside the limits below.
    """

    name: str
    """1-191 characters: letters, digits and ``. _ - : / @ +``."""
    task: str
    """The registered task name each firing submits."""
    trigger: Trigger
    """A :class:`CronTrigger` or :class:`IntervalTrigger` (a string becomes a UTC cron)."""
    args: tuple[JSONValue, ...] = ()
    kwargs: Mapping[str, JSONValue] = field(default_factory=dict)
    description: str = ""
    """At most 1000 characters."""
    overlap: Overlap = "forbid"
    """``forbid``: a firing while a previous run is unfinished is recorded as skipped."""
    max_runtime: float = 3600
    """Seconds for the whole run, all attempts and backoff included (1..86400)."""
    retry_attempts: int = 0
    """Attempts beyond the first (0..10)."""
    retry_backoff: float = 60
    """Seconds between attempts (1..86400)."""
    manual_run_enabled: bool = True
    misfire: Misfire = "skip"
    """After downtime: ``skip`` missed firings, or ``run_once`` (one catch-up in grace)."""
    misfire_grace: float = 3600
    """Seconds a missed firing stays eligible for the ``run_once`` catch-up (1..86400)."""
    bucket_key: str | None = None
    """Business key of the runs; with ``owned_buckets`` the owning node fires them."""
    tags: frozenset[str] = field(default_factory=frozenset)
    display_name: str | None = None
    """What people read (1-191 characters, trimmed); ``None``: the name."""
    dst: DstPolicy | None = None
    """DST policy of a cron trigger: ``default``, ``skip`` or ``vixie`` (see
    :mod:`chongming_task.schedule._triggers`); ``None`` keeps the trigger's own."""

    def __post_init__(self) -> None:
        name = validate_schedule_name(self.name)
        self._check_identity(name)
        self._check_policy(name)
        self._check_presentation(name)

    def _check_presentation(self, name: str) -> None:
        shown: object = name if self.display_name is None else self.display_name
        if not isinstance(shown, str) or not shown.strip() or len(shown.strip()) > NAME_MAX:
            raise ConfigurationError(
                f"schedule {name!r} display name must contain 1-{NAME_MAX} characters "
                f"(not only spaces), got {self.display_name!r}"
            )
        object.__setattr__(self, "display_name", shown.strip())
        trigger = self.trigger
        if self.dst is None:
            object.__setattr__(self, "dst", trigger.dst)
            return
        try:
            policy = validate_dst(self.dst)
        except ConfigurationError as exc:
            raise ConfigurationError(f"schedule {name!r}: {exc}") from exc
        if isinstance(trigger, CronTrigger) and trigger.dst != policy:
            try:
                rebuilt = CronTrigger(trigger.expression, trigger.timezone, dst=policy)
            except ConfigurationError as exc:
                raise ConfigurationError(f"schedule {name!r}: {exc}") from exc
            object.__setattr__(self, "trigger", rebuilt)
        object.__setattr__(self, "dst", policy)

    def _check_identity(self, name: str) -> None:
        if not isinstance(self.task, str) or not self.task.strip():
            raise ConfigurationError(f"schedule {name!r} task name is required, got {self.task!r}")
        trigger: object = self.trigger
        if isinstance(trigger, str):
            object.__setattr__(self, "trigger", CronTrigger(trigger))
        elif not isinstance(trigger, CronTrigger | IntervalTrigger):
            raise ConfigurationError(
                f"schedule {name!r} trigger must be a CronTrigger or IntervalTrigger, "
                f"got {trigger!r}"
            )
        args: object = self.args
        if not isinstance(args, list | tuple):
            raise ConfigurationError(f"schedule {name!r} args must be a list or tuple")
        if not isinstance(self.kwargs, Mapping):
            raise ConfigurationError(f"schedule {name!r} kwargs must be a mapping")
        ensure_json(list(self.args), f"schedule {name!r} args")
        ensure_json(dict(self.kwargs), f"schedule {name!r} kwargs")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))
        if self.bucket_key is not None and (
            not isinstance(self.bucket_key, str) or not self.bucket_key
        ):
            raise ConfigurationError(
                f"schedule {name!r} bucket_key must be a non-empty string or None"
            )
        tags: Iterable[object] = self.tags
        if isinstance(tags, str) or any(not isinstance(tag, str) or not tag for tag in tags):
            raise ConfigurationError(f"schedule {name!r} tags must be non-empty strings")
        object.__setattr__(self, "tags", frozenset(self.tags))

    def _check_policy(self, name: str) -> None:
        if not isinstance(self.description, str) or len(self.description) > DESCRIPTION_MAX:
            raise ConfigurationError(
                f"schedule {name!r} description exceeds {DESCRIPTION_MAX} characters"
            )
        if self.overlap not in ("forbid", "allow"):
            raise ConfigurationError(
                f"schedule {name!r} overlap policy {self.overlap!r} is invalid; "
                "use 'forbid' or 'allow'"
            )
        _seconds(name, "max runtime", self.max_runtime, 1, MAX_RUNTIME_LIMIT)
        attempts: object = self.retry_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            attempts = -1
        if not 0 <= attempts <= RETRY_ATTEMPTS_LIMIT:
            raise ConfigurationError(
                f"schedule {name!r} retry attempts must be between 0 and "
                f"{RETRY_ATTEMPTS_LIMIT}, got {self.retry_attempts!r}"
            )
        _seconds(name, "retry backoff", self.retry_backoff, 1, RETRY_BACKOFF_LIMIT)
        if not isinstance(self.manual_run_enabled, bool):
            raise ConfigurationError(f"schedule {name!r} manual_run_enabled must be a bool")
        if self.misfire not in ("skip", "run_once"):
            raise ConfigurationError(
                f"schedule {name!r} misfire policy {self.misfire!r} is invalid; "
                "use 'skip' or 'run_once'"
            )
        _seconds(name, "misfire grace", self.misfire_grace, 1, MISFIRE_GRACE_LIMIT)

    # -- derived policy ---------------------------------------------------------

    @property
    def anchor(self) -> datetime | None:
        """The interval grid's anchor, for interval triggers."""
        return self.trigger.anchor if isinstance(self.trigger, IntervalTrigger) else None

    def policy(self) -> dict[str, Any]:
        """The policy and definition fields as JSON, as the control record keeps them."""
        return {
            "task": self.task,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "description": self.description,
            "overlap": self.overlap,
            "max_runtime": self.max_runtime,
            "retry_attempts": self.retry_attempts,
            "retry_backoff": self.retry_backoff,
            "manual_run_enabled": self.manual_run_enabled,
            "misfire": self.misfire,
            "misfire_grace": self.misfire_grace,
            "bucket_key": self.bucket_key,
            "tags": sorted(self.tags),
            "display_name": self.display_name,
            "dst": self.dst,
        }
