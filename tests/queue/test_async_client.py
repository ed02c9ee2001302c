"""``AsyncClient`` covers every public ``Client`` method, and its handles their twins'.

The comparison is by introspection, so a method added to ``Client`` (or to a handle)
alone fails here until its asyncio twin exists, with the same parameters. The twins
that issue 36 added (``wait``, ``enqueue_pipeline``, ``pipeline`` and the
``AsyncPipelineHandle``) then run a fleet pipeline of ``async def`` tasks through a
real in-process worker, on memory, SQLite and PostgreSQL, asserting what the store
says.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from chongming_task import (
    AsyncClient,
    AsyncPipelineHandle,
    AsyncTaskHandle,
    Client,
    Controller,
    Pipeline,
    PipelineHandle,
    TaskContext,
    TaskHandle,
    TaskStatus,
    task,
)
from chongming_task.errors import UnknownTask
from chongming_task.queue._client import AsyncEnqueueWithOptions, EnqueueWithOptions
from chongming_task.stores._base import TaskStore
from chongming_task.worker import Worker

S = TaskStatus
DEADLINE = 20.0

#: Client methods whose twin is a plain method: they touch no store.
NOT_AWAITED = frozenset({"with_options"})


def public(cls: type) -> dict[str, Any]:
    """Public members of ``cls`` (methods, properties, slots), by name."""
    return {
        name: inspect.getattr_static(cls, name) for name in dir(cls) if not name.startswith("_")
    }


def parameters(member: Any) -> list[tuple[str, Any]]:
    """(name, kind) of a callable's parameters after ``self``; variadic names dropped."""
    found = []
    for param in list(inspect.signature(member).parameters.values())[1:]:
        variadic = param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
        found.append(("*" if variadic else param.name, param.kind))
    return found


def takes_the_same(twin: Any, sync: Any) -> bool:
    """The same parameters, or the sync method's leading named ones and a ``**options``
    that forwards the rest to it (``enqueue``'s many options)."""
    mine, theirs = parameters(twin), parameters(sync)
    if mine == theirs:
        return True
    forwards = ("*", inspect.Parameter.VAR_KEYWORD) in mine
    named = [p for p in mine if p[0] != "*"]
    return forwards and [p for p in theirs if p[0] != "*"][: len(named)] == named


@pytest.mark.parametrize(
    ("sync", "twin"),
    [
        (Client, AsyncClient),
        (TaskHandle, AsyncTaskHandle),
        (PipelineHandle, AsyncPipelineHandle),
        (EnqueueWithOptions, AsyncEnqueueWithOptions),
    ],
    ids=lambda cls: cls.__name__,
)
def test_the_asyncio_twin_has_every_public_member(sync: type, twin: type) -> None:
    expected = public(sync)
    if sync is Client:  # attributes set in __init__ are not members: the methods
        expected = {name: m for name, m in expected.items() if inspect.isfunction(m)}
    mine = public(twin)
    missing = sorted(set(expected) - set(mine))
    assert not missing, f"{twin.__name__} lacks the twin of {sync.__name__}.{missing}"
    for name, member in expected.items():
        theirs = mine[name]
        if not inspect.isfunction(member):
            continue  # a property or slot: the twin may be a property or a coroutine
        assert inspect.isfunction(theirs), f"{twin.__name__}.{name} is not a method"
        assert takes_the_same(theirs, member), f"{twin.__name__}.{name}"
        awaited = inspect.iscoroutinefunction(theirs)
        assert awaited is (name not in NOT_AWAITED), f"{twin.__name__}.{name}"


def test_a_method_added_to_client_alone_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def brand_new(self: Client) -> None:
        """Nothing."""

    monkeypatch.setattr(Client, "brand_new", brand_new, raising=False)
    with pytest.raises(AssertionError, match="lacks the twin of Client"):
        test_the_asyncio_twin_has_every_public_member(Client, AsyncClient)


# ---------------------------------------------------------------- the new twins at work


@task
async def double(ctx: TaskContext, value: int = 0) -> int:
    """A node awaiting on the worker's event loop."""
    await ctx.acheckpoint()
    await asyncio.sleep(0.01)
    return 2 * (value or sum(int(v) for v in ctx.upstream.values()))


@pytest.fixture
def worker(store: TaskStore) -> Iterator[Worker]:
    controller = Controller(store, owner="async-twins", max_parallel=4)
    controller.register_all(double)
    made = Worker(controller, max_parallel=4, poll_interval=0.02)
    made.start()
    try:
        yield made
    finally:
        made.shutdown(timeout=10)
        controller.close()


def test_async_client_waits_and_runs_a_fleet_pipeline(store: TaskStore, worker: Worker) -> None:
    if not store.atomic_create_batch:
        pytest.skip(f"{type(store).__name__} stores no batch atomically (fleet pipelines)")
    client = AsyncClient(store, tasks=[double], poll_interval=0.02)

    async def scenario() -> None:
        handle = await client.enqueue(double, 5)
        outcome = await client.wait(handle.task_id, timeout=DEADLINE)
        assert (outcome.status, outcome.value) == (S.SUCCEEDED, 10)
        with pytest.raises(UnknownTask):
            await client.wait("missing", timeout=1)

        pipeline = Pipeline("twice")
        first = pipeline.node("double", 3, node_id="first")
        pipeline.node("double", node_id="second", depends_on=[first])
        run = await client.enqueue_pipeline(pipeline, run_id="async-run")
        assert isinstance(run, AsyncPipelineHandle)
        assert run.run_id == "async-run"
        assert await run.pipeline_name() == "twice"
        assert await run.task_ids() == {"first": "async-run/first", "second": "async-run/second"}
        done = await run.wait(DEADLINE)
        assert done.status is S.SUCCEEDED
        again = await client.pipeline("async-run")  # any process, from the run id
        assert await again.done() is True
        assert await again.status() is S.SUCCEEDED
        assert await again.statuses() == {"first": S.SUCCEEDED, "second": S.SUCCEEDED}
        nodes = await again.nodes()
        assert nodes["second"].outcome == 12
        assert await again.stop() is False  # nothing left to stop

    asyncio.run(scenario())
    stored = store.get("async-run/second")
    assert stored is not None
    assert stored.status is S.SUCCEEDED
    assert stored.outcome == 12
    starting = [t for t in store.history("async-run/first") if t.to_status is S.STARTING]
    assert starting[0].reason == "executor=asyncio"


def test_async_wait_times_out_without_blocking_the_loop(store: TaskStore) -> None:
    client = AsyncClient(store, tasks=[double], poll_interval=0.02)

    async def scenario() -> int:
        handle = await client.enqueue(double, 1)  # no worker: it stays queued
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        with pytest.raises(TimeoutError, match="still queued"):
            await client.wait(handle.task_id, timeout=0.3)
        ticker.cancel()
        return ticks

    assert asyncio.run(scenario()) > 5  # the loop went on while it waited
