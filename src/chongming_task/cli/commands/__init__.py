"""One module per command family; each adds its subparsers with one function per command."""

from __future__ import annotations

import argparse
from typing import Any

from chongming_task.cli.commands._common import add_global_options

__all__ = ["add_global_options", "register_all"]


def register_all(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add every subcommand to ``subparsers``, in the order ``--help`` lists them."""
    from chongming_task.cli.commands import (
        _control as control,
    )
    from chongming_task.cli.commands import (
        _dashboard as dashboard,
    )
    from chongming_task.cli.commands import (
        _explain as explain,
    )
    from chongming_task.cli.commands import (
        _inspect_ as inspect_,
    )
    from chongming_task.cli.commands import (
        _limits as limits,
    )
    from chongming_task.cli.commands import (
        _lint as lint,
    )
    from chongming_task.cli.commands import (
        _ps as ps,
    )
    from chongming_task.cli.commands import (
        _queue_admin as queue_admin,
    )
    from chongming_task.cli.commands import (
        _retry as retry,
    )
    from chongming_task.cli.commands import (
        _run as run,
    )
    from chongming_task.cli.commands import (
        _schedules as schedules,
    )
    from chongming_task.cli.commands import (
        _submit as submit,
    )
    from chongming_task.cli.commands import (
        _tasks as tasks,
    )
    from chongming_task.cli.commands import (
        _worker as worker,
    )
    from chongming_task.cli.commands import (
        _workers as workers,
    )

    tasks.add_parsers(subparsers)
    run.add_parsers(subparsers)
    worker.add_parsers(subparsers)
    workers.add_parsers(subparsers)
    limits.add_parsers(subparsers)
    queue_admin.add_parsers(subparsers)
    submit.add_parsers(subparsers)
    ps.add_parsers(subparsers)
    inspect_.add_parsers(subparsers)
    explain.add_parsers(subparsers)
    lint.add_parsers(subparsers)
    control.add_parsers(subparsers)
    retry.add_parsers(subparsers)
    schedules.add_parsers(subparsers)
    dashboard.add_parsers(subparsers)
