"""Handing buckets between nodes: in-process workers on every store, then real processes.

The in-process scenario checks every intermediate state: while the old owner drains,
the bucket is ``draining`` (no hole), neither node claims its queued tasks, the old
owner's running task finishes there; then the new owner declares it and runs the
queued ones. The process scenario runs two ``chongming-task worker`` processes on
SQLite and PostgreSQL, hands a bucket over with the CLI, and checks in the store and
in the bodies' pid files that the queued tasks ran on the new owner; a SIGKILLed
worker's declaration then goes stale.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from _workers import cli, cli_env, on_path, spawn_worker, stop_workers
from chongming_task import Client, Controller, TaskStatus
from chongming_task.buckets import HandoffResult, HandoffTimeout, handoff, ownership_report
from chongming_task.policies import BucketPolicy
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until
from chongming_task.worker import Worker

HERE = Path(__file__).parent
NUM = 16
DEADLINE = 20.0


def key_in(bucket: int, num: int = NUM) -> str:
    policy = BucketPolicy(num_buckets=num)
    return next(f"k{i}" for i in range(10_000) if policy.bucket_for(f"k{i}") == bucket)


GATE = threading.Event()


def gated(ctx: Any, n: int) -> int:
    while not GATE.is_set():
        ctx.checkpoint()
        GATE.wait(0.01)
    return n


def start_worker(store: TaskStore, owner: str, buckets: Any, slots: int) -> Worker:
    controller = Controller(
        store=store, owner=owner, num_buckets=NUM, owned_buckets=buckets, lease_ttl=5.0
    )
    controller.register("gated", gated)
    worker = Worker(controller, max_parallel=slots, poll_interval=0.05, heartbeat_interval=0.2)
    worker.start()
    return worker


@pytest.mark.parametrize("drain", [True, False])
def test_handoff_between_two_workers(store: TaskStore, drain: bool) -> None:
    GATE.clear()
    definitions = Controller()
    definitions.register("gated", gated)
    client = Client(store, tasks=definitions, num_buckets=NUM)
    key = key_in(3)
    a = start_worker(store, "node-a", range(0, 8), slots=1)
    b = start_worker(store, "node-b", range(8, NUM), slots=2)
    results: list[HandoffResult | BaseException] = []
    try:
        first = client.enqueue("gated", 0, bucket_key=key, task_id="t0")
        wait_until(lambda: first.status is TaskStatus.RUNNING, timeout=DEADLINE)
        assert first.snapshot.owner == "node-a"
        queued = [client.enqueue("gated", i, bucket_key=key, task_id=f"t{i}") for i in (1, 2)]
        before = ownership_report(store)
        assert before.owners[3] == ("node-a",)
        assert before.healthy

        def call() -> None:
            try:
                results.append(
                    handoff(
                        store,
                        [3],
                        from_node="node-a",
                        to_node="node-b",
                        drain=drain,
                        timeout=DEADLINE,
                    )
                )
            except BaseException as exc:
                results.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        if drain:
            # The old owner released the bucket and drains: in transit, not a hole.
            wait_until(lambda: ownership_report(store).draining == {3: "node-a"}, timeout=DEADLINE)
            report = ownership_report(store)
            assert report.node("node-a").buckets == (0, 1, 2, 4, 5, 6, 7)  # type: ignore[union-attr]
            assert report.owners[3] == ()
            assert report.holes == ()
            assert report.orphans == ()
            assert 3 not in a.controller.owned_buckets  # type: ignore[operator]
            assert not results  # the call waits for the drain
            for handle in queued:  # nobody claims them meanwhile
                stored = handle.snapshot
                assert stored.status is TaskStatus.QUEUED
                assert stored.owner is None
            assert first.status is TaskStatus.RUNNING
            GATE.set()
        caller.join(DEADLINE)
        assert len(results) == 1, results
        result = results[0]
        assert isinstance(result, HandoffResult), result
        assert (result.buckets, result.from_node, result.to_node) == ((3,), "node-a", "node-b")
        if drain:
            assert result.still_running == ()
            assert first.snapshot.status is TaskStatus.SUCCEEDED  # finished before the confirm
        else:
            assert result.still_running == ("t0",)  # it keeps running on node-a
        after = ownership_report(store)
        assert after.owners[3] == ("node-b",)
        assert after.node("node-b").buckets == (3, *range(8, NUM))  # type: ignore[union-attr]
        assert after.draining == {}
        assert after.duplicates == {}
        assert after.healthy
        GATE.set()
        for handle in [first, *queued]:
            assert handle.wait(DEADLINE).status is TaskStatus.SUCCEEDED
        assert first.snapshot.owner == "node-a"  # tasks do not migrate
        for handle in queued:
            assert handle.snapshot.owner == "node-b"
            assert [t.to_status for t in handle.transitions] == [
                TaskStatus.PENDING,
                TaskStatus.QUEUED,
                TaskStatus.STARTING,
                TaskStatus.RUNNING,
                TaskStatus.SUCCEEDED,
            ]
        # The store kept both commands, completed, with their results.
        release = store.get_command(result.release_command)
        adopt = store.get_command(result.adopt_command)
        assert release is not None
        assert release.status == "completed"
        assert release.claimed_by == "node-a"
        assert release.kind == "node"
        assert adopt is not None
        assert adopt.status == "completed"
        assert adopt.claimed_by == "node-b"
        assert adopt.result == {"applied": True, "adopted": [3]}
        assert a.controller.owned_buckets == frozenset({0, 1, 2, 4, 5, 6, 7})
        assert b.controller.owned_buckets == frozenset({3, *range(8, NUM)})
    finally:
        GATE.set()
        for w in (a, b):
            w.shutdown(timeout=5)
            w.controller.close()


def test_handoff_times_out_honestly_while_the_old_owner_drains(store: TaskStore) -> None:
    GATE.clear()
    definitions = Controller()
    definitions.register("gated", gated)
    client = Client(store, tasks=definitions, num_buckets=NUM)
    a = start_worker(store, "node-a", range(0, 8), slots=1)
    b = start_worker(store, "node-b", range(8, NUM), slots=1)
    try:
        first = client.enqueue("gated", 0, bucket_key=key_in(3), task_id="t0")
        wait_until(lambda: first.status is TaskStatus.RUNNING, timeout=DEADLINE)
        with pytest.raises(HandoffTimeout, match="node-a has not confirmed") as caught:
            handoff(store, [3], from_node="node-a", to_node="node-b", timeout=0.5)
        assert caught.value.stage == "release"
        # It goes on without the caller: node-a drains, and once its task ends node-b
        # owns bucket 3.
        wait_until(lambda: ownership_report(store).draining == {3: "node-a"}, timeout=DEADLINE)
        assert first.status is TaskStatus.RUNNING
        GATE.set()
        wait_until(lambda: ownership_report(store).owners[3] == ("node-b",), timeout=DEADLINE)
        # node-a completes its release right after writing the adopt command (node-b
        # may have adopted a moment before).
        release_id = caught.value.command_id or ""
        command = wait_until(lambda: store.get_command(release_id), timeout=DEADLINE)
        assert command is not None
        wait_until(
            lambda: store.get_command(release_id).status == "completed",  # type: ignore[union-attr]
            timeout=DEADLINE,
        )
        assert command.claimed_by == "node-a"
    finally:
        GATE.set()
        for w in (a, b):
            w.shutdown(timeout=5)
            w.controller.close()


# ------------------------------------------------------------------ real processes


def _cli(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(db, "--num-buckets", "8", *args, env=cli_env(HERE))


def _worker(db: str, owner: str, buckets: str, log: Path) -> subprocess.Popen[bytes]:
    return spawn_worker(
        db,
        log,
        options=["--num-buckets", "8", "--owner", owner, "--owned-buckets", buckets],
        worker=[
            "--tasks",
            str(HERE / "btasks.py"),
            "--max-parallel",
            "2",
            "--poll-interval",
            "0.1",
        ],
        env=cli_env(HERE),
    )


def _owners(db: str) -> dict[str, Any]:
    out = _cli(db, "buckets", "--owners", "--json")
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def scenario(store: TaskStore, db: str, tmp_path: Path) -> None:
    with on_path(HERE):
        import btasks
    gates = tmp_path / "gates"
    gates.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    key = key_in(2, 8)
    client = Client(store, tasks=[btasks.gated], num_buckets=8)
    procs = {
        "w-a": _worker(db, "w-a", "0-3", logs / "w-a.log"),
        "w-b": _worker(db, "w-b", "4-7", logs / "w-b.log"),
    }
    try:
        wait_until(
            lambda: [n["state"] for n in _owners(db).get("nodes", [])] == ["live", "live"],
            timeout=DEADLINE,
        )
        running = [
            client.enqueue("gated", str(gates), bucket_key=key, task_id=f"r{i}") for i in range(2)
        ]
        wait_until(lambda: all(h.status is TaskStatus.RUNNING for h in running), timeout=DEADLINE)
        queued = [
            client.enqueue("gated", str(gates), bucket_key=key, task_id=f"q{i}") for i in range(3)
        ]
        for handle in queued:
            assert handle.status is TaskStatus.QUEUED
            assert handle.snapshot.owner is None
        # w-a is full, so the handoff (drain) waits: the first call times out honestly.
        late = _cli(db, "buckets", "handoff", "--from", "w-a", "--to", "w-b", "2", "--timeout", "1")
        assert late.returncode == 1, late.stdout
        assert "w-a has not confirmed the release of bucket(s) [2]" in late.stderr
        wait_until(lambda: _owners(db)["draining"] == {"2": "w-a"}, timeout=DEADLINE)
        assert _owners(db)["holes"] == []
        (gates / "release").write_text("go")
        wait_until(lambda: _owners(db)["owners"]["2"] == ["w-b"], timeout=DEADLINE)
        for handle in running:
            assert handle.wait(DEADLINE).status is TaskStatus.SUCCEEDED
            assert handle.snapshot.owner == "w-a"
        for handle in queued:
            assert handle.wait(DEADLINE).status is TaskStatus.SUCCEEDED
            assert handle.snapshot.owner == "w-b"
            body_pid = int((gates / f"started-{handle.task_id}").read_text())
            assert body_pid == procs["w-b"].pid
        # Back again, with the CLI waiting this time; a new task runs on w-a.
        back = _cli(db, "buckets", "handoff", "--from", "w-b", "--to", "w-a", "2", "--json")
        assert back.returncode == 0, back.stderr
        moved = json.loads(back.stdout)
        assert moved["schema"] == "chongming-task.bucket-handoff.v1"
        assert (moved["buckets"], moved["from"], moved["to"]) == ([2], "w-b", "w-a")
        home = client.enqueue("gated", str(gates), bucket_key=key, task_id="home")
        assert home.wait(DEADLINE).status is TaskStatus.SUCCEEDED
        assert home.snapshot.owner == "w-a"
        final = _owners(db)
        assert final["healthy"] is True
        assert final["duplicates"] == {}
        assert final["holes"] == []
        # A worker killed without a word: its declaration goes stale, its buckets holes.
        procs["w-b"].send_signal(signal.SIGKILL)
        procs["w-b"].wait(10)
        wait_until(lambda: _owners(db)["stale"] == ["w-b"], timeout=DEADLINE)
        doc = _owners(db)
        assert doc["holes"] == [4, 5, 6, 7]
        health = _cli(db, "health", "--json")
        assert health.returncode == 1
        assert json.loads(health.stdout)["buckets"]["stale"] == ["w-b"]
    finally:
        (gates / "release").write_text("go")
        stop_workers(procs.values(), logs)


def test_handoff_between_worker_processes(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    scenario(*shared_store, tmp_path)
