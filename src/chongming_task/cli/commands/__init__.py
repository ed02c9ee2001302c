"""One module per command family; each adds its subparsers with one function per command."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register_all"]


def register_all(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add every subcommand to ``subparsers``, in the order ``--help`` lists them."""
    from chongming_task.cli.commands import (
        control,
        dashboard,
        explain,
        inspect_,
        lint,
        ps,
        run,
        schedules,
        submit,
        tasks,
        worker,
        workers,
    )

    tasks.add_parsers(subparsers)
    run.add_parsers(subparsers)
    worker.add_parsers(subparsers)
    workers.add_parsers(subparsers)
    submit.add_parsers(subparsers)
    ps.add_parsers(subparsers)
    inspect_.add_parsers(subparsers)
    explain.add_parsers(subparsers)
    lint.add_parsers(subparsers)
    control.add_parsers(subparsers)
    schedules.add_parsers(subparsers)
    dashboard.add_parsers(subparsers)
