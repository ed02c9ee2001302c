"""``manage.py check``: ``settings.CHONGMING_TASK`` and the database it names.

``chongming_task.E001``: the settings; ``E002``: an alias ``DATABASES`` lacks;
``E003``: a database that cannot hold the store (another engine, SQLite in memory);
``E004``: PostgreSQL through psycopg2. Nothing is connected to.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured

from chongming_task.contrib.django._config import load_config
from chongming_task.contrib.django._project import database_problem

__all__ = ["check_settings"]


def check_settings(**_: Any) -> list[CheckMessage]:
    """The system check registered by the app config."""
    try:
        config = load_config()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="chongming_task.E001")]
    problem = database_problem(config.database)
    if problem is None:
        return []
    message, number = problem
    return [Error(message, id=f"chongming_task.E00{number}")]
