"""Every dashboard URL built from an id: the one place ids are put into paths.

An id is percent-encoded from its raw text as a single path segment (``/`` becomes
``%2F``, ``%`` becomes ``%25``, ``?`` ``%3F``, ``#`` ``%23``, spaces and non-ASCII
characters their UTF-8 escapes), so the URL names exactly that id: the page of task
``job%41`` is ``/tasks/job%2541``, never task ``jobA``, and ``a/../b`` stays one
segment a browser does not fold. Templates, htmx attributes (the live refresh) and
redirects all use these functions.
"""

from __future__ import annotations

from urllib.parse import quote

import jinja2

__all__ = ["install", "pipeline_url", "schedule_url", "segment", "task_url", "worker_url"]


def segment(value: str) -> str:
    """``value`` as one percent-encoded path segment (nothing left unescaped but
    unreserved characters)."""
    return quote(value, safe="")


def _url(base: str, kind: str, ident: str, action: str | None) -> str:
    path = f"{base}/{kind}/{segment(ident)}"
    return f"{path}/{action}" if action else path


def task_url(base: str, task_id: str, action: str | None = None) -> str:
    """``{base}/tasks/{id}`` (or ``.../{action}``) for the task of id ``task_id``."""
    return _url(base, "tasks", task_id, action)


def schedule_url(base: str, name: str, action: str | None = None) -> str:
    """``{base}/schedules/{name}`` (or ``.../{action}``) for the schedule ``name``."""
    return _url(base, "schedules", name, action)


def worker_url(base: str, worker_id: str) -> str:
    """``{base}/workers/{id}`` for the worker ``worker_id``."""
    return _url(base, "workers", worker_id, None)


def pipeline_url(base: str, run_id: str) -> str:
    """``{base}/pipelines/{run id}`` for the pipeline run ``run_id``."""
    return _url(base, "pipelines", run_id, None)


def install(env: jinja2.Environment) -> None:
    """``task_url(base, id, action=None)``, ``schedule_url(...)``, ``worker_url(base, id)``
    and ``pipeline_url(base, run_id)`` as template globals."""
    env.globals.update(
        task_url=task_url,
        schedule_url=schedule_url,
        worker_url=worker_url,
        pipeline_url=pipeline_url,
    )
