"""Typed enqueue: hand ``Client.enqueue`` the ``@task`` function, not its name.

A type checker (mypy, pyright) then checks the arguments against the task's
parameters and types ``handle.wait().value`` as what the task returns; options go
through ``client.with_options(...)``. Only the name crosses the store: a worker in
this process runs the function it registered under that name. Every claim the output
makes is asserted.

    python examples/20_typed_enqueue.py
    mypy examples/20_typed_enqueue.py   # no errors; uncomment the WRONG line: one
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from chongming_task import Client, Controller, SqliteTaskStore, TaskContext, Worker, task
from chongming_task.errors import ConfigurationError


@task(name="images.thumbnail")
def thumbnail(ctx: TaskContext, path: str, width: int = 200) -> str:
    """Pretend to resize ``path``."""
    ctx.checkpoint()
    return f"{Path(path).stem}-{width}.png"


def plain(ctx: TaskContext, path: str) -> str:
    """Not decorated with @task: refused by the client."""
    return path


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteTaskStore(Path(tmp) / "tasks.db")
        client = Client(store, tasks=[thumbnail], poll_interval=0.02)

        handle = client.enqueue(thumbnail, "cat.jpg", width=64)  # TaskHandle[str]
        # client.enqueue(thumbnail, "cat.jpg", width="small")  # WRONG: mypy flags it
        urgent = client.with_options(priority=10, task_id="thumb-dog").enqueue(thumbnail, "dog.jpg")
        assert handle.snapshot.name == urgent.snapshot.name == "images.thumbnail"
        assert urgent.snapshot.priority == 10
        print("stored as:", handle.snapshot.name, urgent.task_id)

        try:
            client.enqueue(plain, "x.jpg")
        except ConfigurationError as exc:
            print("refused:", exc)
        else:
            raise AssertionError("an undecorated function must be refused")

        controller = Controller(store=store, owner="example-worker")
        controller.register(thumbnail)
        worker = Worker(controller, max_parallel=2, poll_interval=0.02)
        worker.start()
        try:
            small: str = handle.wait(timeout=30).value  # typed str, no cast
            large = urgent.wait(timeout=30).value
        finally:
            worker.shutdown(timeout=10)
        assert (small, large) == ("cat-64.png", "dog-200.png")
        print("results:", small, large)
        store.close()


if __name__ == "__main__":
    main()
