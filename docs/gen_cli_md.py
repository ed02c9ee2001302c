"""Regenerate docs/cli.md: run every command of the walkthrough and capture its output.

    .venv/bin/python docs/gen_cli_md.py        # rewrites docs/cli.md (about 15 s)

The prose lives here as Markdown templates; every ``$ chongming-task ...`` block in
the result is real output of the installed console script, run against a fresh
SQLite file with the demo's task module (examples/demo_tasks.py). Timestamps, process
ids and host names therefore change from one regeneration to the next.
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

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "examples" / "demo_tasks.py"
SHOWN_TASKS = "examples/demo_tasks.py"
OUT = ROOT / "docs" / "cli.md"


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("chongming-task")
    return [str(script)] if script.exists() else [sys.executable, "-m", "chongming_task.cli"]


class Walkthrough:
    """Runs commands in a scratch directory and renders them as Markdown blocks."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
        self.env.update({"NO_COLOR": "1", "CHONGMING_OWNER": "alice"})

    def argv(self, args: list[str]) -> list[str]:
        return [*_cli(), *[str(TASKS) if a == SHOWN_TASKS else a for a in args]]

    def run(self, *args: str, expect: int = 0, note: str = "") -> tuple[str, str]:
        result = subprocess.run(
            self.argv(list(args)),
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == expect, (args, result.returncode, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        text = (result.stdout + result.stderr).rstrip()
        shown = f"$ chongming-task {shlex.join(args)}"
        if result.returncode:
            text += f"\n$ echo $?\n{result.returncode}"
        block = f"```console\n{shown}\n{text}\n```" + (f"\n{note}" if note else "")
        return block, result.stdout

    def quiet(self, *args: str) -> str:
        return subprocess.run(
            self.argv(list(args)),
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout

    def status(self, task_id: str) -> str:
        document = json.loads(self.quiet("--db", "tasks.db", "status", task_id, "--json"))
        return str(document["task"]["status"]) if document["task"] else "submitted"

    def wait_for(self, task_id: str, *statuses: str) -> None:
        deadline = time.monotonic() + 20
        while self.status(task_id) not in statuses:
            assert time.monotonic() < deadline, f"{task_id} never reached {statuses}"
            time.sleep(0.1)


def _worker(walk: Walkthrough) -> tuple[subprocess.Popen[str], list[str]]:
    args = [
        "--db",
        "tasks.db",
        "worker",
        "--tasks",
        SHOWN_TASKS,
        "--max-parallel",
        "4",
        "--owner",
        "worker-1",
    ]
    process = subprocess.Popen(
        walk.argv(args),
        cwd=walk.workdir,
        env=walk.env,
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
            if "ready; stop with" in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    assert ready.wait(30), "\n".join(lines)
    return process, lines


def generate() -> str:
    with tempfile.TemporaryDirectory(prefix="chongming-cli-doc-") as tmp:
        walk = Walkthrough(Path(tmp))
        db = ("--db", "tasks.db")
        t = ("--tasks", SHOWN_TASKS)
        blocks: dict[str, str] = {}
        blocks["help"], _ = walk.run("--help")
        blocks["tasks"], _ = walk.run("tasks", *t)
        blocks["run_ok"], _ = walk.run(
            *db, "run", "count", *t, "--arg", "n=5", "--task-id", "count-1"
        )
        blocks["run_fail"], _ = walk.run(
            *db, "run", "fail", *t, "--arg", "message=bad input", "--task-id", "fail-1", expect=3
        )
        blocks["run_json"], out = walk.run(
            *db,
            "run",
            "count",
            *t,
            "--arg",
            "n=2",
            "--json",
            "--task-id",
            "count-2",
            "--tag",
            "nightly",
            "--bucket-key",
            "tenant-A",
            "--priority",
            "5",
        )
        sample_task = json.loads(out)["task"]

        worker, worker_lines = _worker(walk)
        try:
            blocks["submit"], _ = walk.run(
                *db, "submit", "crawl", *t, "--task-id", "crawl-a", "--arg", "site=example.org"
            )
            walk.quiet(
                *db,
                "submit",
                "crawl",
                *t,
                "--task-id",
                "crawl-b",
                "--arg",
                "site=example.com",
                "--arg",
                "pages=5000",
            )
            walk.quiet(
                *db,
                "submit",
                "consume",
                *t,
                "--task-id",
                "orders-worker",
                "--arg",
                "source=kafka://orders",
            )
            for task_id in ("crawl-a", "crawl-b", "orders-worker"):
                walk.wait_for(task_id, "running")
            time.sleep(0.5)
            blocks["ps"], _ = walk.run(*db, "ps")
            blocks["ps_filter"], _ = walk.run(*db, "ps", "--status", "running", "--name", "crawl")
            blocks["ps_owner"], _ = walk.run(*db, "ps", "--owner", "worker-1", "--name", "crawl")
            blocks["pause"], _ = walk.run(*db, "pause", "crawl-a", "--reason", "disk almost full")
            walk.wait_for("crawl-a", "paused")
            blocks["status_paused"], _ = walk.run(*db, "status", "crawl-a")
            blocks["resume"], _ = walk.run(
                *db, "resume", "crawl-a", "--reason", "disk freed", "--wait", "10"
            )
            blocks["stop"], _ = walk.run(
                *db, "stop", "crawl-b", "--reason", "release window", "--wait", "10"
            )
            blocks["stop_graceful"], _ = walk.run(
                *db, "stop", "orders-worker", "--reason", "release window", "--wait", "10"
            )
            blocks["status_logs"], _ = walk.run(*db, "status", "orders-worker")
            blocks["history"], _ = walk.run(*db, "history", "crawl-b")
            blocks["submit_wait"], _ = walk.run(
                *db, "submit", "count", *t, "--arg", "n=3", "--wait"
            )
            blocks["schedules"], _ = walk.run(*db, "schedules")
            blocks["schedule_run"], _ = walk.run(
                *db, "schedule", "run", "new-year-report", "--reason", "rehearsal", "--wait", "20"
            )
            blocks["schedule_set"], _ = walk.run(
                *db, "schedule", "set", "new-year-report", "0 9 * * 1"
            )
            blocks["schedule_pause"], _ = walk.run(
                *db, "schedule", "pause", "new-year-report", "--reason", "holiday freeze"
            )
            blocks["schedule_show"], _ = walk.run(*db, "schedule", "show", "new-year-report")
            walk.quiet(*db, "schedule", "resume", "new-year-report")
            blocks["schedule_reset"], _ = walk.run(*db, "schedule", "reset", "new-year-report")
            blocks["health"], _ = walk.run(*db, "health")
            blocks["stats"], _ = walk.run(*db, "stats")
            blocks["buckets"], _ = walk.run(*db, "buckets")
            blocks["bucket_owners"], _ = walk.run(*db, "buckets", "--owners")
            blocks["reconcile"], _ = walk.run(*db, "reconcile", "--dry-run")
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=30)
            time.sleep(0.3)
        assert code == 0, "\n".join(worker_lines)
        blocks["worker"] = (
            "```console\n$ chongming-task --db tasks.db worker --tasks examples/demo_tasks.py "
            "--max-parallel 4 --owner worker-1\n" + "\n".join(worker_lines) + "\n```"
        )
        blocks["ps_after"], _ = walk.run(*db, "ps")
        blocks["pending"], _ = walk.run(*db, "submit", "count", *t, "--task-id", "later-1")
        blocks["status_pending"], _ = walk.run(*db, "status", "later-1")
        blocks["ps_pending"], _ = walk.run(*db, "ps", "--status", "queued")
        blocks["stop_pending"], _ = walk.run(*db, "stop", "later-1", "--reason", "not needed")
        blocks["submit_delay"], _ = walk.run(
            *db, "submit", "count", "--arg", "n=3", "--task-id", "nightly-1", "--delay", "2h"
        )
        blocks["retry"], _ = walk.run(*db, "retry", "later-1", "--reason", "needed after all")
        blocks["retry_filter"], _ = walk.run(*db, "retry", "--status", "stopped", "--dry-run")
        blocks["errors"] = "\n\n".join(
            walk.run(*args, expect=code)[0]
            for args, code in (
                ((*db, "status", "nosuch"), 1),
                ((*db, "run", "nosuch", *t), 1),
                ((*db, "run", "crawl", *t), 1),
                ((*db, "run", "count", *t, "--arg", "n"), 2),
                ((*db, "run", "count", *t, "--args-json", "{n: 5}"), 2),
                ((*db, "run", "count", "--tasks", "myapp.missing"), 1),
                ((*db, "--owned-buckets", "0-15,70", "ps"), 2),
                ((*db, "--owned-buckets", "0-15", "run", "count", *t), 1),
                ((*db, "stop", "count-1"), 1),
                ((*db, "resume", "crawl-a"), 1),
                ((*db, "retry", "fail-1"), 2),
                (("--db", "typo.db", "ps"), 1),
                (("--db", "postgresql://app@127.0.0.1:1/tasks", "ps"), 1),
            )
        )
        blocks["limits"] = "\n\n".join(
            walk.run(*args, expect=code)[0]
            for args, code in (
                ((*db, "limits", "set", "tenant:*", "--concurrency", "1"), 0),
                ((*db, "limits", "set", "mail", "--rate", "100/m"), 0),
                ((*db, "submit", "count", *t, "--concurrency-key", "tenant:acme"), 0),
                ((*db, "limits"), 0),
                ((*db, "limits", "set", "mail", "--rate", "100/d"), 2),
                ((*db, "limits", "delete", "mail"), 0),
            )
        )
        paused = [walk.run(*db, "queue", "pause", "--name", "count", "--reason", "deploy 42")[0]]
        block, out = walk.run(*db, "submit", "count", *t)
        paused += [block, walk.run(*db, "explain", out.strip())[0], walk.run(*db, "queue")[0]]
        paused.append(
            walk.run(*db, "queue", "pause", "--bucket", "64", "--reason", "x", expect=2)[0]
        )
        paused.append(walk.run(*db, "queue", "resume", "--name", "count")[0])
        blocks["queue_pause"] = "\n\n".join(paused)
        blocks["prune"], _ = walk.run(*db, "prune", "--keep-terminal", "5")
        blocks["task_json"] = "```json\n" + json.dumps(sample_task, indent=2) + "\n```"
    return TEMPLATE.format(**blocks)


TEMPLATE = (Path(__file__).resolve().parent / "cli.md.in").read_text(encoding="utf-8")


if __name__ == "__main__":
    OUT.write_text(generate(), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
