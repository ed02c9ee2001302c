"""Many runs of one task without a controller: ``RunTemplate`` and ``TaskRun.from_template``.

An orchestrator of its own (a queue owner) checks the options its runs share once,
then creates each run with only its own arguments and id checked. Every claim the
output makes is asserted.

    python examples/16_run_template.py
"""

from __future__ import annotations

from chongming_task import ConfigurationError, RetryPolicy, TaskContext, TaskRun, TaskStatus
from chongming_task.policies import FixedBackoff
from chongming_task.run import RunTemplate

S = TaskStatus


def resize(ctx: TaskContext, path: str, width: int = 200) -> str:
    """Pretend to resize ``path``."""
    ctx.checkpoint()
    return f"{path.rsplit('.', 1)[0]}-{width}.png"


def main() -> None:
    # Checked once: the policies, tags and executor every run shares.
    template = RunTemplate.check(
        resize, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)), tags={"images"}
    )
    runs = [
        TaskRun.from_template(
            template, (path,), None, task_id=f"resize-{i}", label=None, bucket=None, bucket_key=None
        )
        for i, path in enumerate(["a.jpg", "b.jpg", "c.jpg"])
    ]
    for run in runs:
        run.start()
    values = [run.wait(timeout=30).value for run in runs]
    print("made:", values)
    assert values == ["a-200.png", "b-200.png", "c-200.png"]
    for run in runs:
        path = [t.to_status for t in run.transitions]
        print(f"{run.task_id}: {' -> '.join(status.value for status in path)}")
        assert path == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
        assert run.snapshot.max_attempts == 2
        assert run.snapshot.tags == frozenset({"images"})

    # What differs per run is still checked: these arguments do not fit resize().
    message = ""
    try:
        TaskRun.from_template(
            template, (), {"size": 3}, task_id="bad", label=None, bucket=None, bucket_key=None
        )
    except ConfigurationError as exc:
        message = str(exc)
    print("refused:", message)
    assert "arguments do not fit task 'resize'" in message


if __name__ == "__main__":
    main()
