"""The long-lived worker and the submission protocol that feeds it.

A worker is what users of Celery, Huey or RQ expect to leave running under systemd:
it reconciles at start (§8.11), takes tasks that other processes submit through the
store, serves stop/pause/resume for the tasks it holds, fires schedules when a
scheduler is attached, and on SIGTERM stops what it holds within a deadline and
reports what it stopped. ``chongming-task worker`` is a thin shell around
:class:`Worker`; Python code can run one just the same.
"""

from __future__ import annotations

from chongming_task.worker._daemon import Worker
from chongming_task.worker._logtail import LogTail, stored_tail
from chongming_task.worker._report import ShutdownReport, StoppedTask
from chongming_task.worker._submission import (
    SUBMIT_ACTION,
    Submission,
    describe_submission,
    find_submission,
    submission_command_id,
    submit_options,
)

__all__ = [
    "SUBMIT_ACTION",
    "LogTail",
    "ShutdownReport",
    "StoppedTask",
    "Submission",
    "Worker",
    "describe_submission",
    "find_submission",
    "stored_tail",
    "submission_command_id",
    "submit_options",
]
