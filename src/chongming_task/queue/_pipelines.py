"""Pipelines on the fleet: ``Client.enqueue_pipeline`` and the handle of a stored run.

The whole DAG is stored in one transaction: every node a queued-work task (its recipe
holds the node's JSON arguments) whose metadata carries the pipeline keys
(``pipeline``, ``pipeline_run``, ``node``) and its links (join mode, upstream and
downstream task ids, aggregation; :mod:`chongming_task.stores._dag`). Roots are
``queued``, the others ``blocked``. From then on the store decides: settling a node
releases or skips its dependants in the same transaction, so any worker runs the
nodes and no process has to stay alive for the run to go on.

A :class:`PipelineHandle` reads everything from the store, so any process can make
one from the run id (``client.pipeline(run_id)``); :class:`AsyncPipelineHandle` is its
asyncio twin (``AsyncClient``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from chongming_task._joins import settle_status, triggers_fail_fast
from chongming_task._model import TaskSnapshot
from chongming_task._public import public
from chongming_task._validation import check_lookup, check_timeout
from chongming_task.errors import ConfigurationError
from chongming_task.pipeline import (
    NodeFailure,
    NodeOutcome,
    Pipeline,
    PipelineOutcome,
    node_task_id,
    topological_order,
)
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery
from chongming_task.stores._dag import DAG_KEY, NodeLinks, links_of

if TYPE_CHECKING:
    from chongming_task.queue._client import Client

__all__ = ["AsyncPipelineHandle", "PipelineHandle", "pipeline_entries"]

#: ``pipeline.node(...)`` keyword arguments that are enqueue options, not task arguments.
_OPTIONS = ("label", "tags", "priority", "bucket_key", "concurrency_key", "metadata")


def pipeline_entries(client: Client, pipeline: Pipeline, run_id: str) -> list[Any]:
    """Every node of ``pipeline`` as a ``create_batch`` entry (roots queued, the rest
    blocked), checked as ``enqueue`` checks a task; nothing is stored here.

    Raises:
        ConfigurationError: the graph, a task name, a node's arguments or options
            (the message names the node).
        CircularDependency: the graph has a cycle.
    """
    if not isinstance(pipeline, Pipeline):
        raise ConfigurationError(
            f"enqueue_pipeline takes a Pipeline (chongming_task.Pipeline), got {pipeline!r}"
        )
    registry = client.registry
    order = pipeline.validate(None if registry is None else registry.__contains__)
    nodes = pipeline.nodes
    downstream = pipeline.downstream()
    task_ids = {node_id: node_task_id(run_id, node_id) for node_id in order}
    fail_fast = pipeline.aggregation.is_fail_fast
    entries = []
    for node_id in order:
        node = nodes[node_id]
        kwargs = dict(node.kwargs)
        options = {name: kwargs.pop(name) for name in _OPTIONS if name in kwargs}
        links = NodeLinks(
            join=node.join,
            upstream={dep: task_ids[dep] for dep in node.depends_on},
            downstream=tuple(task_ids[child] for child in downstream[node_id]),
            fail_fast=fail_fast,
        )
        own = options.pop("metadata", None) or {}
        if not isinstance(own, Mapping):
            raise ConfigurationError(f"metadata of node {node_id!r} must be a mapping")
        metadata = {**own, "pipeline": pipeline.name, "pipeline_run": run_id, "node": node_id}
        try:
            entries.append(
                client._prepare(
                    node.task_name,
                    node.args,
                    kwargs,
                    task_id=task_ids[node_id],
                    bucket_key=options.get("bucket_key"),
                    priority=options.get("priority", 0),
                    tags=options.get("tags"),
                    label=options.get("label"),
                    delay=None,
                    not_before=None,
                    metadata=metadata,
                    concurrency_key=options.get("concurrency_key"),
                    reserved={DAG_KEY: links.to_dict()},
                    blocked=bool(node.depends_on),
                )
            )
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"enqueue_pipeline({pipeline.name!r}): node {node_id!r}: {exc}; "
                "nothing was enqueued"
            ) from None
    return entries


@public
class PipelineHandle:
    """A pipeline run stored by :meth:`Client.enqueue_pipeline`, read from the store.

    ``client.pipeline(run_id)`` makes one in any process. Read :attr:`nodes` (node id
    -> latest snapshot) and :attr:`status` at any time, :meth:`wait` for the
    :class:`~chongming_task.pipeline.PipelineOutcome`, :meth:`stop` every unfinished node.
    """

    __slots__ = ("_client", "run_id")

    def __init__(self, client: Client, run_id: str) -> None:
        self._client = client
        self.run_id = check_lookup(run_id)

    # ------------------------------------------------------------ reading

    def _snapshots(self) -> dict[str, TaskSnapshot]:
        """Node id -> snapshot, upstream nodes first."""
        found = self._client.store.query(TaskQuery(metadata_eq={"pipeline_run": self.run_id}))
        by_node: dict[str, TaskSnapshot] = {}
        graph: dict[str, tuple[str, ...]] = {}
        for snapshot in found:
            links = links_of(snapshot)
            node_id = snapshot.metadata.get("node")
            if links is None or not isinstance(node_id, str):
                continue  # an in-process run's node, or not a node at all
            by_node[node_id] = snapshot
            graph[node_id] = tuple(links.upstream)
        if not by_node:
            raise ConfigurationError(
                f"no fleet pipeline run {self.run_id!r} in the store (a typo, or pruned?); "
                "the run id is PipelineHandle.run_id of Client.enqueue_pipeline"
            )
        order = topological_order({n: [d for d in deps if d in graph] for n, deps in graph.items()})
        return {node_id: by_node[node_id] for node_id in order}

    @property
    def pipeline_name(self) -> str:
        first = next(iter(self._snapshots().values()))
        return str(first.metadata.get("pipeline"))

    @property
    def nodes(self) -> dict[str, TaskSnapshot]:
        """Node id -> its task's stored snapshot now, upstream nodes first."""
        return self._snapshots()

    @property
    def task_ids(self) -> Mapping[str, str]:
        """Node id -> the id of its task (``<run_id>/<node_id>``)."""
        return MappingProxyType({n: s.task_id for n, s in self._snapshots().items()})

    def statuses(self) -> dict[str, TaskStatus]:
        """Node id -> status now."""
        return {node_id: s.status for node_id, s in self._snapshots().items()}

    @property
    def status(self) -> TaskStatus:
        """``running`` until every node is terminal, then the outcome's status."""
        outcome = self._outcome(self._snapshots())
        return TaskStatus.RUNNING if outcome is None else outcome.status

    @property
    def done(self) -> bool:
        return self._outcome(self._snapshots()) is not None

    def _outcome(self, snapshots: dict[str, TaskSnapshot]) -> PipelineOutcome | None:
        statuses = {node_id: s.status for node_id, s in snapshots.items()}
        failures = sorted(
            (s for s in snapshots.values() if triggers_fail_fast(s.status)),
            key=lambda s: (s.finished_at or s.updated_at, s.task_id),
        )
        status = settle_status(statuses, failed=bool(failures), stop_requested=False)
        if status is None:
            return None
        first = failures[0] if failures else None
        return PipelineOutcome(
            pipeline=str(next(iter(snapshots.values())).metadata.get("pipeline")),
            run_id=self.run_id,
            status=status,
            nodes=MappingProxyType({n: NodeOutcome(n, s) for n, s in snapshots.items()}),
            first_failure=None
            if first is None
            else NodeFailure(
                str(first.metadata.get("node")), first.task_id, first.status, first.failure
            ),
        )

    # ------------------------------------------------------------ waiting and control

    def wait(self, timeout: float | None = None) -> PipelineOutcome:
        """Block until every node is terminal (read from the store); the outcome.

        ``failed`` when a node failed or was lost (``first_failure`` names the first),
        else ``stopped`` when a node was stopped, ``cancelled`` when one was cancelled,
        else ``succeeded``.

        Raises:
            TimeoutError: ``timeout`` real seconds passed first (the run goes on).
        """
        check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = threading.Event()
        while True:
            snapshots = self._snapshots()
            outcome = self._outcome(snapshots)
            if outcome is not None:
                return outcome
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise self._unsettled(snapshots, timeout)
            interval = self._client.poll_interval
            pause.wait(interval if remaining is None else min(interval, remaining))

    def _unsettled(self, snapshots: dict[str, TaskSnapshot], timeout: float | None) -> TimeoutError:
        unsettled = [n for n, s in snapshots.items() if not s.is_terminal]
        return TimeoutError(
            f"pipeline run {self.run_id!r} did not settle within {timeout}s; "
            f"unsettled nodes: {unsettled} (waiting does not stop them)"
        )

    def stop(self, reason: str | None = None) -> bool:
        """Stop every unfinished node; each ends ``stopped``. ``False`` if none was left.

        Downstream nodes are stopped first, so no node is released or skipped by an
        upstream node settling meanwhile: a blocked or queued node stops at once, a
        running one through its worker (``stopping``, then ``stopped``).
        """
        text = f"pipeline run {self.run_id!r} stopped" + (f": {reason}" if reason else "")
        unfinished = [s for s in self._snapshots().values() if not s.is_terminal]
        for snapshot in reversed(unfinished):
            self._client.stop(snapshot.task_id, reason=text)
        return bool(unfinished)

    def __repr__(self) -> str:
        return f"PipelineHandle({self.run_id!r})"


@public
class AsyncPipelineHandle:
    """The asyncio twin of :class:`PipelineHandle` (``await handle.wait()``): every
    store read in a thread; what the handle's properties read is a coroutine here."""

    __slots__ = ("_sync",)

    def __init__(self, handle: PipelineHandle) -> None:
        self._sync = handle

    @property
    def run_id(self) -> str:
        return self._sync.run_id

    async def pipeline_name(self) -> str:
        return await asyncio.to_thread(lambda: self._sync.pipeline_name)

    async def nodes(self) -> dict[str, TaskSnapshot]:
        """As :attr:`PipelineHandle.nodes`."""
        return await asyncio.to_thread(self._sync._snapshots)

    async def task_ids(self) -> Mapping[str, str]:
        return await asyncio.to_thread(lambda: self._sync.task_ids)

    async def statuses(self) -> dict[str, TaskStatus]:
        return await asyncio.to_thread(self._sync.statuses)

    async def status(self) -> TaskStatus:
        return await asyncio.to_thread(lambda: self._sync.status)

    async def done(self) -> bool:
        return await asyncio.to_thread(lambda: self._sync.done)

    async def wait(self, timeout: float | None = None) -> PipelineOutcome:
        """As :meth:`PipelineHandle.wait`, polling without blocking the event loop.

        Raises:
            TimeoutError: ``timeout`` real seconds passed first (the run goes on).
        """
        check_timeout(timeout)
        sync = self._sync
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            snapshots = await asyncio.to_thread(sync._snapshots)
            outcome = sync._outcome(snapshots)
            if outcome is not None:
                return outcome
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise sync._unsettled(snapshots, timeout)
            interval = sync._client.poll_interval
            await asyncio.sleep(interval if remaining is None else min(interval, remaining))

    async def stop(self, reason: str | None = None) -> bool:
        """As :meth:`PipelineHandle.stop`."""
        return await asyncio.to_thread(self._sync.stop, reason)

    def __repr__(self) -> str:
        return f"AsyncPipelineHandle({self.run_id!r})"
