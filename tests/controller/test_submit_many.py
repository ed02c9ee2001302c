"""``Controller.submit_many``: many submissions of one task, stored in one write.

All or nothing: a bad call, a taken id or a store refusal leaves nothing stored and
nothing held; a good batch is one ``create_batch`` call, each run already ``queued``
with its creation record, then admitted like any other submission.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Controller, SqliteTaskStore
from chongming_task.errors import ConfigurationError
from chongming_task.states import TaskStatus as S
from chongming_task.stores._memory import InMemoryTaskStore

DONE = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def scale(ctx: Any, value: int, factor: int = 2) -> int:
    return value * factor


class CountingStore(InMemoryTaskStore):
    """Counts the store calls that create tasks."""

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0
        self.singles = 0

    def create_batch(self, entries: Any) -> None:
        self.batches += 1
        super().create_batch(entries)

    def create(self, snapshot: Any, transitions: Any = ()) -> None:
        self.singles += 1
        super().create(snapshot, transitions)


def _path(records: Any) -> list[S]:
    return [record.to_status for record in records]


def test_a_batch_is_one_store_write_and_every_run_runs() -> None:
    store = CountingStore()
    with Controller(store=store, max_parallel=2) as controller:
        controller.register("scale", scale)
        runs = controller.submit_many(
            "scale", [(1,), (2, 10), {"value": 3}], task_ids=["a", "b", "c"], label="batch"
        )
        assert [run.task_id for run in runs] == ["a", "b", "c"]
        assert (store.batches, store.singles) == (1, 0)
        outcomes = [run.wait(timeout=10) for run in runs]
        assert [outcome.value for outcome in outcomes] == [2, 20, 6]
        for run in runs:
            assert _path(run.transitions) == DONE
            assert _path(controller.history(run.task_id)) == DONE
            assert run.snapshot.label == "batch"
        assert controller.run("b") is runs[1]


def test_a_batch_on_sqlite_survives_a_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "tasks.db")
    gate = threading.Event()

    def held(ctx: Any, n: int) -> int:
        gate.wait(10)
        return n

    controller = Controller(store=SqliteTaskStore(path), max_parallel=1)
    try:
        controller.register("held", held)
        runs = controller.submit_many("held", [(n,) for n in range(5)])
        assert len({run.task_id for run in runs}) == 5
        reader = SqliteTaskStore(path)
        try:
            stored = {run.task_id: reader.get(run.task_id) for run in runs}
            assert all(snapshot is not None for snapshot in stored.values())
            assert {snapshot.status for snapshot in stored.values() if snapshot} <= {
                S.QUEUED,
                S.STARTING,
                S.RUNNING,
            }
        finally:
            reader.close()
        gate.set()
        assert [run.wait(timeout=10).value for run in runs] == list(range(5))
    finally:
        gate.set()
        controller.close(timeout=5)


@pytest.mark.parametrize(
    ("calls", "options", "message"),
    [
        ([(1,), ("x", 1, 2, 3)], {}, "call 1"),
        ([(1,), [2]], {}, "wrap a single argument"),
        ([(1,), "2"], {}, "tuple of positional arguments"),
        ([{"value": 1}, {3: 1}], {}, "names must be strings"),
        ([(1,), (2,)], {"task_ids": ["x"]}, "one id per call"),
        ([(1,), (2,)], {"task_ids": "ab"}, "not the string"),
        ([(1,), (2,)], {"task_ids": ["x", "x"]}, "appears twice"),
        ([(1,), (2,)], {"task_ids": ["x", ""]}, "non-empty string"),
        ([(1,), (2,)], {"bucket_keys": ["k"]}, "one per call"),
        ([(1,)], {"priority": "high"}, "priority must be an integer"),
        ([(1,), (2,)], {"bucket_keys": "ab"}, "not the string"),
    ],
)
def test_bad_input_names_what_is_wrong_and_stores_nothing(
    calls: list[Any], options: dict[str, Any], message: str
) -> None:
    store = CountingStore()
    with Controller(store=store, max_parallel=1) as controller:
        controller.register("scale", scale)
        with pytest.raises(ConfigurationError, match=message):
            controller.submit_many("scale", calls, **options)
        assert (store.batches, store.singles) == (0, 0)
        assert controller.runs() == []
        assert controller.queued_count == 0


def test_an_id_taken_in_the_store_leaves_nothing_stored_or_held(tmp_path: Path) -> None:
    path = str(tmp_path / "tasks.db")
    with Controller(store=SqliteTaskStore(path), max_parallel=1) as first:
        first.register("scale", scale)
        first.submit("scale", 1, task_id="taken").wait(timeout=10)
    with Controller(store=SqliteTaskStore(path), max_parallel=1) as second:
        second.register("scale", scale)
        with pytest.raises(ConfigurationError, match="taken"):
            second.submit_many("scale", [(1,), (2,)], task_ids=["fresh", "taken"])
        assert second.get("fresh") is None
        assert second.runs() == []
        assert _path(second.history("taken")) == DONE  # the original is untouched


def test_an_id_held_here_is_refused_before_anything_is_built() -> None:
    with Controller(max_parallel=1) as controller:
        controller.register("scale", scale)
        controller.submit("scale", 1, task_id="mine").wait(timeout=10)
        with pytest.raises(ConfigurationError, match="already exists in this controller"):
            controller.submit_many("scale", [(1,)], task_ids=["mine"])
        assert [run.task_id for run in controller.runs()] == ["mine"]


def test_an_unregistered_name_and_a_closed_controller_are_refused() -> None:
    controller = Controller(max_parallel=1)
    with pytest.raises(ConfigurationError, match="nope"):
        controller.submit_many("nope", [()])
    controller.close()
    controller.register("scale", scale)
    with pytest.raises(ConfigurationError, match="closed"):
        controller.submit_many("scale", [(1,)])


def test_an_empty_batch_stores_nothing() -> None:
    store = CountingStore()
    with Controller(store=store) as controller:
        controller.register("scale", scale)
        assert controller.submit_many("scale", []) == []
        assert controller.runs() == []
        assert (store.batches, store.singles) == (0, 0)


@pytest.mark.parametrize("calls", [5, "ab", b"ab", None])
def test_calls_that_are_not_a_collection_of_calls_are_refused(calls: Any) -> None:
    store = CountingStore()
    with Controller(store=store) as controller:
        controller.register("scale", scale)
        with pytest.raises(ConfigurationError, match=r"one tuple .* or mapping"):
            controller.submit_many("scale", calls)
        assert (store.batches, store.singles) == (0, 0)
        assert controller.runs() == []
