"""The command concern of a store: cross-process control, claimed under a lease.

A controller that does not hold a task writes a command for its holder; the holder's
poller claims it, applies it and completes it (guide §8.7). The claim is a lease fenced
by a claim token, so a crashed claimant's command becomes claimable again and is never
applied twice at once. A store without this concern still runs tasks in its own
process; what needs commands (control from another process, workers taking store
submissions, schedule commands, bucket handoffs) refuses it with a
``ConfigurationError`` (:func:`chongming_task.stores._capabilities.require`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection

from chongming_task._model import JSONValue
from chongming_task._validation import check_seconds
from chongming_task.errors import ConfigurationError
from chongming_task.stores._records import Command

__all__ = ["CommandStore", "validate_actions", "validate_claim"]


def validate_actions(actions: Collection[str] | None) -> frozenset[str] | None:
    """The ``actions`` filter of :meth:`CommandStore.claim_commands`, checked and frozen.

    A bare string is refused rather than read as a set of one-letter actions (which
    would silently claim nothing), and so is an empty collection: a claimer that asks
    for no action at all would never get a command, and never say why.

    Raises:
        ConfigurationError: ``actions`` is a string, is empty, or holds anything but
            non-empty strings.
    """
    if actions is None:
        return None
    if isinstance(actions, str | bytes):
        raise ConfigurationError(
            f"actions must be a collection of action names, not the string {actions!r} "
            f"(did you mean ({actions!r},)?)"
        )
    names = frozenset(actions)
    if not names:
        raise ConfigurationError("actions must name at least one action (None claims any)")
    bad = sorted(repr(name) for name in names if not isinstance(name, str) or not name)
    if bad:
        raise ConfigurationError(f"actions must be non-empty strings; got {', '.join(bad)}")
    return names


def validate_claim(
    lease: float, limit: int, actions: Collection[str] | None
) -> frozenset[str] | None:
    """The arguments of :meth:`CommandStore.claim_commands`, checked; returns the
    ``actions`` filter frozen (:func:`validate_actions`).

    Raises:
        ConfigurationError: ``lease`` is not a positive number of seconds, ``limit`` is
            not >= 1, or ``actions`` is refused by :func:`validate_actions`.
    """
    check_seconds(lease, "lease")
    if isinstance(limit, bool) or limit < 1:
        raise ConfigurationError(f"limit must be >= 1, got {limit!r}")
    return validate_actions(actions)


class CommandStore(ABC):
    """Commands: submitted once, claimed under a lease, settled with the claim's token.

    Every method is safe from many threads, reads ``self.clock`` (of the store) at call
    time, and raises :class:`~chongming_task.errors.StoreError` when the backend fails.
    """

    @abstractmethod
    def submit_command(self, command: Command) -> Command:
        """Store a pending command and wake waiters; returns the stored command.

        Submitting a ``command_id`` that already exists is idempotent: the stored
        command is returned unchanged (a retried submit cannot issue twice).
        """

    @abstractmethod
    def claim_commands(
        self,
        owner: str,
        *,
        lease: float,
        limit: int = 10,
        kinds: Collection[str] | None = None,
        actions: Collection[str] | None = None,
    ) -> list[Command]:
        """Claim up to ``limit`` commands for ``owner`` for ``lease`` seconds.

        Eligible: pending commands whose ``target_owner`` is ``owner`` or ``None``, and
        claimed ones (same owner rule) whose lease has expired; only those of the given
        ``kinds`` and ``actions`` when these are given. Each returned command has a
        fresh ``claim_token``, ``claimed_by=owner`` and ``claims`` incremented. No
        command is ever returned to two callers with overlapping leases.

        Order: oldest first (in submission order; a released or expired command keeps
        its place), and the list is returned in that order.

        ``actions`` exists so that a claimer never holds a command it would only hand
        back: another consumer of the same owner claiming in that instant would miss
        it and take a later one first. Check the arguments with :func:`validate_claim`.

        Raises:
            ConfigurationError: ``lease <= 0``, ``limit < 1``, or ``actions`` is not
                ``None`` nor a non-empty collection of non-empty names.
        """

    @abstractmethod
    def complete_command(self, command_id: str, claim_token: str, result: JSONValue = None) -> None:
        """Mark a claimed command done with ``result``.

        Raises:
            ClaimLost: the token is not the current claim (expired and re-claimed,
                released, or already completed).
            StoreError: no such command, or the backend failed.
        """

    @abstractmethod
    def release_command(self, command_id: str, claim_token: str) -> None:
        """Give a claimed command back (pending, no claimant) so its rightful owner gets it.

        Raises ``ClaimLost``/``StoreError`` like ``complete_command``.
        """

    @abstractmethod
    def extend_command(self, command_id: str, claim_token: str, lease: float) -> None:
        """Push the claim's lease to ``now + lease`` while the work is still going on.

        Raises ``ClaimLost``/``StoreError`` like ``complete_command``.
        """

    @abstractmethod
    def get_command(self, command_id: str) -> Command | None:
        """The command as stored, or ``None``."""

    @abstractmethod
    def wait_for_commands(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds (of ``self.clock``) until a command may have arrived.

        A hint, not a guarantee: callers claim after it returns either way. Returns at
        once if a command was submitted since this thread's last ``claim_commands``,
        and promptly when the store is closed.
        """
