"""The README's one-command demo (``make demo``): a worker controlled from other processes.

What it shows, with the real ``chongming-task`` console script in real processes on
one SQLite file:

1. a worker daemon starts with the task module ``demo_tasks.py``;
2. tasks are submitted to it from other processes;
3. ``ps`` lists them; one is paused, resumed, and another stopped, each from a
   separate process; ``status`` and ``history`` show what happened and who did it;
4. the worker is shut down with SIGTERM and reports what it stopped.

Every command and its output is printed; every outcome is asserted. Runs in about
ten seconds.
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

HERE = Path(__file__).resolve().parent
TASKS = HERE / "demo_tasks.py"
SHOWN_TASKS = "examples/demo_tasks.py"  # how the commands read from the repository root
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


class Demo:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.db = "demo.db"
        self.env = clean_env()

    def run(self, *args: str, expect: int = 0, show: bool = True) -> str:
        """Run one CLI command in its own process, print it and its output."""
        argv = [*cli(), "--db", self.db, *args]
        if show:
            shown = [SHOWN_TASKS if arg == str(TASKS) else arg for arg in args]
            say(f"$ {shlex.join(['chongming-task', '--db', self.db, *shown])}")
        result = subprocess.run(
            argv,
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

    def status(self, task_id: str) -> str:
        document = json.loads(self.run("status", task_id, "--json", show=False))
        return str(document["task"]["status"]) if document["task"] else "submitted"

    def wait_for(self, task_id: str, *statuses: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            status = self.status(task_id)
            if status in statuses:
                return status
            assert time.monotonic() < deadline, f"{task_id} is {status}, wanted {statuses}"
            time.sleep(0.1)


def start_worker(demo: Demo) -> tuple[subprocess.Popen[str], list[str], threading.Event]:
    args = ["worker", "--tasks", str(TASKS), "--max-parallel", "4", "--owner", "demo-worker"]
    shown = shlex.join([SHOWN_TASKS if arg == str(TASKS) else arg for arg in args])
    say(f"$ chongming-task --db {demo.db} {shown} &   # a daemon, in the background")
    process = subprocess.Popen(
        [*cli(), "--db", demo.db, *args],
        cwd=demo.workdir,
        env=demo.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip())
            say(f"  [worker] {line.rstrip()}")
            if "ready; stop with" in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    return process, lines, ready


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="chongming-demo-") as tmp:
        demo = Demo(Path(tmp))
        say("== the task definitions a worker will accept (names, never code)")
        demo.run("tasks", "--tasks", str(TASKS))

        say("== 1. start a worker daemon on a SQLite file")
        worker, worker_lines, ready = start_worker(demo)
        try:
            assert ready.wait(30), "the worker did not become ready"
            say()
            say("== 2. submit tasks from other processes (each prints the task id)")
            tasks = str(TASKS)
            demo.run(
                "submit",
                "crawl",
                "--tasks",
                tasks,
                "--task-id",
                "crawl-a",
                "--arg",
                "site=example.org",
            )
            demo.run(
                "submit",
                "crawl",
                "--tasks",
                tasks,
                "--task-id",
                "crawl-b",
                "--arg",
                "site=example.com",
                "--arg",
                "pages=5000",
            )
            demo.run("submit", "count", "--tasks", tasks, "--task-id", "count-1", "--arg", "n=20")
            demo.run(
                "submit",
                "fail",
                "--tasks",
                tasks,
                "--task-id",
                "fail-1",
                "--arg",
                "message=bad input",
            )
            demo.wait_for("crawl-a", "running")
            demo.wait_for("crawl-b", "running")
            demo.wait_for("fail-1", "failed")

            say("== 3. watch and control them from a second process")
            demo.run("ps")
            demo.run("pause", "crawl-a", "--wait", "10")
            assert demo.status("crawl-a") == "paused"
            demo.run("status", "crawl-a")
            demo.run("resume", "crawl-a", "--wait", "10")
            demo.run(
                "stop", "crawl-b", "--reason", "demo: stopped from a second process", "--wait", "10"
            )
            assert demo.status("crawl-b") == "stopped"
            demo.run("status", "fail-1")
            demo.run("history", "crawl-b")
            demo.wait_for("count-1", "succeeded")
            say("-- `submit --wait` returns the task's result as the exit code (0 here)")
            demo.run(
                "submit",
                "count",
                "--tasks",
                tasks,
                "--task-id",
                "count-2",
                "--arg",
                "n=5",
                "--wait",
            )
            demo.run("stats")
        finally:
            say("== 4. shut the worker down cleanly with SIGTERM")
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=30)
            time.sleep(0.2)  # let the reader thread print the last lines
        assert code == 0, f"the worker exited {code}"
        assert any("crawl-a" in line and "-> stopped" in line for line in worker_lines), (
            "the worker did not report stopping crawl-a"
        )
        say()
        demo.run("ps")
        final = json.loads(demo.run("ps", "--json", show=False))
        statuses = {
            task["task_id"]: task["status"]
            for task in final["tasks"]
            if not task["metadata"].get("schedule")  # a yearly firing could happen to land
        }
        assert statuses == {
            "crawl-a": "stopped",
            "crawl-b": "stopped",
            "count-1": "succeeded",
            "fail-1": "failed",
            "count-2": "succeeded",
        }, statuses
        say("demo finished: every outcome above was asserted")


if __name__ == "__main__":
    main()
