"""The project's store, task modules and client, built from Django's settings.

The store lives in the database ``CHONGMING_TASK['DATABASE']`` names (``default``),
reached with the connection settings Django uses for it: the SQLite file itself, or a
``postgresql://`` URL made from the alias's ``NAME``, ``USER``, ``PASSWORD``, ``HOST``,
``PORT`` and libpq ``OPTIONS`` (``sslmode``, ``options=-c search_path=...``,
``service``...). Being the same database is what lets ``enqueue()`` write in the
transaction of Django's own connection.

One client per process, made on first use (never at import, so a server that forks
its workers after loading the project gives each its own connections) and made again
after a fork or when a test changes the settings (``override_settings``).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils.module_loading import module_has_submodule

from chongming_task._decorator import SPEC_ATTRIBUTE
from chongming_task.contrib.django._config import Config, load_config
from chongming_task.controller import TaskRegistry

if TYPE_CHECKING:
    from chongming_task.contrib.django._client import DjangoClient
    from chongming_task.controller import Controller
    from chongming_task.stores import TaskStore

__all__ = [
    "APP_NAME",
    "database_problem",
    "get_client",
    "open_store",
    "register_project_tasks",
    "reset",
    "store_location",
    "task_modules",
]

#: This app's module path (its own ``tasks`` module is the worker's, not a task module).
APP_NAME = "chongming_task.contrib.django"

#: libpq parameters of Django's connection the store sets for itself. (What Django
#: passes to psycopg that is no libpq parameter, the cursor factory, the adapters and
#: the prepare threshold, is left out as well.)
_NOT_LIBPQ = frozenset({"client_encoding"})


def database_problem(alias: str) -> tuple[str, int] | None:
    """Why the database ``alias`` cannot hold the store: ``(message, check number)``,
    or ``None``. Reads the settings only; connects to nothing."""
    if alias not in settings.DATABASES:
        known = ", ".join(map(repr, settings.DATABASES)) or "none"
        return (
            f"settings.CHONGMING_TASK['DATABASE'] is {alias!r}, which settings.DATABASES "
            f"does not define (its aliases: {known})",
            2,
        )
    connection = connections[alias]
    if connection.vendor == "sqlite":
        name = os.fspath(connection.settings_dict["NAME"] or "")
        if not name or name == ":memory:" or "mode=memory" in str(name):
            return (
                f"database {alias!r} is an in-memory SQLite database, which no worker "
                "process can reach; give it a file (for tests too: "
                "DATABASES[...]['TEST']['NAME'] = a file path)",
                3,
            )
        return None
    if connection.vendor == "postgresql":
        driver = getattr(getattr(connection, "Database", None), "__name__", "")
        if driver != "psycopg":
            return (
                f"database {alias!r} uses psycopg2; chongming-task shares the transaction "
                'of a psycopg 3 connection: pip install "psycopg[binary]" (Django picks '
                "psycopg 3 when it is installed)",
                4,
            )
        return None
    return (
        f"database {alias!r} is {connection.vendor}; chongming-task keeps its tasks in "
        "PostgreSQL or SQLite (set CHONGMING_TASK['DATABASE'] to such an alias)",
        3,
    )


def _checked(config: Config) -> str:
    problem = database_problem(config.database)
    if problem is not None:
        raise ImproperlyConfigured(problem[0])
    return config.database


def store_location(alias: str) -> str:
    """What the store of ``alias`` is opened on: the SQLite file's absolute path, or a
    ``postgresql://`` URL (with the password: never show it, ``mask_dsn`` does)."""
    connection = connections[alias]
    if connection.vendor == "sqlite":
        name = str(os.fspath(connection.settings_dict["NAME"]))
        return name if name.startswith("file:") else os.path.abspath(name)
    import psycopg

    keywords = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}
    params = {
        key: str(value)
        for key, value in connection.get_connection_params().items()
        if key in keywords
        and key not in _NOT_LIBPQ
        and isinstance(value, str | int)
        and not isinstance(value, bool)
    }
    user, password = params.pop("user", None), params.pop("password", None)
    userinfo = ""
    if user:
        secret = f":{quote(password, safe='')}" if password else ""
        userinfo = f"{quote(user, safe='')}{secret}@"
    elif password:
        params["password"] = password
    return f"postgresql://{userinfo}/?{urlencode(params, quote_via=quote)}"


def open_store(alias: str) -> TaskStore:
    """The store in database ``alias`` (its schema created or migrated if needed)."""
    location = store_location(alias)
    if connections[alias].vendor == "sqlite":
        from chongming_task.stores import SqliteTaskStore

        return SqliteTaskStore(location)
    from chongming_task.stores import PostgresTaskStore

    return PostgresTaskStore(location, application_name="chongming-task (django)")


# ---------------------------------------------------------------- task modules


def task_modules(config: Config) -> list[ModuleType]:
    """``CHONGMING_TASK['TASK_MODULES']``, or every installed app's ``tasks`` module."""
    if config.task_modules is not None:
        return [importlib.import_module(name) for name in config.task_modules]
    found: list[ModuleType] = []
    for app in apps.get_app_configs():
        if app.name != APP_NAME and module_has_submodule(app.module, "tasks"):
            found.append(importlib.import_module(f"{app.name}.tasks"))
    return found


def _register_hook(module: ModuleType) -> Callable[[Any], Any] | None:
    hook = getattr(module, "register", None)
    return hook if callable(hook) and not hasattr(hook, SPEC_ATTRIBUTE) else None


def register_project_tasks(controller: Controller, modules: Iterable[ModuleType]) -> list[str]:
    """Register the tasks of ``modules`` on ``controller``; returns the names.

    A module's ``register(controller)`` function is called when it has one (as
    ``chongming-task worker --tasks`` does); otherwise its ``@task`` functions are
    registered. A function several modules import is registered once; modules with
    neither (another library's ``tasks.py``) are skipped.
    """
    functions: dict[int, Callable[..., Any]] = {}
    for module in modules:
        hook = _register_hook(module)
        if hook is not None:
            hook(controller)
            continue
        for value in vars(module).values():
            if callable(value) and hasattr(value, SPEC_ATTRIBUTE):
                functions.setdefault(id(value), value)
    controller.register_all(*functions.values())
    return controller.registry.names()


def _registry(modules: list[ModuleType]) -> TaskRegistry | None:
    """The definitions ``modules`` register; ``None`` when there are none (a project
    that only enqueues for workers defined elsewhere: names are checked by them)."""
    from chongming_task.controller import Controller

    with Controller() as probe:  # in memory, no threads: only its registry
        names = register_project_tasks(probe, modules)
        return probe.registry if names else None


# ---------------------------------------------------------------- the process's client


class _Process:
    """The project's client in this process, and what was built on it (the dashboard)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.client: DjangoClient | None = None
        self.pid = 0
        self.closers: list[Callable[[], None]] = []


_process = _Process()


def get_client() -> DjangoClient:
    """The project's client (made on first use in this process).

    Raises:
        ImproperlyConfigured: ``settings.CHONGMING_TASK`` or the database it names
            cannot be used (the message says why).
        StoreError: The database cannot be reached.
    """
    state = _process
    with state.lock:
        if state.client is not None and state.pid == os.getpid():
            return state.client
        if state.pid != os.getpid():  # a forked child: the parent's connections are not ours
            state.client = None
            state.closers.clear()
        from chongming_task.contrib.django._client import DjangoClient

        config = load_config()
        alias = _checked(config)
        registry = _registry(task_modules(config))
        store = open_store(alias)
        state.client = DjangoClient(
            store, alias=alias, tasks=registry, num_buckets=config.num_buckets
        )
        state.pid = os.getpid()
        return state.client


def on_reset(closer: Callable[[], None]) -> None:
    """Run ``closer`` when the client is dropped (what was built on it goes with it)."""
    with _process.lock:
        _process.closers.append(closer)


def reset() -> None:
    """Close the project's client and what was built on it; the next use makes them anew
    (after ``override_settings`` of ``CHONGMING_TASK`` or ``DATABASES``, in tests)."""
    state = _process
    with state.lock:
        client, state.client = state.client, None
        closers = list(reversed(state.closers))
        state.closers.clear()
        owned = state.pid == os.getpid()
    if not owned:
        return
    for closer in closers:
        closer()
    if client is not None:
        client.store.close()
