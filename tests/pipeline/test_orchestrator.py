"""The orchestrator on a scripted port: every interleaving is chosen by the test."""

from __future__ import annotations

import pytest

from chongming_task._model import FailureKind
from chongming_task.errors import CircularDependency, ConfigurationError
from chongming_task.pipeline import Pipeline, PipelineRun
from chongming_task.pipeline._submit import submit_to_port
from chongming_task.policies import AggregationPolicy, JoinMode
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from .scripted import ScriptedPort

S = TaskStatus
NAMES = {"fetch", "transform", "load", "audit", "t"}


def _branches(aggregation: AggregationPolicy) -> Pipeline:
    """root -> a, b, c (parallel) -> a2, b2, c2; all -> end (ALL_SETTLED)."""
    p = Pipeline("branches", aggregation=aggregation)
    root = p.node("t", node_id="root")
    firsts = [p.node("t", node_id=name, depends_on=[root]) for name in "abc"]
    seconds = [p.node("t", node_id=f"{f.node_id}2", depends_on=[f]) for f in firsts]
    p.node("t", node_id="end", depends_on=seconds, join=JoinMode.ALL_SETTLED)
    return p


def run_status(run: PipelineRun) -> TaskStatus:
    """``run.status`` through a call, so the type checker does not pin it across calls."""
    return run.status


def _status(port: ScriptedPort, run_id: str, node_id: str) -> TaskStatus:
    return port.task(run_id, node_id).status


def test_nodes_are_created_blocked_roots_last_with_metadata() -> None:
    port = ScriptedPort(NAMES)
    run = submit_to_port(port, _branches(AggregationPolicy.fail_fast()), run_id="r1")
    created = [(task_id, blocked) for task_id, _, _, blocked in port.submitted]
    assert created[-1] == ("r1/root", False)
    assert all(blocked for _, blocked in created[:-1])
    assert run.task_ids["a2"] == "r1/a2"
    assert port.task("r1", "a2").snapshot.metadata == {
        "pipeline": "branches",
        "pipeline_run": "r1",
        "node": "a2",
    }
    assert port.path("r1/root") == ["pending", "queued"]
    assert port.path("r1/a") == ["pending", "blocked"]
    run.stop("cleanup")
    run.wait(5)


def test_fail_fast_with_several_branches_in_flight() -> None:
    port = ScriptedPort(NAMES)
    run = submit_to_port(port, _branches(AggregationPolicy.fail_fast()), run_id="r")
    port.succeed("r/root", {"day": "2026-10-02"})
    wait_until(lambda: all(_status(port, "r", n) is S.QUEUED for n in "abc"))
    assert port.upstream["r/a"] == {"root": {"day": "2026-10-02"}}
    port.start("r/a")
    port.start("r/b")  # c stays queued: released, not started
    port.fail("r/a", "disk full")
    outcome = run.wait(5)

    assert outcome.status is S.FAILED
    assert outcome.first_failure is not None
    assert outcome.first_failure.node_id == "a"
    assert outcome.first_failure.message == "disk full"
    assert str(outcome.first_failure) == "node 'a' failed: disk full"
    assert outcome.statuses() == {
        "root": S.SUCCEEDED,
        "a": S.FAILED,
        "b": S.CANCELLED,
        "c": S.CANCELLED,
        "a2": S.SKIPPED,
        "b2": S.SKIPPED,
        "c2": S.SKIPPED,
        "end": S.SKIPPED,
    }
    assert port.path("r/b") == ["pending", "blocked", "queued", "starting", "running", "cancelled"]
    assert port.path("r/c") == ["pending", "blocked", "queued", "cancelled"]
    assert port.path("r/a2") == ["pending", "blocked", "skipped"]
    cancelled = outcome.nodes["b"].failure
    assert cancelled is not None
    assert cancelled.kind is FailureKind.CANCELLED
    assert cancelled.message == "pipeline 'branches' failed fast: node 'a' failed: disk full"
    skipped = outcome.nodes["end"].failure
    assert skipped is not None
    assert skipped.kind is FailureKind.DEPENDENCY_FAILED
    assert "failed fast before this node was released: node 'a' failed" in skipped.message
    # Nothing was released after the failure; the cancellations triggered nothing.
    released = [task for action, task in port.actions if action == "release"]
    assert released == ["r/a", "r/b", "r/c"]


def test_a_failure_during_releases_stops_further_releases() -> None:
    """Another node fails while the children of root are being released one by one."""
    port = ScriptedPort(NAMES)
    p = Pipeline("race")
    root = p.node("t", node_id="root")
    p.node("t", node_id="other")
    for name in ("a", "b", "c"):
        p.node("t", node_id=name, depends_on=[root])
    run = submit_to_port(port, p, run_id="r")
    port.start("r/other")
    # The failure arrives (and is queued) while "a" is being released.
    port.during_release["r/a"] = lambda: port.fail("r/other", "concurrent failure")
    port.succeed("r/root")
    outcome = run.wait(5)
    assert outcome.first_failure is not None
    assert outcome.first_failure.node_id == "other"
    assert outcome.statuses() == {
        "root": S.SUCCEEDED,
        "other": S.FAILED,
        "a": S.CANCELLED,  # released before the failure: cancelled
        "b": S.SKIPPED,  # never released after it
        "c": S.SKIPPED,
    }
    assert [task for action, task in port.actions if action == "release"] == ["r/a"]


def test_a_cancelled_node_never_triggers_fail_fast() -> None:
    port = ScriptedPort(NAMES)
    run = submit_to_port(port, _branches(AggregationPolicy.fail_fast()), run_id="r")
    port.succeed("r/root")
    wait_until(lambda: _status(port, "r", "c") is S.QUEUED)
    port.cancel("r/a", "operator cancelled one branch")
    for node in ("b", "c"):
        port.succeed(f"r/{node}")
        assert _status(port, "r", f"{node}2") is S.QUEUED
        port.succeed(f"r/{node}2")
    # end is ALL_SETTLED: it is released although a branch was cancelled.
    wait_until(lambda: _status(port, "r", "end") is S.QUEUED)
    assert port.upstream["r/end"] == {"b2": None, "c2": None}
    port.succeed("r/end")
    outcome = run.wait(5)
    assert outcome.first_failure is None
    assert outcome.status is S.CANCELLED
    assert outcome.statuses()["a2"] is S.SKIPPED
    assert outcome.statuses()["b2"] is S.SUCCEEDED
    assert port.path("r/end") == [
        "pending",
        "blocked",
        "queued",
        "starting",
        "running",
        "succeeded",
    ]
    assert ("cancel", "r/b") not in port.actions


def test_all_settled_lets_the_other_branches_finish() -> None:
    port = ScriptedPort(NAMES)
    run = submit_to_port(port, _branches(AggregationPolicy.all_settled()), run_id="r")
    port.succeed("r/root")
    wait_until(lambda: all(_status(port, "r", n) is S.QUEUED for n in "abc"))
    port.fail("r/a", "first")
    wait_until(lambda: _status(port, "r", "a2") is S.SKIPPED)
    port.fail("r/b", "second")
    port.succeed("r/c", 3)
    wait_until(lambda: _status(port, "r", "c2") is S.QUEUED)
    assert port.upstream["r/c2"] == {"c": 3}
    port.succeed("r/c2", 4)
    wait_until(lambda: _status(port, "r", "end") is S.QUEUED)
    # Only the succeeded upstream appears; skipped ones have no value, not None.
    assert port.upstream["r/end"] == {"c2": 4}
    port.succeed("r/end")
    outcome = run.wait(5)
    assert outcome.status is S.FAILED
    assert outcome.first_failure is not None
    assert outcome.first_failure.node_id == "a"
    assert outcome.statuses() == {
        "root": S.SUCCEEDED,
        "a": S.FAILED,
        "b": S.FAILED,
        "c": S.SUCCEEDED,
        "a2": S.SKIPPED,
        "b2": S.SKIPPED,
        "c2": S.SUCCEEDED,
        "end": S.SUCCEEDED,
    }
    skipped = outcome.nodes["a2"].failure
    assert skipped is not None
    assert skipped.kind is FailureKind.DEPENDENCY_FAILED
    assert skipped.message == (
        "pipeline 'branches': upstream 'a' (failed) did not succeed (join all_succeeded)"
    )


def test_stop_stops_every_unsettled_node() -> None:
    port = ScriptedPort(NAMES)
    run = submit_to_port(port, _branches(AggregationPolicy.fail_fast()), run_id="r")
    port.succeed("r/root")
    wait_until(lambda: _status(port, "r", "c") is S.QUEUED)
    port.start("r/a")
    assert run.status is S.RUNNING
    assert run.stop("maintenance window") is True
    wait_until(lambda: _status(port, "r", "a") is S.STOPPING)
    assert run_status(run) is S.STOPPING
    port.stopped("r/a")
    outcome = run.wait(5)
    assert outcome.status is S.STOPPED
    assert outcome.stop_reason == "maintenance window"
    assert outcome.first_failure is None
    assert set(outcome.statuses().values()) == {S.SUCCEEDED, S.STOPPED}
    assert port.path("r/a") == [
        "pending",
        "blocked",
        "queued",
        "starting",
        "running",
        "stopping",
        "stopped",
    ]
    assert port.path("r/end") == ["pending", "blocked", "stopped"]
    reason = port.machines["r/end"].transitions[-1].reason
    assert reason == "pipeline 'branches' stopped: maintenance window"
    assert run.stop() is False
    assert run_status(run) is S.STOPPED


def test_any_succeeded_releases_at_the_first_success() -> None:
    port = ScriptedPort(NAMES)
    p = Pipeline("mirror")
    sources = [p.node("fetch", url, node_id=f"src{i}") for i, url in enumerate("xyz")]
    p.node("load", node_id="load", depends_on=sources, join=JoinMode.ANY_SUCCEEDED)
    run = submit_to_port(port, p, run_id="m")
    port.fail("m/src0")
    wait_until(lambda: run.nodes["src0"].status is S.FAILED)
    # fail_fast: a real failure cancels the others, so the redundant sources stop too.
    outcome = run.wait(5)
    assert outcome.statuses()["load"] is S.SKIPPED

    port2 = ScriptedPort(NAMES)
    p2 = Pipeline("mirror", aggregation=AggregationPolicy.all_settled())
    sources = [p2.node("fetch", url, node_id=f"src{i}") for i, url in enumerate("xyz")]
    p2.node("load", node_id="load", depends_on=sources, join=JoinMode.ANY_SUCCEEDED)
    run2 = submit_to_port(port2, p2, run_id="m")
    port2.fail("m/src0")
    port2.start("m/src2")
    port2.succeed("m/src1", "rows")
    wait_until(lambda: port2.task("m", "load").status is S.QUEUED)
    assert port2.upstream["m/load"] == {"src1": "rows"}
    port2.succeed("m/load")
    port2.succeed("m/src2", "late")
    outcome2 = run2.wait(5)
    assert outcome2.status is S.FAILED  # src0 really failed; all_settled still reports it
    assert outcome2.statuses()["load"] is S.SUCCEEDED


def test_rejected_pipelines_create_nothing() -> None:
    port = ScriptedPort(NAMES)
    p = Pipeline("bad")
    p.node("fetch")
    p.node("unknown-task", depends_on=["fetch"])
    with pytest.raises(ConfigurationError, match="not registered"):
        submit_to_port(port, p)
    cyclic = Pipeline("cyclic")
    cyclic.node("t", node_id="a", depends_on=["b"])
    cyclic.node("t", node_id="b", depends_on=["a"])
    with pytest.raises(CircularDependency):
        submit_to_port(port, cyclic)
    ok = Pipeline("ok")
    ok.node("fetch")
    run = submit_to_port(port, ok, run_id="same")
    port.succeed("same/fetch")
    run.wait(5)
    before = dict(port.machines)
    with pytest.raises(ConfigurationError, match="run id 'same' is already used"):
        submit_to_port(port, ok, run_id="same")
    assert port.machines == before
    assert port.subscribers == []


def test_a_refused_submission_cancels_what_was_created() -> None:
    port = ScriptedPort(NAMES)
    port.refuse.add("fetch")
    p = Pipeline("p")
    root = p.node("fetch")
    p.node("load", depends_on=[root])
    with pytest.raises(ValueError, match="refused fetch"):
        submit_to_port(port, p, run_id="x")
    assert port.path("x/load") == ["pending", "blocked", "cancelled"]
    assert port.subscribers == []


def test_pipeline_owned_options_are_refused() -> None:
    p = Pipeline("p")
    with pytest.raises(ConfigurationError, match="cannot take task_id="):
        p.node("fetch", task_id="x")
    with pytest.raises(ConfigurationError, match="cannot take blocked="):
        p.node("fetch", blocked=False)
    with pytest.raises(ConfigurationError, match=r"metadata keys \['node'\]"):
        p.node("fetch", metadata={"node": "x"})


def test_user_metadata_is_kept_beside_the_pipeline_keys() -> None:
    port = ScriptedPort(NAMES)
    p = Pipeline("p")
    p.node("fetch", "day", metadata={"team": "data"}, priority=5)
    run = submit_to_port(port, p, run_id="u")
    assert port.task("u", "fetch").snapshot.metadata == {
        "team": "data",
        "pipeline": "p",
        "pipeline_run": "u",
        "node": "fetch",
    }
    assert port.submitted[0][1:3] == (("day",), {"priority": 5})
    port.succeed("u/fetch")
    assert run.wait(5).ok


def test_a_refused_release_or_skip_still_ends_the_node() -> None:
    port = ScriptedPort(NAMES)
    port.refuse_actions |= {("release", "r/a"), ("skip", "r/b"), ("release", "r/b")}
    p = Pipeline("refusals", aggregation=AggregationPolicy.all_settled())
    root = p.node("t", node_id="root")
    p.node("t", node_id="a", depends_on=[root])
    p.node("t", node_id="b", depends_on=[root])
    run = submit_to_port(port, p, run_id="r")
    port.succeed("r/root")
    outcome = run.wait(5)
    # a: release refused -> skipped; b: release and skip refused -> stopped.
    assert outcome.statuses() == {"root": S.SUCCEEDED, "a": S.SKIPPED, "b": S.STOPPED}
    failure = outcome.nodes["a"].failure
    assert failure is not None
    assert failure.message == (
        "pipeline 'refusals': could not release the node: release refused for r/a"
    )


def test_a_refused_skip_ends_the_node_stopped() -> None:
    port = ScriptedPort(NAMES)
    port.refuse_actions.add(("skip", "r/a"))
    p = Pipeline("refusals")
    root = p.node("t", node_id="root")
    p.node("t", node_id="a", depends_on=[root])
    run = submit_to_port(port, p, run_id="r")
    port.fail("r/root")
    outcome = run.wait(5)
    assert outcome.statuses() == {"root": S.FAILED, "a": S.STOPPED}
    assert port.machines["r/a"].transitions[-1].reason == (
        "pipeline 'refusals': could not skip the node: skip refused for r/a"
    )
