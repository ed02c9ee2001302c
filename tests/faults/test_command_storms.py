"""Stop/pause/resume storms across processes: every command is applied, in order, by
the process holding the task; none is lost."""

from __future__ import annotations

import random

import pytest

from _store_spec import open_store
from chongming_task import Controller
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from ._checks import check_store
from ._procs import Worker
from .conftest import SCALE, record

pytestmark = pytest.mark.timeout(240)

S = TaskStatus
EXPECTED = {"pause": S.PAUSED, "resume": S.RUNNING, "stop": S.STOPPED}


def test_command_storm_from_another_process(store_spec: str) -> None:
    tasks = 10
    commands = 300 * SCALE
    rng = random.Random(7)
    worker = Worker(
        store_spec, "holder", "--tasks", str(tasks), "--parallel", str(tasks), "--long-only",
        "--lease-ttl", "5",
    )  # fmt: skip
    store = open_store(store_spec)
    console = Controller(store=store, owner="console")
    ids = [f"holder-{n}" for n in range(tasks)]
    try:
        wait_until(lambda: all(store.get(t).status is S.RUNNING for t in ids), timeout=30)  # type: ignore[union-attr]
        last: dict[str, str] = {}
        issued = 0
        for _ in range(commands):
            task_id = rng.choice(ids)
            action = rng.choices(["pause", "resume", "stop"], weights=[40, 40, 1])[0]
            if last.get(task_id) == "stop":
                continue  # a stopped task stays stopped: nothing more to expect
            if action == "pause":
                console.pause(task_id)  # remote: written as a command, unconfirmed
            elif action == "resume":
                console.resume(task_id)
            else:
                console.stop(task_id, reason="storm")
            last[task_id] = action
            issued += 1
        expected = {t: EXPECTED[last.get(t, "resume")] for t in ids}

        def applied(task_id: str) -> bool:
            status = store.get(task_id).status  # type: ignore[union-attr]
            if status is expected[task_id]:
                return True
            # Guide §4.2: a pause the body does not confirm within the pause timeout is
            # rolled back to running, on the record -- applied, not lost.
            tail = store.history(task_id)[-1]
            return expected[task_id] is S.PAUSED and tail.trigger == "runtime:pause_aborted"

        def settled() -> bool:
            return all(applied(t) for t in ids)

        try:
            wait_until(settled, timeout=60, message="the storm's last commands applied")
        except TimeoutError:
            wrong = {
                t: (expected[t].value, store.get(t).status.value, [  # type: ignore[union-attr]
                    f"{r.to_status.value}:{r.trigger}" for r in store.history(t)[-6:]
                ])
                for t in ids
                if not applied(t)
            }  # fmt: skip
            raise AssertionError(
                f"last commands not applied (expected, actual, tail): {wrong}"
            ) from None
        rolled_back = len(
            [t for t in ids if store.get(t).status is not expected[t]]  # type: ignore[union-attr]
        )
        for task_id in ids:
            console.stop(task_id, reason="end of storm")
        wait_until(lambda: all(store.get(t).status is S.STOPPED for t in ids), timeout=60)  # type: ignore[union-attr]
        statuses = check_store(store, ids)
        transitions = sum(len(store.history(t)) for t in ids)
        assert worker.alive
        assert set(statuses.values()) == {S.STOPPED}
        record(
            storm_commands=issued,
            storm_pauses_rolled_back=rolled_back,
            transitions_checked=transitions,
            commands_lost=0,
        )
    finally:
        console.close()
        worker.sigkill()
        store.close()
