"""1,000 concurrent ``async def`` tasks on one worker: wall time, peak threads, peak RSS.

Run ``python bench/async_bench.py`` (SQLite and, when ``CHONGMING_TEST_POSTGRES`` or
``--postgres DSN`` reaches a server, PostgreSQL; ``--store sqlite`` for one). Per
store:

1. one ``chongming-task worker --max-parallel <tasks>`` process is started, and the
   bench waits for its first heartbeat in the store's worker registry (its intake
   polls from then on; the start-up is reported apart);
2. ``--tasks`` (1,000) ``nap`` tasks are enqueued at once (``Client.enqueue_many``):
   each awaits ``asyncio.sleep(--sleep)`` (1 s) between two ``await
   ctx.acheckpoint()`` (``bench/peers/queue_tasks.py``); every task takes a slot,
   and all of them await together on the worker's one event loop;
3. the bench counts the finished tasks every 50 ms (``count_by_status``) until every
   task is ``succeeded``, and samples the worker's ``/proc/PID/status`` every 10 ms
   throughout.

Figures: **wall**, from the enqueue to the poll that saw the last task succeeded
(claims, three stored transitions per task, the awaits, and the polling: what a
client waits for); **window**, from the first task's start to the last one's end as
stored; **start-up**, from the worker's spawn to its first heartbeat; **peak threads**,
the most ``Threads:`` sampled; **peak RSS**, the worker's ``VmHWM`` (the kernel's
high-water mark of its resident memory, read before it is stopped). The bounds of
issue 36 are checked: wall < 5 s, threads <= 24, RSS <= 200 MB; the exit status is 1
when one is missed (``--no-check``: report only).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "src"))

from harness import pg  # noqa: E402
from harness.core import Unavailable  # noqa: E402

from chongming_task import Client, TaskStatus  # noqa: E402
from chongming_task.stores._base import QueueStore, TaskStore  # noqa: E402

TASKS = str(BENCH / "peers" / "queue_tasks.py")
#: Issue 36's bounds for 1,000 tasks that each await 1 s.
MAX_WALL = 5.0
MAX_THREADS = 24
MAX_RSS_MB = 200.0
#: Seconds between two samples of the worker's /proc status (threads, memory).
POLL = 0.01
#: Seconds between two counts of the finished tasks: a count is a query the store's
#: server answers while it serves the worker, so it is not made every sample.
COUNT_EVERY = 0.05
DEADLINE = 120.0


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(BENCH)])
    return env


def _open(db: str) -> TaskStore:
    if db.startswith(("postgres://", "postgresql://")):
        from chongming_task import PostgresTaskStore

        return PostgresTaskStore(db)
    from chongming_task import SqliteTaskStore

    return SqliteTaskStore(db)


def _proc_status(pid: int) -> dict[str, str]:
    """``/proc/PID/status`` as a mapping (empty once the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


@contextlib.contextmanager
def _worker(db: str, slots: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    command = [*(sys.executable, "-m", "chongming_task.cli", "--db", db), "worker"]
    command += ["--tasks", TASKS, "--max-parallel", str(slots), "--log-level", "warning"]
    with log.open("ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=_env())
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def measure(db: str, tasks: int, seconds: float, log: Path) -> dict[str, Any]:
    """One run on store ``db``: the figures of the module docstring."""
    with _open(db) as store:
        assert isinstance(store, QueueStore)
        client = Client(store)
        spawned = time.monotonic()
        with _worker(db, tasks, log) as proc:
            peak_threads = rss_kb = 0

            def sample() -> None:
                nonlocal peak_threads, rss_kb
                status = _proc_status(proc.pid)
                if "Threads" in status:
                    peak_threads = max(peak_threads, int(status["Threads"]))
                    rss_kb = int(status["VmHWM"].split()[0])
                if proc.poll() is not None:
                    raise RuntimeError(f"the worker exited ({proc.returncode}); see {log}")

            while not store.list_workers():  # its first heartbeat: the intake polls
                sample()
                if time.monotonic() - spawned > DEADLINE:
                    raise TimeoutError(f"the worker was not ready after {DEADLINE:g} s")
                time.sleep(POLL)
            ready = time.monotonic()
            done = 0
            for start in range(0, tasks, 500):
                client.enqueue_many("nap", [(seconds,)] * min(500, tasks - start))
            counted = 0.0
            while True:
                sample()
                if time.monotonic() - counted >= COUNT_EVERY:
                    counted = time.monotonic()
                    done = store.count_by_status().get(TaskStatus.SUCCEEDED, 0)
                    if done >= tasks:
                        wall = time.monotonic() - ready
                        break
                if time.monotonic() - ready > DEADLINE:
                    raise TimeoutError(f"{done}/{tasks} tasks succeeded after {DEADLINE:g} s")
                time.sleep(POLL)
            sample()
        snapshots = store.query()
    first = min(s.first_started_at or s.started_at for s in snapshots)  # type: ignore[type-var]
    last = max(s.finished_at for s in snapshots)  # type: ignore[type-var]
    return {
        "tasks": tasks,
        "sleep": seconds,
        "startup_s": round(ready - spawned, 3),
        "wall_s": round(wall, 3),
        "window_s": round((last - first).total_seconds(), 3),  # type: ignore[operator]
        "peak_threads": peak_threads,
        "peak_rss_mb": round(rss_kb / 1024, 1),
    }


def _verdict(figures: dict[str, Any]) -> list[str]:
    """The bounds a run missed (empty: all met)."""
    missed = []
    if figures["wall_s"] >= MAX_WALL:
        missed.append(f"wall {figures['wall_s']} s >= {MAX_WALL:g} s")
    if figures["peak_threads"] > MAX_THREADS:
        missed.append(f"{figures['peak_threads']} threads > {MAX_THREADS}")
    if figures["peak_rss_mb"] > MAX_RSS_MB:
        missed.append(f"RSS {figures['peak_rss_mb']} MB > {MAX_RSS_MB:g} MB")
    return missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--postgres", default=None, help="DSN (default CHONGMING_TEST_POSTGRES)")
    parser.add_argument("--tasks", type=int, default=1000, help="concurrent tasks (1000)")
    parser.add_argument("--sleep", type=float, default=1.0, help="seconds each awaits (1)")
    parser.add_argument("--no-check", action="store_true", help="report, do not judge")
    args = parser.parse_args(argv)
    stores = ("sqlite", "postgres") if args.store == "both" else (args.store,)
    failed = False
    with tempfile.TemporaryDirectory(prefix="async-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for kind in stores:
            log = tmp / f"worker-{kind}.log"
            try:
                if kind == "sqlite":
                    figures = measure(str(tmp / "bench.db"), args.tasks, args.sleep, log)
                else:
                    base = args.postgres or pg.base_dsn()
                    pg.check(base)
                    with pg.fresh_schema(base, prefix="ct_async") as dsn:
                        figures = measure(dsn, args.tasks, args.sleep, log)
            except Unavailable as exc:
                print(f"{kind}: skipped ({exc})")
                failed = failed or args.store == "postgres"
                continue
            except (RuntimeError, TimeoutError) as exc:
                print(f"{kind}: failed: {exc}\n{log.read_text()[-3000:]}")
                failed = True
                continue
            missed = [] if args.no_check else _verdict(figures)
            verdict = "ok" if not missed else "MISSED " + "; ".join(missed)
            print(
                f"{kind}: {figures['tasks']} tasks awaiting {figures['sleep']:g} s on one worker: "
                f"wall {figures['wall_s']:.2f} s (store window {figures['window_s']:.2f} s, "
                f"worker start-up {figures['startup_s']:.2f} s before), "
                f"peak threads {figures['peak_threads']}, peak RSS {figures['peak_rss_mb']:.1f} MB"
                f" [{verdict}]"
            )
            failed = failed or bool(missed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
