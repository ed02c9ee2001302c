"""The web dashboard demo (``make dashboard-demo``): a worker and the dashboard on SQLite.

1. a worker daemon starts with ``demo_tasks.py`` (and its ``SCHEDULES``);
2. a few tasks are submitted from other processes: long crawls, a counter, a failure;
3. ``chongming-task dashboard`` serves the store; the URL and the token are printed.

With ``--serve`` (what ``make dashboard-demo`` passes) it keeps running until Ctrl-C:
open the URL, log in with the token, pause and stop the crawls. Without it (as the
examples test runs it) it checks the dashboard answers, with the token and not without,
then shuts everything down.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = HERE / "demo_tasks.py"


def cli() -> list[str]:
    script = Path(sys.executable).with_name("chongming-task")
    return [str(script)] if script.exists() else [sys.executable, "-m", "chongming_task.cli"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(
    argv: list[str], env: dict[str, str], cwd: Path, tag: str
) -> tuple[subprocess.Popen[str], threading.Event]:
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            print(f"  [{tag}] {line.rstrip()}", flush=True)
            # The worker logs "<time> INFO    ready; ..." on stderr (merged here).
            text = line.split(None, 2)[-1] if line[:1].isdigit() else line
            if text.startswith(("ready", "dashboard of")):
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    return process, ready


def get(url: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_until_up(url: str, token: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            get(url, token)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="keep serving until Ctrl-C")
    parser.add_argument("--port", type=int, default=0, help="dashboard port (default: free)")
    parser.add_argument("--dir", help="where the SQLite file lives (default: a temp dir)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="chongming-dashboard-") as tmp:
        workdir = Path(args.dir or tmp).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        db = str(workdir / "dashboard-demo.db")
        token = secrets.token_urlsafe(24)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
        env["NO_COLOR"] = "1"
        base = [*cli(), "--db", db]
        print(f"== a worker on {db}", flush=True)
        worker, worker_ready = start(
            [
                *base,
                "worker",
                "--tasks",
                str(TASKS),
                "--max-parallel",
                "4",
                "--owner",
                "demo-worker",
            ],
            env,
            workdir,
            "worker",
        )
        processes = [worker]
        try:
            assert worker_ready.wait(30), "the worker did not become ready"
            print("== tasks submitted from other processes", flush=True)
            for task_args in (
                [
                    "crawl",
                    "--task-id",
                    "crawl-a",
                    "--arg",
                    "site=example.org",
                    "--arg",
                    "pages=100000",
                ],
                [
                    "crawl",
                    "--task-id",
                    "crawl-b",
                    "--arg",
                    "site=example.com",
                    "--arg",
                    "pages=100000",
                ],
                ["count", "--task-id", "count-1", "--arg", "n=5"],
                ["fail", "--task-id", "fail-1", "--arg", "message=bad input (password=hunter2)"],
            ):
                subprocess.run(
                    [*base, "submit", task_args[0], "--tasks", str(TASKS), *task_args[1:]],
                    cwd=workdir,
                    env=env,
                    check=True,
                    capture_output=True,
                )
            port = args.port or free_port()
            dash_env = {**env, "CHONGMING_DASHBOARD_TOKEN": token}
            dashboard, dashboard_ready = start(
                [*base, "dashboard", "--port", str(port), "--user", "demo-operator"],
                dash_env,
                workdir,
                "dashboard",
            )
            processes.append(dashboard)
            assert dashboard_ready.wait(30), "the dashboard did not start"
            url = f"http://127.0.0.1:{port}/"
            wait_until_up(url + "api/overview", token)
            print(flush=True)
            print(f"dashboard: {url}", flush=True)
            print(f"token:     {token}", flush=True)
            print(flush=True)

            status, _ = get(url + "api/overview", None)
            assert status == 401, f"without a token the dashboard answered {status}"
            status, body = get(url + "api/overview", token)
            assert status == 200, body
            overview = json.loads(body)
            print(f"overview: {overview['total']} tasks, {overview['counts']}", flush=True)
            assert overview["total"] == 4, overview
            if args.serve:
                print("serving until Ctrl-C", flush=True)
                try:
                    dashboard.wait()
                except KeyboardInterrupt:
                    print("\nstopping", flush=True)
        finally:
            for process in reversed(processes):
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in reversed(processes):
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
    print("done", flush=True)


if __name__ == "__main__":
    main()
