"""The long-lived worker.

A worker is what users of Celery, Huey or RQ expect to leave running under systemd:
it reconciles at start (§8.11), claims the tasks other processes enqueue in the
store's work queue, serves stop/pause/resume for the tasks it holds, fires schedules when a
scheduler is attached, and on SIGTERM stops what it holds within a deadline and
reports what it stopped. ``chongming-task worker`` is a thin shell around
:class:`Worker`; Python code can run one just the same.
"""

from __future__ import annotations

from chongming_task.worker._daemon import Worker
from chongming_task.worker._logtail import LogTail, stored_tail
from chongming_task.worker._report import ShutdownReport, StoppedTask

__all__ = ["LogTail", "ShutdownReport", "StoppedTask", "Worker", "stored_tail"]
