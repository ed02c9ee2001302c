"""``tasks --checkpoints`` and ``explain`` name an ``async def`` task that blocked the
event loop (issue 36): its stored checkpoint-gap profile counts the loop blocks."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from chongming_task import Controller
from chongming_task.stores._base import TaskStore

from .conftest import Result

PATIENCE = 15.0

MODULE = """
import asyncio
import time

from chongming_task import task


@task
async def hog(ctx):
    await ctx.acheckpoint()
    time.sleep(0.3)  # blocks the shared event loop
    await ctx.acheckpoint()


@task
async def polite(ctx):
    await ctx.acheckpoint()
    await asyncio.sleep(0.05)
    await ctx.acheckpoint()
"""


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"loop_blocks_cli_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def open_store(db: str) -> TaskStore:
    from chongming_task.cli._session import is_postgres_url

    if is_postgres_url(db):
        from chongming_task.stores._postgres import PostgresTaskStore

        return PostgresTaskStore(db)
    from chongming_task.stores._sqlite import SqliteTaskStore

    return SqliteTaskStore(db)


def test_checkpoints_and_explain_report_loop_blocks(
    db: str, tmp_path: Path, invoke: Callable[..., Result]
) -> None:
    path = tmp_path / "blocking.py"
    path.write_text(MODULE)
    with open_store(db) as store, Controller(store) as controller:
        controller.register_module(load(path))
        for name in ("hog", "polite"):
            assert controller.submit(name, task_id=name).wait(PATIENCE).ok
    result = invoke("--db", db, "tasks", "--tasks", str(path), "--checkpoints")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "BLOCKS LOOP" in next(line for line in lines if line.startswith("hog"))
    assert next(line for line in lines if line.startswith("polite")).endswith("ok")
    assert any(
        line.startswith("warning: the async def body blocked the event loop 1 time(s)")
        for line in lines
    )
    doc = invoke("--db", db, "tasks", "--tasks", str(path), "--checkpoints", "--json").json()
    by_name = {item["name"]: item["checkpoints"] for item in doc["tasks"]}
    assert by_name["hog"]["loop_blocks"] == 1
    assert by_name["hog"]["loop_block_max"] >= 0.3
    assert by_name["polite"]["loop_blocks"] == 0
    explained = invoke("--db", db, "explain", "hog", "--tasks", str(path))
    assert explained.code == 0, explained.err
    assert "blocked the event loop 1 time(s)" in explained.out
