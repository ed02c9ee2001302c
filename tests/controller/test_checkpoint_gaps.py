"""Will my stop land? Checkpoint gaps counted by the runtime, stored, and judged.

Time is a FakeClock: a "2 s gap" is ``clock.advance(2)`` between two checkpoints,
never a real sleep.
"""

from __future__ import annotations

import contextlib
import threading

import pytest

from chongming_task import Controller
from chongming_task._checkpoint_gaps import BOUNDS, CheckpointGaps, GapRecorder, forecast
from chongming_task._explain import CheckpointRisk, explain
from chongming_task.controller._explaining import name_gaps, store_facts
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.policies import Timeout
from chongming_task.run import TaskRun
from chongming_task.runtime._context import TaskContext
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock, wait_until

S = TaskStatus
PATIENCE = 10.0


class Stepper:
    """A body that reaches one checkpoint per step the test releases."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.go = threading.Semaphore(0)
        self.reached = threading.Semaphore(0)

    def __call__(self, ctx: TaskContext) -> str:
        for _ in range(self.steps):
            assert self.go.acquire(timeout=PATIENCE)
            ctx.checkpoint()
            self.reached.release()
        return "done"

    def step(self) -> None:
        self.go.release()
        assert self.reached.acquire(timeout=PATIENCE)


def test_a_2s_gap_under_a_1s_window_gets_the_warning(store: TaskStore) -> None:
    clock = FakeClock()
    store.clock = clock
    body = Stepper(4)
    with Controller(store, clock=clock, graceful_stop=1) as controller:
        controller.register("slow", body, timeout=Timeout(idle=2.4))
        controller.submit("slow", task_id="s1")
        wait_until(
            lambda: controller.get("s1").status is S.RUNNING,  # type: ignore[union-attr]
            timeout=PATIENCE,
        )
        # Two gaps of 0 s so far: the attempt's start to the runtime's checkpoint before
        # the body, and that to the body's first checkpoint.
        body.step()
        version = store.get("s1").status_version  # type: ignore[union-attr]
        for _ in range(2):
            clock.advance(2)
            body.step()
        run = controller.run("s1")
        assert run is not None
        gaps = run.snapshot.checkpoint_gaps
        assert gaps is not None
        assert gaps.count == 4
        assert gaps.max == 2
        assert gaps.counts[BOUNDS.index(2.0)] == 2
        assert gaps.counts[0] == 2

        # The side channel carries them to the store without moving status_version.
        # The lease keeper flushes the side channel once a second of (fake) time.
        def flushed() -> bool:
            found = store.get("s1")
            return found is not None and found.checkpoint_gaps == gaps

        for _ in range(6):  # at most 1.5 s: idle (2.4 s) stays quiet
            if flushed():
                break
            clock.advance(0.25)
            with contextlib.suppress(TimeoutError):
                wait_until(flushed, timeout=0.5, message="the gaps in the store")
        stored = store.get("s1")
        assert stored is not None
        assert stored.checkpoint_gaps == gaps
        assert stored.status is S.RUNNING
        assert stored.status_version == version

        risk = controller.explain("s1").reasons[-1]
        assert isinstance(risk, CheckpointRisk)
        verdict = risk.forecast
        assert (verdict.p99, verdict.max, verdict.graceful_stop) == (2.0, 2.0, 1.0)
        assert verdict.stop_warning
        assert verdict.stop_miss_share is not None
        assert verdict.stop_miss_share > 0.3  # half of each 2 s gap is beyond the window
        assert verdict.idle_warning  # a healthy 2 s gap is within 80% of idle=2.4
        assert "a stop would likely not land in the 1s graceful window" in risk.message
        assert "idle timeout of 2.4s could fire on a healthy run" in risk.message

        body.step()
        controller.wait("s1", PATIENCE)
    final = store.get("s1")
    assert final is not None
    assert final.checkpoint_gaps is not None
    assert final.checkpoint_gaps.count == 5
    merged = name_gaps(store, "slow")
    assert merged == final.checkpoint_gaps
    facts = store_facts(store, final, now=clock.now(), graceful_stop=1.0)
    reasons = explain(facts).reasons
    assert [r.kind for r in reasons] == ["ended", "checkpoint_gaps"]
    assert isinstance(reasons[1], CheckpointRisk)
    assert reasons[1].forecast.stop_warning


def test_short_gaps_under_the_window_are_fine() -> None:
    clock = FakeClock()
    body = Stepper(5)
    run = TaskRun(body, clock=clock, graceful_stop=5)
    run.start()
    for _ in range(5):
        clock.advance(0.1)
        body.step()
    run.wait(PATIENCE)
    gaps = run.snapshot.checkpoint_gaps
    assert gaps is not None
    verdict = forecast(gaps, graceful_stop=5, idle=None)
    assert not verdict.stop_warning
    assert verdict.stop_miss_share == 0
    assert verdict.warnings == []


def test_time_paused_in_a_checkpoint_is_not_a_gap() -> None:
    clock = FakeClock()
    body = Stepper(3)
    run = TaskRun(body, clock=clock)
    run.start()
    body.step()
    pausing = threading.Thread(target=run.pause, kwargs={"timeout": PATIENCE})
    pausing.start()
    wait_until(lambda: run.status is S.PAUSING, timeout=PATIENCE)
    body.go.release()  # the second checkpoint confirms the pause and blocks
    pausing.join(PATIENCE)
    assert run.status is S.PAUSED
    clock.advance(600)
    assert run.resume()
    assert body.reached.acquire(timeout=PATIENCE)
    clock.advance(0.5)
    body.step()
    run.wait(PATIENCE)
    gaps = run.snapshot.checkpoint_gaps
    assert gaps is not None
    assert gaps.max == 0.5  # not 600
    assert gaps.count == 4  # start -> runtime checkpoint -> 3 body checkpoints


def test_the_recorder_and_the_value_are_exact() -> None:
    from chongming_task.runtime._context import RuntimeContext
    from chongming_task.runtime._control import Control

    now = [0.0]
    recorder = GapRecorder(last=0.0)
    ctx = RuntimeContext(
        task_id="t",
        task_name="t",
        attempt=1,
        control=Control(beat=0.0, gaps=recorder),
        monotonic=lambda: now[0],
        host=None,  # type: ignore[arg-type]  # nothing here reports progress or logs
    )
    for at in (0.0005, 1.0, 3.5, 5000.0):
        now[0] = at
        ctx.checkpoint()
    gaps = recorder.freeze()
    assert gaps is not None
    assert gaps.count == 4
    assert gaps.max == 4996.5
    assert gaps.counts[0] == 1  # 0.5 ms, the fast path
    assert gaps.counts[BOUNDS.index(1.0)] == 1  # 0.9995 s
    assert gaps.counts[BOUNDS.index(5.0)] == 1  # 2.5 s
    assert gaps.counts[-1] == 1  # above an hour
    assert gaps.p50 == 1.0
    assert gaps.quantile(1.0) == 4996.5
    assert CheckpointGaps.from_dict(gaps.to_dict()) == gaps
    assert gaps.merged(gaps).count == 8
    assert GapRecorder().freeze() is None
    only_fast = GapRecorder()
    only_fast.fast = 3
    frozen = only_fast.freeze()
    assert frozen is not None
    assert (frozen.count, frozen.max) == (3, 0.001)  # lengths not kept: the edge


@pytest.mark.parametrize(
    "bad",
    [
        {"counts": [1, 2], "max": 1.0},
        {"counts": [-1] * (len(BOUNDS) + 1), "max": 1.0},
        {"counts": [0] * (len(BOUNDS) + 1), "max": float("nan")},
        {"counts": [0] * (len(BOUNDS) + 1)},
        {"v": 99, "counts": [0] * (len(BOUNDS) + 1), "max": 0},
    ],
)
def test_corrupt_stored_gaps_are_a_store_error(bad: dict[str, object]) -> None:
    with pytest.raises(StoreError):
        CheckpointGaps.from_dict(bad)


def test_bad_values_are_refused_on_construction() -> None:
    with pytest.raises(ConfigurationError, match=r"CheckpointGaps\.max"):
        CheckpointGaps(counts=(0,) * (len(BOUNDS) + 1), max=-1)
