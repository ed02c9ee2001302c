"""Hand buckets from one live node to another, through the store, and wait for it.

:func:`handoff` checks the request against the registry, writes a ``release_buckets``
command for the old owner and waits until it confirms; the old owner then writes the
``adopt_buckets`` command for the new owner itself, and :func:`handoff` waits for
that one too. What each node does is in :mod:`chongming_task.buckets._agent`; in short:

* the old owner stops claiming (and accepting) tasks of the buckets at once;
* tasks do not migrate: what it holds of them -- running, or claimed and waiting for a
  slot -- finishes there; with ``drain=True`` (the default) it confirms only once it
  holds none of them, so no two nodes ever run tasks of one bucket at the same time;
  ``drain=False`` confirms at once and lets them finish alongside the new owner;
* queued tasks nobody holds stay where they are, in the store, and the new owner
  claims them once it has adopted the buckets.

If the wait times out, nothing is undone: the commands stay in the store and the
nodes finish the handoff when they get to it (``buckets --owners`` shows the buckets
as ``draining`` meanwhile). :class:`HandoffTimeout` says which step was pending.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from chongming_task._model import JSONValue
from chongming_task._public import public
from chongming_task.buckets._agent import RELEASE
from chongming_task.buckets._registry import OwnershipReport, ownership_report
from chongming_task.controller._buckets import format_buckets
from chongming_task.controller._options import default_owner
from chongming_task.errors import (
    ConfigurationError,
    HandoffError,
    HandoffRefused,
    HandoffTimeout,
)
from chongming_task.policies import BucketPolicy
from chongming_task.stores._base import Command, TaskStore

__all__ = ["HandoffError", "HandoffRefused", "HandoffResult", "HandoffTimeout", "handoff"]

#: How often the caller reads the commands while waiting.
POLL_INTERVAL: Final = 0.05


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffResult:
    """A completed handoff: the new owner declares the buckets."""

    buckets: tuple[int, ...]
    from_node: str
    to_node: str
    release_command: str
    adopt_command: str
    released_at: datetime | None
    adopted_at: datetime | None
    still_running: tuple[str, ...]
    """Tasks of the buckets the old owner still held when it confirmed (``drain=False``)."""

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "buckets": list(self.buckets),
            "from": self.from_node,
            "to": self.to_node,
            "release_command": self.release_command,
            "adopt_command": self.adopt_command,
            "released_at": None if self.released_at is None else self.released_at.isoformat(),
            "adopted_at": None if self.adopted_at is None else self.adopted_at.isoformat(),
            "still_running": list(self.still_running),
        }


@public
def handoff(
    store: TaskStore,
    buckets: Iterable[int],
    *,
    from_node: str,
    to_node: str,
    timeout: float = 60.0,
    drain: bool = True,
    actor: str | None = None,
) -> HandoffResult:
    """Move ``buckets`` from ``from_node`` to ``to_node`` and wait until it is done.

    Both nodes must be live in the registry (workers, or controllers declared with
    ``declare_buckets``) and ``from_node`` must declare every bucket named.

    Args:
        store: The store both nodes use.
        buckets: The bucket numbers to move.
        from_node: The current owner (its ``owner`` / ``--owner``).
        to_node: The new owner.
        timeout: Seconds to wait, for both steps together.
        drain: Wait for the old owner's tasks of the buckets to finish first.
        actor: Written as the commands' issuer (default ``hostname:pid``).

    Raises:
        ConfigurationError: The request does not fit the registry (unknown or dead
            node, a bucket the old owner does not declare, ``from_node == to_node``).
        HandoffRefused: A node refused the command (its registry entry was out of date).
        HandoffTimeout: ``timeout`` passed; the handoff goes on without the caller.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
    report = ownership_report(store)
    wanted = _check(report, buckets, from_node, to_node)
    issued_by = actor or default_owner()
    release = Command.new(
        kind="node",
        target=from_node,
        action=RELEASE,
        issued_by=issued_by,
        issued_at=store.clock.now(),
        payload={"buckets": list(wanted), "to": to_node, "drain": bool(drain)},
        target_owner=from_node,
    )
    store.submit_command(release)
    deadline = time.monotonic() + float(timeout)
    what = f"bucket(s) {format_buckets(wanted)}"
    released, result = _confirmed(
        store,
        release.command_id,
        deadline,
        stage="release",
        pending=(
            f"{from_node} has not confirmed the release of {what} within {timeout:g}s "
            f"(command {release.command_id}); "
        ),
        refused=f"{from_node} refused the handoff of {what}: <error>",
    )
    adopt_id = str(result.get("adopt_command"))
    adopted, _ = _confirmed(
        store,
        adopt_id,
        deadline,
        stage="adopt",
        pending=(
            f"{from_node} released {what}, but {to_node} has not adopted them within "
            f"{timeout:g}s (command {adopt_id}); until it does, nobody claims them; "
        ),
        refused=(
            f"{to_node} refused to adopt {what}: <error>; {from_node} no longer owns "
            "them: hand them to another node"
        ),
    )
    running = result.get("still_running")
    return HandoffResult(
        buckets=wanted,
        from_node=from_node,
        to_node=to_node,
        release_command=release.command_id,
        adopt_command=adopt_id,
        released_at=released.completed_at,
        adopted_at=adopted.completed_at,
        still_running=tuple(str(t) for t in running) if isinstance(running, list) else (),
    )


def _check(
    report: OwnershipReport, buckets: Iterable[int], from_node: str, to_node: str
) -> tuple[int, ...]:
    if isinstance(buckets, str | bytes):
        raise ConfigurationError(f"buckets must be integers such as [7, 8], got {buckets!r}")
    wanted = tuple(sorted(BucketPolicy(num_buckets=report.num_buckets).validate_buckets(buckets)))
    if not wanted:
        raise ConfigurationError("name at least one bucket to hand off")
    if from_node == to_node:
        raise ConfigurationError(f"--from and --to are both {from_node!r}: nothing to hand off")
    for role, node_id in (("old owner", from_node), ("new owner", to_node)):
        node = report.node(node_id)
        if node is None:
            known = ", ".join(n.node_id for n in report.nodes) or "none"
            raise ConfigurationError(
                f"the {role} {node_id!r} is not in the node registry (registered: {known}); "
                "a worker registers at start, a controller with declare_buckets()"
            )
        if node.state != "live":
            raise ConfigurationError(
                f"the {role} {node_id!r} is {node.state} (lease until "
                f"{node.lease_until.isoformat()}): nothing would apply the handoff; start it, "
                "or start a node that owns the buckets"
            )
    source = report.node(from_node)
    assert source is not None
    if source.buckets is not None:
        missing = sorted(set(wanted) - set(source.buckets))
        if missing:
            raise ConfigurationError(
                f"{from_node} does not declare bucket(s) {format_buckets(missing)} "
                f"(it declares {format_buckets(source.buckets)})"
            )
    return wanted


def _confirmed(
    store: TaskStore, command_id: str, deadline: float, *, stage: str, pending: str, refused: str
) -> tuple[Command, dict[str, JSONValue]]:
    """Wait for the command of one step; its result when the node applied it.

    Raises:
        HandoffTimeout: Not completed by ``deadline`` (``pending`` says what is missing).
        HandoffRefused: The node completed it without applying it (``refused`` names
            the ``<error>`` it gave).
    """
    command = _wait(store, command_id, deadline, stage=stage, pending=pending)
    result = dict(command.result) if isinstance(command.result, dict) else {}
    if not result.get("applied"):
        error = result.get("error", "no reason given")
        message = refused.replace("<error>", str(error))
        raise HandoffRefused(message, stage=stage, command_id=command_id)
    return command, result


def _wait(
    store: TaskStore, command_id: str, deadline: float, *, stage: str, pending: str
) -> Command:
    pause = threading.Event()
    while True:
        command = store.get_command(command_id)
        if command is not None and command.status == "completed":
            return command
        if time.monotonic() >= deadline:
            if command is None:
                state = "the command is gone from the store"
            elif command.status == "claimed":
                state = f"it is working on it (claimed by {command.claimed_by}, draining)"
            else:
                state = "nobody has claimed the command yet"
            raise HandoffTimeout(
                pending + state + "; it goes on without this call: check `buckets --owners`",
                stage=stage,
                command_id=command_id,
            )
        pause.wait(POLL_INTERVAL)
