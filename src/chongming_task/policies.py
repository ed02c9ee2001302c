"""Policies decide; they do not act.

Each policy is a frozen, keyword-only value validated on construction (a
``ConfigurationError`` says what is wrong and what is allowed). Decisions such as
"retry after how long" or "which timeout expires first" are pure functions of their
inputs: no I/O, no clock reads, no logging, so they can be tested exhaustively.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Literal

from chongming_task._public import public
from chongming_task._validation import INT64_MAX, MAX_SECONDS, check_int, check_utf8
from chongming_task.errors import ConfigurationError, TaskCancelled, TaskTimeout

__all__ = [
    "AggregationPolicy",
    "BucketPolicy",
    "ConcurrencyPolicy",
    "ExponentialBackoff",
    "FixedBackoff",
    "Jitter",
    "JoinMode",
    "RetryDecision",
    "RetryPolicy",
    "Timeout",
    "TimeoutScope",
]


def _number(
    value: object,
    name: str,
    *,
    minimum: float = 0.0,
    allow_none: bool = False,
    unit: str = "a number of seconds",
) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigurationError(f"{name} must be {unit}, got {value!r}")
    if value < minimum or math.isinf(value):
        raise ConfigurationError(f"{name} must be a finite number >= {minimum:g}, got {value!r}")
    if unit == "a number of seconds" and value > MAX_SECONDS:
        raise ConfigurationError(f"{name} must be at most {MAX_SECONDS:g} seconds, got {value!r}")


def _jitter(value: object, name: str) -> Jitter:
    """Accept a ``Jitter`` member or its string value ("none", "full", "equal")."""
    if isinstance(value, Jitter):
        return value
    if isinstance(value, str):
        try:
            return Jitter(value)
        except ValueError:
            pass
    allowed = ", ".join(f"Jitter.{member.name}" for member in Jitter)
    raise ConfigurationError(f"{name} must be one of {allowed}, got {value!r}")


def _positive_int(value: object, name: str, *, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")
    check_int(value, name, maximum=INT64_MAX)  # what the store can keep


# ----------------------------------------------------------------- backoff


@public
class Jitter(StrEnum):
    """How a computed backoff delay is randomised, so failed batches do not retry in step."""

    NONE = "none"
    """Exactly the computed delay."""
    FULL = "full"
    """Uniform in ``[0, delay)`` (the default: the best spread against retry storms)."""
    EQUAL = "equal"
    """``delay / 2`` plus uniform in ``[0, delay / 2)``: a floor with spread above it."""

    def apply(self, delay: float, rng: Callable[[], float]) -> float:
        """Randomise ``delay`` with ``rng`` (uniform in ``[0, 1)``, like ``random.random``)."""
        if self is Jitter.NONE or delay <= 0:
            return delay
        if self is Jitter.FULL:
            return delay * rng()
        return delay / 2 + (delay / 2) * rng()


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class FixedBackoff:
    """The same delay before every retry. ``FixedBackoff(0)`` removes waiting in tests."""

    delay: float = 1.0
    """Seconds before every retry (>= 0)."""
    jitter: Jitter = Jitter.NONE
    """No jitter by default: a fixed delay is usually chosen to be exact."""

    def __init__(self, delay: float = 1.0, *, jitter: Jitter = Jitter.NONE) -> None:
        # Positional ``delay`` on purpose: the guide writes ``FixedBackoff(0)``.
        _number(delay, "FixedBackoff.delay")
        object.__setattr__(self, "delay", float(delay))
        object.__setattr__(self, "jitter", _jitter(jitter, "FixedBackoff.jitter"))

    def delay_for(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return self.jitter.apply(self.delay, rng)


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialBackoff:
    """``base * factor ** (attempt - 1)``, capped at ``max_delay``, then jittered."""

    base: float = 1.0
    """Seconds before the first retry, before jitter."""
    factor: float = 2.0
    """Growth per attempt (>= 1; 1 makes it a fixed backoff with a cap)."""
    max_delay: float = 300.0
    """Cap on the computed delay, applied before jitter."""
    jitter: Jitter = Jitter.FULL
    """Full jitter by default, so a batch that failed together does not retry together."""

    def __post_init__(self) -> None:
        _number(self.base, "ExponentialBackoff.base")
        _number(self.factor, "ExponentialBackoff.factor", minimum=1.0, unit="a number")
        _number(self.max_delay, "ExponentialBackoff.max_delay")
        if self.max_delay < self.base:
            raise ConfigurationError(
                f"ExponentialBackoff.max_delay ({self.max_delay!r}) must be >= base ({self.base!r})"
            )
        object.__setattr__(self, "jitter", _jitter(self.jitter, "ExponentialBackoff.jitter"))

    def delay_for(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        exponent = max(0, attempt - 1)
        if self.base == 0 or self.factor == 1:
            raw = float(self.base)
        elif exponent * math.log(self.factor) >= math.log(self.max_delay / self.base):
            # Already at the cap; comparing logs first keeps factor ** exponent from
            # overflowing a float (6.0 ** 400 raises OverflowError).
            raw = float(self.max_delay)
        else:
            try:
                raw = self.base * float(self.factor) ** exponent
            except OverflowError:  # a denormal base can pass the log test above
                raw = float(self.max_delay)
        return self.jitter.apply(min(raw, self.max_delay), rng)


Backoff = FixedBackoff | ExponentialBackoff


# ----------------------------------------------------------------- retry


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """The result of :meth:`RetryPolicy.decide`."""

    retry: bool
    """Whether another attempt should follow."""
    delay: float = 0.0
    """Seconds to wait before it (0 when ``retry`` is false)."""
    reason: str = ""
    """Why, in words, for the transition's ``reason`` and the logs."""


_DEFAULT_RETRY_ON: Final[tuple[type[BaseException], ...]] = (Exception,)


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How many attempts a task gets and which failures earn another one (guide §5).

    ``max_attempts`` counts every attempt including the first, so ``1`` means no retry.
    ``give_up_on`` wins over ``retry_on``. Cancellation is never retried: ``TaskCancelled``
    is a ``BaseException`` and matches no ``retry_on`` of ``Exception`` subclasses, and
    :meth:`decide` refuses it explicitly besides.
    """

    max_attempts: int = 1
    """Every attempt including the first; 1 (the default) means no retry."""
    backoff: FixedBackoff | ExponentialBackoff = field(default_factory=ExponentialBackoff)
    """Delay before each retry; exponential with full jitter by default."""
    retry_on: tuple[type[BaseException], ...] = _DEFAULT_RETRY_ON
    """Exception classes worth retrying (a single class is accepted too)."""
    give_up_on: tuple[type[BaseException], ...] = ()
    """Exception classes that end the task at once; they win over ``retry_on``."""
    retry_timeouts: bool = True
    """Whether ``attempt``/``idle``/``no_progress`` timeouts are retried (usually transient)."""

    def __post_init__(self) -> None:
        _positive_int(self.max_attempts, "RetryPolicy.max_attempts")
        if not isinstance(self.backoff, FixedBackoff | ExponentialBackoff):
            raise ConfigurationError(
                "RetryPolicy.backoff must be FixedBackoff or ExponentialBackoff, "
                f"got {self.backoff!r}"
            )
        for name in ("retry_on", "give_up_on"):
            value = getattr(self, name)
            if isinstance(value, type):
                value = (value,)
            value = tuple(value)
            for item in value:
                if not (isinstance(item, type) and issubclass(item, BaseException)):
                    raise ConfigurationError(
                        f"RetryPolicy.{name} must hold exception classes, got {item!r}"
                    )
            object.__setattr__(self, name, value)
        if not isinstance(self.retry_timeouts, bool):
            raise ConfigurationError(
                f"RetryPolicy.retry_timeouts must be True or False, got {self.retry_timeouts!r}"
            )

    def decide(
        self,
        error: BaseException | None,
        attempt: int,
        *,
        timeout_scope: str | None = None,
        rng: Callable[[], float] = random.random,
    ) -> RetryDecision:
        """Whether failed attempt ``attempt`` (1-based) should be followed by another.

        The rules, in order: no attempt left -> no; cancellation -> never; an error in
        ``give_up_on`` -> no; a timeout (``timeout_scope`` given, or ``error`` is a
        :class:`TaskTimeout`) -> ``total`` never, the others per ``retry_timeouts``;
        any other error -> yes if it is in ``retry_on``. ``error=None`` without a
        scope (a crash, a non-zero exit) is retried.

        Args:
            error: The exception raised by the body, or ``None`` for a failure
                without one (a timeout, a dead process).
            attempt: The attempt that just failed, 1-based.
            timeout_scope: ``"start"``, ``"attempt"``, ``"idle"``, ``"no_progress"`` or
                ``"total"`` when a timeout ended the attempt.
            rng: Source of jitter, uniform in ``[0, 1)``; injected in tests.

        Raises:
            ConfigurationError: ``attempt`` is not an integer >= 1, or
                ``timeout_scope`` is not one of the five scopes.
        """
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise ConfigurationError(f"attempt must be an integer >= 1, got {attempt!r}")
        if timeout_scope is None and isinstance(error, TaskTimeout):
            timeout_scope = error.scope
        if timeout_scope is not None and timeout_scope not in _TIMEOUT_SCOPES:
            raise ConfigurationError(
                f"timeout_scope must be one of {', '.join(_TIMEOUT_SCOPES)} or None, "
                f"got {timeout_scope!r}"
            )
        if attempt >= self.max_attempts:
            return RetryDecision(False, reason=f"attempt {attempt} of {self.max_attempts} used")
        if isinstance(error, TaskCancelled):
            return RetryDecision(False, reason="cancellation is never retried")
        if error is not None and self.give_up_on and isinstance(error, self.give_up_on):
            return RetryDecision(False, reason=f"{type(error).__name__} is in give_up_on")
        if timeout_scope is not None:
            if timeout_scope == "total":
                return RetryDecision(False, reason="the total timeout is never retried")
            if not self.retry_timeouts:
                return RetryDecision(False, reason=f"{timeout_scope} timeout is not retried")
        elif error is not None and not isinstance(error, self.retry_on):
            return RetryDecision(False, reason=f"{type(error).__name__} is not in retry_on")
        return RetryDecision(True, self.backoff.delay_for(attempt, rng), "retryable")


# ----------------------------------------------------------------- timeouts


TimeoutScope = Literal["start", "attempt", "idle", "no_progress", "total"]

_TIMEOUT_SCOPES: Final = ("start", "attempt", "idle", "no_progress", "total")


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class Timeout:
    """Independent timeout scopes; the earliest to expire wins (guide §6).

    - ``start``: from submission to the first real start; void once an attempt starts.
    - ``per_attempt``: length of one attempt.
    - ``idle``: silence since the last ``checkpoint()``/heartbeat, only inside a started
      attempt and never while paused.
    - ``no_progress``: time since ``ctx.progress()`` last raised ``done`` (or since the
      attempt started), only inside a started attempt, paused time excluded. It catches
      the body that keeps checkpointing (so ``idle`` stays quiet) but gets nowhere.
    - ``total``: the whole run across all attempts and backoff waits (the scheduler's
      max runtime); never retried.

    All times are monotonic seconds (``clock.monotonic()``), never wall time.
    """

    start: float | None = None
    """Seconds from submission to the first start; ``None`` = no limit."""
    per_attempt: float | None = None
    """Seconds one attempt may run, paused time excluded; ``None`` = no limit."""
    idle: float | None = None
    """Seconds between checkpoints/heartbeats inside an attempt; ``None`` = no limit."""
    no_progress: float | None = None
    """Seconds an attempt may go without raising ``done``; ``None`` = no limit."""
    total: float | None = None
    """Seconds from submission to the end, across attempts; ``None`` = no limit."""

    def __post_init__(self) -> None:
        for name in ("start", "per_attempt", "idle", "no_progress", "total"):
            value = getattr(self, name)
            _number(value, f"Timeout.{name}", allow_none=True)
            if value is not None and value <= 0:
                raise ConfigurationError(
                    f"Timeout.{name} must be > 0 seconds or None (no limit), got {value!r}"
                )

    @property
    def is_unlimited(self) -> bool:
        """True when no scope is set, so nothing can ever expire."""
        scopes = (self.start, self.per_attempt, self.idle, self.no_progress, self.total)
        return all(v is None for v in scopes)

    def expired(
        self,
        *,
        now: float,
        submitted_at: float,
        attempt_started_at: float | None,
        last_beat_at: float | None,
        paused: bool = False,
        paused_seconds: float = 0.0,
        started_before: bool = False,
        last_progress_at: float | None = None,
    ) -> TimeoutScope | None:
        """The scope that has expired at monotonic time ``now``, or ``None``.

        Takes the arguments of :meth:`next_deadline`, plus ``now``.
        """
        deadline = self.next_deadline(
            submitted_at=submitted_at,
            attempt_started_at=attempt_started_at,
            last_beat_at=last_beat_at,
            paused=paused,
            paused_seconds=paused_seconds,
            started_before=started_before,
            last_progress_at=last_progress_at,
        )
        if deadline is not None and now >= deadline[0]:
            return deadline[1]
        return None

    def next_deadline(
        self,
        *,
        submitted_at: float,
        attempt_started_at: float | None,
        last_beat_at: float | None,
        paused: bool = False,
        paused_seconds: float = 0.0,
        started_before: bool = False,
        last_progress_at: float | None = None,
    ) -> tuple[float, TimeoutScope] | None:
        """The earliest (monotonic deadline, scope) pair, or ``None`` if nothing can expire.

        Args:
            submitted_at: When the task was submitted (``total`` and ``start`` count
                from here).
            attempt_started_at: When the current attempt started, or ``None`` between
                attempts (queued, retry_wait).
            last_beat_at: The last checkpoint or heartbeat of the current attempt;
                the runtime must beat when a paused attempt resumes, or the pause
                itself would read as silence.
            paused: The task is paused: nothing but ``total`` can expire.
            paused_seconds: Time spent paused in the current attempt; it does not
                count toward ``per_attempt``.
            started_before: Some earlier attempt started, so ``start`` no longer
                applies even while no attempt is current (e.g. in retry_wait).
            last_progress_at: When ``done`` last went up in the current attempt, moved
                forward by the time paused since (the runtime's job, as for
                ``last_beat_at``); ``None`` if it has not yet, so ``no_progress``
                counts from the attempt's start.
        """
        candidates: list[tuple[float, TimeoutScope]] = []
        if self.total is not None:
            candidates.append((submitted_at + self.total, "total"))
        if paused:
            pass
        elif attempt_started_at is None:
            if self.start is not None and not started_before:
                candidates.append((submitted_at + self.start, "start"))
        else:
            if self.per_attempt is not None:
                candidates.append(
                    (attempt_started_at + paused_seconds + self.per_attempt, "attempt")
                )
            if self.idle is not None:
                beat = (
                    attempt_started_at
                    if last_beat_at is None
                    else max(last_beat_at, attempt_started_at)
                )
                candidates.append((beat + self.idle, "idle"))
            if self.no_progress is not None:
                moved = (
                    attempt_started_at + paused_seconds
                    if last_progress_at is None
                    else max(last_progress_at, attempt_started_at + paused_seconds)
                )
                candidates.append((moved + self.no_progress, "no_progress"))
        if not candidates:
            return None
        return min(candidates, key=lambda item: item[0])


# ----------------------------------------------------------------- concurrency


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class ConcurrencyPolicy:
    """Execution slots of one process: a global cap, named-resource limits, a default priority.

    ``limits`` maps a tag to how many *active* tasks (paused ones included: a pause
    keeps its slot) carrying that tag may run at once. Tags not in ``limits`` are free.
    """

    max_parallel: int = 4
    """Tasks that may hold an execution slot at once in this process."""
    limits: Mapping[str, int] = field(default_factory=dict)
    """Per-tag caps on active tasks; read-only after construction."""
    priority: int = 0
    """Default priority of submissions; higher runs first, FIFO within one priority."""

    def __post_init__(self) -> None:
        _positive_int(self.max_parallel, "ConcurrencyPolicy.max_parallel")
        if not isinstance(self.limits, Mapping):
            raise ConfigurationError(
                f"ConcurrencyPolicy.limits must map tag -> int, got {self.limits!r}"
            )
        for tag, limit in self.limits.items():
            if not isinstance(tag, str) or not tag:
                raise ConfigurationError(f"limit tags must be non-empty strings, got {tag!r}")
            _positive_int(limit, f"ConcurrencyPolicy.limits[{tag!r}]")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise ConfigurationError(
                f"ConcurrencyPolicy.priority must be an integer, got {self.priority!r}"
            )
        object.__setattr__(self, "limits", MappingProxyType(dict(self.limits)))


# ----------------------------------------------------------------- buckets


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class BucketPolicy:
    """Maps a business key to a bucket, identically in every process and machine.

    It uses blake2b, never ``hash()``: CPython salts ``str`` hashes per process
    (``PYTHONHASHSEED``), which would silently send one key to different buckets.
    """

    num_buckets: int = 64
    """Buckets are ``0..num_buckets-1``. Changing it moves keys: pick it once."""

    def __post_init__(self) -> None:
        _positive_int(self.num_buckets, "BucketPolicy.num_buckets")

    def bucket_for(self, key: str) -> int:
        """The bucket of ``key``: blake2b (8 bytes, big-endian) modulo ``num_buckets``.

        Raises:
            ConfigurationError: ``key`` is not a non-empty string.
        """
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"bucket_key must be a non-empty string, got {key!r}")
        digest = hashlib.blake2b(check_utf8(key, "bucket_key").encode("utf-8"), digest_size=8)
        return int.from_bytes(digest.digest(), "big") % self.num_buckets

    def validate_buckets(self, buckets: Iterable[int]) -> frozenset[int]:
        """Check that every bucket is in ``0..num_buckets-1``; return them as a set."""
        result = set()
        for bucket in buckets:
            if isinstance(bucket, bool) or not isinstance(bucket, int):
                raise ConfigurationError(f"bucket numbers must be integers, got {bucket!r}")
            if not 0 <= bucket < self.num_buckets:
                raise ConfigurationError(
                    f"bucket {bucket} is outside 0..{self.num_buckets - 1} "
                    f"(num_buckets={self.num_buckets}); a task there would never run"
                )
            result.add(bucket)
        return frozenset(result)

    def bucket_for_submit(self, key: str | None, owned: frozenset[int] | None = None) -> int | None:
        """The bucket of a new task on a node owning ``owned`` (``None``: every bucket).

        Refuses what no node would ever run: on a partitioned node (it owns some
        buckets, not all) a task without a key, or a key whose bucket it does not own.

        Raises:
            ConfigurationError: As above, naming the buckets this node owns.
        """
        partitioned = owned is not None and len(owned) != self.num_buckets
        if key is None:
            if partitioned:
                assert owned is not None
                raise ConfigurationError(
                    f"this node owns only buckets {format_buckets(owned)} of "
                    f"{self.num_buckets}, so every task needs a bucket_key: a task in "
                    "no bucket would be claimed by no node. Pass bucket_key=..."
                )
            return None
        bucket = self.bucket_for(key)
        if partitioned and owned is not None and bucket not in owned:
            raise ConfigurationError(
                f"bucket {bucket} (from bucket_key={key!r}) is not owned by this node; "
                f"this node owns {format_buckets(owned)}. A task written into another node's "
                "bucket would never be run by any node."
            )
        return bucket


def format_buckets(buckets: Iterable[int]) -> str:
    """``[0, 1, ..., 15, 32, 33, ..., 47]``: runs of four or more are elided."""
    ordered = sorted(buckets)
    parts: list[str] = []
    index = 0
    while index < len(ordered):
        end = index
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        run = ordered[index : end + 1]
        if len(run) >= 4:
            parts.extend([str(run[0]), str(run[1]), "...", str(run[-1])])
        else:
            parts.extend(str(value) for value in run)
        index = end + 1
    return "[" + ", ".join(parts) + "]"


# ----------------------------------------------------------------- pipelines


@public
class JoinMode(StrEnum):
    """When a pipeline node is released, judged on its upstream nodes (guide §8.12)."""

    ALL_SUCCEEDED = "all_succeeded"
    ALL_SETTLED = "all_settled"
    ANY_SUCCEEDED = "any_succeeded"


@public
@dataclass(frozen=True, slots=True)
class AggregationPolicy:
    """How a whole pipeline settles: ``fail_fast()`` (default) or ``all_settled()``."""

    mode: Literal["fail_fast", "all_settled"] = "fail_fast"
    """Prefer the ``fail_fast()`` / ``all_settled()`` constructors to spelling it."""

    def __post_init__(self) -> None:
        mode: object = self.mode
        if mode not in ("fail_fast", "all_settled"):
            hint = (
                " (quorum is refused on purpose; see AggregationPolicy.quorum)"
                if mode == "quorum"
                else ""
            )
            raise ConfigurationError(
                f"AggregationPolicy.mode must be 'fail_fast' or 'all_settled', got {mode!r}{hint}"
            )

    @classmethod
    def fail_fast(cls) -> AggregationPolicy:
        """The first real failure cancels the released nodes and skips the rest."""
        return cls("fail_fast")

    @classmethod
    def all_settled(cls) -> AggregationPolicy:
        """Wait for every node to settle, then judge the whole."""
        return cls("all_settled")

    @classmethod
    def quorum(cls, *args: object, **kwargs: object) -> AggregationPolicy:
        """Refused on purpose (guide §8.12)."""
        raise ConfigurationError(
            "quorum aggregation is not supported: it describes 'k of N copies of the same "
            "work succeeded', which is a fan-out group, not a DAG of different nodes; "
            "use fail_fast() or all_settled(), and a JoinMode.ANY_SUCCEEDED node for redundancy"
        )

    @property
    def is_fail_fast(self) -> bool:
        """True for ``fail_fast``."""
        return self.mode == "fail_fast"
