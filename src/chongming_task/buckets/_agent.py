"""A node's side of the bucket registry: declare what it owns, apply handoffs.

A :class:`BucketAgent` sits next to one controller. It turns the controller's
``owned_buckets`` into a declaration in the store's node registry (a
:class:`~chongming_task.stores._queue_records.WorkerRecord` with a lease), and it
applies the two ``kind="node"`` commands of a handoff addressed to its node:

``release_buckets`` (to the old owner)
    The buckets leave ``controller.owned_buckets`` at once, so the node claims and
    accepts no new task of them, and its declaration lists them as ``draining``. Tasks
    do not migrate: what the node holds in those buckets (running, or claimed and
    waiting for a slot) finishes here. With ``drain`` (the default) the node confirms
    once it holds none of them any more; without, at once. Confirming means: it writes
    the ``adopt_buckets`` command for the new owner, drops the buckets from
    ``draining`` in its declaration, then completes the release command. The handoff
    goes on even if whoever asked for it stopped waiting.
``adopt_buckets`` (to the new owner)
    The buckets join ``owned_buckets``, the declaration is written, queued work is
    announced (``notify_work``) and the command is completed: from then on the new
    owner claims the queued unheld tasks of those buckets.

A :class:`~chongming_task.worker.Worker` drives its agent from its intake thread (the
thread that claims queued work, so no claim of a released bucket is in flight when
the release is confirmed). A plain controller that owns buckets declares them with
:func:`declare_buckets`, which runs the agent on a thread of its own.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from chongming_task._consumer import KEEP, CommandConsumer, Complete, Outcome
from chongming_task._model import JSONValue
from chongming_task._public import public
from chongming_task._service import BackgroundService
from chongming_task._validation import check_seconds
from chongming_task.errors import ConfigurationError
from chongming_task.stores._base import Command, CommandStore, QueueStore
from chongming_task.stores._capabilities import require_queue
from chongming_task.stores._queue_records import WorkerRecord

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = [
    "ADOPT",
    "RELEASE",
    "BucketAgent",
    "Declaration",
    "declaration_lease",
    "declare_buckets",
]

log = logging.getLogger("chongming_task.buckets")

RELEASE: Final = "release_buckets"
ADOPT: Final = "adopt_buckets"
ACTIONS: Final = (RELEASE, ADOPT)
#: How long a claimed handoff command stays ours; extended while a release drains.
COMMAND_LEASE: Final = 30.0
#: Longest wait between two looks at the handoff commands of a declared controller.
POLL_INTERVAL: Final = 0.2


def declaration_lease(heartbeat_interval: float) -> float:
    """Seconds a declaration lasts after each heartbeat: three beats, at least 2 s."""
    return max(3 * heartbeat_interval, 2.0)


@dataclass(slots=True)
class _Drain:
    command: Command
    buckets: frozenset[int]
    to: str
    extended_at: float = 0.0


class BucketAgent:
    """Declares one controller's buckets and applies the handoffs addressed to it.

    Args:
        controller: The node (its ``owner`` is the node id, its store the registry).
        kind: ``"worker"`` or ``"controller"`` (written on the declaration).
        heartbeat: Writes the node's declaration now (called after every change).
    """

    def __init__(self, controller: Controller, *, kind: str, heartbeat: Callable[[], None]) -> None:
        self.controller = controller
        self.store = controller.store
        self.kind = kind
        self._heartbeat = heartbeat
        self._drains: list[_Drain] = []
        #: Handoffs are commands between nodes, declarations live in the worker registry.
        self._queue = self.store if isinstance(self.store, QueueStore) else None
        self.supported = isinstance(self.store, CommandStore) and self._queue is not None
        self._consumer = CommandConsumer(
            controller.store,
            controller.owner,
            kinds=("node",),
            actions=ACTIONS,
            lease=COMMAND_LEASE,
            batch=10,
            logger=log,
        )
        self.released = 0
        """Release commands this node confirmed."""
        self.adopted = 0
        """Adopt commands this node applied."""

    @property
    def node_id(self) -> str:
        return self.controller.owner

    def declared(self) -> tuple[int, ...] | None:
        """The buckets to declare (``None``: every bucket, no partition)."""
        controller = self.controller
        if controller.owns_all_buckets:
            return None
        return tuple(sorted(controller.owned_buckets or ()))

    @property
    def draining(self) -> tuple[int, ...]:
        return tuple(sorted({b for drain in self._drains for b in drain.buckets}))

    # ------------------------------------------------------------ commands

    def poll(self) -> int:
        """Apply the handoff commands addressed to this node; finish drained releases.

        Returns how many commands were claimed. A store failure is logged, not raised
        (it must not end a long-lived node); the commands stay in the store.
        """
        if not self.supported:
            return 0
        try:
            batch = self._consumer.poll(self._handle)
        except Exception as exc:
            log.warning("handoff commands failed: %s: %s", type(exc).__name__, exc)
            return 0
        self._finish_drains()
        return batch.claimed

    def _handle(self, command: Command) -> Outcome:
        """Apply one handoff command; it completes what it applies itself (in order
        with the declaration it writes)."""
        try:
            self._apply(command)
        except Exception as exc:  # report it to the caller, keep the node running
            log.exception("handoff command %s failed", command.command_id)
            return Complete({"applied": False, "error": f"{type(exc).__name__}: {exc}"})
        return KEEP

    def _apply(self, command: Command) -> None:
        if command.target != self.node_id:
            self._complete(
                command,
                {
                    "applied": False,
                    "error": f"addressed to node {command.target!r}, not {self.node_id!r}",
                },
            )
            return
        buckets, error = self._buckets_of(command)
        if error is not None:
            self._complete(command, {"applied": False, "error": error})
            return
        if command.action == RELEASE:
            self._release(command, buckets)
        else:
            self._adopt(command, buckets)

    def _buckets_of(self, command: Command) -> tuple[frozenset[int], str | None]:
        raw = command.payload.get("buckets")
        if not isinstance(raw, list) or not raw:
            return frozenset(), "the command names no buckets"
        try:
            return self.controller.bucket_policy.validate_buckets(raw), None
        except (ConfigurationError, TypeError, ValueError) as exc:
            return frozenset(), str(exc)

    def _release(self, command: Command, buckets: frozenset[int]) -> None:
        controller = self.controller
        to = command.payload.get("to")
        if not isinstance(to, str) or not to:
            self._complete(command, {"applied": False, "error": "the command names no new owner"})
            return
        owned = controller.owned_buckets
        full = frozenset(range(controller.bucket_policy.num_buckets))
        current = full if owned is None else owned
        missing = sorted(buckets - current)
        if missing:
            self._complete(
                command,
                {
                    "applied": False,
                    "error": f"node {self.node_id} does not own bucket(s) {missing}",
                },
            )
            return
        # From here on this node claims and accepts no task of these buckets.
        controller.owned_buckets = current - buckets
        self._drains.append(_Drain(command, buckets, to, self.controller.clock.monotonic()))
        log.info(
            "releasing bucket(s) %s to %s (requested by %s)",
            sorted(buckets),
            to,
            command.issued_by,
        )
        self._heartbeat()
        if command.payload.get("drain") is False:
            self._finish_drains(force=True)

    def _adopt(self, command: Command, buckets: frozenset[int]) -> None:
        controller = self.controller
        owned = controller.owned_buckets
        if owned is not None:
            controller.owned_buckets = owned | buckets
        self._heartbeat()  # declared before the command says so
        self.adopted += 1
        log.info("adopted bucket(s) %s from %s", sorted(buckets), command.payload.get("from"))
        self._complete(command, {"applied": True, "adopted": sorted(buckets)})
        if self._queue is not None:
            self._queue.notify_work()

    def held_in(self, buckets: frozenset[int]) -> list[str]:
        """Ids of the unfinished tasks this node holds in ``buckets``."""
        return [
            run.task_id
            for run in self.controller.runs()
            if not run.done and run.snapshot.bucket in buckets
        ]

    def _finish_drains(self, *, force: bool = False) -> None:
        waiting: list[_Drain] = []
        for drain in self._drains:
            held = self.held_in(drain.buckets)
            if held and not force:
                now = self.controller.clock.monotonic()
                if now - drain.extended_at >= COMMAND_LEASE / 3:
                    drain.extended_at = now
                    self._extend(drain.command)
                waiting.append(drain)
                continue
            adopt = Command.new(
                kind="node",
                target=drain.to,
                action=ADOPT,
                issued_by=self.node_id,
                issued_at=self.controller.clock.now(),
                payload={
                    "buckets": sorted(drain.buckets),
                    "from": self.node_id,
                    "release_command": drain.command.command_id,
                },
                target_owner=drain.to,
            )
            try:
                self.store.submit_command(adopt)
            except Exception as exc:  # try again on the next poll
                log.warning("handoff: could not write the adopt command: %s", exc)
                waiting.append(drain)
                continue
            self._drains_without(drain)
            self._heartbeat()
            self.released += 1
            self._complete(
                drain.command,
                {
                    "applied": True,
                    "released": sorted(drain.buckets),
                    "still_running": held,
                    "adopt_command": adopt.command_id,
                },
            )
        self._drains = waiting

    def _drains_without(self, drain: _Drain) -> None:
        self._drains = [d for d in self._drains if d is not drain]

    def _extend(self, command: Command) -> None:
        try:
            self._consumer.extend(command)
        except Exception as exc:
            log.warning("handoff %s: could not extend the claim: %s", command.command_id, exc)

    def _complete(self, command: Command, result: dict[str, JSONValue]) -> None:
        self._consumer.complete(command, result)


class Declaration:
    """A controller's bucket declaration kept alive on a thread (:func:`declare_buckets`)."""

    def __init__(
        self, controller: Controller, *, heartbeat_interval: float, lease: float | None
    ) -> None:
        if controller.owned_buckets is None:
            raise ConfigurationError(
                "this controller has no owned_buckets to declare; pass owned_buckets=... "
                "(a controller that owns every bucket is no partition)"
            )
        self.controller = controller
        self._registry = require_queue(
            controller.store, "declare_buckets (declarations in the worker registry)"
        )
        self.heartbeat_interval = check_seconds(heartbeat_interval, "heartbeat_interval")
        self.lease = (
            declaration_lease(self.heartbeat_interval)
            if lease is None
            else check_seconds(lease, "lease")
        )
        if self.lease <= self.heartbeat_interval:
            raise ConfigurationError(
                f"lease ({self.lease:g}s) must be longer than heartbeat_interval "
                f"({self.heartbeat_interval:g}s), or it expires between two renewals"
            )
        self.agent = BucketAgent(controller, kind="controller", heartbeat=self.heartbeat)
        self._started: datetime = controller.clock.now()
        self._next_beat = 0.0
        self.heartbeat()
        self._service = BackgroundService(
            f"chongming-buckets[{controller.owner}]", self._pass, clock=controller.clock
        )
        self._next_beat = controller.clock.monotonic() + self.heartbeat_interval
        self._service.start()

    def heartbeat(self, *, stopped: bool = False) -> None:
        """Write the declaration now (renews its lease)."""
        controller = self.controller
        now = controller.clock.now()
        declared = self.agent.declared()
        record = WorkerRecord(
            worker_id=controller.owner,
            host=socket.gethostname(),
            pid=os.getpid(),
            version=_version(),
            buckets=declared,
            slots=controller.concurrency.max_parallel or 0,
            started_at=self._started,
            heartbeat_at=now,
            heartbeat_interval=self.heartbeat_interval,
            stopped_at=now if stopped else None,
            kind="controller",
            lease_until=now + timedelta(seconds=self.lease),
            num_buckets=controller.bucket_policy.num_buckets,
            draining=self.agent.draining,
        )
        self._registry.put_worker(record)

    def _pass(self) -> float:
        clock = self.controller.clock
        self.agent.poll()
        if clock.monotonic() >= self._next_beat:
            self._next_beat = clock.monotonic() + self.heartbeat_interval
            try:
                self.heartbeat()
            except Exception as exc:  # a store hiccup must not end the declaration
                log.warning("bucket declaration failed: %s: %s", type(exc).__name__, exc)
        # The service's own wake-up, not the store's command signal: close() must never
        # wait for a store (or a clock) to deliver one.
        return min(self.heartbeat_interval, POLL_INTERVAL)

    def close(self) -> None:
        """Stop renewing and withdraw the declaration (a clean shutdown, not stale)."""
        if self._service.stopping:
            return
        self._service.stop(5.0)
        try:
            self.heartbeat(stopped=True)
        except Exception as exc:
            log.warning("could not withdraw the bucket declaration: %s", exc)

    def __enter__(self) -> Declaration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@public
def declare_buckets(
    controller: Controller, *, heartbeat_interval: float = 1.0, lease: float | None = None
) -> Declaration:
    """Declare ``controller.owned_buckets`` in its store until ``close()``.

    For a controller that is a node of a partitioned deployment but not a worker (a
    worker declares its buckets by itself). The declaration is renewed every
    ``heartbeat_interval`` and expires ``lease`` seconds after the last renewal
    (default: three intervals, at least 2 s); handoffs addressed to the controller's
    ``owner`` are applied on the same thread.

    Raises:
        ConfigurationError: The controller has no ``owned_buckets``, the store has no
            node registry, or the intervals are out of range.
    """
    return Declaration(controller, heartbeat_interval=heartbeat_interval, lease=lease)


def _version() -> str:
    from chongming_task import __version__

    return __version__
