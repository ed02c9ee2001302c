"""The public members of ``Controller`` and ``TaskRun``, pinned: plumbing stays out.

What the guide and docs/ show is public; what only the library's own layers call sits
behind ``Controller._internal`` (typed by ``ControllerInternals``) or is underscored
on ``TaskRun``. Adding a public member is a decision made here.
"""

from __future__ import annotations

import inspect

from chongming_task import Controller, TaskRun
from chongming_task.controller._internal import ControllerInternals

CONTROLLER_MEMBERS = [
    "active_count",
    "active_in_bucket",
    "bucket_counts",
    "bucket_policy",
    "clock",
    "close",
    "closed",
    "concurrency",
    "definitions",
    "explain",
    "get",
    "history",
    "keep_finished",
    "lease_ttl",
    "list_tasks",
    "max_parallel_per_bucket",
    "owned_buckets",
    "owner",
    "owns_all_buckets",
    "owns_bucket",
    "pause",
    "pending_writes",
    "persist_failure_count",
    "persist_failures",
    "prune",
    "queued_count",
    "reconcile",
    "register",
    "register_all",
    "register_module",
    "registry",
    "resume",
    "run",
    "runs",
    "stats",
    "stop",
    "stop_all",
    "store",
    "submit",
    "submit_many",
    "submit_pipeline",
    "subscribe",
    "subscribe_commands",
    "subscriber_errors",
    "task_names",
    "wait",
    "wait_all",
    "with_options",
]

TASKRUN_MEMBERS = [
    "add_done_callback",
    "add_listener",
    "block",
    "cancel",
    "done",
    "enqueue",
    "executor",
    "hand_back",
    "handed_back",
    "logs",
    "machine",
    "name",
    "outcome",
    "pause",
    "release",
    "resume",
    "skip",
    "snapshot",
    "start",
    "status",
    "stop",
    "task_id",
    "transitions",
    "wait",
]


def _public(obj: object) -> list[str]:
    return sorted(name for name in dir(obj) if not name.startswith("_"))


def test_the_controller_surface_is_exactly_the_pinned_one() -> None:
    with Controller() as controller:
        assert _public(controller) == CONTROLLER_MEMBERS


def test_the_task_run_surface_is_exactly_the_pinned_one() -> None:
    assert _public(TaskRun) == TASKRUN_MEMBERS


def test_the_plumbing_is_behind_the_internal_protocol() -> None:
    wanted = {
        name
        for name, _ in inspect.getmembers(ControllerInternals, inspect.isfunction)
        if not name.startswith("_")
    }
    assert wanted == {
        *("run_claimed", "release", "release_many", "skip", "cancel"),
        *("hold_queue", "let_go"),  # a draining worker (docs/deployment.md)
    }
    with Controller() as controller:
        internal = controller._internal
        for name in wanted:
            assert callable(getattr(internal, name))
            assert not hasattr(controller, name)
