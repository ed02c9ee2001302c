"""Submitting many tasks at once with ``Controller.submit_many``.

A batch of thumbnails is submitted in one call: every call is checked first and the
whole batch is stored in one transaction, so a bad call or a taken id leaves nothing
behind. Every claim the output makes is asserted.

    python examples/14_submit_many.py
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from chongming_task import Controller, SqliteTaskStore, TaskContext, TaskStatus, task
from chongming_task.errors import ConfigurationError

S = TaskStatus


@task(tags={"images"})
def thumbnail(ctx: TaskContext, path: str, width: int = 200) -> str:
    """Pretend to resize ``path``."""
    ctx.checkpoint()
    return f"{Path(path).stem}-{width}.png"


def refused(action: Callable[[], object]) -> str:
    """The message of the ConfigurationError that ``action`` must raise."""
    try:
        action()
    except ConfigurationError as exc:
        return str(exc)
    raise AssertionError("expected a ConfigurationError")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteTaskStore(str(Path(tmp) / "tasks.db"))
        with Controller(store=store, max_parallel=2) as controller:
            controller.register_all(thumbnail)

            # A tuple is the positional arguments, a mapping the keyword arguments.
            runs = controller.submit_many(
                "thumbnail",
                [("a.jpg",), ("b.jpg", 800), {"path": "c.jpg", "width": 400}],
                task_ids=["thumb-a", "thumb-b", "thumb-c"],
            )
            values = [run.wait(timeout=30).value for run in runs]
            print("made:", values)
            assert values == ["a-200.png", "b-800.png", "c-400.png"]
            for run in runs:
                path = [t.to_status.value for t in controller.history(run.task_id)]
                print(f"{run.task_id}: {' -> '.join(path)}")
                assert path == ["pending", "queued", "starting", "running", "succeeded"]

            # All or nothing: call 1 is missing its path, so not even call 0 is stored.
            message = refused(
                lambda: controller.submit_many("thumbnail", [("d.jpg",), {"width": 10}])
            )
            print("refused:", message)
            assert "call 1" in message
            assert "nothing was submitted" in message
            assert len(controller.list_tasks()) == 3

            # A taken id is refused before anything is written: "thumb-e" is not kept either.
            message = refused(
                lambda: controller.submit_many(
                    "thumbnail", [("e.jpg",), ("a.jpg",)], task_ids=["thumb-e", "thumb-a"]
                )
            )
            print("refused:", message)
            assert controller.get("thumb-e") is None
            print("stored tasks:", sorted(s.task_id for s in controller.list_tasks()))

            # A time window of creation (aware datetimes; after inclusive, before not).
            first = runs[0].snapshot.created_at
            window = controller.list_tasks(
                created_after=first, created_before=controller.clock.now() + timedelta(seconds=1)
            )
            assert [s.task_id for s in window] == ["thumb-a", "thumb-b", "thumb-c"]
            assert controller.list_tasks(created_before=first) == []
            print("created in the window:", [s.task_id for s in window])


if __name__ == "__main__":
    main()
