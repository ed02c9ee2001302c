"""The project's tasks, as ``manage.py chongming_worker`` loads them (``--tasks``).

``register(controller)`` registers the tasks of ``CHONGMING_TASK['TASK_MODULES']``, or
of every installed app's ``tasks`` module, and gives each task body Django's
connection handling of a request: ``close_old_connections()`` before the body starts
and after it ends, in the thread that runs it (a connection past ``CONN_MAX_AGE`` or
broken is closed, and the next query opens a fresh one). ``register_schedules`` exists
when some module declares schedules (``SCHEDULES`` or ``register_schedules``), so a
worker runs a scheduler only then.

Importing this module needs Django set up (``manage.py`` does it).
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections

from chongming_task.cli import module_schedules
from chongming_task.contrib.django._config import load_config
from chongming_task.contrib.django._project import register_project_tasks, task_modules
from chongming_task.errors import ConfigurationError
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot, Transition
    from chongming_task.controller import Controller

__all__ = ["register"]

_body = threading.local()
"""The task whose body runs on this thread (``task_id``), between its start and end."""


def _connection_hygiene(transition: Transition, _snapshot: TaskSnapshot) -> None:
    """``close_old_connections()`` around each task body, on the body's own thread.

    An inline subscriber: it runs on the thread that made the transition. A body
    starts on its carrier thread (``starting -> running``) and its end is recorded
    there after it returns; only the end of the task whose body ran on this thread
    counts, so a body that stops another task never loses its own connection midway.
    """
    if transition.to_status is TaskStatus.RUNNING and transition.from_status is TaskStatus.STARTING:
        _body.task_id = transition.task_id
        close_old_connections()
    elif (
        transition.to_status.is_terminal or transition.to_status is TaskStatus.RETRY_WAIT
    ) and getattr(_body, "task_id", None) == transition.task_id:
        _body.task_id = None
        close_old_connections()


def _modules() -> list[ModuleType]:
    return task_modules(load_config())


def register(controller: Controller) -> None:
    """Register the project's tasks on ``controller`` (a worker's).

    Raises:
        ConfigurationError: No module defines a task, or two define one name.
    """
    modules = _modules()
    if not register_project_tasks(controller, modules):
        searched = ", ".join(m.__name__ for m in modules) or "no installed app has a tasks module"
        raise ConfigurationError(
            f"no task found ({searched}): decorate functions in an app's tasks.py with "
            "@task, or name the modules in settings.CHONGMING_TASK['TASK_MODULES']"
        )
    controller.subscribe(_connection_hygiene, inline=True)


def _register_schedules(scheduler: Any) -> None:
    # The worker checks the names across all of them (this runs as one module's hook).
    for module in _modules():
        hook = getattr(module, "register_schedules", None)
        if callable(hook):
            hook(scheduler)
        else:
            for schedule in getattr(module, "SCHEDULES", None) or ():
                scheduler.add(schedule)


def __getattr__(name: str) -> Any:
    # The worker asks for ``register_schedules``; it exists only if some module has
    # schedules, so a project without any runs no scheduler.
    if name == "register_schedules" and any(module_schedules(m) for m in _modules()):
        return _register_schedules
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
