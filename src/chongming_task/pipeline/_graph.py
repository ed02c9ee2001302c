"""The pipeline definition: nodes, their dependencies, and validation before anything runs.

A :class:`Pipeline` is an in-memory recipe (guide §8.12, "limits"): which registered
task each node runs, with which arguments, after which upstream nodes, under which
join mode. Nothing here touches a controller or a store; :meth:`Pipeline.validate`
checks the whole graph so that a bad pipeline is refused before a single task exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from chongming_task._public import public
from chongming_task.errors import ConfigurationError
from chongming_task.pipeline._checks import (
    check_node_options,
    coerce_aggregation,
    coerce_join,
    topological_order,
)
from chongming_task.policies import AggregationPolicy, JoinMode

__all__ = ["Node", "Pipeline"]


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """A handle to one node of a pipeline, returned by :meth:`Pipeline.node`.

    Pass it to a later node's ``depends_on``. It belongs to the pipeline that made it;
    using it in another pipeline is refused, because node ids are only unique within
    their own pipeline.
    """

    node_id: str
    task_name: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    depends_on: tuple[str, ...]
    """Upstream node ids in the order given (ids may refer to nodes declared later)."""
    join: JoinMode
    pipeline: Pipeline = field(repr=False)

    @property
    def id(self) -> str:
        """Alias of :attr:`node_id`."""
        return self.node_id

    def __repr__(self) -> str:
        deps = f", depends_on={list(self.depends_on)}" if self.depends_on else ""
        return f"Node({self.node_id!r}, task={self.task_name!r}{deps}, join={self.join.value})"


#: The default aggregation (a frozen value, so one shared instance is safe).
_FAIL_FAST = AggregationPolicy.fail_fast()


@public
class Pipeline:
    """A DAG of registered tasks, submitted with ``controller.submit_pipeline(pipeline)``.

    Args:
        name: What the pipeline is called; every node task carries it in its metadata
            (``{"pipeline": name, ...}``) so ``ps``, history and reconcile can group them.
        aggregation: ``AggregationPolicy.fail_fast()`` (default: the first real failure
            cancels the released nodes and skips the rest) or ``all_settled()``.
            ``quorum`` is refused (guide §8.12).

    Raises:
        ConfigurationError: an empty name or an unsupported aggregation.
    """

    def __init__(self, name: str, aggregation: AggregationPolicy | str = _FAIL_FAST) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"pipeline name must be a non-empty string, got {name!r}")
        self.name = name
        self.aggregation = coerce_aggregation(aggregation)
        self._nodes: dict[str, Node] = {}

    # ------------------------------------------------------------ building

    def node(
        self,
        task_name: str,
        *args: Any,
        node_id: str | None = None,
        depends_on: Iterable[Node | str] | Node | str = (),
        join: JoinMode | str = JoinMode.ALL_SUCCEEDED,
        **kwargs: Any,
    ) -> Node:
        """Add a node that runs the registered task ``task_name`` with ``args``/``kwargs``.

        The first positional argument is the task *name*; everything after it goes to
        the task (``p.node("mark", "after")`` passes ``"after"`` to ``mark``), which is
        why the node's own id is the keyword ``node_id`` (guide §8.12 note). Without
        ``node_id`` the id is the task name, then ``name#2``, ``name#3`` for repeats.

        ``depends_on`` takes node handles of this pipeline or node ids; an id may name a
        node declared later (checked by :meth:`validate`). Keyword arguments other than
        the three node options are passed to ``controller.submit`` unchanged, so its
        options (``label=``, ``tags=``, ``priority=``, ``bucket_key=``) work here too.

        Raises:
            ConfigurationError: an empty task name or node id, a duplicate node id, a
                handle from another pipeline, or an unknown join mode.
        """
        if not isinstance(task_name, str) or not task_name:
            raise ConfigurationError(
                f"the first argument of node() is a registered task name, got {task_name!r}"
            )
        check_node_options(task_name, kwargs)
        if node_id is None:
            node_id = self._free_id(task_name)
        elif not isinstance(node_id, str) or not node_id.strip():
            raise ConfigurationError(f"node_id must be a non-empty string, got {node_id!r}")
        elif node_id in self._nodes:
            raise ConfigurationError(
                f"pipeline {self.name!r} already has a node {node_id!r}; node ids must be unique"
            )
        node = Node(
            node_id=node_id,
            task_name=task_name,
            args=tuple(args),
            kwargs=MappingProxyType(dict(kwargs)),
            depends_on=self._dependency_ids(node_id, depends_on),
            join=coerce_join(join),
            pipeline=self,
        )
        self._nodes[node_id] = node
        return node

    def _free_id(self, task_name: str) -> str:
        if task_name not in self._nodes:
            return task_name
        index = 2
        while f"{task_name}#{index}" in self._nodes:
            index += 1
        return f"{task_name}#{index}"

    def _dependency_ids(
        self, node_id: str, depends_on: Iterable[Node | str] | Node | str
    ) -> tuple[str, ...]:
        if isinstance(depends_on, Node | str):
            depends_on = [depends_on]  # a single handle or id is a common slip; accept it
        ids: list[str] = []
        for dep in depends_on:
            if isinstance(dep, Node):
                if dep.pipeline is not self:
                    raise ConfigurationError(
                        f"node {node_id!r} depends on {dep.node_id!r} of pipeline "
                        f"{dep.pipeline.name!r}, not of {self.name!r}; dependencies must be "
                        "nodes of the same pipeline"
                    )
                dep_id = dep.node_id
            elif isinstance(dep, str) and dep:
                dep_id = dep
            else:
                raise ConfigurationError(
                    f"depends_on of node {node_id!r} must hold node handles or node ids, "
                    f"got {dep!r}"
                )
            if dep_id not in ids:
                ids.append(dep_id)
        return tuple(ids)

    # ------------------------------------------------------------ reading

    @property
    def nodes(self) -> Mapping[str, Node]:
        """Node id -> node, in declaration order (a read-only view)."""
        return MappingProxyType(self._nodes)

    def downstream(self) -> dict[str, tuple[str, ...]]:
        """Node id -> the ids of the nodes that depend on it, in declaration order."""
        result: dict[str, list[str]] = {node_id: [] for node_id in self._nodes}
        for node in self._nodes.values():
            for dep in node.depends_on:
                if dep in result:
                    result[dep].append(node.node_id)
        return {node_id: tuple(ids) for node_id, ids in result.items()}

    def __len__(self) -> int:
        return len(self._nodes)

    def __repr__(self) -> str:
        return (
            f"Pipeline({self.name!r}, aggregation={self.aggregation.mode}, "
            f"nodes={list(self._nodes)})"
        )

    # ------------------------------------------------------------ validation

    def validate(self, is_registered: Callable[[str], bool] | None = None) -> list[str]:
        """Check the whole graph and return the node ids in a topological order.

        Args:
            is_registered: Answers whether a task name is registered with the controller
                that will run the pipeline; ``None`` skips that check.

        Raises:
            ConfigurationError: no nodes, a dependency on an unknown node id, or task
                names that are not registered (all of them named in one message).
            CircularDependency: the graph has a cycle; ``exc.cycle`` lists it, for
                example ``("a", "b", "a")`` where each node feeds the next.
        """
        if not self._nodes:
            raise ConfigurationError(f"pipeline {self.name!r} has no nodes; add some with node()")
        for node in self._nodes.values():
            unknown = [dep for dep in node.depends_on if dep not in self._nodes]
            if unknown:
                raise ConfigurationError(
                    f"node {node.node_id!r} of pipeline {self.name!r} depends on unknown "
                    f"node id(s) {unknown}; known ids: {sorted(self._nodes)}"
                )
        order = topological_order({n.node_id: n.depends_on for n in self._nodes.values()})
        if is_registered is not None:
            names = {node.task_name for node in self._nodes.values()}
            missing = sorted(name for name in names if not is_registered(name))
            if missing:
                raise ConfigurationError(
                    f"pipeline {self.name!r} uses task name(s) {missing} that are not "
                    "registered with this controller; register them first "
                    "(controller.register(name, fn))"
                )
        return order
