"""The pipeline page: a run's nodes read from the store and laid out for an SVG drawing.

Every node of a pipeline run is a task whose metadata names the run (``pipeline_run``)
and the node (``node``); a fleet run's node also stores its links (``pipeline_dag``:
upstream and downstream task ids, join mode; :mod:`chongming_task.stores._dag`). An
in-process run (``controller.submit_pipeline``) keeps its dependencies in the
submitting process only, so its page shows the nodes without edges and says why.

The layout is a plain layered one, computed here so the page needs no script: a
node's layer is the longest path from a root to it (left to right), and within a
layer nodes follow the mean position of their upstream nodes (then their ids).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from chongming_task._joins import settle_status, triggers_fail_fast
from chongming_task._model import TaskSnapshot
from chongming_task.pipeline import topological_order
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery, TaskStore
from chongming_task.stores._dag import links_of

__all__ = ["MAX_NODES", "PipelineGraph", "pipeline_graph"]

#: The most nodes one page reads and draws (a larger run says it was cut).
MAX_NODES: Final = 500
#: Box and spacing of the drawing, in SVG user units (CSS pixels).
NODE_W: Final = 190
NODE_H: Final = 46
GAP_X: Final = 64
GAP_Y: Final = 18
PAD: Final = 12
#: Characters of a node id drawn in its box (the full id is the box's tooltip).
LABEL_CHARS: Final = 22


@dataclass(frozen=True, slots=True)
class GraphNode:
    node_id: str
    snapshot: TaskSnapshot
    upstream: tuple[str, ...]
    """Upstream node ids (fleet runs; empty for an in-process run)."""
    downstream: tuple[str, ...]
    join: str | None
    layer: int
    x: int
    y: int

    @property
    def label(self) -> str:
        text = self.node_id
        return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"

    @property
    def status(self) -> str:
        return self.snapshot.status.value


@dataclass(frozen=True, slots=True)
class GraphEdge:
    source: str
    target: str
    path: str
    """The SVG path data, from the right side of ``source`` to the left of ``target``."""


@dataclass(frozen=True, slots=True)
class PipelineGraph:
    run_id: str
    pipeline: str
    fleet: bool
    """Whether the nodes store their links (``Client.enqueue_pipeline``)."""
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    width: int
    height: int
    truncated: bool
    status: str
    """``running`` until every node is terminal, then the run's outcome."""
    node_w: int = NODE_W
    node_h: int = NODE_H

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for node in self.nodes:
            out[node.status] = out.get(node.status, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "pipeline": self.pipeline,
            "kind": "fleet" if self.fleet else "in-process",
            "status": self.status,
            "counts": self.counts(),
            "truncated": self.truncated,
            "nodes": [
                {
                    "node": n.node_id,
                    "task_id": n.snapshot.task_id,
                    "task": n.snapshot.name,
                    "status": n.status,
                    "join": n.join,
                    "upstream": list(n.upstream),
                    "downstream": list(n.downstream),
                    "layer": n.layer,
                }
                for n in self.nodes
            ],
            "edges": [{"from": e.source, "to": e.target} for e in self.edges],
        }


def pipeline_graph(store: TaskStore, run_id: str) -> PipelineGraph | None:
    """The run ``run_id`` laid out for drawing; ``None`` when no node of it is stored."""
    found = store.query(TaskQuery(metadata_eq={"pipeline_run": run_id}, limit=MAX_NODES + 1))
    truncated = len(found) > MAX_NODES
    by_node: dict[str, TaskSnapshot] = {}
    for snapshot in found[:MAX_NODES]:
        node_id = snapshot.metadata.get("node")
        if isinstance(node_id, str):
            by_node[node_id] = snapshot
    if not by_node:
        return None
    upstream: dict[str, tuple[str, ...]] = {}
    joins: dict[str, str | None] = {}
    for node_id, snapshot in sorted(by_node.items()):
        links = links_of(snapshot)
        upstream[node_id] = tuple(u for u in (links.upstream if links else ()) if u in by_node)
        joins[node_id] = links.join.value if links else None
    downstream: dict[str, list[str]] = {node_id: [] for node_id in upstream}
    for node_id, ups in upstream.items():
        for up in ups:
            downstream[up].append(node_id)
    layers = _layers(upstream)
    # An edge longer than one layer passes through a waypoint in every layer between,
    # which takes a slot there as a node does: it never runs through another box.
    via: dict[tuple[str, str], list[str]] = {}
    slots: dict[str, int] = dict(layers)
    order_upstream: dict[str, tuple[str, ...]] = {}
    for node_id, ups in upstream.items():
        before: list[str] = []
        for up in ups:
            between = range(layers[up] + 1, layers[node_id])
            waypoints = [f"\0{up}\0{node_id}\0{layer}" for layer in between]
            for previous, waypoint, layer in zip(
                [up, *waypoints], waypoints, between, strict=False
            ):
                slots[waypoint] = layer
                order_upstream[waypoint] = (previous,)
            via[(up, node_id)] = waypoints
            before.append(waypoints[-1] if waypoints else up)
        order_upstream[node_id] = tuple(before)
    columns = _columns(order_upstream, slots)
    depth = max(len(column) for column in columns.values())
    place: dict[str, tuple[int, int]] = {}
    for layer, column in columns.items():
        offset = (depth - len(column)) * (NODE_H + GAP_Y) // 2  # centre short columns
        for index, key in enumerate(column):
            place[key] = (PAD + layer * (NODE_W + GAP_X), PAD + offset + index * (NODE_H + GAP_Y))
    nodes = {
        node_id: GraphNode(
            node_id=node_id,
            snapshot=by_node[node_id],
            upstream=upstream[node_id],
            downstream=tuple(downstream[node_id]),
            join=joins[node_id],
            layer=layers[node_id],
            x=place[node_id][0],
            y=place[node_id][1],
        )
        for layer in sorted(columns)
        for node_id in columns[layer]
        if node_id in by_node
    }
    edges = tuple(
        GraphEdge(
            up,
            node.node_id,
            _edge_path([place[k] for k in (up, *via[(up, node.node_id)], node.node_id)]),
        )
        for node in nodes.values()
        for up in node.upstream
    )
    statuses = {node_id: s.status for node_id, s in by_node.items()}
    settled = settle_status(
        statuses,
        failed=any(triggers_fail_fast(status) for status in statuses.values()),
        stop_requested=False,
    )
    first = next(iter(by_node.values()))
    return PipelineGraph(
        run_id=run_id,
        pipeline=str(first.metadata.get("pipeline", "")),
        fleet=any(links_of(s) is not None for s in by_node.values()),
        nodes=tuple(nodes.values()),
        edges=edges,
        width=2 * PAD + len(columns) * NODE_W + (len(columns) - 1) * GAP_X,
        height=2 * PAD + depth * NODE_H + (depth - 1) * GAP_Y,
        truncated=truncated,
        status=(settled or TaskStatus.RUNNING).value,
    )


def _layers(upstream: Mapping[str, tuple[str, ...]]) -> dict[str, int]:
    """Node id -> the length of the longest path from a root to it."""
    layers: dict[str, int] = {}
    for node_id in topological_order(upstream):
        layers[node_id] = 1 + max((layers[u] for u in upstream[node_id]), default=-1)
    return layers


def _columns(
    upstream: Mapping[str, tuple[str, ...]], layers: Mapping[str, int]
) -> dict[int, list[str]]:
    """Layer -> its keys in drawing order: roots by id, then each layer by the mean
    position of a key's upstream keys (fewer crossings), ties by key."""
    columns: dict[int, list[str]] = {}
    for key in sorted(layers):
        columns.setdefault(layers[key], []).append(key)
    index: dict[str, int] = {}
    for layer in sorted(columns):
        column = columns[layer]
        if layer:
            column.sort(key=lambda k: (_mean(index[u] for u in upstream.get(k, ())), k))
        index.update((key, i) for i, key in enumerate(column))
    return dict(sorted(columns.items()))


def _mean(values: Iterable[int]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def _edge_path(points: list[tuple[int, int]]) -> str:
    """From the middle of the first box's right side to the middle of the last box's
    left side, through the slots of its waypoints: a cubic curve between layers, a
    straight line across a waypoint's slot."""
    (x, y), *rest = points
    x, y = x + NODE_W, y + NODE_H // 2
    path = [f"M{x} {y}"]
    for index, (px, py) in enumerate(rest):
        ny = py + NODE_H // 2
        middle = (x + px) // 2
        path.append(f"C{middle} {y} {middle} {ny} {px} {ny}")
        x, y = px, ny
        if index < len(rest) - 1:  # a waypoint: straight across its slot
            x += NODE_W
            path.append(f"L{x} {y}")
    return " ".join(path)
