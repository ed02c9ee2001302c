"""The ready queue and slot ledger: limits stack, priority then FIFO, scanning not head-of-line."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from chongming_task.controller._admission import Admission
from chongming_task.errors import ConfigurationError


def drain(admission: Admission) -> list[str]:
    admitted = []
    while (task_id := admission.pop_eligible()) is not None:
        admitted.append(task_id)
    return admitted


def test_global_limit_and_fifo() -> None:
    admission = Admission(max_parallel=2)
    for index in range(4):
        admission.push(f"t{index}", bucket=None)
    assert drain(admission) == ["t0", "t1"]
    assert admission.active_count == 2
    assert admission.queued_count == 2
    admission.release("t0")
    assert drain(admission) == ["t2"]
    admission.release("t1")
    admission.release("t2")
    assert drain(admission) == ["t3"]
    admission.release("t3")
    assert admission.active_count == 0
    assert admission.queued_count == 0


def test_priority_first_then_fifo() -> None:
    admission = Admission(max_parallel=10)
    admission.push("low-1", bucket=None)
    admission.push("high-1", priority=10, bucket=None)
    admission.push("low-2", bucket=None)
    admission.push("high-2", priority=10, bucket=None)
    admission.push("mid", priority=5, bucket=None)
    assert drain(admission) == ["high-1", "high-2", "mid", "low-1", "low-2"]


def test_named_limits_need_room_in_every_limited_tag() -> None:
    admission = Admission(max_parallel=20, limits={"db": 2, "gpu": 1})
    admission.push("a", tags=["db"], bucket=None)
    admission.push("b", tags=["db", "gpu"], bucket=None)
    admission.push("c", tags=["db"], bucket=None)
    admission.push("d", tags=["gpu"], bucket=None)
    admission.push("free", tags=["unlimited"], bucket=None)
    # a and b fill db; b takes gpu; c waits for db, d waits for gpu; free is not limited.
    assert drain(admission) == ["a", "b", "free"]
    assert admission.tag_usage("db") == 2
    assert admission.tag_usage("gpu") == 1
    admission.release("b")
    assert drain(admission) == ["c", "d"]


def test_scanning_passes_a_head_blocked_by_its_bucket() -> None:
    admission = Admission(max_parallel=10, max_parallel_per_bucket=1)
    admission.push("a0", bucket=1)
    admission.push("a1", bucket=1)
    admission.push("a2", bucket=1)
    admission.push("b0", bucket=2)
    assert drain(admission) == ["a0", "b0"]
    assert admission.active_in_bucket(1) == 1
    assert admission.active_in_bucket(2) == 1
    admission.release("a0")
    assert drain(admission) == ["a1"]


def test_priority_is_respected_across_constraint_classes() -> None:
    admission = Admission(max_parallel=1, limits={"db": 1}, max_parallel_per_bucket=5)
    admission.push("x", bucket=1)
    admission.push("y", tags=["db"], priority=3, bucket=2)
    admission.push("z", priority=7, bucket=3)
    assert drain(admission) == ["z"]
    admission.release("z")
    assert drain(admission) == ["y"]
    admission.release("y")
    assert drain(admission) == ["x"]


def test_remove_and_repush_keep_the_ledger_exact() -> None:
    admission = Admission(max_parallel=1)
    admission.push("a", bucket=None)
    admission.push("b", bucket=None)
    assert admission.remove("a")
    assert not admission.remove("a")
    admission.push("a", bucket=None)  # resumed: goes to the back
    assert admission.queued_count == 2
    assert drain(admission) == ["b"]
    admission.push("b", bucket=None)  # already active: ignored
    assert admission.queued_count == 1
    admission.release("b")
    assert drain(admission) == ["a"]
    assert not admission.release("missing")


def test_bucket_usage_is_tracked_without_a_bucket_limit() -> None:
    admission = Admission(max_parallel=3)
    admission.push("a", bucket=7)
    admission.push("b", bucket=7)
    drain(admission)
    assert admission.active_in_bucket(7) == 2
    admission.admit("c", tags=(), bucket=7)
    assert admission.active_in_bucket(7) == 3
    for task_id in ("a", "b", "c"):
        admission.release(task_id)
    assert admission.active_in_bucket(7) == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_parallel": 0},
        {"max_parallel": True},
        {"max_parallel": 2, "max_parallel_per_bucket": 0},
    ],
)
def test_bad_limits_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        Admission(**kwargs)


def test_randomised_against_a_naive_model() -> None:
    rng = random.Random(7)
    limits = {"db": 2, "gpu": 1}
    admission = Admission(max_parallel=4, limits=limits, max_parallel_per_bucket=2)
    queued: dict[str, tuple[int, int, frozenset[str], int]] = {}
    active: dict[str, tuple[frozenset[str], int]] = {}
    seq = 0

    def naive_pick() -> str | None:
        if len(active) >= 4:
            return None
        for task_id, (_, _, tags, bucket) in sorted(queued.items(), key=lambda kv: kv[1][:2]):
            in_bucket = sum(1 for _, b in active.values() if b == bucket)
            if in_bucket >= 2:
                continue
            if all(
                sum(1 for t, _ in active.values() if tag in t) < limits[tag]
                for tag in tags
                if tag in limits
            ):
                return task_id
        return None

    for step in range(3000):
        action = rng.random()
        if action < 0.5:
            task_id = f"t{step}"
            tags = frozenset(rng.sample(["db", "gpu", "io"], rng.randint(0, 2)))
            priority = rng.choice([0, 0, 5])
            bucket = rng.randint(0, 3)
            queued[task_id] = (-priority, seq, tags, bucket)
            seq += 1
            admission.push(task_id, priority=priority, tags=tags, bucket=bucket)
        elif action < 0.75 and active:
            task_id = rng.choice(sorted(active))
            del active[task_id]
            assert admission.release(task_id)
        elif action < 0.8 and queued:
            task_id = rng.choice(sorted(queued))
            del queued[task_id]
            assert admission.remove(task_id)
        else:
            expected = naive_pick()
            got = admission.pop_eligible()
            assert got == expected
            if got is not None:
                _, _, tags, bucket = queued.pop(got)
                active[got] = (tags, bucket)
        assert admission.active_count == len(active)
        assert admission.queued_count == len(queued)


def test_100k_queued_tasks_admit_in_near_linear_time() -> None:
    admission = Admission(max_parallel=4, limits={"db": 2}, max_parallel_per_bucket=1)
    count = 100_000
    started = time.perf_counter()
    for index in range(count):
        admission.push(
            f"t{index}", priority=index % 3, tags=["db"] if index % 2 else [], bucket=index % 64
        )
    admitted = 0
    while admitted < count:
        batch = drain(admission)
        assert batch, "the queue stalled with tasks left"
        admitted += len(batch)
        for task_id in batch:
            admission.release(task_id)
    elapsed = time.perf_counter() - started
    assert admission.active_count == 0
    assert admission.queued_count == 0
    # O(classes + log n) per admission: a quadratic scan would take minutes here.
    assert elapsed < 30, elapsed
