"""Dashboard render times over a large store (issue 23's performance targets).

Seeds a store with ``--tasks`` tasks (default 1,000,000; ``--quick``: 20,000) of mixed
statuses, buckets and tags, then renders each page ``--rounds`` times through the
ASGI app in process (Starlette's TestClient, so what is timed is the server's work
plus a negligible in-process transport) and prints p50/p95 per page against the
targets: tasks page <= 150 ms p50, overview <= 100 ms p50.

The live view's cost does not grow with clients: one shared poller reads the
fingerprint once per interval however many browsers listen. The script reports that
read's time and the share of one CPU it takes at the default 1 s interval.

    python bench/dashboard_bench.py --quick
    python bench/dashboard_bench.py --tasks 1000000 --db postgres --dsn postgresql://...
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from chongming_task.model import Failure, FailureKind, TaskSnapshot  # noqa: E402
from chongming_task.states import TaskStatus  # noqa: E402
from chongming_task.stores.base import TaskStore  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
TARGETS_MS = {"tasks": 150.0, "overview": 100.0}
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


def open_store(args: argparse.Namespace, workdir: Path) -> TaskStore:
    if args.db == "postgres":
        from chongming_task.stores.postgres import PostgresTaskStore

        if not args.dsn:
            raise SystemExit("--db postgres needs --dsn")
        return PostgresTaskStore(args.dsn)
    from chongming_task.stores.sqlite import SqliteTaskStore

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
    args = parser.parse_args(argv)
    count = args.tasks or (20_000 if args.quick else 1_000_000)
    rounds = args.rounds or (5 if args.quick else 30)

    from starlette.testclient import TestClient

    from chongming_task.web import create_app
    from chongming_task.web.views import FULL_EVERY, Dashboard

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
            }
            results: dict[str, Any] = {"task_count": count, "db": args.db, "rounds": rounds}
            with TestClient(app) as client:
                first = client.get(
                    "/api/tasks", headers={"Authorization": f"Bearer {TOKEN}"}
                ).json()
                pages["tasks, page 2"] = f"/tasks?cursor={first['next_cursor']}"
                for label, path in pages.items():
                    results[label] = timed(client, path, rounds)
            data = Dashboard(store, clock=store.clock)
            calls = FULL_EVERY * max(2, rounds // FULL_EVERY)  # whole cycles: an honest mean
            begin = time.perf_counter()
            for _ in range(calls):
                data.fingerprint()
            live_ms = (time.perf_counter() - begin) * 1000 / calls
            results["live poll"] = {"mean_ms": live_ms, "cpu_share_at_1s": live_ms / 1000}
        finally:
            store.close()

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
    results["targets_met"] = all(verdicts)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
