"""After the process dies mid-pipeline, reconcile() tells the truth about every node."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chongming_task.controller import Controller
from chongming_task.stores._base import TaskQuery
from chongming_task.testing import FakeClock

from .conftest import open_store

TESTS_DIR = Path(__file__).resolve().parent.parent

WORKER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[2])
    from chongming_task.pipeline import Pipeline, submit_pipeline
    from chongming_task.controller import Controller
    from pipeline import tasks
    from pipeline.conftest import open_store

    controller = Controller(store=open_store(sys.argv[1]), owner="worker-1", max_parallel=2)
    for name, fn in tasks.TASKS.items():
        controller.register(name, fn)
    p = Pipeline("nightly")
    early = p.node("value", 1, node_id="early")
    root = p.node("hold", "never", node_id="root")
    p.node("value", node_id="child", depends_on=[root, early])
    run = submit_pipeline(controller, p, run_id="crashy")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # The store, not the run: a run is `running` a moment before its write is done.
        root, early = controller.get("crashy/root"), controller.get("crashy/early")
        if root and root.status == "running" and early and early.status == "succeeded":
            print("ready", flush=True)
            break
        time.sleep(0.01)
    time.sleep(120)
    """
)


def test_reconcile_after_a_crash_mid_pipeline(store_spec: str) -> None:
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, store_spec, str(TESTS_DIR)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready"
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        if worker.stdout is not None:
            worker.stdout.close()

    # A new process, well past the dead worker's lease (no real waiting).
    clock = FakeClock(datetime.now(UTC) + timedelta(minutes=10))
    store = open_store(store_spec, clock=clock)
    with Controller(store=store, owner="worker-2", clock=clock) as controller:
        preview = controller.reconcile(dry_run=True)
        assert preview.lost == ("crashy/root",)
        before = controller.get("crashy/root")
        assert before is not None
        assert before.status == "running"  # the dry run wrote nothing
        report = controller.reconcile()

        assert report.lost == ("crashy/root",)
        assert report.adoptable == ("crashy/child",)  # blocked: nobody will release it
        root = controller.get("crashy/root")
        assert root is not None
        assert root.status == "lost"
        assert root.failure is not None
        assert "worker-1" in root.failure.message
        assert root.metadata == {"pipeline": "nightly", "pipeline_run": "crashy", "node": "root"}
        assert [t.to_status.value for t in controller.history("crashy/root")] == [
            "pending",
            "queued",
            "starting",
            "running",
            "lost",
        ]
        early = controller.get("crashy/early")
        assert early is not None
        assert early.status == "succeeded"
        assert early.outcome == 1
        nodes = store.query(TaskQuery(metadata_eq={"pipeline_run": "crashy"}))
        assert {snap.metadata["node"]: snap.status.value for snap in nodes} == {
            "early": "succeeded",
            "root": "lost",
            "child": "blocked",
        }
    store.close()
