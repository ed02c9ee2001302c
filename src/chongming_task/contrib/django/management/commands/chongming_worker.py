"""``manage.py chongming_worker [OPTIONS]``: a worker running the project's tasks."""

from __future__ import annotations

from chongming_task.contrib.django._commands import CliCommand

__all__ = ["Command"]


class Command(CliCommand):
    help = (
        "Run a chongming-task worker with Django set up: the tasks of the installed apps, "
        "the project's database, the options of chongming-task worker "
        "(manage.py chongming_worker --help)"
    )
    worker = True
