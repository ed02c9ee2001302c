"""Dashboard render times over a large store (issue 23's performance targets).

Seeds a store with ``--tasks`` tasks (default 1,000,000; ``--quick``: 20,000) of mixed
statuses, buckets and tags, then renders each page ``--rounds`` times through the
ASGI app in process (Starlette's TestClient, so what is timed is the server's work
plus a negligible in-process transport) and prints p50/p95 per page against the
targets: tasks page <= 150 ms p50, overview <= 100 ms p50.

The live view's cost does not grow with clients: one shared poller reads the
fingerprint once per interval however many browsers listen. The script reports that
read's time and the share of one CPU it takes at the default 1 s interval.

Then it measures the live claim directly (SQLite): it starts the real
``chongming-task dashboard`` process over the same store, connects ``--clients`` (20)
Server-Sent-Event streams (``/events``, what every open page holds) and reads that
process's CPU time (user + system, from ``/proc``) over ``--live-seconds`` of wall
time, with no client first (the idle server) and then with the clients connected.
Target: the dashboard with 20 live clients adds at most 5% CPU to an idle worker host,
checked against 5% of one CPU (the stricter reading; the host's share is that divided
by its core count, also printed). ``--live-seconds 0`` skips it.

The time-range filter (``created_after``/``created_before``) and a deep page (the
keyset cursor) are timed with the other pages.

    python bench/dashboard_bench.py --quick
    python bench/dashboard_bench.py --tasks 1000000 --db-file /tmp/dash-1m.db
    python bench/dashboard_bench.py --tasks 1000000 --db postgres --dsn postgresql://...
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from chongming_task._model import Failure, FailureKind, TaskSnapshot  # noqa: E402
from chongming_task.states import TaskStatus  # noqa: E402
from chongming_task.stores._base import TaskStore  # noqa: E402

TOKEN = "bench-token-0123456789abcdefGHIJKL"
TARGETS_MS = {"tasks": 150.0, "overview": 100.0}
#: The live target: CPU the dashboard process takes with ``--clients`` streams open,
#: as a share of one CPU.
LIVE_CPU_TARGET = 0.05
MIX = (
    [TaskStatus.SUCCEEDED] * 90
    + [TaskStatus.FAILED] * 4
    + [TaskStatus.STOPPED] * 2
    + [TaskStatus.QUEUED] * 3
    + [TaskStatus.LOST]
)


def seed(store: TaskStore, count: int, batch: int = 20_000) -> float:
    start = time.perf_counter()
    base = datetime(2026, 1, 1, tzinfo=UTC)
    made = 0
    while made < count:
        rows = []
        for i in range(made, min(count, made + batch)):
            status = MIX[i % len(MIX)]
            at = base + timedelta(milliseconds=i)
            finished = at + timedelta(seconds=1) if status.is_terminal else None
            rows.append(
                TaskSnapshot(
                    task_id=f"task-{i:08d}",
                    name=("import.orders", "mail.send", "report.daily")[i % 3],
                    status=status,
                    status_version=4 if status.is_terminal else 1,
                    created_at=at,
                    updated_at=finished or at,
                    queued_at=at,
                    started_at=at if status.is_terminal else None,
                    finished_at=finished,
                    tags=frozenset({("gpu", "io", "cpu")[i % 3]}),
                    bucket=i % 64,
                    owner=f"worker-{i % 8}",
                    failure=Failure(kind=FailureKind.EXCEPTION, message="boom")
                    if status is TaskStatus.FAILED
                    else None,
                )
            )
        store.create_many(rows)
        made += len(rows)
    return time.perf_counter() - start


def timed(client: Any, path: str, rounds: int) -> dict[str, float]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    client.get(path, headers=headers)  # warm: templates compiled, statements prepared
    samples = []
    for _ in range(rounds):
        begin = time.perf_counter()
        response = client.get(path, headers=headers)
        samples.append((time.perf_counter() - begin) * 1000)
        assert response.status_code == 200, (path, response.status_code, response.text[:300])
    samples.sort()
    return {
        "p50_ms": statistics.median(samples),
        "p95_ms": samples[min(len(samples) - 1, int(len(samples) * 0.95))],
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(port: int, path: str, timeout: float = 5.0) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        request = (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(request.encode())
        status = conn.recv(64).split(b" ", 2)[1]
        return int(status)


class _Stream:
    """One open ``/events`` stream, drained by a thread (as a browser keeps reading)."""

    def __init__(self, port: int) -> None:
        self.conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn.settimeout(None)  # a quiet stream sends a tick every 15 s: keep waiting
        request = (
            "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\n"
        )
        self.conn.sendall(request.encode())
        self.received = b""
        self.hello = threading.Event()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = self.conn.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            self.received += chunk
            if b"event: hello" in self.received:
                self.hello.set()

    def close(self) -> None:
        self.conn.close()


def live_clients_cpu(db_file: str, clients: int, seconds: float) -> dict[str, Any]:
    """CPU share of a real dashboard process, idle and with ``clients`` live streams."""
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "CHONGMING_DASHBOARD_TOKEN": TOKEN,
    }
    argv = [sys.executable, "-m", "chongming_task.cli", "--db", db_file, "dashboard"]
    errors = Path(db_file).with_suffix(".dashboard.err")
    with errors.open("wb") as sink:
        server = subprocess.Popen(
            [*argv, "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=sink
        )
    streams: list[_Stream] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if _get(port, "/api/overview") == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the dashboard did not start: {errors.read_text()!r}")
            time.sleep(0.1)  # waiting for a child process to listen (bench only)

        def window() -> float:
            cpu0, wall0 = _cpu_seconds(server.pid), time.monotonic()
            time.sleep(seconds)  # the measured window of wall time
            return (_cpu_seconds(server.pid) - cpu0) / (time.monotonic() - wall0)

        idle = window()
        streams = [_Stream(port) for _ in range(clients)]
        for stream in streams:
            if not stream.hello.wait(30):
                raise SystemExit("a live stream did not open")
        time.sleep(2.0)  # let the shared poller start before measuring (bench only)
        live = window()
        alive = sum(1 for s in streams if s.thread.is_alive())
    finally:
        for stream in streams:
            stream.close()
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    cores = os.cpu_count() or 1
    return {
        "clients": clients,
        "streams_open_at_end": alive,
        "seconds": seconds,
        "idle_cpu_share": idle,
        "cpu_share": live,
        "host_share": live / cores,
        "cores": cores,
        "target_met": live <= LIVE_CPU_TARGET and alive == clients,
    }


def open_store(args: argparse.Namespace, workdir: Path) -> TaskStore:
    if args.db == "postgres":
        from chongming_task.stores._postgres import PostgresTaskStore

        if not args.dsn:
            raise SystemExit("--db postgres needs --dsn")
        return PostgresTaskStore(args.dsn)
    from chongming_task.stores._sqlite import SqliteTaskStore

    return SqliteTaskStore(args.db_file or str(workdir / "dashboard-bench.db"))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=None, help="tasks to seed (1,000,000)")
    parser.add_argument("--quick", action="store_true", help="20,000 tasks, 5 rounds")
    parser.add_argument("--rounds", type=int, default=None, help="renders per page (30)")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--dsn", help="PostgreSQL URL (an empty schema) for --db postgres")
    parser.add_argument(
        "--db-file",
        metavar="PATH",
        help="SQLite file to keep between runs (seeded only while it holds no task)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results here")
    parser.add_argument("--clients", type=int, default=20, help="live streams (20)")
    parser.add_argument(
        "--live-seconds",
        type=float,
        default=None,
        help="wall seconds each live CPU window lasts (30; --quick 5; 0 skips)",
    )
    args = parser.parse_args(argv)
    live_seconds = args.live_seconds if args.live_seconds is not None else (5 if args.quick else 30)
    count = args.tasks or (20_000 if args.quick else 1_000_000)
    rounds = args.rounds or (5 if args.quick else 30)

    from starlette.testclient import TestClient

    from chongming_task.web import create_app
    from chongming_task.web._views import FULL_EVERY, Dashboard

    with tempfile.TemporaryDirectory(prefix="dashboard-bench-") as tmp:
        store = open_store(args, Path(tmp))
        try:
            present = sum(store.count_by_status().values())
            if present:
                count = present
                print(f"reusing {count:,} tasks in {args.db_file}", flush=True)
            else:
                seconds = seed(store, count)
                print(f"seeded {count:,} tasks into {args.db} in {seconds:.1f}s", flush=True)
            app = create_app(store, token=TOKEN)
            pages = {
                "overview": "/",
                "overview (JSON)": "/api/overview",
                "tasks": "/tasks",
                "tasks, status=failed": "/tasks?status=failed",
                "tasks, name prefix + tag": "/tasks?name=mail.&tag=io",
                "tasks, bucket": "/tasks?bucket=7",
                "tasks (JSON)": "/api/tasks",
                "tasks, time range": "/tasks?created_after=2026-01-01T00:00:05Z"
                "&created_before=2026-01-01T00:00:15Z",
                "tasks, time range + status": "/tasks?status=failed"
                "&created_after=2026-01-01T00:00:05Z",
            }
            results: dict[str, Any] = {"task_count": count, "db": args.db, "rounds": rounds}
            with TestClient(app) as client:
                first = client.get(
                    "/api/tasks", headers={"Authorization": f"Bearer {TOKEN}"}
                ).json()
                pages["tasks, page 2"] = f"/tasks?cursor={first['next_cursor']}"
                deep = None
                for _ in range(20):  # 20 pages down: a keyset read, not an offset
                    deep = client.get(
                        "/api/tasks",
                        params={"cursor": deep} if deep else {},
                        headers={"Authorization": f"Bearer {TOKEN}"},
                    ).json()["next_cursor"]
                    if deep is None:
                        break
                if deep is not None:
                    pages["tasks, page 21"] = f"/tasks?cursor={deep}"
                for label, path in pages.items():
                    results[label] = timed(client, path, rounds)
            data = Dashboard(store, clock=store.clock)
            calls = FULL_EVERY * max(2, rounds // FULL_EVERY)  # whole cycles: an honest mean
            begin = time.perf_counter()
            for _ in range(calls):
                data.fingerprint()
            live_ms = (time.perf_counter() - begin) * 1000 / calls
            results["live poll"] = {"mean_ms": live_ms, "cpu_share_at_1s": live_ms / 1000}
            db_file = args.db_file or str(Path(tmp) / "dashboard-bench.db")
        finally:
            store.close()
        if live_seconds > 0 and args.db == "sqlite" and db_file:
            print(
                f"live: {args.clients} streams on a dashboard process, "
                f"{live_seconds:g}s windows...",
                flush=True,
            )
            results["live clients"] = live_clients_cpu(str(db_file), args.clients, live_seconds)

    print(f"\n{'page':28} {'p50 ms':>9} {'p95 ms':>9}  target")
    verdicts = []
    for label, value in results.items():
        if not isinstance(value, dict) or "p95_ms" not in value:
            continue
        target = TARGETS_MS.get(label)
        mark = ""
        if target is not None:
            ok = value["p50_ms"] <= target
            verdicts.append(ok)
            mark = f"<= {target:.0f} ms p50: {'ok' if ok else 'MISSED'}"
        print(f"{label:28} {value['p50_ms']:9.1f} {value['p95_ms']:9.1f}  {mark}")
    live = results["live poll"]
    print(
        f"\nlive poll (shared by every open page): {live['mean_ms']:.2f} ms mean, "
        f"{live['cpu_share_at_1s']:.1%} of one CPU at the default 1 s interval"
    )
    clients = results.get("live clients")
    if clients is not None:
        verdicts.append(clients["target_met"])
        print(
            f"dashboard process with {clients['clients']} live streams: "
            f"{clients['cpu_share']:.2%} of one CPU ({clients['host_share']:.2%} of this "
            f"{clients['cores']}-core host; {clients['idle_cpu_share']:.2%} with none) over "
            f"{clients['seconds']:g}s: <= {LIVE_CPU_TARGET:.0%} of one CPU: "
            f"{'ok' if clients['target_met'] else 'MISSED'}"
        )
    results["targets_met"] = all(verdicts)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
