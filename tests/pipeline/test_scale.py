"""Blocked nodes hold no slot: a long serial chain on one slot, a wide fan-out/fan-in."""

from __future__ import annotations

import threading
import time
from typing import Any

from chongming_task import Pipeline
from chongming_task._model import TaskSnapshot, Transition
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from . import tasks
from .conftest import make_controller
from .helpers import NODE_PATH, ROOT_PATH, path

S = TaskStatus


class SlotWatch:
    """Samples the controller's slot ledger after every transition; keeps the maximum.

    The ledger (``active_count``) is the invariant itself. Counting occupying states
    from events instead would be racy: events are ordered per task, not across tasks,
    so a finished node's event may arrive after its freed slot's next start.
    """

    def __init__(self, controller: Any) -> None:
        self._controller = controller
        self._lock = threading.Lock()
        self.most = 0

    def __call__(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        active = self._controller.active_count
        with self._lock:
            self.most = max(self.most, active)


def test_a_20_node_chain_runs_on_one_slot() -> None:
    with make_controller(max_parallel=1) as controller:
        watch = SlotWatch(controller)
        controller.subscribe(watch, inline=True)
        p = Pipeline("chain")
        previous = p.node("hold", "root", node_id="n0")
        for index in range(1, 20):
            previous = p.node(
                "increment", previous.node_id, node_id=f"n{index}", depends_on=[previous]
            )
        run = controller.submit_pipeline(p)
        # Guide §8.12, right after submission: only the root holds a slot; the others
        # are blocked, not queued.
        assert controller.active_count == 1
        assert controller.queued_count == 0
        wait_until(lambda: run.nodes["n0"].status is S.RUNNING)
        assert controller.active_count == 1
        assert controller.queued_count == 0
        assert controller.stats().unfinished == 20
        assert {snap.status for node, snap in run.nodes.items() if node != "n0"} == {S.BLOCKED}
        tasks.gate("root").set()
        outcome = run.wait(timeout=60)

        assert outcome.status is S.SUCCEEDED
        assert outcome.nodes["n19"].value == 19  # each node read its upstream's value
        assert watch.most == 1
        assert path(controller, run.task_ids["n0"]) == ROOT_PATH
        for index in range(1, 20):
            assert path(controller, run.task_ids[f"n{index}"]) == NODE_PATH
        assert controller.active_count == 0


def test_a_200_node_fan_out_fan_in_completes() -> None:
    with make_controller(max_parallel=8) as controller:
        watch = SlotWatch(controller)
        controller.subscribe(watch, inline=True)
        p = Pipeline("fan")
        root = p.node("value", 1, node_id="root")
        wide = [p.node("increment", "root", node_id=f"w{i}", depends_on=[root]) for i in range(200)]
        p.node("load", node_id="sink", depends_on=wide)
        started = time.monotonic()
        run = controller.submit_pipeline(p)
        outcome = run.wait(timeout=60)
        elapsed = time.monotonic() - started

        assert outcome.status is S.SUCCEEDED
        assert len(outcome.nodes) == 202
        assert outcome.nodes["sink"].value == 400  # 200 nodes x (1 + 1)
        assert watch.most <= 8
        for node_id in ("w0", "w199", "sink"):
            assert path(controller, run.task_ids[node_id]) == NODE_PATH
        assert {node.status for node in outcome.nodes.values()} == {S.SUCCEEDED}
        assert controller.active_count == 0
        assert controller.queued_count == 0
        assert elapsed < 30, f"202 trivial nodes took {elapsed:.1f}s"


def test_inline_executor_is_refused_by_the_controller() -> None:
    """Guide §7.2: an inline executor blocks in ``launch``; a controller must not use it.

    (It used to run a whole pipeline inside ``submit_pipeline``; chains of trivial
    nodes on the default executor are measured above.)
    """
    import pytest

    from chongming_task.errors import ConfigurationError
    from chongming_task.runtime.executors.inline import InlineExecutor

    with pytest.raises(ConfigurationError, match="InlineExecutor"):
        make_controller(max_parallel=1, executor=InlineExecutor())
