"""Why is it waiting? Will my stop land? Is it stuck? ``explain``, gaps, ``no_progress``.

Three questions an operator asks about a task that ``status`` alone cannot answer:

1. ``controller.explain(task_id)``: a task queued behind a full named limit says
   which limit and which task holds it, and where it stands in the queue;
2. the runtime counts the gaps between checkpoints; ``explain`` judges them against
   the graceful window (a body that checkpoints every 0.3 s cannot honour a 0.1 s
   window, so a stop would end it ``lost``);
3. ``Timeout(no_progress=...)`` ends a body that keeps checkpointing but never
   advances ``ctx.progress()``, as ``timeout_no_progress``.

Plus the static check behind ``chongming-task lint``. Every claim is asserted.

    python examples/18_explain.py
"""

from __future__ import annotations

import threading
import time

from chongming_task import (
    CheckpointRisk,
    ConcurrencyPolicy,
    Controller,
    FailureKind,
    LimitFull,
    QueuePosition,
    TaskContext,
    TaskStatus,
    Timeout,
    lint_function,
    task,
)
from chongming_task.testing import wait_until

S = TaskStatus
DONE = threading.Event()


@task(tags={"gpu"})
def train(ctx: TaskContext, model: str) -> str:
    """Holds the only GPU, checkpointing every 0.3 s."""
    while not DONE.is_set():
        ctx.checkpoint()
        DONE.wait(0.3)
    return model


@task(timeout=Timeout(no_progress=0.5))
def crawl(ctx: TaskContext) -> None:
    """Alive (checkpoints every 20 ms) but stuck: ``done`` never moves past 3."""
    while True:
        ctx.checkpoint()
        ctx.progress(3, total=10, unit="pages")
        time.sleep(0.02)


def careless(ctx: TaskContext) -> None:
    while True:  # no checkpoint: a stop cannot land here
        time.sleep(1)


def gaps_counted(controller: Controller, task_id: str) -> int:
    """How many checkpoint gaps the runtime has counted for a held run so far."""
    run = controller.run(task_id)
    gaps = None if run is None else run.snapshot.checkpoint_gaps
    return 0 if gaps is None else gaps.count


def main() -> None:
    policy = ConcurrencyPolicy(max_parallel=4, limits={"gpu": 1})
    with Controller(concurrency=policy, graceful_stop=0.1, owner="node-1") as controller:
        controller.register_all(train, crawl)
        controller.submit("train", "resnet", task_id="train-resnet")
        controller.submit("train", "bert", task_id="train-bert")
        controller.submit("train", "gpt", task_id="train-gpt")
        wait_until(lambda: gaps_counted(controller, "train-resnet") >= 1)  # it is running

        # 1. Why is train-gpt waiting? The gpu limit, held by train-resnet; one ahead.
        why = controller.explain("train-gpt")
        print(why.render())
        assert why.source == "controller"
        assert why.reasons[0] == LimitFull(
            limit="named", name="gpu", capacity=1, holders=("train-resnet",)
        )
        assert why.reasons[1] == QueuePosition(
            priority=0, position=2, ahead=("train-bert",), higher=0
        )

        # 2. Will a stop land? train-resnet's gaps (0.3 s) exceed the 0.1 s window.
        wait_until(lambda: gaps_counted(controller, "train-resnet") >= 3, timeout=10)
        risk = controller.explain("train-resnet").reasons[-1]
        print(risk.message)
        assert isinstance(risk, CheckpointRisk)
        assert risk.forecast.stop_warning
        DONE.set()
        controller.wait_all(timeout=30)

        # 3. Alive but stuck: checkpoints keep coming, progress does not.
        controller.submit("crawl", task_id="crawl-1")
        outcome = controller.wait("crawl-1", timeout=30)
        assert outcome.failure is not None
        print(f"crawl-1: {outcome.status.value}, {outcome.failure.kind}: {outcome.failure.message}")
        assert outcome.status is S.FAILED
        assert outcome.failure.kind is FailureKind.TIMEOUT_NO_PROGRESS
        print(controller.explain("crawl-1").reasons[0].message)

    # 4. The static check (what `chongming-task lint --tasks MODULE` runs).
    [finding] = lint_function("careless", careless)
    print(f"line {finding.line}: {finding.loop} loop: {finding.why}")
    assert finding.loop == "while"
    assert lint_function("train", train) == []


if __name__ == "__main__":
    main()
