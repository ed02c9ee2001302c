"""Guide §8.1-§8.5 and §8.8 samples (one process, in-memory store), as written.

``extract``, ``transform``, ``sync_tenant`` and ``train_model`` are the names the
samples leave undefined: here they checkpoint until a test releases them, so which
task holds a slot at any moment is decided by the test, not by timing.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chongming_task import TaskSnapshot
from chongming_task.errors import ConfigurationError

from .conftest import PATIENCE, S, Work, path, reach


def table_rows(text: str) -> dict[str, list[str]]:
    """``render_table`` output as {task id: cells}; the header row is keyed by its name."""
    lines = text.splitlines()
    assert set(lines[1].replace(" ", "")) == {"-"}  # the rule under the header
    return {line.split()[0]: line.split() for line in [lines[0], *lines[2:]]}


# ---------------------------------------------------------------- §8.1


def test_s8_1_basic_usage(work: Work, capsys: pytest.CaptureFixture[str]) -> None:
    extract, transform = work.extract, work.transform

    from chongming_task.controller import Controller, render_table

    controller = Controller(max_parallel=2)  # 最多同时跑 2 个

    controller.register("extract", extract, tags={"io"})  # 先登记，之后只传名字
    controller.register("transform", transform)

    run = controller.submit("transform", 100, task_id="t0", label="转换-1")
    controller.submit("transform", 200, task_id="t1", label="转换-2")

    wait_for = [run, controller.run("t1")]
    for held in wait_for:
        assert held is not None
        reach(held, S.RUNNING)
    print(render_table(controller.list_tasks()))  # 查询
    controller.stop("t0", reason="手工干预")  # 控制
    work.release.set()
    controller.wait_all(timeout=60)  # 等全部落终态

    rows = table_rows(capsys.readouterr().out)
    assert rows["TASK_ID"][:7] == [
        "TASK_ID", "NAME", "STATUS", "ATTEMPT", "ELAPSED", "PROGRESS", "FAILURE",
    ]  # fmt: skip
    assert rows["t0"][1:4] == ["转换-1", "running", "1/1"]
    assert rows["t1"][1:4] == ["转换-2", "running", "1/1"]
    assert run.status is S.STOPPED
    assert run.transitions[-2].reason == "手工干预"
    t1 = controller.run("t1")
    assert t1 is not None
    assert t1.wait(PATIENCE).value == 200
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]
    controller.close()


# ---------------------------------------------------------------- §8.2


def test_s8_2_query_interface(work: Work) -> None:
    from chongming_task.controller import Controller

    controller = Controller(max_parallel=1)
    try:
        controller.register("extract", work.extract, tags={"io"})
        controller.register("transform", work.transform)
        controller.submit("extract", task_id="e0")
        controller.submit("transform", 1, task_id="t0")
        controller.submit("transform", 2, task_id="t1")
        reach(controller.run("e0"), S.RUNNING)  # type: ignore[arg-type]

        assert controller.get("nope") is None
        snapshot = controller.get("e0")
        assert snapshot is not None
        assert snapshot.status is S.RUNNING

        def ids(snaps: list[TaskSnapshot]) -> list[str]:
            return [s.task_id for s in snaps]

        assert ids(controller.list_tasks(status=S.QUEUED)) == ["t0", "t1"]
        assert ids(controller.list_tasks(name_prefix="trans")) == ["t0", "t1"]
        assert ids(controller.list_tasks(tag="io")) == ["e0"]
        assert ids(controller.list_tasks(limit=2)) == ["e0", "t0"]
        stats = controller.stats()
        assert (stats.running, stats.queued, stats.unfinished) == (1, 2, 3)
        assert sorted(r.task_id for r in controller.runs()) == ["e0", "t0", "t1"]
        assert (controller.active_count, controller.queued_count) == (1, 2)
        work.release.set()
        controller.wait_all(timeout=PATIENCE)
        assert controller.stats().succeeded == 3
        assert (controller.active_count, controller.queued_count) == (0, 0)
    finally:
        controller.close(timeout=PATIENCE)


# ---------------------------------------------------------------- §8.3


def test_s8_3_control_interface_return_values(work: Work) -> None:
    from chongming_task.controller import Controller

    controller = Controller(max_parallel=2)
    controller.register("transform", work.transform)
    for index in range(3):
        controller.submit("transform", index, task_id=f"t{index}")
    task_id = "t0"
    reach(controller.run("t0"), S.RUNNING)  # type: ignore[arg-type]
    reach(controller.run("t1"), S.RUNNING)  # type: ignore[arg-type]

    assert controller.pause(task_id, timeout=PATIENCE) is True  # → bool（是否**确认**已挂起）
    assert controller.resume(task_id) is True  # → bool
    assert controller.stop(task_id, reason="one") is True  # → bool（是否找到该任务）
    assert controller.stop("no-such-task", reason="x") is False
    controller.wait(task_id, timeout=PATIENCE)
    # stop_all counts requests issued, not tasks stopped: t1 and t2 (queued or just
    # started in t0's slot).
    assert controller.stop_all(reason="all") == 2  # → int（本轮**发出**的请求数）
    assert controller.run("t1").status in (S.STOPPING, S.STOPPED)  # type: ignore[union-attr]
    controller.wait_all(timeout=PATIENCE)
    assert controller.stop_all(reason="again") == 0  # nothing left to ask
    controller.close(reason="bye", timeout=PATIENCE)  # 停止一切并收尾
    statuses = {r.task_id: r.status for r in controller.runs()}
    assert statuses == {"t0": S.STOPPED, "t1": S.STOPPED, "t2": S.STOPPED}


def test_s8_3_pause_false_means_rolled_back(work: Work) -> None:
    from chongming_task.controller import Controller

    release = threading.Event()

    def deaf(ctx: Any) -> str:
        release.wait(PATIENCE)  # no checkpoint: a pause cannot take effect
        return "done"

    controller = Controller()
    try:
        controller.register("deaf", deaf)
        run = controller.submit("deaf", task_id="d")
        reach(run, S.RUNNING)
        assert controller.pause("d", timeout=0.1) is False
        assert run.status is S.RUNNING
        assert run.transitions[-1].trigger == "runtime:pause_aborted"
        release.set()
        assert controller.wait("d", timeout=PATIENCE).ok
    finally:
        release.set()
        controller.close(timeout=PATIENCE)


def test_s8_3_close_never_runs_queued_bodies(work: Work) -> None:
    from chongming_task.controller import Controller

    controller = Controller(max_parallel=1)
    controller.register("transform", work.transform)
    running = controller.submit("transform", 1, task_id="r")
    queued = [controller.submit("transform", n, task_id=f"q{n}") for n in (2, 3)]
    reach(running, S.RUNNING)
    assert controller.close(reason="shutdown", timeout=PATIENCE) == 3
    assert running.status is S.STOPPED
    for run in queued:
        assert run.status is S.STOPPED
        assert S.RUNNING not in path(run)
    assert work.started == [1]
    with pytest.raises(ConfigurationError, match="closed"):
        controller.submit("transform", 9)


# ---------------------------------------------------------------- §8.4


def test_s8_4_max_parallel_queues_the_rest(work: Work, capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task.controller import Controller, render_table

    controller = Controller(max_parallel=2)
    try:
        controller.register("transform", work.transform)
        runs = [
            controller.submit("transform", n, task_id=f"t{n}", label=f"转换-{n + 1}")
            for n in range(4)
        ]
        reach(runs[0], S.RUNNING)
        reach(runs[1], S.RUNNING)
        print(render_table(controller.list_tasks()))
        rows = table_rows(capsys.readouterr().out)
        assert rows["t0"][1:5] == ["转换-1", "running", "1/1", rows["t0"][4]]
        assert rows["t0"][4].endswith("s")
        assert rows["t2"][1:5] == ["转换-3", "queued", "0/1", "-"]  # ELAPSED "-" when queued
        assert rows["t3"][1:5] == ["转换-4", "queued", "0/1", "-"]
        # unfinished counts queued (and paused) runs; active_count only slot holders.
        assert controller.pause("t0", timeout=PATIENCE)
        stats = controller.stats()
        assert (stats.unfinished, controller.active_count) == (4, 2)
        assert controller.queued_count == 2
        controller.resume("t0")
        work.release.set()
        controller.wait_all(timeout=PATIENCE)
    finally:
        controller.close(timeout=PATIENCE)


def test_s8_4_named_resource_limits(work: Work) -> None:
    sync_tenant, train_model = work.sync_tenant, work.train_model

    from chongming_task import ConcurrencyPolicy, Controller

    controller = Controller(
        concurrency=ConcurrencyPolicy(max_parallel=20, limits={"db": 4, "gpu": 1})
    )
    controller.register("sync", sync_tenant)
    controller.register("train", train_model)

    controller.submit("sync", "tenant-A", tags=["db"])  # 占一个 db 名额
    controller.submit("sync", "tenant-B", tags=["db"])  # 再占一个
    controller.submit("train", "v3", tags=["gpu"])  # 占那个唯一的 gpu 名额

    try:
        gpu2 = controller.submit("train", "v4", tags=["gpu"], task_id="gpu2")
        more_db = [controller.submit("sync", f"t{n}", tags=["db"]) for n in range(3)]
        free = [controller.submit("sync", f"free{n}", tags=["io"]) for n in range(3)]
        both = controller.submit("train", "v5", tags=["db", "gpu"], task_id="both")
        for run in [*more_db[:2], *free]:
            reach(run, S.RUNNING)  # untracked tag "io" is not limited
        assert gpu2.status is S.QUEUED  # the one gpu slot is taken
        assert more_db[2].status is S.QUEUED  # db is at 4
        assert both.status is S.QUEUED  # needs room in db and gpu
        # A paused task keeps its named slot: pausing the gpu holder frees nothing.
        gpu_holder = next(
            r for r in controller.runs() if "gpu" in r.snapshot.tags and r.status is S.RUNNING
        )
        assert controller.pause(gpu_holder.task_id, timeout=PATIENCE)
        assert gpu2.status is S.QUEUED
        assert controller.active_count == 8  # 2+2 db, 1 gpu (paused), 3 io
        controller.resume(gpu_holder.task_id)
        work.release.set()
        outcomes = controller.wait_all(timeout=PATIENCE)
        assert all(o.ok for o in outcomes)
    finally:
        work.release.set()
        controller.close(timeout=PATIENCE)


def test_s8_4_priority(work: Work) -> None:
    from chongming_task import ConcurrencyPolicy, Controller

    controller = Controller(max_parallel=1)
    try:
        controller.register("sync", work.sync_tenant)
        controller.submit("sync", "blocker")
        assert wait_started(work, 1)

        controller.submit("sync", "tenant-A", priority=10)  # 用户等着的那次同步
        controller.submit("sync", "tenant-B")  # 默认优先级 0：批量回填

        controller.submit("sync", "tenant-C")
        controller.submit("sync", "tenant-D", priority=10)
        work.release.set()
        controller.wait_all(timeout=PATIENCE)
        # Higher first; equal priority in submission order.
        assert work.started == ["blocker", "tenant-A", "tenant-D", "tenant-B", "tenant-C"]
    finally:
        controller.close(timeout=PATIENCE)

    policy_default = Controller(concurrency=ConcurrencyPolicy(max_parallel=1, priority=5))
    try:
        policy_default.register("sync", lambda ctx: None)
        assert policy_default.submit("sync").snapshot.priority == 5
        assert policy_default.submit("sync", priority=1).snapshot.priority == 1
        policy_default.wait_all(timeout=PATIENCE)
    finally:
        policy_default.close(timeout=PATIENCE)


def wait_started(work: Work, count: int) -> bool:
    from chongming_task.testing import wait_until

    return bool(wait_until(lambda: len(work.started) >= count, timeout=PATIENCE))


# ---------------------------------------------------------------- §8.5


def test_s8_5_names_only_never_code(work: Work) -> None:
    from chongming_task.controller import Controller

    controller = Controller()
    try:
        with pytest.raises(ConfigurationError, match="extract"):
            controller.submit("extract", "s3://x")  # never registered
        with pytest.raises(ConfigurationError):
            controller.submit(work.extract, "s3://x")  # code, not an @task function
        controller.register("extract", work.extract)
        with pytest.raises(ConfigurationError, match="extract"):
            controller.register("extract", work.transform)  # no silent override
        assert [d.fn for d in controller.definitions()] == [work.extract]
        assert not hasattr(controller, "list")  # §8.2: list_tasks, never a shadowing `list`
    finally:
        controller.close(timeout=PATIENCE)


# ---------------------------------------------------------------- §8.8


def test_s8_8_buckets(work: Work, capsys: pytest.CaptureFixture[str]) -> None:
    from chongming_task import Controller
    from chongming_task.controller import render_table

    controller = Controller(max_parallel=10, max_parallel_per_bucket=1)
    controller.register("sync", work.sync_tenant)
    try:
        controller.submit("sync", "租户A", task_id="a0", bucket_key="tenant-A")
        controller.submit("sync", "租户B", task_id="b0", bucket_key="tenant-B")

        a1 = controller.submit("sync", "租户A-2", task_id="a1", bucket_key="tenant-A")
        policy = controller.bucket_policy
        bucket_a, bucket_b = policy.bucket_for("tenant-A"), policy.bucket_for("tenant-B")
        assert bucket_a != bucket_b
        reach(controller.run("a0"), S.RUNNING)  # type: ignore[arg-type]
        reach(controller.run("b0"), S.RUNNING)  # type: ignore[arg-type]  # not starved by A
        assert a1.status is S.QUEUED  # bucket A is full (1 per bucket)
        snapshot = controller.get("a0")
        assert snapshot is not None
        assert (snapshot.bucket, snapshot.bucket_key) == (bucket_a, "tenant-A")
        assert [s.task_id for s in controller.list_tasks(bucket=bucket_a)] == ["a0", "a1"]
        assert [s.task_id for s in controller.list_tasks(buckets=[bucket_b])] == ["b0"]
        assert controller.bucket_counts() == {bucket_a: 2, bucket_b: 1}
        assert controller.active_in_bucket(bucket_a) == 1
        assert policy.num_buckets == 64
        print(render_table(controller.list_tasks()))
        rows = table_rows(capsys.readouterr().out)
        assert rows["TASK_ID"][-1] == "BUCKET"
        assert rows["a0"][-1] == str(bucket_a)
        # The next runnable task is found by scanning: c0 runs although a1 is ahead.
        c0 = controller.submit("sync", "租户C", task_id="c0", bucket_key="tenant-C")
        assert policy.bucket_for("tenant-C") not in (bucket_a, bucket_b)
        reach(c0, S.RUNNING)
        assert a1.status is S.QUEUED
        work.release.set()
        controller.wait_all(timeout=PATIENCE)
    finally:
        work.release.set()
        controller.close(timeout=PATIENCE)


def test_s8_8_bucket_of_a_key_is_the_same_in_every_process() -> None:
    import os
    import subprocess
    import sys

    from chongming_task import BucketPolicy

    code = "from chongming_task import BucketPolicy; print(BucketPolicy().bucket_for('tenant-A'))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert seen == {str(BucketPolicy().bucket_for("tenant-A"))}
