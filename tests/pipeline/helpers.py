"""Small assertions shared by the end-to-end pipeline tests."""

from __future__ import annotations

from chongming_task.controller import Controller

ROOT_PATH = ["pending", "queued", "starting", "running", "succeeded"]
NODE_PATH = ["pending", "blocked", "queued", "starting", "running", "succeeded"]


def path(controller: Controller, task_id: str) -> list[str]:
    """A task's whole trajectory as status values, from the controller's history."""
    return [t.to_status.value for t in controller.history(task_id)]
