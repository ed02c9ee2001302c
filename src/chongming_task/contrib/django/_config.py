"""``settings.CHONGMING_TASK``: every key, its default, and the checks on it.

Read when something needs it (the project's client, a management command, the
dashboard, ``manage.py check``), never at import. A mistake is Django's
``ImproperlyConfigured`` naming the key; ``manage.py check`` reports it too.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = ["KEYS", "Config", "load_config"]

#: Every key of ``settings.CHONGMING_TASK`` and what it means (docs/django.md lists them).
KEYS: Final = {
    "DATABASE": "alias in settings.DATABASES of the database that holds the tasks "
    "(default 'default'); PostgreSQL (psycopg 3) or SQLite on a file",
    "TASK_MODULES": "dotted paths of the modules that define the tasks; default: the "
    "'tasks' module of every installed app that has one",
    "NUM_BUCKETS": "number of buckets business keys hash into, for the project's client "
    "and its workers alike (default 64)",
    "DASHBOARD_READ_ONLY": "the dashboard shows everything and changes nothing (default False)",
}


@dataclass(frozen=True, slots=True)
class Config:
    """``settings.CHONGMING_TASK`` with its defaults, checked."""

    database: str = "default"
    task_modules: tuple[str, ...] | None = None
    """``None``: discovered from the installed apps."""
    num_buckets: int = 64
    dashboard_read_only: bool = False


def _settings_value() -> Mapping[str, Any]:
    value = getattr(settings, "CHONGMING_TASK", None)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(
            f"settings.CHONGMING_TASK must be a dict, got {type(value).__name__}"
        )
    return value


def load_config() -> Config:
    """``settings.CHONGMING_TASK``, checked.

    Raises:
        ImproperlyConfigured: Not a dict, an unknown key (naming the nearest), or a
            value of the wrong kind.
    """
    value = _settings_value()
    for key in value:
        if key not in KEYS:
            near = difflib.get_close_matches(str(key), sorted(KEYS), 1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ImproperlyConfigured(
                f"settings.CHONGMING_TASK has an unknown key {key!r}{hint} "
                f"(known: {', '.join(KEYS)})"
            )
    database = value.get("DATABASE", "default")
    if not isinstance(database, str) or not database:
        raise ImproperlyConfigured(
            f"settings.CHONGMING_TASK['DATABASE'] must be a database alias, got {database!r}"
        )
    modules = value.get("TASK_MODULES")
    if modules is not None:
        if isinstance(modules, str) or not all(
            isinstance(m, str) and m and all(p.isidentifier() for p in m.split("."))
            for m in modules
        ):
            raise ImproperlyConfigured(
                "settings.CHONGMING_TASK['TASK_MODULES'] must be a list of dotted module "
                f"paths ('shop.tasks'), got {modules!r}"
            )
        modules = tuple(modules)
    buckets = value.get("NUM_BUCKETS", 64)
    if not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 1:
        raise ImproperlyConfigured(
            f"settings.CHONGMING_TASK['NUM_BUCKETS'] must be an integer >= 1, got {buckets!r}"
        )
    read_only = value.get("DASHBOARD_READ_ONLY", False)
    if not isinstance(read_only, bool):
        raise ImproperlyConfigured(
            "settings.CHONGMING_TASK['DASHBOARD_READ_ONLY'] must be True or False, "
            f"got {read_only!r}"
        )
    return Config(
        database=database,
        task_modules=modules,
        num_buckets=buckets,
        dashboard_read_only=read_only,
    )
