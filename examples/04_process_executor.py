"""The ProcessExecutor: a stop that is really enforced, crash isolation (guide §7.4).

A thread that ignores its checkpoints can only be abandoned (``lost``). A child
process can be terminated: after the graceful window it gets ``terminate()``, then
``kill()``, and the run ends ``stopped`` with the process really gone. A native crash
(here a deliberate SIGSEGV) takes only the child: the run fails naming the signal and
everything else goes on. The price: module-level functions and picklable arguments,
checked at submission, and the ``if __name__ == "__main__":`` guard below (spawn
re-imports this file in every child).

    python examples/04_process_executor.py
"""

from __future__ import annotations

import os
import signal
import threading
import time

from chongming_task import ProcessExecutor, TaskContext, TaskRun, TaskStatus, run_task, task
from chongming_task.errors import ConfigurationError
from chongming_task.testing import wait_until

S = TaskStatus


@task
def crunch(ctx: TaskContext, n: int) -> dict[str, int]:
    """CPU-bound work in a real child process (no GIL shared with the parent)."""
    total = 0
    for index in range(n):
        if index % 10_000 == 0:
            ctx.checkpoint()
            ctx.progress(index, total=n)
        total += index * index
    return {"total": total, "pid": os.getpid()}


@task
def third_party_loop(ctx: TaskContext) -> None:
    """Someone else's code that never looks at the context again."""
    ctx.checkpoint()
    while True:
        time.sleep(0.05)


@task
def native_crash(ctx: TaskContext) -> None:
    """What a buggy native extension does."""
    os.kill(os.getpid(), signal.SIGSEGV)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main() -> None:
    executor = ProcessExecutor()

    outcome = run_task(crunch, 200_000, executor=executor)
    print("crunch:", outcome.status.value, "in child", outcome.value["pid"])
    assert outcome.ok
    assert outcome.value["pid"] != os.getpid()
    assert outcome.snapshot.pid == outcome.value["pid"]  # what `ps` shows

    run = TaskRun(third_party_loop, executor=executor, graceful_stop=0.5)
    run.start()
    wait_until(lambda: run.status is S.RUNNING)
    pid = run.snapshot.pid
    assert pid is not None
    assert alive(pid)
    run.stop(reason="it has to stop now")
    outcome = run.wait(timeout=30)
    assert outcome.failure is not None
    print("third_party_loop:", outcome.status.value, "-", outcome.failure.message)
    assert outcome.status is S.STOPPED  # not lost: the process is gone for real
    assert not alive(pid)

    neighbour_done = threading.Event()

    def neighbour(ctx: TaskContext) -> str:
        while not neighbour_done.is_set():
            ctx.checkpoint()
            time.sleep(0.01)
        return "unharmed"

    thread_run = TaskRun(neighbour)
    thread_run.start()
    crashed = run_task(native_crash, executor=executor)
    assert crashed.failure is not None
    print("native_crash:", crashed.status.value, "-", crashed.failure.message)
    assert crashed.failure.kind.value == "crashed"
    assert "SIGSEGV" in crashed.failure.message
    neighbour_done.set()
    assert thread_run.wait(timeout=10).value == "unharmed"

    try:
        TaskRun(lambda ctx: 1, executor=executor)
    except ConfigurationError as exc:
        print("refused at submission:", exc)
    else:
        raise AssertionError("a lambda cannot run in a child process")
    print("ok")


if __name__ == "__main__":
    main()
