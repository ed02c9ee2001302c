"""The README's one-command demo (``make demo``): the work queue, a crash, and recovery.

What it shows, with the real ``chongming-task`` console script in real processes on
one SQLite file:

1. a client (this script, ``chongming_task.Client``) enqueues 20 tasks into two
   buckets, tenant A's and tenant B's; ``ps`` shows them ``queued`` before any worker
   exists;
2. one queued task is stopped from another process: ``queued -> stopped`` at once,
   and its body never runs;
3. two workers start, each owning one bucket, and run them (tenant A's reports wait
   for their input file, so two of them are mid-task on worker-a);
4. worker-a is killed with SIGKILL. Nobody types a command: worker-b's periodic
   reconcile marks the two tasks it was running ``lost`` within lease TTL + one
   reconcile period, while the rest of tenant A's tasks wait; ``workers`` and
   ``health`` say bucket A has no live owner;
5. a new worker owning bucket A starts and runs the tasks that waited;
6. the two ``lost`` tasks are run again with ``retry --status lost``: each keeps its id
   and history (the retry is recorded with who asked and why) and succeeds on the new
   worker;
7. a deploy: worker-b gets SIGTERM while two of tenant B's tasks are mid-run. It drains:
   it claims nothing more, lets the running tasks finish, and exits 0; the task that
   was still queued runs on its successor.

Every command and its output is printed; every outcome is asserted. Runs in about
half a minute.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import queue_tasks

from chongming_task import BucketPolicy, Client, SqliteTaskStore, TaskStatus
from chongming_task.testing import wait_until

S = TaskStatus
HERE = Path(__file__).resolve().parent
TASKS = HERE / "queue_tasks.py"
SHOWN_TASKS = "examples/queue_tasks.py"  # how the commands read from the repository root
LEASE_TTL = 2.0
RECONCILE_PERIOD = LEASE_TTL / 2  # a worker's default: half its lease TTL
SLACK = 3.0  # polling, and process start-up on a loaded machine
_print_lock = threading.Lock()


def say(text: str = "") -> None:
    with _print_lock:
        print(text, flush=True)


def cli() -> list[str]:
    """The installed console script next to this Python, else ``python -m``."""
    script = Path(sys.executable).with_name("chongming-task")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "chongming_task.cli"]


def clean_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CHONGMING_")}
    env["NO_COLOR"] = "1"
    return env


def shown(args: list[str]) -> str:
    return shlex.join([SHOWN_TASKS if arg == str(TASKS) else arg for arg in args])


def two_tenants() -> tuple[tuple[str, int], tuple[str, int]]:
    """Two tenant keys that hash into different buckets (of the default 64)."""
    policy = BucketPolicy(num_buckets=64)
    a, b = "tenant-A", "tenant-B"
    suffix = 0
    while policy.bucket_for(b) == policy.bucket_for(a):
        suffix += 1
        b = f"tenant-B{suffix}"
    return (a, policy.bucket_for(a)), (b, policy.bucket_for(b))


class Demo:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.db = "demo.db"
        self.env = clean_env()
        self.workers: dict[str, subprocess.Popen[str]] = {}
        self.worker_lines: dict[str, list[str]] = {}

    def run(self, *args: str, expect: int = 0, show: bool = True) -> str:
        """Run one CLI command in its own process, print it and its output."""
        if show:
            say(f"$ chongming-task --db {self.db} {shown(list(args))}")
        result = subprocess.run(
            [*cli(), "--db", self.db, *args],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if show:
            for line in (result.stdout + result.stderr).rstrip().splitlines():
                say(f"  {line}")
            if result.returncode:
                say(f"  (exit code {result.returncode})")
            say()
        assert result.returncode == expect, (
            f"{args} exited {result.returncode}, expected {expect}: {result.stderr}"
        )
        assert "Traceback" not in result.stderr, result.stderr
        return result.stdout

    def json(self, *args: str, expect: int = 0) -> Any:
        return json.loads(self.run(*args, "--json", expect=expect, show=False))

    def start_worker(self, name: str, bucket: int) -> None:
        args = [
            "--owner", name, "--owned-buckets", str(bucket), "worker", "--tasks", str(TASKS),
            "--max-parallel", "2", "--lease-ttl", str(LEASE_TTL), "--poll-interval", "0.1",
        ]  # fmt: skip
        say(f"$ chongming-task --db {self.db} {shown(args)} &")
        process = subprocess.Popen(
            [*cli(), "--db", self.db, *args],
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []
        self.workers[name] = process
        self.worker_lines[name] = lines

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line.rstrip())
                # The worker logs every transition; the demo shows the telling lines.
                if any(word in line for word in ("ready", "lost", "drain", "Traceback", "rror")):
                    say(f"  [{name}] {line.rstrip()}")

        threading.Thread(target=pump, daemon=True).start()

    def stop_workers(self) -> None:
        for name, process in self.workers.items():
            if process.poll() is None:
                say(f"$ kill -TERM <{name}>")
                process.send_signal(signal.SIGTERM)
        for process in self.workers.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def wait_for(condition: Any, what: str, timeout: float = 30.0) -> Any:
    """Poll ``condition`` (a store read, never a command) until it is truthy."""
    return wait_until(condition, timeout=timeout, interval=0.05, message=what)


def main() -> None:
    (key_a, bucket_a), (key_b, bucket_b) = two_tenants()
    with tempfile.TemporaryDirectory(prefix="chongming-demo-") as tmp:
        demo = Demo(Path(tmp))
        uploads = Path(tmp) / "upload-A.csv"  # tenant A's input, not there yet
        store = SqliteTaskStore(Path(tmp) / demo.db)
        client = Client(store, tasks=queue_tasks)
        try:
            say(f"== 1. a client enqueues 20 tasks: 10 for {key_a} (bucket {bucket_a}), ")
            say(f"==    10 for {key_b} (bucket {bucket_b}); no worker is running yet")
            say(f'client = Client(SqliteTaskStore("{demo.db}"), tasks=queue_tasks)')
            say(f'client.enqueue("render", "{key_a}", n, bucket_key="{key_a}", ...)  # x10, x10')
            say()
            handles = {
                key: [
                    client.enqueue(
                        "render",
                        key,
                        n,
                        wait_for=str(uploads) if key == key_a else None,
                        bucket_key=key,
                        task_id=f"{key[-1].lower()}-{n:02d}",
                    )
                    for n in range(1, 11)
                ]
                for key in (key_a, key_b)
            }
            a_tasks, b_tasks = handles[key_a], handles[key_b]
            demo.run("ps", "--order", "created")
            queued = [t for t in demo.json("ps")["tasks"] if t["status"] == "queued"]
            assert len(queued) == 20, queued

            say("== 2. stop one queued task from another process: immediate, nothing ran")
            cancelled = a_tasks[-1]
            demo.run("stop", cancelled.task_id, "--reason", "customer withdrew the request")
            demo.run("history", cancelled.task_id)
            assert cancelled.status is S.STOPPED
            assert [t.to_status for t in cancelled.transitions] == [S.PENDING, S.QUEUED, S.STOPPED]

            say("== 3. two workers, one bucket each")
            demo.start_worker("worker-a", bucket_a)
            demo.start_worker("worker-b", bucket_b)
            for handle in b_tasks:
                assert handle.wait(timeout=60).value == int(handle.task_id[-2:])

            def running_a() -> list[str]:
                return [h.task_id for h in a_tasks if h.status is S.RUNNING]

            wait_for(lambda: len(running_a()) == 2, "two of tenant A's tasks running")
            mid_task = running_a()
            say(f"  worker-b ran all of {key_b}'s tasks; worker-a is mid-task on {mid_task}")
            say()
            demo.run("workers")
            demo.run("ps", "--status", "running,queued", "--order", "created")

            say("== 4. kill worker-a with SIGKILL mid-task, and type nothing")
            say("$ kill -KILL <worker-a>")
            demo.workers["worker-a"].send_signal(signal.SIGKILL)
            demo.workers["worker-a"].wait(10)
            killed = time.monotonic()
            for task_id in mid_task:
                wait_for(
                    lambda task_id=task_id: (
                        store.get(task_id).status is S.LOST  # type: ignore[union-attr]
                    ),
                    f"{task_id} to become lost",
                )
            elapsed = time.monotonic() - killed
            bound = LEASE_TTL + RECONCILE_PERIOD
            say(f"  {mid_task} lost {elapsed:.1f}s after the kill ")
            say(f"  (bound: lease TTL {LEASE_TTL:g}s + one reconcile period {RECONCILE_PERIOD:g}s)")
            say()
            assert elapsed < bound + SLACK, (elapsed, bound)
            waiting = [h for h in a_tasks if h.status is S.QUEUED]
            assert len(waiting) == 7, [(h.task_id, h.status) for h in a_tasks]
            assert all(h.snapshot.owner is None for h in waiting)

            def worker_state(name: str) -> str | None:
                found = [w for w in demo.json("workers")["workers"] if w["worker_id"] == name]
                return found[0]["state"] if found else None

            wait_for(lambda: worker_state("worker-a") == "dead", "worker-a to be reported dead")
            demo.run("history", mid_task[0])
            workers_text = demo.run("workers")
            assert f"bucket {bucket_a}:" in workers_text
            assert "no live owner" in workers_text
            health = demo.run("health", expect=1)
            assert "worker-a" in health
            assert f"bucket {bucket_a}" in health
            queue = demo.json("health", expect=1)["queue"]
            assert str(bucket_a) in queue["orphaned_buckets"], queue
            assert queue["depth"][str(bucket_a)] == 7, queue

            say(f"== 5. {key_a}'s input arrives; a new worker owning bucket {bucket_a} starts")
            uploads.write_text("id,amount\n1,10\n")
            demo.start_worker("worker-a2", bucket_a)
            for handle in waiting:
                outcome = handle.wait(timeout=60)
                assert outcome.ok, (handle.task_id, outcome.status)
                assert outcome.snapshot.owner == "worker-a2"
            demo.run("ps", "--status", "lost", "--status", "stopped")

            say("== 6. run the lost tasks again: same ids, history kept, on the new worker")
            demo.run("retry", "--status", "lost", "--reason", "worker-a crashed; rerun")
            for task_id in mid_task:
                outcome = client.wait(task_id, timeout=60)
                assert outcome.ok, (task_id, outcome.status)
                assert outcome.snapshot.owner == "worker-a2"
                assert outcome.snapshot.attempt == 2
            demo.run("history", mid_task[0])
            demo.run("stats")
            final = {s.task_id: s.status for s in client.list_tasks()}
            assert sorted(final.values()).count(S.SUCCEEDED) == 19, final
            assert [t for t, s in final.items() if s is S.LOST] == [], final
            assert final[cancelled.task_id] is S.STOPPED
            started = [t.to_status for t in cancelled.transitions]
            assert S.STARTING not in started  # the cancelled body never ran

            say("== 7. deploy: SIGTERM worker-b while two tasks run; it drains, loses nothing")
            upload_b = Path(tmp) / "upload-B.csv"
            deploy = [
                client.enqueue(
                    "render",
                    key_b,
                    n,
                    wait_for=str(upload_b),
                    bucket_key=key_b,
                    task_id=f"{key_b[-1].lower()}-deploy-{n}",
                )
                for n in (1, 2, 3)
            ]
            running, behind = deploy[:2], deploy[2]
            wait_for(lambda: all(h.status is S.RUNNING for h in running), "two deploy tasks")
            say("$ kill -TERM <worker-b>")
            demo.workers["worker-b"].send_signal(signal.SIGTERM)
            wait_for(
                lambda: any("drain" in line for line in demo.worker_lines["worker-b"]),
                "worker-b to start draining",
            )
            upload_b.write_text("id,amount\n2,20\n")  # the running tasks can finish now
            assert demo.workers["worker-b"].wait(timeout=60) == 0
            for handle in running:
                outcome = handle.wait(timeout=60)
                assert outcome.ok, (handle.task_id, outcome.status)
                assert outcome.snapshot.owner == "worker-b"
            assert behind.status is S.QUEUED  # a draining worker claims nothing more
            demo.start_worker("worker-b2", bucket_b)
            outcome = behind.wait(timeout=60)
            assert outcome.ok, (behind.task_id, outcome.status)
            assert outcome.snapshot.owner == "worker-b2"
            demo.run("history", running[0].task_id)
        finally:
            demo.stop_workers()
            store.close()
        for name in ("worker-b", "worker-a2", "worker-b2"):
            assert demo.workers[name].returncode == 0, (name, demo.worker_lines[name][-20:])
        say()
        say("demo finished: every outcome above was asserted")


if __name__ == "__main__":
    main()
