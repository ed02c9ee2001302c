"""``CommandConsumer``: claim commands from the store, hand each to a handler, settle it.

Three parts of the library consume commands written by other processes: the
controller's poller (``stop``/``pause``/``resume`` of the tasks it holds), the
worker's intake (``submit``) and the scheduler (schedule commands), plus a node's
bucket agent (handoffs). Each used to write its own claim / apply / complete /
release loop, each with its own answer to the same questions. They are answered here,
once:

- **What is claimed.** The consumer's ``kinds`` and ``actions``, under its own lease,
  a bounded batch per call.
- **What becomes of a command.** The handler says, by what it returns:
  :class:`Complete` (done, with this result), :data:`RELEASE` (not ours: handed back
  at once, so whoever it is for still gets it) or :data:`KEEP` (still under way: the
  handler completes it later through :meth:`CommandConsumer.complete`, and keeps it
  alive meanwhile with :meth:`CommandConsumer.extend`).
- **A handler that raises.** The command is handed back for a later attempt (warned),
  the rest of the batch is still handled, and the first error is raised after the
  batch, for the caller's loop to count.
- **A claim lost** (the lease ran out and someone else took the command): warned and
  reported as ``False``, never raised; the new claimant answers it. Any other store
  failure while settling goes to ``on_store_error`` when given, else it is raised like
  a handler's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Final, Literal

from chongming_task._model import JSONValue
from chongming_task.errors import ClaimLost
from chongming_task.stores._base import Command, TaskStore

__all__ = ["KEEP", "RELEASE", "Batch", "CommandConsumer", "Complete", "Handler", "Outcome"]


@dataclass(frozen=True, slots=True)
class Complete:
    """Complete the command with ``result`` (what its issuer reads back)."""

    result: JSONValue = None


#: Hand the command back at once: it is for another consumer (or node).
RELEASE: Final = "release"
#: The handler completes the command later (a pause awaiting confirmation, a run).
KEEP: Final = "keep"

#: What a handler returns for one claimed command.
Outcome = Complete | Literal["release", "keep"]
Handler = Callable[[Command], Outcome]


@dataclass(frozen=True, slots=True)
class Batch:
    """What one :meth:`CommandConsumer.poll` did."""

    claimed: int
    """Commands claimed."""
    handed_back: int
    """Of those, released by the handler's :data:`RELEASE` (not ours)."""

    @property
    def more(self) -> bool:
        """Whether more may be waiting: something of ours was in the batch."""
        return self.claimed > self.handed_back


class CommandConsumer:
    """Claims one consumer's commands and settles what its handler decides.

    Args:
        store: Where the commands are.
        owner: The claimant written on each claim (the controller's or node's id).
        kinds: Command kinds claimed (``("task",)``).
        actions: Actions claimed, where the store can filter (``None``: every one).
        lease: Seconds a claim lasts; :meth:`extend` renews it.
        batch: Claims per :meth:`poll` unless it is given a ``limit``.
        logger: Where warnings go (the consumer's package logger).
        on_store_error: ``on_store_error(command, exc)`` for a failure to complete or
            release other than a lost claim; raised when not given.
    """

    def __init__(
        self,
        store: TaskStore,
        owner: str,
        *,
        kinds: Collection[str],
        actions: Collection[str] | None,
        lease: float,
        batch: int,
        logger: logging.Logger,
        on_store_error: Callable[[Command, Exception], None] | None = None,
    ) -> None:
        self.store = store
        self.owner = owner
        self.kinds = tuple(kinds)
        self.actions = None if actions is None else frozenset(actions)
        self.lease = lease
        self.batch = batch
        self._log = logger
        self._on_store_error = on_store_error
        self.completed = 0
        """Commands completed here (whatever their result)."""
        self.released = 0
        """Commands handed back here."""

    def claim(self, limit: int | None = None) -> list[Command]:
        """Claim up to ``limit`` (default: ``batch``) commands; settle each of them."""
        size = self.batch if limit is None else limit
        return self.store.claim_commands(
            self.owner, lease=self.lease, limit=size, kinds=self.kinds, actions=self.actions
        )

    def poll(self, handler: Handler, limit: int | None = None) -> Batch:
        """Claim a batch and settle each command as ``handler`` decides.

        Raises:
            Exception: The first error of a handler (or of settling) in the batch,
                after every other command of it was handled; that command was handed
                back.
        """
        commands = self.claim(limit)
        handed_back = 0
        failure: Exception | None = None
        for command in commands:
            try:
                outcome = handler(command)
                self.settle(command, outcome)
            except Exception as exc:  # one bad command must not strand the rest
                failure = failure or exc
                self._give_back(command, exc)
                continue
            handed_back += outcome == RELEASE
        if failure is not None:
            raise failure
        return Batch(claimed=len(commands), handed_back=handed_back)

    def settle(self, command: Command, outcome: Outcome) -> bool:
        """Complete, release or keep ``command``; ``False`` when its claim was lost."""
        if isinstance(outcome, Complete):
            return self.complete(command, outcome.result)
        if outcome == RELEASE:
            return self.release(command)
        return True

    def complete(self, command: Command, result: JSONValue = None) -> bool:
        """Complete a claimed command with ``result``; ``False`` when the claim was lost."""
        done = self._call(
            command,
            lambda: self.store.complete_command(command.command_id, _token(command), result),
        )
        self.completed += done
        return done

    def release(self, command: Command) -> bool:
        """Hand a claimed command back at once; ``False`` when the claim was lost."""
        done = self._call(
            command, lambda: self.store.release_command(command.command_id, _token(command))
        )
        self.released += done
        return done

    def _call(self, command: Command, settle: Callable[[], None]) -> bool:
        """Run one settling store call; whether it took (see the module docstring)."""
        try:
            settle()
        except ClaimLost as exc:
            self._log.warning("command %s (%s): %s", command.command_id, command.action, exc)
            return False
        except Exception as exc:
            if self._on_store_error is None:
                raise
            self._on_store_error(command, exc)
            return False
        return True

    def extend(self, command: Command, lease: float | None = None) -> None:
        """Renew the claim of a kept command (default: by the consumer's lease).

        Raises:
            ClaimLost: Another claimant took it; it is not ours to complete any more.
        """
        self.store.extend_command(
            command.command_id, _token(command), self.lease if lease is None else lease
        )

    def _give_back(self, command: Command, exc: Exception) -> None:
        """Release a command whose handling failed, for a later attempt."""
        self._log.warning(
            "command %s (%s) failed, handed back: %s: %s",
            command.command_id,
            command.action,
            type(exc).__name__,
            exc,
        )
        try:
            self.store.release_command(command.command_id, _token(command))
        except Exception as release_exc:  # its lease will run out instead
            self._log.warning("command %s: not handed back: %s", command.command_id, release_exc)


def _token(command: Command) -> str:
    return command.claim_token or ""
