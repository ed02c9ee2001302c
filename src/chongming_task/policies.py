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

from chongming_task.errors import ConfigurationError, TaskCancelled

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


def _number(value: object, name: str, *, minimum: float = 0.0, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    if value < minimum or math.isinf(value):
        raise ConfigurationError(f"{name} must be a finite number >= {minimum:g}, got {value!r}")


def _positive_int(value: object, name: str, *, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")


# ----------------------------------------------------------------- backoff


class Jitter(StrEnum):
    """How a computed backoff delay is randomised, so failed batches do not retry in step."""

    NONE = "none"
    """Exactly the computed delay."""
    FULL = "full"
    """Uniform in ``[0, delay)`` (the default: the best spread against retry storms)."""
    EQUAL = "equal"
    """``delay / 2`` plus uniform in ``[0, delay / 2)``: a floor with spread above it."""

    def apply(self, delay: float, rng: Callable[[], float]) -> float:
        if self is Jitter.NONE or delay <= 0:
            return delay
        if self is Jitter.FULL:
            return delay * rng()
        return delay / 2 + (delay / 2) * rng()


@dataclass(frozen=True, slots=True, kw_only=True)
class FixedBackoff:
    """The same delay before every retry. ``FixedBackoff(0)`` removes waiting in tests."""

    delay: float = 1.0
    jitter: Jitter = Jitter.NONE

    def __init__(self, delay: float = 1.0, *, jitter: Jitter = Jitter.NONE) -> None:
        _number(delay, "FixedBackoff.delay")
        if not isinstance(jitter, Jitter):
            raise ConfigurationError(f"jitter must be a Jitter member, got {jitter!r}")
        object.__setattr__(self, "delay", float(delay))
        object.__setattr__(self, "jitter", jitter)

    def delay_for(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return self.jitter.apply(self.delay, rng)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialBackoff:
    """``base * factor ** (attempt - 1)``, capped at ``max_delay``, then jittered."""

    base: float = 1.0
    factor: float = 2.0
    max_delay: float = 300.0
    jitter: Jitter = Jitter.FULL

    def __post_init__(self) -> None:
        _number(self.base, "ExponentialBackoff.base")
        _number(self.factor, "ExponentialBackoff.factor", minimum=1.0)
        _number(self.max_delay, "ExponentialBackoff.max_delay")
        if self.max_delay < self.base:
            raise ConfigurationError(
                f"ExponentialBackoff.max_delay ({self.max_delay!r}) must be >= base ({self.base!r})"
            )
        if not isinstance(self.jitter, Jitter):
            raise ConfigurationError(f"jitter must be a Jitter member, got {self.jitter!r}")

    def delay_for(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        exponent = max(0, attempt - 1)
        # Cap the exponent before pow: factor ** 10_000 would overflow a float.
        raw = self.max_delay if exponent > 1024 else self.base * self.factor**exponent
        return self.jitter.apply(min(raw, self.max_delay), rng)


Backoff = FixedBackoff | ExponentialBackoff


# ----------------------------------------------------------------- retry


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """The result of :meth:`RetryPolicy.decide`."""

    retry: bool
    delay: float = 0.0
    reason: str = ""


_DEFAULT_RETRY_ON: Final[tuple[type[BaseException], ...]] = (Exception,)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How many attempts a task gets and which failures earn another one (guide §5).

    ``max_attempts`` counts every attempt including the first, so ``1`` means no retry.
    ``give_up_on`` wins over ``retry_on``. Cancellation is never retried: ``TaskCancelled``
    is a ``BaseException`` and matches no ``retry_on`` of ``Exception`` subclasses, and
    :meth:`decide` refuses it explicitly besides.
    """

    max_attempts: int = 1
    backoff: FixedBackoff | ExponentialBackoff = field(default_factory=ExponentialBackoff)
    retry_on: tuple[type[BaseException], ...] = _DEFAULT_RETRY_ON
    give_up_on: tuple[type[BaseException], ...] = ()
    retry_timeouts: bool = True
    """Whether ``start``/``attempt``/``idle`` timeouts are retried (they usually are transient)."""

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

    def decide(
        self,
        error: BaseException | None,
        attempt: int,
        *,
        timeout_scope: str | None = None,
        rng: Callable[[], float] = random.random,
    ) -> RetryDecision:
        """Whether failed attempt ``attempt`` (1-based) should be followed by another.

        ``error`` is the exception raised by the body, or ``None`` for a timeout
        (then ``timeout_scope`` names it: ``total`` timeouts are never retried).
        """
        if attempt >= self.max_attempts:
            return RetryDecision(False, reason=f"attempt {attempt} of {self.max_attempts} used")
        if isinstance(error, TaskCancelled):
            return RetryDecision(False, reason="cancellation is never retried")
        if error is None:
            if timeout_scope == "total" or not self.retry_timeouts:
                return RetryDecision(False, reason=f"{timeout_scope} timeout is not retried")
        else:
            if self.give_up_on and isinstance(error, self.give_up_on):
                return RetryDecision(False, reason=f"{type(error).__name__} is in give_up_on")
            if not isinstance(error, self.retry_on):
                return RetryDecision(False, reason=f"{type(error).__name__} is not in retry_on")
        return RetryDecision(True, self.backoff.delay_for(attempt, rng), "retryable")


# ----------------------------------------------------------------- timeouts


TimeoutScope = Literal["start", "attempt", "idle", "total"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeout:
    """Independent timeout scopes; the earliest to expire wins (guide §6).

    - ``start``: from submission to the first real start; void once an attempt starts.
    - ``per_attempt``: length of one attempt.
    - ``idle``: silence since the last ``checkpoint()``/heartbeat, only inside a started
      attempt and never while paused.
    - ``total``: the whole run across all attempts and backoff waits (the scheduler's
      max runtime); never retried.
    """

    start: float | None = None
    per_attempt: float | None = None
    idle: float | None = None
    total: float | None = None

    def __post_init__(self) -> None:
        for name in ("start", "per_attempt", "idle", "total"):
            value = getattr(self, name)
            _number(value, f"Timeout.{name}", allow_none=True)
            if value is not None and value <= 0:
                raise ConfigurationError(
                    f"Timeout.{name} must be > 0 seconds or None (no limit), got {value!r}"
                )

    @property
    def is_unlimited(self) -> bool:
        return all(v is None for v in (self.start, self.per_attempt, self.idle, self.total))

    def expired(
        self,
        *,
        now: float,
        submitted_at: float,
        attempt_started_at: float | None,
        last_beat_at: float | None,
        paused: bool = False,
        paused_seconds: float = 0.0,
    ) -> TimeoutScope | None:
        """The scope that has expired at monotonic time ``now``, or ``None``.

        ``paused_seconds`` is time spent paused within the current attempt; it does not
        count toward ``per_attempt`` or ``idle``. While ``paused`` nothing but ``total``
        can expire.
        """
        deadline = self.next_deadline(
            submitted_at=submitted_at,
            attempt_started_at=attempt_started_at,
            last_beat_at=last_beat_at,
            paused=paused,
            paused_seconds=paused_seconds,
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
    ) -> tuple[float, TimeoutScope] | None:
        """The earliest (monotonic deadline, scope) pair, or ``None`` if nothing can expire."""
        candidates: list[tuple[float, TimeoutScope]] = []
        if self.total is not None:
            candidates.append((submitted_at + self.total, "total"))
        if attempt_started_at is None:
            if self.start is not None:
                candidates.append((submitted_at + self.start, "start"))
        elif not paused:
            if self.per_attempt is not None:
                candidates.append(
                    (attempt_started_at + paused_seconds + self.per_attempt, "attempt")
                )
            if self.idle is not None:
                beat = max(last_beat_at or attempt_started_at, attempt_started_at)
                candidates.append((beat + self.idle, "idle"))
        if not candidates:
            return None
        return min(candidates, key=lambda item: item[0])


# ----------------------------------------------------------------- concurrency


@dataclass(frozen=True, slots=True, kw_only=True)
class ConcurrencyPolicy:
    """Execution slots of one process: a global cap, named-resource limits, a default priority.

    ``limits`` maps a tag to how many *active* tasks (paused ones included: a pause
    keeps its slot) carrying that tag may run at once. Tags not in ``limits`` are free.
    """

    max_parallel: int = 4
    limits: Mapping[str, int] = field(default_factory=dict)
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
            raise ConfigurationError(f"priority must be an integer, got {self.priority!r}")
        object.__setattr__(self, "limits", MappingProxyType(dict(self.limits)))


# ----------------------------------------------------------------- buckets


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketPolicy:
    """Maps a business key to a bucket, identically in every process and machine.

    It uses blake2b, never ``hash()``: CPython salts ``str`` hashes per process
    (``PYTHONHASHSEED``), which would silently send one key to different buckets.
    """

    num_buckets: int = 64

    def __post_init__(self) -> None:
        _positive_int(self.num_buckets, "BucketPolicy.num_buckets")

    def bucket_for(self, key: str) -> int:
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"bucket_key must be a non-empty string, got {key!r}")
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.num_buckets

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


# ----------------------------------------------------------------- pipelines


class JoinMode(StrEnum):
    """When a pipeline node is released, judged on its upstream nodes (guide §8.12)."""

    ALL_SUCCEEDED = "all_succeeded"
    ALL_SETTLED = "all_settled"
    ANY_SUCCEEDED = "any_succeeded"


@dataclass(frozen=True, slots=True)
class AggregationPolicy:
    """How a whole pipeline settles: ``fail_fast()`` (default) or ``all_settled()``."""

    mode: Literal["fail_fast", "all_settled"] = "fail_fast"

    def __post_init__(self) -> None:
        if self.mode not in ("fail_fast", "all_settled"):
            raise ConfigurationError(
                f"aggregation mode must be 'fail_fast' or 'all_settled', got {self.mode!r}"
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
        return self.mode == "fail_fast"
