"""Fleet limits: caps on concurrency and on starts per window, obeyed by every worker.

A limit has a *key*: a tag, a dynamic ``concurrency_key`` given at enqueue
(``enqueue(..., concurrency_key="tenant:42")``), or a pattern ending in ``*``
(``tenant:*``: one limit per distinct key that starts with ``tenant:``). A task's keys
are its tags plus its concurrency key, one namespace. A key's bound comes from the
limit declared for exactly that key, else from the longest matching pattern.

A limit caps ``concurrency`` (how many tasks of the key hold a slot at once across
the fleet), ``rate`` (how many may start within a sliding window, ``"100/m"``), or
both. Limits are declared in the store (``Client.set_limit``, ``chongming-task limits
set``) and enforced by the store inside the claim (``claim_queued``), so any number of
workers racing never exceed one. A worker's ``global_limits`` (``--global-limit
db=4``) are concurrency limits of the same kind that only that worker's claims apply.

Bookkeeping, all in the store and read inside the claim's transaction (or under the
memory store's lock):

* a *slot* (:class:`GlobalSlot`) per holder of a concurrency limit -- (key, task id,
  owner, acquired at, lease until) -- taken in the claim, renewed with the task's
  lease (``renew_leases``), deleted when the task ends (``release_global_slots``); a
  holder that dies stops renewing, and past its lease the slot no longer counts;
* a *start* (:class:`LimitStart`) per claim of a rate-limited key, counted until the
  window that began with it has passed.

A task that does not fit is not claimed: it stays ``queued`` and unheld, visible in
``ps``, and ``explain`` names the limit, its holders, or when the window next opens.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from chongming_task._model import JSONValue
from chongming_task.errors import ConfigurationError

__all__ = [
    "FleetLimit",
    "GlobalSlot",
    "LimitBook",
    "LimitLedger",
    "LimitStart",
    "LimitUse",
    "Rate",
    "check_concurrency_key",
    "check_limit",
    "check_limit_key",
    "limit_uses",
    "parse_rate",
]

_UNITS: Final = {"s": 1, "m": 60, "h": 3600}
_RATE: Final = re.compile(r"^\s*(\d+)\s*/\s*([smh])\s*$")
_KEY: Final = re.compile(r"^[^\s*]+\*?$|^\*$")
MAX_KEY: Final = 200


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts within any ``seconds``-long window."""

    count: int
    seconds: int

    def __str__(self) -> str:
        unit = {1: "s", 60: "m", 3600: "h"}[self.seconds]
        return f"{self.count}/{unit}"

    @property
    def window(self) -> timedelta:
        return timedelta(seconds=self.seconds)


def parse_rate(value: object, name: str = "rate") -> Rate:
    """``"100/m"`` (also ``/s`` and ``/h``) as a :class:`Rate`.

    Raises:
        ConfigurationError: Not a string of that form, or a count below 1.
    """
    if isinstance(value, Rate):
        return value
    found = _RATE.match(value) if isinstance(value, str) else None
    if found is None:
        raise ConfigurationError(
            f"{name} must be COUNT/UNIT with UNIT s, m or h (e.g. '100/m'), got {value!r}"
        )
    count = int(found.group(1))
    if count < 1:
        raise ConfigurationError(f"{name} must allow at least 1 start per window, got {value!r}")
    return Rate(count, _UNITS[found.group(2)])


def check_limit_key(key: object, name: str = "a limit key") -> str:
    """A limit key: a tag or concurrency key, or a pattern ending in ``*``.

    Raises:
        ConfigurationError: Not a non-empty string without spaces, longer than 200
            characters, or with a ``*`` anywhere but at the end.
    """
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"{name} must be a non-empty string, got {key!r}")
    if len(key) > MAX_KEY:
        raise ConfigurationError(f"{name} has at most {MAX_KEY} characters, got {len(key)}")
    if not _KEY.match(key):
        raise ConfigurationError(
            f"{name} {key!r}: no spaces, and '*' only at the end (a pattern such as "
            "'tenant:*' means one limit per matching key)"
        )
    return key


def check_concurrency_key(key: object) -> str:
    """A task's ``concurrency_key``: a limit key that is not a pattern.

    Raises:
        ConfigurationError: As :func:`check_limit_key`, or it ends in ``*``.
    """
    checked = check_limit_key(key, "concurrency_key")
    if checked.endswith("*"):
        raise ConfigurationError(
            f"concurrency_key {checked!r} ends in '*': a task's key is one key, "
            "patterns are for Client.set_limit"
        )
    return checked


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetLimit:
    """A limit declared in the store: a key (or pattern) and its bounds."""

    key: str
    concurrency: int | None = None
    """How many tasks of a key may hold a slot at once across every worker."""
    rate: Rate | None = None
    """How many tasks of a key may start within a sliding window."""

    @property
    def is_pattern(self) -> bool:
        return self.key.endswith("*")

    def matches(self, key: str) -> bool:
        return key.startswith(self.key[:-1]) if self.is_pattern else key == self.key

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "key": self.key,
            "concurrency": self.concurrency,
            "rate": None if self.rate is None else str(self.rate),
        }


def check_limit(key: object, concurrency: object = None, rate: object = None) -> FleetLimit:
    """The one validation of a fleet limit (API, CLI and dashboard).

    Raises:
        ConfigurationError: A malformed key, a concurrency that is not an integer of at
            least 1, a malformed rate, or neither bound given.
    """
    checked_key = check_limit_key(key)
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ConfigurationError(
            f"limit {checked_key!r}: concurrency must be an integer of at least 1, "
            f"got {concurrency!r}"
        )
    parsed = None if rate is None else parse_rate(rate, f"limit {checked_key!r}: rate")
    if concurrency is None and parsed is None:
        raise ConfigurationError(
            f"limit {checked_key!r}: give concurrency=N, rate='N/s|m|h', or both"
        )
    return FleetLimit(key=checked_key, concurrency=concurrency, rate=parsed)


@dataclass(frozen=True, slots=True, kw_only=True)
class GlobalSlot:
    """One holder of one concurrency limit's slot, as the store keeps it."""

    name: str
    """The concrete key (a tag or a concurrency key; never a pattern)."""
    task_id: str
    """The task holding it."""
    owner: str
    """The worker that claimed the task (and renews the lease)."""
    acquired_at: datetime
    lease_until: datetime
    """Renewed with the task's lease; past it the slot no longer counts."""

    def live(self, now: datetime) -> bool:
        """Whether it still counts against its limit at ``now``."""
        return self.lease_until > now


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitStart:
    """One start of a task under a rate-limited key, as the store keeps it."""

    key: str
    task_id: str
    started_at: datetime
    expires_at: datetime
    """The end of the window that began with it: from then on it no longer counts."""

    def live(self, now: datetime) -> bool:
        return self.expires_at > now


class LimitBook:
    """The limits one claim obeys: the store's declared ones plus a worker's own."""

    def __init__(
        self, declared: Iterable[FleetLimit], extra: Mapping[str, int] | None = None
    ) -> None:
        self.exact: dict[str, FleetLimit] = {}
        patterns: list[FleetLimit] = []
        for limit in declared:
            if limit.is_pattern:
                patterns.append(limit)
            else:
                self.exact[limit.key] = limit
        self.patterns = sorted(patterns, key=lambda p: -len(p.key))
        self.extra = dict(extra or {})
        self._bounds: dict[str, tuple[int | None, Rate | None]] = {}

    def __bool__(self) -> bool:
        return bool(self.exact or self.patterns or self.extra)

    def rule_for(self, key: str) -> FleetLimit | None:
        """The declared limit bounding ``key``: its own, else the longest pattern."""
        found = self.exact.get(key)
        if found is not None:
            return found
        return next((p for p in self.patterns if p.matches(key)), None)

    def bounds(self, key: str) -> tuple[int | None, Rate | None]:
        """``key``'s concurrency and rate (the smaller concurrency of store and worker)."""
        cached = self._bounds.get(key)
        if cached is not None:
            return cached
        rule = self.rule_for(key)
        caps = [c for c in (None if rule is None else rule.concurrency, self.extra.get(key)) if c]
        bound = (min(caps) if caps else None, None if rule is None else rule.rate)
        self._bounds[key] = bound
        return bound

    def keys_of(self, tags: Iterable[str], concurrency_key: str | None) -> frozenset[str]:
        """The keys of a task (its tags and concurrency key) that some limit bounds."""
        keys = set(tags)
        if concurrency_key is not None:
            keys.add(concurrency_key)
        return frozenset(k for k in keys if self.bounds(k) != (None, None))


class LimitLedger:
    """One claim's view of the fleet limits: which keys are full, and taking room.

    Pure bookkeeping over the live slot and start counts the store read inside the
    claim's transaction (or under its lock), so every store decides the same way.
    """

    def __init__(
        self, book: LimitBook, holders: Mapping[str, int], starts: Mapping[str, int]
    ) -> None:
        self.book = book
        self.holders: Counter[str] = Counter(holders)
        self.starts: Counter[str] = Counter(starts)

    def _room(self, key: str) -> bool:
        concurrency, rate = self.book.bounds(key)
        if concurrency is not None and self.holders[key] >= concurrency:
            return False
        return rate is None or self.starts[key] < rate.count

    def full(self) -> list[str]:
        """The keys with no room now (sorted): only keys with holders or starts can be."""
        return sorted(k for k in set(self.holders) | set(self.starts) if not self._room(k))

    def fits(self, keys: Iterable[str]) -> bool:
        return all(self._room(key) for key in keys)

    def take(self, keys: Iterable[str], now: datetime) -> tuple[list[str], list[LimitStart]]:
        """Room for one task in each of ``keys``: the slot names and the starts to store."""
        slots: list[str] = []
        starts: list[LimitStart] = []
        for key in sorted(keys):
            concurrency, rate = self.book.bounds(key)
            if concurrency is not None:
                self.holders[key] += 1
                slots.append(key)
            if rate is not None:
                self.starts[key] += 1
                starts.append(
                    LimitStart(key=key, task_id="", started_at=now, expires_at=now + rate.window)
                )
        return slots, starts


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitUse:
    """How full one key's limit is now (for ``explain``, the CLI and the dashboard)."""

    key: str
    """The concrete key (a tag or a concurrency key)."""
    rule: str
    """The declared key bounding it (``key`` itself, or a pattern such as ``tenant:*``)."""
    concurrency: int | None
    holders: tuple[GlobalSlot, ...]
    rate: Rate | None
    starts: tuple[LimitStart, ...]
    """Live starts in the current window, oldest first."""

    @property
    def concurrency_full(self) -> bool:
        return self.concurrency is not None and len(self.holders) >= self.concurrency

    @property
    def rate_full(self) -> bool:
        return self.rate is not None and len(self.starts) >= self.rate.count

    @property
    def opens_at(self) -> datetime | None:
        """When the rate window next has room (``None``: it has room, or no rate)."""
        if self.rate is None or not self.rate_full:
            return None
        return self.starts[len(self.starts) - self.rate.count].expires_at


def limit_uses(
    keys: Iterable[str],
    limits: Iterable[FleetLimit],
    slots: Iterable[GlobalSlot],
    starts: Iterable[LimitStart],
    now: datetime,
) -> list[LimitUse]:
    """The use of each of ``keys`` that a declared limit bounds, by key."""
    book = LimitBook(limits)
    live_slots = [s for s in slots if s.live(now)]
    live_starts = sorted((s for s in starts if s.live(now)), key=lambda s: s.started_at)
    found: list[LimitUse] = []
    for key in sorted(set(keys)):
        rule = book.rule_for(key)
        if rule is None:
            continue
        found.append(
            LimitUse(
                key=key,
                rule=rule.key,
                concurrency=rule.concurrency,
                holders=tuple(s for s in live_slots if s.name == key),
                rate=rule.rate,
                starts=tuple(s for s in live_starts if s.key == key),
            )
        )
    return found
