"""The bucket ownership registry's verdicts, each situation constructed on every store.

Nodes declare through the real paths (``declare_buckets`` on a controller, a
``Worker``'s own heartbeat); time goes through ``FakeClock``. A *stalled* node is one
whose own clock stands still while the store's moves on: it renews nothing, exactly
like a suspended VM, and its declaration goes stale when its lease has run out.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Client, Controller, InMemoryTaskStore, SqliteTaskStore, TaskStatus
from chongming_task.buckets import (
    HandoffRefused,
    declare_buckets,
    handoff,
    ownership_report,
)
from chongming_task.core._clock import SystemClock
from chongming_task.errors import ConfigurationError
from chongming_task.policies import BucketPolicy
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock

NUM = 16


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.external_service)]
)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(
    kind: str, clock: FakeClock, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[TaskStore]:
    opened: TaskStore
    if kind == "memory":
        opened = InMemoryTaskStore(clock=clock)
    elif kind == "sqlite":
        opened = SqliteTaskStore(tmp_path / "b.db", clock=clock)
    else:
        from chongming_task.stores._postgres import PostgresTaskStore

        opened = PostgresTaskStore(request.getfixturevalue("postgres_dsn"), clock=clock)
    yield opened
    opened.close()


def job(ctx: Any, n: int) -> int:
    return n


def make_client(store: TaskStore) -> Client:
    definitions = Controller()
    definitions.register("job", job)
    return Client(store, tasks=definitions, num_buckets=NUM)


def key_in(bucket: int) -> str:
    policy = BucketPolicy(num_buckets=NUM)
    return next(f"k{i}" for i in range(10_000) if policy.bucket_for(f"k{i}") == bucket)


def node(store: TaskStore, owner: str, buckets: Any, clock: Any) -> Controller:
    return Controller(store=store, owner=owner, num_buckets=NUM, owned_buckets=buckets, clock=clock)


def test_no_declaration_no_verdict(store: TaskStore) -> None:
    report = ownership_report(store)
    assert not report.declared
    assert report.healthy
    assert report.holes == ()
    assert report.duplicates == {}


def test_two_nodes_declaring_bucket_7_are_duplicates(store: TaskStore, clock: FakeClock) -> None:
    a = node(store, "node-a", range(0, 8), clock)
    b = node(store, "node-b", [7, *range(8, NUM)], clock)
    with declare_buckets(a), declare_buckets(b):
        report = ownership_report(store)
        assert report.duplicates == {7: ("node-a", "node-b")}
        assert report.owners[7] == ("node-a", "node-b")
        assert report.owners[6] == ("node-a",)
        assert report.owners[8] == ("node-b",)
        assert report.holes == ()
        assert report.problems == ["bucket 7 is declared by 2 live nodes: node-a, node-b"]
        assert not report.healthy
        assert [n.state for n in report.nodes] == ["live", "live"]
        assert {n.kind for n in report.nodes} == {"controller"}
    # Closed: withdrawn cleanly, not stale; every bucket is now a hole.
    after = ownership_report(store)
    assert [n.state for n in after.nodes] == ["stopped", "stopped"]
    assert after.stale == ()
    assert after.duplicates == {}
    assert after.holes == tuple(range(NUM))
    a.close()
    b.close()


def test_a_bucket_nobody_declares_is_a_hole_and_its_queued_task_an_orphan(
    store: TaskStore, clock: FakeClock
) -> None:
    client = make_client(store)
    orphan = client.enqueue("job", 1, bucket_key=key_in(15), task_id="in-15")
    owned = client.enqueue("job", 2, bucket_key=key_in(3), task_id="in-3")
    a = node(store, "node-a", range(0, 8), clock)
    b = node(store, "node-b", range(8, 15), clock)
    with declare_buckets(a), declare_buckets(b):
        report = ownership_report(store)
        assert report.holes == (15,)
        assert report.owners[15] == ()
        assert report.duplicates == {}
        assert [(o.bucket, o.count, o.task_ids) for o in report.orphans] == [("15", 1, ("in-15",))]
        assert report.problems == [
            "1 of 16 bucket(s) have no live owner: [15]",
            "bucket 15: 1 unfinished task(s) and no live owner (e.g. in-15)",
        ]
        # The store says so too: it is queued, held by nobody.
        stored = store.get(orphan.task_id)
        assert stored is not None
        assert stored.status is TaskStatus.QUEUED
        assert stored.owner is None
        assert store.get(owned.task_id).bucket == 3  # type: ignore[union-attr]
        doc = report.to_dict()
        assert doc["holes"] == [15]
        assert doc["orphaned_tasks"] == 1
        assert doc["orphans"] == [{"bucket": "15", "count": 1, "task_ids": ["in-15"]}]
        # A finished task is no orphan.
        orphan.stop("not needed")
        assert ownership_report(store).orphans == ()
    a.close()
    b.close()


def test_a_stalled_nodes_declaration_goes_stale_when_its_lease_expires(
    store: TaskStore, clock: FakeClock
) -> None:
    frozen = FakeClock(start=clock.now())  # the node's own clock: it never moves
    a = node(store, "node-a", range(0, 8), frozen)
    b = node(store, "node-b", range(8, NUM), clock)
    declared_a = declare_buckets(a, heartbeat_interval=0.5, lease=2.0)
    # node-b's lease outlasts the test, so its verdict does not hang on its thread.
    declared_b = declare_buckets(b, heartbeat_interval=1800, lease=3600)
    try:
        start = ownership_report(store)
        assert start.stale == ()
        assert start.holes == ()
        lease_a = start.node("node-a").lease_until  # type: ignore[union-attr]
        assert lease_a == clock.now() + timedelta(seconds=2)
        clock.advance(2.0)  # the last instant of node-a's lease: still live
        assert ownership_report(store).stale == ()
        clock.advance(0.001)  # past it; node-a, stalled, renewed nothing
        assert ownership_report(store).node("node-a").heartbeat_at == lease_a - timedelta(  # type: ignore[union-attr]
            seconds=2
        )
        report = ownership_report(store)
        assert report.stale == ("node-a",)
        assert report.node("node-a").state == "stale"  # type: ignore[union-attr]
        assert report.node("node-b").state == "live"  # type: ignore[union-attr]
        assert report.holes == tuple(range(0, 8))
        assert (
            f"node node-a: its declaration of buckets [0, 1, ..., 7] expired at "
            f"{lease_a.isoformat()} (stale)" in report.problems
        )
        # A handoff from a stale node is refused before anything is written.
        with pytest.raises(ConfigurationError, match="node-a' is stale"):
            handoff(store, [3], from_node="node-a", to_node="node-b", timeout=1)
    finally:
        declared_b.close()
        declared_a.close()
        a.close()
        b.close()


def test_workers_owning_every_bucket_are_no_duplicates(store: TaskStore, clock: FakeClock) -> None:
    from chongming_task.worker import Worker

    # Workers on the wall clock (their intake waits on the store's): this test judges
    # ownership, not time.
    store.clock = SystemClock()
    nodes = [Controller(store=store, owner=f"w{i}", num_buckets=NUM) for i in range(2)]
    workers = [Worker(c, heartbeat_interval=1.0) for c in nodes]
    for w in workers:
        w.start()
    try:
        report = ownership_report(store)
        assert [(n.node_id, n.kind, n.buckets, n.state) for n in report.nodes] == [
            ("w0", "worker", None, "live"),
            ("w1", "worker", None, "live"),
        ]
        assert report.duplicates == {}
        assert report.holes == ()
        assert report.healthy
        assert report.owners[7] == ("w0", "w1")
        # One of them partitions: bucket 7 is claimed by a catch-all and by it.
        c = node(store, "part", [7], None)
        with declare_buckets(c):
            assert ownership_report(store).duplicates == {7: ("part", "w0", "w1")}
        c.close()
    finally:
        for w in workers:
            w.shutdown(timeout=5)
        for c in nodes:
            c.close()


def test_mismatched_num_buckets_is_reported(store: TaskStore, clock: FakeClock) -> None:
    a = node(store, "node-a", range(0, NUM), clock)
    b = Controller(store=store, owner="node-b", num_buckets=32, owned_buckets=[1], clock=clock)
    with declare_buckets(a), declare_buckets(b):
        report = ownership_report(store, num_buckets=NUM)
        assert report.mismatched == {"node-b": 32}
        assert any("num_buckets=32" in p for p in report.problems)
    a.close()
    b.close()


def test_declare_and_handoff_refuse_bad_input(store: TaskStore, clock: FakeClock) -> None:
    with pytest.raises(ConfigurationError, match="no owned_buckets"):
        declare_buckets(Controller(store=store, owner="x", clock=clock))
    a = node(store, "node-a", range(0, 8), clock)
    with pytest.raises(ConfigurationError, match="longer than heartbeat_interval"):
        declare_buckets(a, heartbeat_interval=5, lease=1)
    b = node(store, "node-b", range(8, NUM), clock)
    with declare_buckets(a), declare_buckets(b):
        before = [(n.node_id, n.buckets, n.draining) for n in ownership_report(store).nodes]
        refusals: list[tuple[dict[str, Any], str]] = [
            ({"buckets": [9]}, r"node-a does not declare bucket\(s\) \[9\]"),
            ({"buckets": [99]}, "outside 0..15"),
            ({"buckets": []}, "at least one bucket"),
            ({"buckets": "7"}, "must be integers"),
            ({"buckets": [1], "to_node": "node-a"}, "both 'node-a'"),
            ({"buckets": [1], "to_node": "ghost"}, "'ghost' is not in the node registry"),
            ({"buckets": [1], "timeout": 0}, "timeout must be a positive"),
        ]
        for kwargs, match in refusals:
            args: dict[str, Any] = {"from_node": "node-a", "to_node": "node-b", "timeout": 1}
            args.update(kwargs)
            with pytest.raises(ConfigurationError, match=match):
                handoff(store, **args)
        after = [(n.node_id, n.buckets, n.draining) for n in ownership_report(store).nodes]
        assert after == before  # nothing changed
        assert a.owned_buckets == frozenset(range(0, 8))
        assert b.owned_buckets == frozenset(range(8, NUM))
    a.close()
    b.close()


def test_a_node_refuses_a_release_of_buckets_it_does_not_own(
    store: TaskStore, clock: FakeClock
) -> None:
    """The registry said yes, the node says no (it changed meanwhile): refused, unchanged."""
    from chongming_task.buckets._agent import RELEASE, BucketAgent
    from chongming_task.stores._base import Command

    a = node(store, "node-a", range(0, 8), clock)
    agent = BucketAgent(a, kind="controller", heartbeat=lambda: None)
    command = store.submit_command(
        Command.new(
            kind="node",
            target="node-a",
            action=RELEASE,
            issued_by="test",
            issued_at=clock.now(),
            payload={"buckets": [9], "to": "node-b"},
            target_owner="node-a",
        )
    )
    assert agent.poll() == 1
    stored = store.get_command(command.command_id)
    assert stored is not None
    assert stored.status == "completed"
    assert stored.result == {"applied": False, "error": "node node-a does not own bucket(s) [9]"}
    assert a.owned_buckets == frozenset(range(0, 8))
    assert HandoffRefused.__mro__[1].__name__ == "HandoffError"
    a.close()


def test_cli_owners_json_and_health(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The CLI reads with the wall clock, so these nodes declare with it too."""
    if kind == "memory":
        pytest.skip("the CLI opens a database")
    from chongming_task.cli._app import main

    db = str(tmp_path / "cli.db") if kind == "sqlite" else request.getfixturevalue("postgres_dsn")
    store: TaskStore
    if kind == "sqlite":
        store = SqliteTaskStore(db)
    else:
        from chongming_task.stores._postgres import PostgresTaskStore

        store = PostgresTaskStore(db)
    client = make_client(store)
    client.enqueue("job", 1, bucket_key=key_in(15), task_id="in-15")
    a = node(store, "node-a", [*range(0, 8), 9], None)
    b = node(store, "node-b", range(8, 15), None)
    try:
        with declare_buckets(a, lease=60), declare_buckets(b, lease=60):
            out, err = io.StringIO(), io.StringIO()
            code = main(["--db", db, "buckets", "--owners", "--json"], stdout=out, stderr=err)
            assert code == 1, err.getvalue()
            doc = json.loads(out.getvalue())
            assert doc["schema"] == "chongming-task.bucket-owners.v1"
            assert doc["duplicates"] == {"9": ["node-a", "node-b"]}
            assert doc["holes"] == [15]
            assert doc["orphans"] == [{"bucket": "15", "count": 1, "task_ids": ["in-15"]}]
            assert [n["node_id"] for n in doc["nodes"]] == ["node-a", "node-b"]
            out = io.StringIO()
            assert main(["--db", db, "buckets", "--owners"], stdout=out, stderr=err) == 1
            text = out.getvalue()
            assert "problem: bucket 9 is declared by 2 live nodes: node-a, node-b" in text
            assert "problem: 1 of 16 bucket(s) have no live owner: [15]" in text
            out = io.StringIO()
            assert main(["--db", db, "health", "--json"], stdout=out, stderr=err) == 1
            health = json.loads(out.getvalue())
            # The top-level verdict is the exit code's, not scheduling's alone.
            assert (health["healthy"], health["status"]) == (False, "unhealthy")
            assert (health["schedules_healthy"], health["schedules_status"]) == (True, "ok")
            assert health["buckets"]["duplicates"] == {"9": ["node-a", "node-b"]}
            out = io.StringIO()
            assert main(["--db", db, "health"], stdout=out, stderr=err) == 1
            assert out.getvalue().startswith("unhealthy:"), out.getvalue()
            assert "bucket 9 is declared by 2 live nodes: node-a, node-b" in health["problems"]
    finally:
        a.close()
        b.close()
        store.close()


def test_prometheus_gauges_carry_the_verdicts(store: TaskStore, clock: FakeClock) -> None:
    pytest.importorskip("prometheus_client")
    from chongming_task.observability import PrometheusExporter

    exporter = PrometheusExporter(store=store)
    registry = exporter.registry

    def sample(name: str, labels: dict[str, str] | None = None) -> float | None:
        value: float | None = registry.get_sample_value(name, labels or {})
        return value

    assert sample("chongming_bucket_holes") is None  # nothing declared: nothing exported
    client = make_client(store)
    client.enqueue("job", 1, bucket_key=key_in(15), task_id="in-15")
    client.enqueue("job", 2, bucket_key=key_in(15), task_id="in-15b")
    a = node(store, "node-a", range(0, 8), clock)
    b = node(store, "node-b", [7, *range(8, 14)], clock)
    with declare_buckets(a), declare_buckets(b):
        assert sample("chongming_bucket_owners", {"bucket": "7"}) == 2
        assert sample("chongming_bucket_owners", {"bucket": "0"}) == 1
        assert sample("chongming_bucket_owners", {"bucket": "15"}) == 0
        assert sample("chongming_bucket_duplicates") == 1
        assert sample("chongming_bucket_holes") == 2
        assert sample("chongming_bucket_orphaned_tasks") == 2
        assert sample("chongming_bucket_stale_declarations") == 0
        assert sample("chongming_bucket_draining") == 0
    exporter.close()
    a.close()
    b.close()


def test_cli_handoff_refusals_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    from chongming_task.cli._app import main

    db = str(tmp_path / "cli.db")
    store = SqliteTaskStore(db)
    a = node(store, "node-a", range(0, 8), None)
    b = node(store, "node-b", range(8, NUM), None)
    try:
        with declare_buckets(a, lease=60), declare_buckets(b, lease=60):

            def declared() -> list[tuple[str, Any, Any]]:
                return [(n.node_id, n.buckets, n.draining) for n in ownership_report(store).nodes]

            before = declared()
            for args, code, message in [
                (["--from", "node-a", "--to", "node-b", "9"], 1, "node-a does not declare"),
                (["--from", "ghost", "--to", "node-b", "1"], 1, "not in the node registry"),
                (["--from", "node-a", "--to", "node-b", "1", "--timeout", "0"], 2, "--timeout"),
                (["--from", "node-a", "--to", "node-b", "x-y"], 2, "BUCKETS"),
                (["--from", "node-a", "1"], 2, "--to"),
            ]:
                out, err = io.StringIO(), io.StringIO()
                argv = ["--db", db, "--num-buckets", str(NUM), "buckets", "handoff", *args]
                assert main(argv, stdout=out, stderr=err) == code, (args, err.getvalue())
                assert message in err.getvalue()
                assert len(err.getvalue().strip().splitlines()) == 1
                assert "Traceback" not in err.getvalue()
            assert declared() == before
            # The plain command still counts tasks per bucket.
            out = io.StringIO()
            assert main(["--db", db, "buckets"], stdout=out, stderr=io.StringIO()) == 0
    finally:
        a.close()
        b.close()
        store.close()


def test_handoff_refused_by_the_node_changes_nothing(store: TaskStore) -> None:
    """The registry is a moment behind the node: the node's own refusal is the answer."""
    from chongming_task.errors import HandoffRefused

    store.clock = SystemClock()  # the declarations' threads poll on the wall clock
    a = node(store, "node-a", range(0, 8), None)
    b = node(store, "node-b", range(8, NUM), None)
    try:
        with (
            declare_buckets(a, heartbeat_interval=30, lease=60),
            declare_buckets(b, heartbeat_interval=30, lease=60),
        ):
            a.owned_buckets = frozenset(range(0, 3))  # not declared again before the call
            with pytest.raises(HandoffRefused, match=r"node-a does not own bucket\(s\) \[5\]") as e:
                handoff(store, [5], from_node="node-a", to_node="node-b", timeout=10)
            assert e.value.stage == "release"
            command = store.get_command(e.value.command_id or "")
            assert command is not None
            assert command.status == "completed"
            assert command.claimed_by == "node-a"
            assert a.owned_buckets == frozenset(range(0, 3))
            assert b.owned_buckets == frozenset(range(8, NUM))
    finally:
        a.close()
        b.close()
