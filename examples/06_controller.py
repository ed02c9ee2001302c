"""Managing a batch of tasks with a Controller (guide §8.1-§8.5, §8.8).

Registration (names, never code), submission with labels, limits (global, named
resources, per bucket), priority, queries, render_table, stop/pause/resume, and the
shutdown that never runs queued bodies. Every claim the output makes is asserted.

    python examples/06_controller.py
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from chongming_task import (
    ConcurrencyPolicy,
    Controller,
    TaskContext,
    TaskStatus,
    render_table,
    task,
)
from chongming_task.errors import ConfigurationError
from chongming_task.testing import wait_until

S = TaskStatus
#: Opened by the demo when the "transform" bodies may finish.
release = threading.Event()


@task(tags={"io"})
def extract(ctx: TaskContext, source: str) -> str:
    """Pretend to read ``source``."""
    ctx.checkpoint()
    return f"rows from {source}"


@task
def transform(ctx: TaskContext, n: int) -> int:
    """Work in small steps until released, reporting progress."""
    step = 0
    while not release.is_set():
        ctx.checkpoint()  # stop and pause take effect here
        step += 1
        ctx.progress(step, unit="steps")
        time.sleep(0.01)
    return n * 2


@task
def sync(ctx: TaskContext, tenant: str) -> str:
    """A tenant sync that holds its slot until released."""
    while not release.is_set():
        ctx.checkpoint()
        time.sleep(0.01)
    return tenant


def refusal(action: Callable[[], object]) -> str:
    """The message of the ConfigurationError that ``action`` must raise."""
    try:
        action()
    except ConfigurationError as exc:
        return str(exc)
    raise AssertionError("expected a ConfigurationError")


def statuses(run_transitions: object) -> list[str]:
    return [t.to_status.value for t in run_transitions]  # type: ignore[attr-defined]


def basic_usage() -> None:
    print("== §8.1-§8.4: max_parallel=2, four submissions ==")
    release.clear()
    controller = Controller(max_parallel=2)  # at most 2 tasks execute at once
    controller.register("extract", extract, tags={"io"})  # register once, submit by name
    controller.register("transform", transform)

    run = controller.submit("transform", 100, task_id="t0", label="转换-1")
    controller.submit("transform", 200, task_id="t1", label="转换-2")
    controller.submit("transform", 300, task_id="t2", label="转换-3")
    controller.submit("transform", 400, task_id="t3", label="转换-4")
    wait_until(lambda: controller.active_count == 2 and run.status is S.RUNNING)

    table = render_table(controller.list_tasks())
    print(table)
    lines = table.splitlines()
    header = "TASK_ID NAME STATUS ATTEMPT ELAPSED PROGRESS FAILURE BUCKET"
    assert " ".join(lines[0].split()) == header
    assert lines[4].split()[:5] == ["t2", "转换-3", "queued", "0/1", "-"]  # never ran: "-"
    assert controller.queued_count == 2
    stats = controller.stats()
    assert (stats.running, stats.queued, stats.unfinished) == (2, 2, 4)

    # §8.3: stop returns "found"; the stopped task frees its slot and t2 starts.
    assert controller.stop("t0", reason="手工干预") is True
    assert controller.stop("nope") is False
    # A pause is confirmed (True) once the body reaches a checkpoint; it keeps its slot.
    assert controller.pause("t1", timeout=5) is True
    wait_until(lambda: controller.get("t2").status is S.RUNNING)  # type: ignore[union-attr]
    assert controller.active_count == 2  # t1 paused (holds its slot) + t2
    assert controller.queued_count == 1
    assert controller.resume("t1") is True

    release.set()
    outcomes = controller.wait_all(timeout=60)  # wait until all four are terminal
    assert [o.status for o in outcomes] == [S.STOPPED, S.SUCCEEDED, S.SUCCEEDED, S.SUCCEEDED]
    assert outcomes[3].value == 800
    assert statuses(run.transitions) == [
        "pending",
        "queued",
        "starting",
        "running",
        "stopping",
        "stopped",
    ]
    t1 = controller.run("t1")
    assert t1 is not None
    assert statuses(t1.transitions) == [
        "pending",
        "queued",
        "starting",
        "running",
        "pausing",
        "paused",
        "running",
        "succeeded",
    ]
    assert controller.active_count == 0
    print(render_table(controller.list_tasks()))
    controller.close()


def named_limits_and_priority() -> None:
    print("\n== §8.4: named resource limits and priority ==")
    release.clear()
    controller = Controller(
        concurrency=ConcurrencyPolicy(max_parallel=20, limits={"db": 2, "gpu": 1})
    )
    controller.register("sync", sync)
    for tenant in ("A", "B", "C"):
        controller.submit("sync", f"tenant-{tenant}", task_id=f"db-{tenant}", tags=["db"])
    controller.submit("sync", "v3", task_id="gpu-1", tags=["gpu"])
    controller.submit("sync", "v4", task_id="gpu-2", tags=["gpu"])
    controller.submit("sync", "free", task_id="untagged")  # tags outside limits are free
    wait_until(lambda: controller.active_count == 4)
    # A slot is taken at "starting"; "running" follows on the task's own thread.
    wait_until(lambda: len(controller.list_tasks(status="running")) == 4)
    running = {s.task_id for s in controller.list_tasks(status="running")}
    assert running == {"db-A", "db-B", "gpu-1", "untagged"}, running
    assert {s.task_id for s in controller.list_tasks(status=S.QUEUED)} == {"db-C", "gpu-2"}
    print("running:", sorted(running), "queued:", ["db-C", "gpu-2"])
    release.set()
    controller.wait_all(timeout=30)
    controller.close()

    # Priority: higher first, FIFO within one priority (one slot makes it visible).
    release.set()
    order: list[str] = []
    controller = Controller(max_parallel=1)
    controller.register("extract", extract)
    controller.subscribe(
        lambda t, s: order.append(t.task_id) if t.to_status is S.STARTING else None,
        inline=True,
    )
    release.clear()
    controller.register("sync", sync)
    controller.submit("sync", "blocker", task_id="blocker")  # holds the only slot
    wait_until(lambda: controller.active_count == 1)
    controller.submit("extract", "backfill-1", task_id="backfill-1")
    controller.submit("extract", "urgent", task_id="urgent", priority=10)
    controller.submit("extract", "backfill-2", task_id="backfill-2")
    release.set()
    controller.wait_all(timeout=30)
    assert order == ["blocker", "urgent", "backfill-1", "backfill-2"], order
    print("start order:", order)
    controller.close()


def buckets_and_safety() -> None:
    print("\n== §8.5 and §8.8: names only, buckets ==")
    release.set()
    controller = Controller(max_parallel=10, max_parallel_per_bucket=1)
    controller.register("sync", sync)
    message = refusal(lambda: controller.submit("drop_database"))
    print("refused:", message)
    assert "not registered" in message
    assert "already registered" in refusal(lambda: controller.register("sync", extract))
    run = controller.submit("sync", "租户A", task_id="a0", bucket_key="tenant-A")
    controller.submit("sync", "租户B", task_id="b0", bucket_key="tenant-B")
    controller.wait_all(timeout=30)
    snapshot = controller.get("a0")
    assert snapshot is not None
    assert snapshot.bucket == controller.bucket_policy.bucket_for("tenant-A")
    assert snapshot.bucket_key == "tenant-A"
    assert controller.list_tasks(bucket=snapshot.bucket)[0].task_id == "a0"
    assert sum(controller.bucket_counts().values()) == 2
    assert run.snapshot.bucket == snapshot.bucket
    print(render_table(controller.list_tasks()))
    controller.close()


def close_never_runs_queued_bodies() -> None:
    print("\n== §8.3: close() ==")
    release.clear()
    controller = Controller(max_parallel=1)
    controller.register("sync", sync)
    running = controller.submit("sync", "first", task_id="first")
    waiting = controller.submit("sync", "second", task_id="second")
    wait_until(lambda: running.status is S.RUNNING)
    assert controller.close(reason="shutdown") == 2
    assert statuses(waiting.transitions) == ["pending", "queued", "stopped"]  # body never ran
    assert running.status is S.STOPPED
    print("second:", " -> ".join(statuses(waiting.transitions)))


if __name__ == "__main__":
    basic_usage()
    named_limits_and_priority()
    buckets_and_safety()
    close_never_runs_queued_bodies()
    print("\nok")
