"""Writing a task and running it (guide §2, §3).

A task is a function whose first parameter receives the TaskContext. It calls
``ctx.checkpoint()`` in its loop (that is where stop and pause take effect), reports
progress and logs, and returns JSON. ``run_task`` runs it to the end; ``TaskRun`` is
the handle for everything in between.

    python examples/01_first_task.py
"""

from __future__ import annotations

import logging
from typing import Any

from chongming_task import TaskContext, TaskRun, TaskStatus, run_task, task

S = TaskStatus


@task(tags={"io"})
def count_words(ctx: TaskContext, text: str, *, batch_size: int = 2) -> dict[str, Any]:
    """Count the words of ``text``, a few lines at a time."""
    lines = text.splitlines()
    words = 0
    for start in range(0, len(lines), batch_size):
        ctx.checkpoint()  # stop, pause and heartbeat: call it in every loop
        words += sum(len(line.split()) for line in lines[start : start + batch_size])
        ctx.progress(min(start + batch_size, len(lines)), total=len(lines), unit="lines")
    ctx.log(f"counted {words} words")
    return {"lines": len(lines), "words": words}  # must be JSON


TEXT = "the quick brown fox\njumps over\nthe lazy dog\nagain and again\n"


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")

    # One line: blocks until the run is over. The task's own keywords (batch_size) and
    # our options (task_id, name) mix freely; ctx is never passed by the caller.
    outcome = run_task(count_words, TEXT, batch_size=3, task_id="words-1", name="count")
    if outcome.ok:
        print("value:", outcome.value)
    else:
        print(outcome.status.value, outcome.failure.kind.value if outcome.failure else "")
    assert outcome.ok
    assert outcome.value == {"lines": 4, "words": 12}
    assert outcome.snapshot.progress is not None
    print("progress:", outcome.snapshot.progress.render())
    assert outcome.snapshot.progress.render() == "4/4 lines (100%)"

    # The handle: start returns at once; the run is a trajectory, not a boolean.
    run = TaskRun(count_words, (TEXT,), task_id="words-2")
    run.start()
    result = run.wait(timeout=10)
    for record in run.transitions:
        print(f"  {record.from_status} -> {record.to_status}  by {record.trigger}")
    assert [t.to_status for t in run.transitions] == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.SUCCEEDED,
    ]
    assert result.value["words"] == 12
    assert [entry.message for entry in run.logs] == ["counted 12 words"]

    # A result that cannot be stored fails loudly, naming the type.
    bad = run_task(lambda ctx: {1, 2, 3})
    assert bad.failure is not None
    print("bad result:", bad.status.value, "-", bad.failure.message.split(";")[0])
    assert bad.failure.kind.value == "result_invalid"
    assert "set" in bad.failure.message
    print("ok")


if __name__ == "__main__":
    main()
