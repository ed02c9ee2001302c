"""APScheduler 3 with the W3 jobs: a 1 s interval and a per-second cron.

``BackgroundScheduler`` with its default thread-pool executor and in-memory job store
is what a user of APScheduler 3 runs in-process; it claims nothing in a shared store,
so it has no exactly-once guarantee across processes (ours has, and pays for it).
Both jobs are aligned on whole seconds, so a body that starts at wall time ``t`` was
scheduled for the whole second nearest below it (APScheduler never fires early).
"""

from __future__ import annotations

import datetime as dt
import math
import threading
import time

from harness.core import Unavailable


def aps_version() -> str | None:
    """Installed APScheduler version, or None."""
    try:
        from importlib.metadata import version

        return version("apscheduler")
    except Exception:
        return None


def measure_lateness(seconds: float) -> dict[str, list[float]]:
    """Run both jobs for ``seconds`` from the next whole second; lateness samples in s."""
    try:
        from apscheduler.schedulers.background import BackgroundScheduler
    except ImportError as exc:
        raise Unavailable(f"apscheduler<4 not installed ({exc}); pip install '.[bench]'") from exc

    starts: dict[str, list[float]] = {"interval": [], "cron": []}
    lock = threading.Lock()

    def body(kind: str) -> None:
        now = time.time()
        with lock:
            starts[kind].append(now)

    begin = math.floor(time.time()) + 1.0
    end = begin + seconds
    start_date = dt.datetime.fromtimestamp(begin, dt.UTC)
    end_date = dt.datetime.fromtimestamp(end - 0.5, dt.UTC)
    scheduler = BackgroundScheduler(timezone=dt.UTC)
    scheduler.add_job(
        body,
        "interval",
        seconds=1,
        start_date=start_date,
        end_date=end_date,
        args=["interval"],
        misfire_grace_time=5,
    )
    scheduler.add_job(
        body,
        "cron",
        second="*",
        start_date=start_date,
        end_date=end_date,
        args=["cron"],
        misfire_grace_time=5,
    )
    scheduler.start()
    try:
        time.sleep(max(0.0, end - time.time()) + 0.3)
    finally:
        scheduler.shutdown(wait=True)
    return {
        kind: [t - math.floor(t) for t in times if begin <= t < end + 1]
        for kind, times in starts.items()
    }
