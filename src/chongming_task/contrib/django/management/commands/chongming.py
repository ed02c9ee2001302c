"""``manage.py chongming COMMAND ...``: the ``chongming-task`` CLI on the project's store."""

from __future__ import annotations

from chongming_task.contrib.django._commands import CliCommand

__all__ = ["Command"]


class Command(CliCommand):
    help = (
        "The chongming-task CLI on the project's database (ps, status, stop, retry, "
        "submit...): manage.py chongming --help"
    )
