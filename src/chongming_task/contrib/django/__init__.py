"""The Django integration: ``pip install "chongming-task[django]"`` (docs/django.md).

Add ``"chongming_task.contrib.django"`` to ``INSTALLED_APPS``; the tasks are the
``@task`` functions of every installed app's ``tasks.py``, kept in the project's
database (PostgreSQL or SQLite), configured by ``settings.CHONGMING_TASK``::

    from django.db import transaction
    from chongming_task.contrib.django import get_client

    with transaction.atomic():
        order = Order.objects.create(email=email)
        get_client().enqueue(send_confirmation, order.pk)   # commits with the order

    get_client().enqueue_on_commit(send_confirmation, order.pk)  # after the commit

``manage.py chongming_worker`` runs a worker (the options of ``chongming-task
worker``), ``manage.py chongming`` is the CLI on the project's store, and
``path("tasks/", include("chongming_task.contrib.django.urls"))`` mounts the
dashboard for staff users.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["DjangoClient", "get_client"]

if TYPE_CHECKING:
    from chongming_task.contrib.django._client import DjangoClient
    from chongming_task.contrib.django._project import get_client


def __getattr__(name: str) -> Any:
    # Django imports this package while it loads the apps: nothing that needs them here.
    if name == "get_client":
        from chongming_task.contrib.django._project import get_client

        return get_client
    if name == "DjangoClient":
        from chongming_task.contrib.django._client import DjangoClient

        return DjangoClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
