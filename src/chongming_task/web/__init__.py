"""A web dashboard over the store: see and control tasks, schedules, buckets and workers.

``pip install "chongming-task[web]"``, then either ``chongming-task dashboard --db ...``
or mount :func:`create_app` in your own ASGI service::

    from chongming_task import SqliteTaskStore
    from chongming_task.web import create_app

    app = create_app(SqliteTaskStore("tasks.db"), token=os.environ["DASHBOARD_TOKEN"])

It is a thin adapter over the library's public API (the store's query API, the
commands ``Controller.stop``/``pause``/``resume`` write for tasks held elsewhere, and
``ScheduleAdmin``); ``docs/dashboard.md`` documents the pages, routes and JSON API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "DEFAULT_SESSION_TTL",
    "DEFAULT_USER",
    "HOST_IDENTITY",
    "Identity",
    "create_app",
    "read_token_file",
]

if TYPE_CHECKING:
    from chongming_task.web._app import create_app
    from chongming_task.web._auth import (
        DEFAULT_SESSION_TTL,
        DEFAULT_USER,
        HOST_IDENTITY,
        Identity,
        read_token_file,
    )

#: What the CLI needs to serve the dashboard; the standard library's only.
_AUTH = frozenset(
    {"DEFAULT_SESSION_TTL", "DEFAULT_USER", "HOST_IDENTITY", "Identity", "read_token_file"}
)


def __getattr__(name: str) -> Any:
    if name in _AUTH:
        from chongming_task.web import _auth

        return getattr(_auth, name)
    if name == "create_app":
        try:
            from chongming_task.web._app import create_app
        except ImportError as exc:  # starlette/jinja2 missing
            raise ImportError(
                f'the dashboard needs the web extra: pip install "chongming-task[web]" ({exc})'
            ) from exc
        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
