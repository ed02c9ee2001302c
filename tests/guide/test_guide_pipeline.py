"""Guide §8.12 (DAG pipelines) and the §8.13 upstream-data sample, as written.

``fetch``, ``transform``, ``load`` and ``audit`` are the sample's registered tasks;
``Steps`` lets a test decide which node fails, which one hangs until released, and
records what each node received from upstream.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from chongming_task import Controller, task
from chongming_task.errors import ConfigurationError
from chongming_task.policies import AggregationPolicy, JoinMode

from .conftest import PATIENCE, S, path, reach


class Steps:
    """Task bodies for pipeline nodes: ``fail`` names failing args, ``hold`` hanging ones."""

    def __init__(self) -> None:
        self.fail: set[Any] = set()
        self.hold: set[Any] = set()
        self.release = threading.Event()
        self.seen: dict[Any, dict[str, Any]] = {}

    def _body(self, ctx: Any, key: Any) -> Any:
        self.seen[key] = dict(ctx.upstream)
        if key in self.hold:
            while not self.release.wait(0.002):
                ctx.checkpoint()
        if key in self.fail:
            raise RuntimeError(f"{key} failed")
        return key

    def fetch(self, ctx: Any, day: str) -> list[str]:
        self._body(ctx, day)
        return [f"{day}/p0", f"{day}/p1"]

    def transform(self, ctx: Any, index: int) -> int:
        return int(self._body(ctx, index))

    def load(self, ctx: Any) -> list[str]:
        self._body(ctx, "load")
        return sorted(ctx.upstream)

    def audit(self, ctx: Any) -> dict[str, Any]:
        self._body(ctx, "audit")
        return dict(ctx.upstream)

    def step(self, ctx: Any, key: str) -> str:
        return str(self._body(ctx, key))


@pytest.fixture
def steps() -> Iterator[Steps]:
    s = Steps()
    yield s
    s.release.set()


@pytest.fixture
def controller(steps: Steps) -> Iterator[Controller]:
    c = Controller(max_parallel=4)
    for name in ("fetch", "transform", "load", "audit", "step"):
        c.register(name, getattr(steps, name))
    yield c
    steps.release.set()
    c.close(timeout=PATIENCE)


def test_s8_12_sample(controller: Controller, capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task import Pipeline
    from chongming_task.policies import AggregationPolicy, JoinMode

    pipeline = Pipeline("nightly-etl", aggregation=AggregationPolicy.all_settled())

    fetch = pipeline.node("fetch", "2026-10-02", node_id="fetch")
    shards = [
        pipeline.node("transform", index, node_id=f"shard{index}", depends_on=[fetch])
        for index in range(3)
    ]
    load = pipeline.node("load", node_id="load", depends_on=shards)
    pipeline.node("audit", node_id="audit", depends_on=[load], join=JoinMode.ALL_SETTLED)

    run = controller.submit_pipeline(pipeline)
    outcome = run.wait(timeout=60)
    print(outcome.status, outcome.nodes)

    printed = capsys.readouterr().out
    assert printed.startswith("succeeded {'fetch': ")
    assert outcome.ok
    assert list(outcome.nodes) == ["fetch", "shard0", "shard1", "shard2", "load", "audit"]
    assert outcome.values()["load"] == ["shard0", "shard1", "shard2"]
    assert outcome.values()["audit"] == {"load": ["shard0", "shard1", "shard2"]}
    for node_id in ("shard0", "load", "audit"):
        held = controller.run(run.task_ids[node_id])
        assert held is not None
        assert path(held) == [
            S.PENDING, S.BLOCKED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED,
        ]  # fmt: skip


def test_s8_12_node_ids_and_arguments() -> None:
    from chongming_task import Pipeline

    p = Pipeline("ids")
    first = p.node("mark", "before")
    second = p.node("mark", "after")  # "after" is mark's argument, not a node name
    third = p.node("mark")
    assert [first.node_id, second.node_id, third.node_id] == ["mark", "mark#2", "mark#3"]
    assert second.args == ("after",)
    with pytest.raises(ConfigurationError, match="unique"):
        p.node("other", node_id="mark")


def test_s8_12_quorum_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        AggregationPolicy.quorum(2)


def test_s8_12_waiting_nodes_take_no_slot(controller: Controller, steps: Steps) -> None:
    from chongming_task import Pipeline

    steps.hold.add("root")
    pipeline = Pipeline("serial")
    previous = pipeline.node("step", "root", node_id="root")
    for index in range(19):  # a 20-node serial pipeline
        previous = pipeline.node("step", f"n{index}", node_id=f"n{index}", depends_on=[previous])
    run = controller.submit_pipeline(pipeline)
    root = controller.run(run.task_ids["root"])
    assert root is not None
    reach(root, S.RUNNING)

    assert controller.active_count == 1  # 只有根节点占额度
    assert controller.queued_count == 0  # 下游还在 blocked，不是 queued

    assert controller.stats().blocked == 19
    steps.release.set()
    assert run.wait(timeout=PATIENCE).ok


# ---------------------------------------------------------------- join modes


def diamond(controller: Controller, join: JoinMode, aggregation: Any = None) -> Any:
    """Two upstream steps ``a`` and ``b``, then ``c`` with ``join``."""
    from chongming_task import Pipeline

    pipeline = Pipeline(
        f"join-{join.value}", aggregation=aggregation or AggregationPolicy.all_settled()
    )
    a = pipeline.node("step", "a", node_id="a")
    b = pipeline.node("step", "b", node_id="b")
    pipeline.node("step", "c", node_id="c", depends_on=[a, b], join=join)
    return controller.submit_pipeline(pipeline).wait(timeout=PATIENCE)


def test_s8_12_join_all_succeeded_is_the_default(controller: Controller, steps: Steps) -> None:
    from chongming_task import Pipeline

    assert Pipeline("x").node("step", "x").join is JoinMode.ALL_SUCCEEDED
    steps.fail.add("a")
    outcome = diamond(controller, JoinMode.ALL_SUCCEEDED)
    assert outcome.statuses() == {"a": S.FAILED, "b": S.SUCCEEDED, "c": S.SKIPPED}
    assert "c" not in steps.seen  # it never ran
    assert outcome.status is S.FAILED


def test_s8_12_join_all_settled_runs_whatever_happened(
    controller: Controller, steps: Steps
) -> None:
    steps.fail.add("a")
    outcome = diamond(controller, JoinMode.ALL_SETTLED)
    assert outcome.statuses() == {"a": S.FAILED, "b": S.SUCCEEDED, "c": S.SUCCEEDED}
    # §8.13: only succeeded upstream nodes appear in ctx.upstream (no None for "a").
    assert steps.seen["c"] == {"b": "b"}


@pytest.mark.parametrize(
    ("failing", "expected_c"),
    [({"a"}, S.SUCCEEDED), ({"a", "b"}, S.SKIPPED), (set(), S.SUCCEEDED)],
)
def test_s8_12_join_any_succeeded(
    controller: Controller, steps: Steps, failing: set[str], expected_c: S
) -> None:
    steps.fail.update(failing)
    outcome = diamond(controller, JoinMode.ANY_SUCCEEDED)
    assert outcome.statuses()["c"] is expected_c


# ---------------------------------------------------------------- aggregation and the three


def test_s8_12_fail_fast_cancels_released_and_skips_the_rest(
    controller: Controller, steps: Steps
) -> None:
    from chongming_task import Pipeline

    steps.hold.add("slow")
    pipeline = Pipeline("ff")  # fail_fast() is the default
    assert pipeline.aggregation.is_fail_fast
    bad = pipeline.node("step", "bad", node_id="bad")
    slow = pipeline.node("step", "slow", node_id="slow")
    pipeline.node("step", "after-bad", node_id="after-bad", depends_on=[bad])
    pipeline.node("step", "after-slow", node_id="after-slow", depends_on=[slow])
    steps.fail.add("bad")
    run = controller.submit_pipeline(pipeline)
    outcome = run.wait(timeout=PATIENCE)
    assert outcome.statuses() == {
        "bad": S.FAILED,  # the real failure
        "slow": S.CANCELLED,  # released, then cancelled by fail_fast (连坐)
        "after-bad": S.SKIPPED,  # its upstream did not succeed: it should never run
        "after-slow": S.SKIPPED,
    }
    assert outcome.status is S.FAILED
    assert outcome.first_failure is not None
    assert outcome.first_failure.node_id == "bad"


def test_s8_12_all_settled_waits_for_everything(controller: Controller, steps: Steps) -> None:
    from chongming_task import Pipeline

    steps.hold.add("slow")
    steps.fail.add("bad")
    pipeline = Pipeline("as", aggregation=AggregationPolicy.all_settled())
    pipeline.node("step", "bad", node_id="bad")
    pipeline.node("step", "slow", node_id="slow")
    run = controller.submit_pipeline(pipeline)
    slow = controller.run(run.task_ids["slow"])
    assert slow is not None
    reach(slow, S.RUNNING)
    steps.release.set()
    outcome = run.wait(timeout=PATIENCE)
    assert outcome.statuses() == {"bad": S.FAILED, "slow": S.SUCCEEDED}
    assert outcome.status is S.FAILED


def test_s8_12_a_manual_stop_is_stopped_not_a_failure(controller: Controller, steps: Steps) -> None:
    from chongming_task import Pipeline

    steps.hold.update({"manual", "sibling"})
    pipeline = Pipeline("manual")
    manual = pipeline.node("step", "manual", node_id="manual")
    pipeline.node("step", "sibling", node_id="sibling")
    pipeline.node("step", "after", node_id="after", depends_on=[manual])
    run = controller.submit_pipeline(pipeline)
    for node_id in ("manual", "sibling"):
        reach(controller.run(run.task_ids[node_id]), S.RUNNING)  # type: ignore[arg-type]
    assert controller.stop(run.task_ids["manual"], reason="值班同学手动停的")
    manual_run = controller.run(run.task_ids["manual"])
    assert manual_run is not None
    reach(manual_run, S.STOPPED)
    steps.release.set()
    outcome = run.wait(timeout=PATIENCE)
    statuses = outcome.statuses()
    assert statuses["manual"] is S.STOPPED
    assert statuses["after"] is S.SKIPPED
    assert statuses["sibling"] is S.SUCCEEDED  # a stop is not a failure: no fail_fast
    assert outcome.status is S.STOPPED


def test_s8_12_cancelled_does_not_trigger_fail_fast(controller: Controller, steps: Steps) -> None:
    from chongming_task import Pipeline

    steps.hold.update({"victim", "sibling"})
    pipeline = Pipeline("cancel")
    pipeline.node("step", "victim", node_id="victim")
    pipeline.node("step", "sibling", node_id="sibling")
    run = controller.submit_pipeline(pipeline)
    for node_id in ("victim", "sibling"):
        reach(controller.run(run.task_ids[node_id]), S.RUNNING)  # type: ignore[arg-type]
    victim = controller.run(run.task_ids["victim"])
    assert victim is not None
    victim.cancel(reason="cancelled from outside", actor=controller.owner)
    steps.release.set()
    outcome = run.wait(timeout=PATIENCE)
    assert outcome.statuses() == {"victim": S.CANCELLED, "sibling": S.SUCCEEDED}


# ---------------------------------------------------------------- §8.13 upstream data


@task
def transform(ctx, day: str) -> int:  # type: ignore[no-untyped-def]
    partitions = ctx.input("extract", [])  # extract 节点的返回值
    ...
    return len(partitions)


@task
def extract(ctx, day: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{day}/a", f"{day}/b", f"{day}/c"]


def test_s8_13_upstream_data_sample() -> None:
    from chongming_task import Pipeline

    with Controller() as controller:
        controller.register_all(extract, transform)
        pipeline = Pipeline("upstream")
        source = pipeline.node("extract", "2026-10-02")
        pipeline.node("transform", "2026-10-02", depends_on=[source])
        alone = pipeline.node("transform", "2026-10-03")  # no upstream: the default []
        outcome = controller.submit_pipeline(pipeline).wait(timeout=PATIENCE)
        assert outcome.values() == {
            "extract": ["2026-10-02/a", "2026-10-02/b", "2026-10-02/c"],
            "transform": 3,
            alone.node_id: 0,
        }
