"""``chongming_task.worker`` used from Python: submissions, refusals, buckets, shutdown."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task.controller import Controller
from chongming_task.core._clock import SystemClock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.policies import BucketPolicy
from chongming_task.stores._base import Command
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import wait_until
from chongming_task.worker import (
    Submission,
    Worker,
    describe_submission,
    find_submission,
    submission_command_id,
)

from .conftest import Result

Invoke = Callable[..., Result]


def add(ctx: Any, a: int, b: int = 1) -> int:
    return a + b


def spin(ctx: Any, steps: int = 100_000) -> int:
    import time

    for _ in range(steps):
        ctx.checkpoint()
        time.sleep(0.005)
    return steps


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteTaskStore]:
    with SqliteTaskStore(tmp_path / "w.db") as opened:
        yield opened


def _worker(store: SqliteTaskStore, **options: Any) -> tuple[Controller, Worker]:
    max_parallel = options.pop("max_parallel", 2)
    controller = Controller(store, owner="w1", max_parallel=max_parallel, **options)
    controller.register("add", add)
    controller.register("spin", spin)
    worker = Worker(controller, max_parallel=max_parallel, poll_interval=0.05)
    return controller, worker


def test_submission_round_trip_and_deterministic_id(store: SqliteTaskStore) -> None:
    submission = Submission(name="add", task_id="t1", kwargs={"a": 2}, tags=("x",), priority=3)
    assert Submission.from_payload(submission.to_payload()) == submission
    command = submission.submit(store, issued_by="me")
    assert command.command_id == submission_command_id("t1")
    assert (command.kind, command.action, command.target_owner) == ("task", "submit", None)
    found = find_submission(store, "t1")
    assert found is not None
    assert "no worker has taken it yet" in describe_submission(found)
    with pytest.raises(ConfigurationError, match="already submitted"):
        submission.submit(store, issued_by="me")
    with pytest.raises(ConfigurationError, match="not JSON-serialisable"):
        Submission(name="add", task_id="t2", kwargs={"a": object()})


def test_worker_runs_submissions_and_reports_shutdown(store: SqliteTaskStore) -> None:
    controller, worker = _worker(store)
    report = worker.start()
    assert report.clean
    Submission(name="add", task_id="ok", kwargs={"a": 40, "b": 2}).submit(store, issued_by="me")
    Submission(name="spin", task_id="long").submit(store, issued_by="me")
    wait_until(lambda: (s := store.get("ok")) is not None and s.status.value == "succeeded")
    wait_until(lambda: (s := store.get("long")) is not None and s.status.value == "running")
    snapshot = store.get("ok")
    assert snapshot is not None
    assert (snapshot.outcome, snapshot.owner) == (42, "w1")
    command = find_submission(store, "ok")
    assert command is not None
    assert command.result == {"accepted": True, "task_id": "ok", "worker": "w1"}

    shutdown = worker.shutdown(reason="test over", timeout=10, drain_timeout=0)
    assert shutdown.clean
    assert [(t.task_id, t.before, t.after) for t in shutdown.tasks] == [
        ("long", "running", "stopped")
    ]
    assert [(t.from_status, t.to_status) for t in store.history("long")][-2:] == [
        ("running", "stopping"),
        ("stopping", "stopped"),
    ]
    assert worker.accepted == 2
    assert controller.closed


def test_worker_refuses_what_it_cannot_run(
    store: SqliteTaskStore, invoke: Invoke, tmp_path: Path
) -> None:
    _controller, worker = _worker(store)
    worker.start()
    try:
        Submission(name="nosuch", task_id="r1").submit(store, issued_by="me")
        Submission(name="add", task_id="r2", kwargs={"zzz": 1}).submit(store, issued_by="me")
        for task_id in ("r1", "r2"):
            wait_until(
                # mypy infers no type for a lambda with a default argument:
                lambda task_id=task_id: (  # type: ignore[misc]
                    (c := find_submission(store, task_id)) is not None and c.status == "completed"
                )
            )
    finally:
        worker.shutdown(timeout=5)
    refused = find_submission(store, "r1")
    assert refused is not None
    assert refused.result["accepted"] is False
    assert "not registered" in refused.result["error"]
    assert worker.refused >= 1
    status = invoke("--db", str(tmp_path / "w.db"), "status", "r1")
    assert status.code == 0
    assert "was refused by worker w1" in status.out
    assert "not registered" in status.out


def test_worker_takes_only_its_buckets_and_only_free_slots(store: SqliteTaskStore) -> None:
    policy = BucketPolicy(num_buckets=4)
    mine = next(f"k{i}" for i in range(100) if policy.bucket_for(f"k{i}") == 0)
    theirs = next(f"k{i}" for i in range(100) if policy.bucket_for(f"k{i}") == 3)
    controller, worker = _worker(store, max_parallel=1, num_buckets=4, owned_buckets=[0, 1])
    worker.start()
    try:
        Submission(name="spin", task_id="a", bucket_key=mine).submit(store, issued_by="me")
        Submission(name="spin", task_id="b", bucket_key=mine).submit(store, issued_by="me")
        Submission(name="add", task_id="c", bucket_key=theirs, kwargs={"a": 1}).submit(
            store, issued_by="me"
        )
        # "a" takes the only slot, strictly in order: the controller's own poller never
        # claims a submission, so it can never hold "a" while the worker takes "b".
        wait_until(lambda: (s := store.get("a")) is not None and s.status.value == "running")
        assert worker.free_slots() == 0
        # Full: "b" waits for a slot, "c" belongs to another node's bucket.
        assert store.get("b") is None
        assert store.get("c") is None
        other = find_submission(store, "c")
        assert other is not None
        assert other.status != "completed"
        controller.stop("a", reason="make room")
        wait_until(lambda: (s := store.get("b")) is not None and s.status.value == "running")
        assert store.get("c") is None
    finally:
        shutdown = worker.shutdown(timeout=10, drain_timeout=0)
    assert {t.task_id for t in shutdown.tasks} == {"b"}


class _Interleaving(InMemoryTaskStore):
    """Runs ``after_claim`` once, right after the next ``claim_commands`` returns.

    That is the instant in which the claimant holds everything it claimed and has
    handed nothing back yet: the window of the race, opened on demand.
    """

    after_claim: Callable[[], None] | None = None

    def claim_commands(self, owner: str, **options: Any) -> list[Command]:
        claimed = super().claim_commands(owner, **options)
        hook, self.after_claim = self.after_claim, None
        if hook is not None:
            hook()
        return claimed


def test_the_controllers_poller_never_holds_a_submission_from_the_worker() -> None:
    # "a" is pending when the controller's poller claims; "b" arrives and the worker
    # (one free slot) claims while the poller still holds what it took. The worker must
    # take "a". (It took "b" when the poller claimed every task command.)
    with _Interleaving() as store:
        controller = Controller(store, owner="w1", max_parallel=1)
        controller.register("spin", spin)
        worker = Worker(controller, max_parallel=1, poll_interval=0.05)
        try:
            Submission(name="spin", task_id="a").submit(store, issued_by="me")
            polls: list[tuple[int, int]] = []

            def then_b_and_the_worker() -> None:
                Submission(name="spin", task_id="b").submit(store, issued_by="me")
                polls.append(worker.poll_once())

            store.after_claim = then_b_and_the_worker
            controller._parts.poller.poll_once()
            assert polls == [(1, 0)]
            taken = [task_id for task_id in ("a", "b") if store.get(task_id) is not None]
            assert taken == ["a"], f"the worker took {taken} first, not the oldest submission"
        finally:
            worker.shutdown(timeout=10, drain_timeout=0)


def test_worker_needs_a_sane_configuration() -> None:
    controller = Controller()
    try:
        with pytest.raises(ConfigurationError, match="max_parallel"):
            Worker(controller, max_parallel=0)
    finally:
        controller.close()


def test_rich_output_paths(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal: live progress for run, rich tables for ps (and --watch)."""
    from chongming_task.cli import main

    from .conftest import TASKS

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    db = str(tmp_path / "tty.db")
    out = Tty()
    code = main(
        [
            "--db",
            db,
            "run",
            "loop",
            "--tasks",
            TASKS,
            "--arg",
            "steps=3",
            "--arg",
            "delay=0.05",
            "--task-id",
            "t1",
        ],
        stdout=out,
        stderr=io.StringIO(),
    )
    assert code == 0
    assert "t1: succeeded, outcome 3" in out.getvalue()
    assert "\x1b[" in out.getvalue()
    for argv in (["ps"], ["ps", "--watch", "--count", "2", "--interval", "0.01"], ["stats"]):
        out = Tty()
        assert main(["--db", db, *argv], stdout=out, stderr=io.StringIO()) == 0
        assert "succeeded" in out.getvalue()


def test_a_worker_with_keep_finished_forgets_old_runs_not_tasks(store: SqliteTaskStore) -> None:
    controller, worker = _worker(store, keep_finished=1)
    worker.start()
    try:
        for n in range(4):
            Submission(name="add", task_id=f"k{n}", kwargs={"a": n}).submit(store, issued_by="me")
        wait_until(
            lambda: all(
                (s := store.get(f"k{n}")) is not None and s.status.value == "succeeded"
                for n in range(4)
            )
        )
        wait_until(lambda: len(controller.runs()) == 1)
        for n in range(4):
            assert [t.to_status.value for t in store.history(f"k{n}")] == [
                "pending",
                "queued",
                "starting",
                "running",
                "succeeded",
            ]
            assert controller.wait(f"k{n}", timeout=5).value == n + 1
    finally:
        assert worker.shutdown(reason="test over", timeout=10).clean


def test_start_logs_each_lost_task_of_a_dead_predecessor(
    store: SqliteTaskStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker subscribes before it reconciles: it hears every ``-> lost`` (its log
    line names the task)."""
    clock = SystemClock()
    for i in range(3):
        machine = StateMachine.create(f"old-{i}", f"job-{i}", owner="dead", clock=clock)
        machine.mark_queued()
        machine.mark_starting()
        machine.mark_running()
        expired = clock.now() - timedelta(seconds=5)
        store.create(
            machine.snapshot.replace(lease_owner="dead", lease_until=expired),
            machine.transitions,
        )
    _, worker = _worker(store)
    with caplog.at_level("INFO", logger="chongming_task.worker"):
        report = worker.start()
        assert report.lost == ("old-0", "old-1", "old-2")
        wait_until(lambda: sum("-> lost" in r.getMessage() for r in caplog.records) == 3, timeout=5)
    named = {r.getMessage().split()[0]: getattr(r, "task_name", None) for r in caplog.records}
    assert {k: v for k, v in named.items() if k.startswith("old-")} == {
        "old-0": "job-0",
        "old-1": "job-1",
        "old-2": "job-2",
    }
    worker.shutdown(timeout=5)
    for i in range(3):
        stored = store.get(f"old-{i}")
        assert stored is not None
        assert stored.status.value == "lost"


def _keys(policy: BucketPolicy, bucket: int, count: int) -> list[str]:
    return [f"k{i}" for i in range(1000) if policy.bucket_for(f"k{i}") == bucket][:count]


def test_a_worker_reaches_its_own_submissions_behind_other_nodes_ones(
    store: SqliteTaskStore,
) -> None:
    # Three submissions for a bucket owned by a node that is down are the oldest
    # pending ones, more than this worker has slots: it must look past them.
    policy = BucketPolicy(num_buckets=4)
    theirs, mine = _keys(policy, 3, 3), _keys(policy, 0, 3)
    for n, key in enumerate(theirs):
        Submission(name="add", task_id=f"f{n}", bucket_key=key, kwargs={"a": n}).submit(
            store, issued_by="me"
        )
    for n, key in enumerate(mine):
        Submission(name="add", task_id=f"o{n}", bucket_key=key, kwargs={"a": n}).submit(
            store, issued_by="me"
        )
    _, worker = _worker(store, max_parallel=2, num_buckets=4, owned_buckets=[0, 1])
    worker.start()
    try:
        wait_until(
            lambda: all(
                (s := store.get(f"o{n}")) is not None and s.status.value == "succeeded"
                for n in range(3)
            )
        )
    finally:
        assert worker.shutdown(timeout=10).clean
    for n in range(3):
        assert [t.to_status.value for t in store.history(f"o{n}")] == [
            "pending",
            "queued",
            "starting",
            "running",
            "succeeded",
        ]
        foreign = find_submission(store, f"f{n}")
        assert foreign is not None
        assert (foreign.status, store.get(f"f{n}")) == ("pending", None)  # handed back


def test_what_a_poll_claims_beyond_its_free_slots_is_handed_back_in_order(
    store: SqliteTaskStore,
) -> None:
    policy = BucketPolicy(num_buckets=4)
    (theirs,), mine = _keys(policy, 3, 1), _keys(policy, 0, 3)
    Submission(name="add", task_id="f0", bucket_key=theirs, kwargs={"a": 0}).submit(
        store, issued_by="me"
    )
    for n, key in enumerate(mine):
        Submission(name="add", task_id=f"o{n}", bucket_key=key, kwargs={"a": n}).submit(
            store, issued_by="me"
        )
    controller, worker = _worker(store, max_parallel=1, num_buckets=4, owned_buckets=[0, 1])
    try:
        assert worker.poll_once() == (0, 1)  # f0: another node's, handed back
        assert worker.poll_once() == (1, 1)  # looks past f0 and takes o0
        wait_until(lambda: worker.free_slots() == 1)
        # f0's owner takes it meanwhile, so this poll's look past it finds o1 and o2.
        (other,) = store.claim_commands("other-node", lease=30, limit=1, actions=["submit"])
        assert other.target == "f0"
        store.complete_command(other.command_id, other.claim_token or "", {"accepted": True})
        assert worker.poll_once() == (1, 1)  # o1 taken, o2 claimed beyond the slot
        left = find_submission(store, "o2")
        assert left is not None
        assert (left.status, left.claims, store.get("o2")) == ("pending", 1, None)
        wait_until(lambda: worker.free_slots() == 1)
        assert worker.poll_once() == (1, 0)  # o2, in its turn
        wait_until(lambda: (s := store.get("o2")) is not None and s.status.value == "succeeded")
        assert [store.get(f"o{n}").outcome for n in range(3)] == [1, 2, 3]  # type: ignore[union-attr]
    finally:
        controller.close()


def test_a_later_urgent_submission_overtakes_older_pending_ones(store: SqliteTaskStore) -> None:
    # One slot, held by "blocker": three submissions wait in the store meanwhile. When
    # the slot frees, the newest one, of the highest priority, must start first; the
    # other two follow by priority, then in submission order.
    controller, worker = _worker(store, max_parallel=1)
    started: list[str] = []
    controller.subscribe(
        lambda transition, _snapshot: (
            started.append(transition.task_id) if transition.to_status.value == "running" else None
        )
    )
    worker.start()
    try:
        Submission(name="spin", task_id="blocker").submit(store, issued_by="me")
        wait_until(lambda: started == ["blocker"])
        Submission(name="add", task_id="old", kwargs={"a": 1}).submit(store, issued_by="me")
        Submission(name="add", task_id="older-urgent", kwargs={"a": 2}, priority=3).submit(
            store, issued_by="me"
        )
        Submission(name="add", task_id="urgent", kwargs={"a": 3}, priority=9).submit(
            store, issued_by="me"
        )
        assert worker.free_slots() == 0
        assert [store.get(t) for t in ("old", "older-urgent", "urgent")] == [None, None, None]
        controller.stop("blocker", reason="make room")
        wait_until(
            lambda: all(
                (s := store.get(t)) is not None and s.status.value == "succeeded"
                for t in ("old", "older-urgent", "urgent")
            )
        )
    finally:
        assert worker.shutdown(timeout=10).clean
    assert started == ["blocker", "urgent", "older-urgent", "old"]
    for task_id, priority in (("urgent", 9), ("older-urgent", 3), ("old", 0)):
        snapshot = store.get(task_id)
        assert snapshot is not None
        assert snapshot.priority == priority
        assert [t.to_status.value for t in store.history(task_id)] == [
            "pending",
            "queued",
            "starting",
            "running",
            "succeeded",
        ]


def test_a_poll_counts_other_nodes_submissions_it_claimed_beyond_its_slots(
    store: SqliteTaskStore,
) -> None:
    # An urgent submission of ours can come before another node's in a batch; what the
    # poll hands back beyond its slot must still count as looked past, or the next poll
    # claims the other node's submission alone and takes nothing.
    policy = BucketPolicy(num_buckets=4)
    (theirs,), (low, high) = _keys(policy, 3, 1), _keys(policy, 0, 2)
    Submission(name="add", task_id="f0", bucket_key=theirs, kwargs={"a": 0}, priority=5).submit(
        store, issued_by="me"
    )
    Submission(name="add", task_id="o-low", bucket_key=low, kwargs={"a": 1}).submit(
        store, issued_by="me"
    )
    controller, worker = _worker(store, max_parallel=1, num_buckets=4, owned_buckets=[0, 1])
    try:
        assert worker.poll_once() == (0, 1)  # f0 first (priority 5): handed back
        Submission(
            name="add", task_id="o-high", bucket_key=high, kwargs={"a": 2}, priority=9
        ).submit(store, issued_by="me")
        assert worker.poll_once() == (1, 1)  # o-high taken; f0 claimed beyond the slot
        assert store.get("o-low") is None
        wait_until(lambda: worker.free_slots() == 1)
        done = store.get("o-high")
        assert done is not None
        assert (done.status.value, store.get("o-low")) == ("succeeded", None)
        assert worker.poll_once() == (1, 1)  # looks past f0 again and takes o-low
        wait_until(lambda: (s := store.get("o-low")) is not None and s.status.value == "succeeded")
        foreign = find_submission(store, "f0")
        assert foreign is not None
        assert (foreign.status, foreign.claims, store.get("f0")) == ("pending", 3, None)
    finally:
        controller.close()
