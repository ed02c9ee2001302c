"""The pipeline builder and its validation (no controller involved)."""

from __future__ import annotations

import itertools

import pytest

from chongming_task.errors import CircularDependency, ConfigurationError
from chongming_task.pipeline._checks import topological_order
from chongming_task.pipeline._graph import Node, Pipeline
from chongming_task.policies import AggregationPolicy, JoinMode


def test_node_ids_default_to_the_task_name_with_suffixes() -> None:
    p = Pipeline("p")
    first = p.node("mark", "before")
    second = p.node("mark", "after")
    third = p.node("mark")
    other = p.node("mark", node_id="explicit")
    assert [first.node_id, second.node_id, third.node_id, other.node_id] == [
        "mark",
        "mark#2",
        "mark#3",
        "explicit",
    ]
    # The positional argument after the task name is the task's argument, not an id.
    assert second.task_name == "mark"
    assert second.args == ("after",)
    assert list(p.nodes) == ["mark", "mark#2", "mark#3", "explicit"]


def test_an_auto_id_skips_ids_already_taken_explicitly() -> None:
    p = Pipeline("p")
    p.node("mark", node_id="mark#2")
    assert p.node("mark").node_id == "mark"
    assert p.node("mark").node_id == "mark#3"


def test_keyword_arguments_go_to_the_task() -> None:
    p = Pipeline("p")
    node = p.node("load", 1, 2, batch=500, label="Load")
    assert node.args == (1, 2)
    assert dict(node.kwargs) == {"batch": 500, "label": "Load"}
    assert node.join is JoinMode.ALL_SUCCEEDED
    assert node.id == "load"


def test_duplicate_node_id_is_refused_at_once() -> None:
    p = Pipeline("p")
    p.node("a", node_id="x")
    with pytest.raises(ConfigurationError, match="already has a node 'x'"):
        p.node("b", node_id="x")


@pytest.mark.parametrize("bad", ["", None, 3])
def test_bad_task_name_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="registered task name"):
        Pipeline("p").node(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "  ", 3])
def test_bad_node_id_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="node_id must be a non-empty string"):
        Pipeline("p").node("a", node_id=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "   ", None, 1])
def test_bad_pipeline_name_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="pipeline name"):
        Pipeline(bad)  # type: ignore[arg-type]


def test_foreign_dependency_is_refused() -> None:
    one, two = Pipeline("one"), Pipeline("two")
    foreign = one.node("a")
    with pytest.raises(ConfigurationError, match="of pipeline 'one', not of 'two'"):
        two.node("b", depends_on=[foreign])


def test_dependencies_by_handle_or_id_deduplicated() -> None:
    p = Pipeline("p")
    a = p.node("a")
    b = p.node("b", depends_on=[a, "a"])
    c = p.node("c", depends_on=b)  # a single handle is accepted
    assert b.depends_on == ("a",)
    assert c.depends_on == ("b",)
    assert p.downstream() == {"a": ("b",), "b": ("c",), "c": ()}


def test_bad_dependency_value_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="node handles or node ids"):
        Pipeline("p").node("a", depends_on=[3])  # type: ignore[list-item]


def test_unknown_dependency_is_reported_by_validate() -> None:
    p = Pipeline("p")
    p.node("a", depends_on=["ghost"])
    with pytest.raises(ConfigurationError, match=r"depends on unknown node id\(s\) \['ghost'\]"):
        p.validate()


def test_forward_references_are_allowed() -> None:
    p = Pipeline("p")
    p.node("b", depends_on=["a"])
    p.node("a")
    assert p.validate() == ["a", "b"]


def test_empty_pipeline_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="has no nodes"):
        Pipeline("p").validate()


@pytest.mark.parametrize(
    ("edges", "cycle"),
    [
        ({"a": ["a"]}, ("a", "a")),
        ({"a": ["b"], "b": ["a"]}, ("a", "b", "a")),
        # a depends on c, c on b, b on a: data flows a -> b -> c -> a.
        ({"a": ["c"], "b": ["a"], "c": ["b"]}, ("a", "b", "c", "a")),
        ({"root": [], "x": ["root", "z"], "y": ["x"], "z": ["y"]}, ("x", "y", "z", "x")),
    ],
)
def test_cycles_are_named(edges: dict[str, list[str]], cycle: tuple[str, ...]) -> None:
    p = Pipeline("p")
    for node_id, deps in edges.items():
        p.node("t", node_id=node_id, depends_on=deps)
    with pytest.raises(CircularDependency) as info:
        p.validate()
    assert info.value.cycle == cycle
    assert str(info.value) == "circular dependency: " + " -> ".join(cycle)
    # Each arrow is a real edge: the left node feeds the right one.
    for upstream, downstream in itertools.pairwise(cycle):
        assert upstream in edges[downstream]


def test_unregistered_task_names_are_all_named() -> None:
    p = Pipeline("p")
    p.node("fetch")
    p.node("nope", depends_on=["fetch"])
    p.node("also-nope")
    with pytest.raises(
        ConfigurationError, match=r"\['also-nope', 'nope'\] that are not registered"
    ):
        p.validate({"fetch"}.__contains__)
    assert p.validate(lambda name: True) == ["fetch", "nope", "also-nope"]


def test_topological_order_is_deterministic() -> None:
    graph = {"d": ["b", "c"], "b": ["a"], "c": ["a"], "a": []}
    assert topological_order(graph) == ["a", "b", "c", "d"]


def test_aggregation_options() -> None:
    assert Pipeline("p").aggregation == AggregationPolicy.fail_fast()
    assert Pipeline("p", AggregationPolicy.all_settled()).aggregation.mode == "all_settled"
    assert Pipeline("p", "all_settled").aggregation.mode == "all_settled"
    with pytest.raises(ConfigurationError, match="quorum aggregation is not supported"):
        Pipeline("p", "quorum")
    with pytest.raises(ConfigurationError, match="quorum aggregation is not supported"):
        Pipeline("p", AggregationPolicy.quorum(2))
    with pytest.raises(ConfigurationError, match="aggregation must be"):
        Pipeline("p", 3)  # type: ignore[arg-type]


def test_join_mode_accepts_members_and_values() -> None:
    p = Pipeline("p")
    assert p.node("a", join="all_settled").join is JoinMode.ALL_SETTLED
    with pytest.raises(ConfigurationError, match="join must be one of"):
        p.node("b", join="most")


def test_repr_is_readable() -> None:
    p = Pipeline("p")
    a = p.node("a")
    node: Node = p.node("b", depends_on=[a])
    assert repr(node) == "Node('b', task='b', depends_on=['a'], join=all_succeeded)"
    assert repr(p) == "Pipeline('p', aggregation=fail_fast, nodes=['a', 'b'])"
    assert len(p) == 2


def test_public_names_are_exported_from_chongming_task_pipeline() -> None:
    import typing

    import chongming_task
    import chongming_task.pipeline as public

    assert public.__all__ == sorted(public.__all__)
    for name in public.__all__:
        value = getattr(public, name)
        if name in chongming_task.__all__:  # a top-level name reports the package
            assert value.__module__ == "chongming_task", name
        else:
            assert value.__module__.startswith("chongming_task.pipeline"), name
        if isinstance(value, type):
            typing.get_type_hints(value)  # resolvable in the module that defines it
    assert chongming_task.Pipeline is public.Pipeline
    assert chongming_task.PipelineRun is public.PipelineRun
