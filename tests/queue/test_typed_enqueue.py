"""Typed enqueue: ``Client.enqueue`` / ``Controller.submit`` take the ``@task`` function.

Statically, mypy checks the arguments against the task's parameters and types
``wait().value`` as its return type (a sample file checked by mypy, below). At run
time only the name taken from the definition crosses the store -- on every store the
stored task, its recipe and the worker's run say so -- and a function ``@task`` did
not decorate, or not the one registered under its name, is refused with a
``ConfigurationError`` before anything is stored.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import chongming_task
from chongming_task import AsyncClient, Client, Controller, TaskContext, TaskStatus, task
from chongming_task.errors import ConfigurationError, UnknownTaskName
from chongming_task.queue import recipe_of
from chongming_task.queue._client import EnqueueOptions
from chongming_task.stores._base import TaskQuery, TaskStore
from chongming_task.worker import Worker

S = TaskStatus
DEADLINE = 20.0


@task(name="typed.scale")
def scale(ctx: TaskContext, value: int, factor: int = 2, *, offset: int = 0) -> int:
    """Multiply, then add."""
    return value * factor + offset


@task
async def shout(ctx: TaskContext, word: str) -> str:
    return word.upper()


def undecorated(ctx: TaskContext, value: int) -> int:
    return value


@task(name="typed.scale")
def impostor(ctx: TaskContext, value: int, factor: int = 2, *, offset: int = 0) -> int:
    """Same name as ``scale``, different code."""
    return -1


def registered() -> Controller:
    controller = Controller()
    controller.register_all(scale, shout)
    return controller


def stored(store: TaskStore) -> list[Any]:
    return store.query(TaskQuery())


def run_queue(store: TaskStore) -> Worker:
    controller = Controller(store=store, owner="w1")
    controller.register_all(scale, shout)
    return Worker(controller, max_parallel=2, poll_interval=0.02)


# ------------------------------------------------------------ the client, every store


@pytest.mark.parametrize("checked", [True, False], ids=["tasks=", "no-tasks"])
def test_enqueue_by_function_stores_the_name_and_the_worker_runs_it(
    store: TaskStore, checked: bool
) -> None:
    client = Client(store, tasks=registered() if checked else None, poll_interval=0.02)
    handle = client.enqueue(scale, 4, 3, offset=1)
    by_name = client.enqueue("typed.scale", 5)
    later = client.with_options(priority=7, task_id="scaled-6", tags=["batch"]).enqueue(
        scale, 6, factor=10
    )
    spoken = client.enqueue(shout, "hi")
    assert handle.task_id.startswith("typed.scale-")
    snapshot = handle.snapshot
    assert (snapshot.name, snapshot.status, snapshot.owner) == ("typed.scale", S.QUEUED, None)
    recipe = recipe_of(snapshot)
    assert recipe is not None
    assert (recipe.args, recipe.kwargs) == ((4, 3), {"offset": 1})
    options = later.snapshot
    assert (options.task_id, options.name, options.priority) == ("scaled-6", "typed.scale", 7)
    assert "batch" in options.tags
    assert recipe_of(options) is not None
    assert recipe_of(options).kwargs == {"factor": 10}  # type: ignore[union-attr]
    assert spoken.snapshot.name == "shout"

    worker = run_queue(store)
    worker.start()
    try:
        results = [h.wait(DEADLINE) for h in (handle, by_name, later, spoken)]
    finally:
        worker.shutdown(timeout=10)
    assert [(r.status, r.value) for r in results] == [
        (S.SUCCEEDED, 13),
        (S.SUCCEEDED, 10),
        (S.SUCCEEDED, 60),
        (S.SUCCEEDED, "HI"),
    ]
    assert {s.task_id: s.status for s in stored(store)} == {
        h.task_id: S.SUCCEEDED for h in (handle, by_name, later, spoken)
    }


def test_enqueue_many_and_the_async_client_take_the_function(store: TaskStore) -> None:
    client = Client(store, tasks=registered())
    handles = client.enqueue_many(scale, [(1,), {"value": 2, "factor": 5}])
    assert [h.snapshot.name for h in handles] == ["typed.scale", "typed.scale"]

    async def enqueue() -> list[str]:
        aclient = AsyncClient(store, tasks=registered())
        one = await aclient.enqueue(scale, 3)
        two = await aclient.with_options(unique_key="shout-once").enqueue(shout, "a")
        again = await aclient.with_options(unique_key="shout-once").enqueue(shout, "b")
        assert (two.created, again.created, again.task_id) == (True, False, two.task_id)
        return [one.task_id, two.task_id]

    ids = asyncio.run(enqueue())
    names = {s.task_id: s.name for s in stored(store)}
    assert [names[i] for i in ids] == ["typed.scale", "shout"]
    assert len(names) == 4


def test_with_options_delay_is_the_enqueue_delay(store: TaskStore) -> None:
    client = Client(store)
    handle = client.with_options(delay=3600).enqueue(scale, 1)
    recipe = recipe_of(handle.snapshot)
    assert recipe is not None
    assert recipe.not_before is not None
    assert recipe.not_before > store.clock.now()


REFUSED: list[tuple[str, Any, str]] = [
    (
        "undecorated function",
        lambda client: client.enqueue(undecorated, 1),
        r"'undecorated' is not an @task function.*decorate the function with @task",
    ),
    (
        "lambda",
        lambda client: client.enqueue(lambda ctx: None),
        "is not an @task function",
    ),
    (
        "undecorated, with options",
        lambda client: client.with_options(priority=1).enqueue(undecorated, 1),
        "is not an @task function",
    ),
    (
        "undecorated, in a batch",
        lambda client: client.enqueue_many(undecorated, [(1,)]),
        "is not an @task function",
    ),
    (
        "a task keyword named like an option",
        lambda client: client.with_options(priority=1).enqueue(scale, 1, label="x"),
        r"'label' is the name of an option.*positionally",
    ),
]


@pytest.mark.parametrize(("case", "call", "expected"), REFUSED, ids=[c[0] for c in REFUSED])
@pytest.mark.parametrize("checked", [True, False], ids=["tasks=", "no-tasks"])
def test_a_function_that_is_no_task_is_refused_and_nothing_is_stored(
    store: TaskStore, checked: bool, case: str, call: Any, expected: str
) -> None:
    client = Client(store, tasks=registered() if checked else None)
    with pytest.raises(ConfigurationError, match=expected):
        call(client)
    assert stored(store) == []


def test_a_function_other_than_the_registered_one_is_refused(store: TaskStore) -> None:
    client = Client(store, tasks=registered())
    with pytest.raises(ConfigurationError, match=r"'typed.scale' is registered to .*not to"):
        client.enqueue(impostor, 1)
    unknown = Client(store, tasks=[shout])
    with pytest.raises(UnknownTaskName, match=r"typed\.scale"):
        unknown.enqueue(scale, 1)
    assert stored(store) == []


def test_with_options_refuses_an_unknown_option(store: TaskStore) -> None:
    client = Client(store)
    with pytest.raises(TypeError, match=r"with_options\(\) got .* 'dealy'; did you mean 'delay'"):
        client.with_options(dealy=5)  # type: ignore[call-arg]


def test_the_typed_options_are_the_options_of_enqueue() -> None:
    import inspect

    keyword_only = {
        p.name
        for p in inspect.signature(Client.enqueue).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert EnqueueOptions.__optional_keys__ == keyword_only


# ------------------------------------------------------------ the controller


def test_submit_takes_the_registered_function() -> None:
    with registered() as controller:
        run = controller.submit(scale, 2, factor=4)
        tagged = controller.with_options(task_id="s-1", tags=["x"]).submit(scale, 3)
        loud = controller.submit(shout, "ok")
        outcomes = [r.wait(DEADLINE) for r in (run, tagged, loud)]
        assert [(o.status, o.value) for o in outcomes] == [
            (S.SUCCEEDED, 8),
            (S.SUCCEEDED, 6),
            (S.SUCCEEDED, "OK"),
        ]
        snapshot = controller.store.get("s-1")
        assert snapshot is not None
        assert (snapshot.name, "x" in snapshot.tags) == ("typed.scale", True)
        assert [r.snapshot.name for r in controller.submit_many(scale, [(1,), (2,)])] == [
            "typed.scale",
            "typed.scale",
        ]
        before = len(controller.store.query(TaskQuery()))
        with pytest.raises(ConfigurationError, match="is not an @task function"):
            controller.submit(undecorated, 1)
        with pytest.raises(ConfigurationError, match="is registered to"):
            controller.with_options(priority=2).submit(impostor, 1)
        with pytest.raises(ConfigurationError, match="'retry' is the name of an option"):
            controller.with_options(priority=2).submit(scale, 1, retry=None)  # type: ignore[call-arg,arg-type]
        assert len(controller.store.query(TaskQuery())) == before


# ------------------------------------------------------------ what mypy says

SAMPLE = """\
from chongming_task import AsyncClient, Client, Controller, TaskContext, task


@task
def resize(ctx: TaskContext, path: str, width: int = 800, *, keep_ratio: bool = True) -> bytes:
    return path.encode()


@task(name="fetch")
async def fetch(ctx: TaskContext, url: str) -> int:
    return len(url)


def calls(client: Client, controller: Controller) -> None:
    client.enqueue(resize, "a.png", 400, keep_ratio=False)  # RIGHT
    client.enqueue(resize, "a.png", width="wide")  # WRONG
    reveal_type(client.enqueue(resize, "a.png").wait().value)  # bytes
    reveal_type(client.enqueue(fetch, "https://example.org").wait().value)  # int
    reveal_type(client.with_options(delay=60).enqueue(resize, "b.png").wait().value)  # bytes
    reveal_type(client.enqueue("resize", "c.png", delay=5).wait().value)  # Any
    reveal_type(controller.submit(resize, "d.png").wait().value)  # bytes
    reveal_type(controller.with_options(tags=["i"]).submit(fetch, "u").wait().value)  # int


async def async_calls(client: AsyncClient) -> None:
    reveal_type((await (await client.enqueue(resize, "f.png")).wait()).value)  # bytes
    later = await client.with_options(delay=1).enqueue(fetch, "u")
    reveal_type((await later.wait()).value)  # int
"""


@pytest.mark.slow
def test_mypy_flags_the_wrong_call_and_types_the_value(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(SAMPLE)
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\n")
    src = Path(chongming_task.__file__).parents[1]  # the code under test, not an install
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "sample.py"],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(src)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = SAMPLE.splitlines()
    marked = {n + 1: line.rsplit("# ", 1)[-1] for n, line in enumerate(lines) if "  # " in line}
    errors = re.findall(r"^sample\.py:(\d+): error: (.*)$", result.stdout, re.MULTILINE)
    assert errors, result.stdout + result.stderr
    assert {marked.get(int(line)) for line, _ in errors} == {"WRONG"}, result.stdout
    assert any('"width"' in message and '"int"' in message for _, message in errors)
    revealed = re.findall(r'^sample\.py:(\d+): note: Revealed type is "(.*)"$', result.stdout, re.M)
    assert {int(line): shown for line, shown in revealed} == {
        n: mark for n, mark in marked.items() if mark in {"bytes", "int", "Any"}
    }, result.stdout
    assert result.returncode == 1
