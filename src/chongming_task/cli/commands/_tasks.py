"""``tasks --tasks MODULE``: the definitions a module registers, with their parameters.

Listing needs no database: the definitions live in code, and a person checking a
deployment's task module should not need a store to do so. ``--checkpoints`` does:
it reads the checkpoint gaps the runs of each task left in the store.
"""

from __future__ import annotations

import argparse
import inspect
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import ExitCode
from chongming_task.cli._schema import document
from chongming_task.cli.commands._common import (
    add_tasks_option,
    format_parameter,
    new_parser,
    scratch_controller,
)
from chongming_task.cli.commands._explain import add_graceful_stop_option

if TYPE_CHECKING:
    from chongming_task.cli._session import Session
    from chongming_task.controller._registry import TaskDefinition

__all__ = ["add_parsers", "parameters_of"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "tasks",
        help="list the task definitions a module registers",
        handler=cmd_tasks,
    )
    add_tasks_option(parser)
    parser.add_argument(
        "--checkpoints",
        action="store_true",
        help="also report each task's checkpoint gaps (p50/p99/max, from the runs in the "
        "store) against its graceful window and idle timeout, with warnings",
    )
    add_graceful_stop_option(parser)


def parameters_of(definition: TaskDefinition) -> str:
    """The task's parameters as the CLI passes them (the leading ``ctx`` left out)."""
    try:
        signature = inspect.signature(definition.fn)
    except (TypeError, ValueError):
        return "..."
    parameters = list(signature.parameters.values())
    if parameters and parameters[0].name in ("ctx", "context"):
        parameters = parameters[1:]
    return ", ".join(format_parameter(parameter) for parameter in parameters) or "-"


def cmd_tasks(args: argparse.Namespace, session: Session) -> int:
    controller, _, spec = scratch_controller(args, session)
    definitions = controller.registry.definitions()
    if args.checkpoints:
        return _checkpoints(args, session, definitions)
    if session.json:
        session.output.json(
            document(
                "tasks",
                module=spec,
                tasks=[
                    {
                        "name": item.name,
                        "tags": sorted(item.tags),
                        "description": item.description,
                        "parameters": parameters_of(item),
                    }
                    for item in definitions
                ],
            )
        )
        return ExitCode.OK
    rows = [
        [
            item.name,
            ",".join(sorted(item.tags)) or "-",
            parameters_of(item),
            item.description or "-",
        ]
        for item in definitions
    ]
    session.output.table(["NAME", "TAGS", "PARAMETERS", "DESCRIPTION"], rows, status_column=None)
    return ExitCode.OK


def _checkpoints(
    args: argparse.Namespace, session: Session, definitions: list[TaskDefinition]
) -> int:
    """``tasks --checkpoints``: will a stop land, would ``idle`` fire on a healthy run?"""
    from chongming_task._checkpoint_gaps import GapForecast, forecast, format_seconds
    from chongming_task.controller._explaining import name_gaps

    store = session.open_store(create=False, read_only=True)
    window: float = args.graceful_stop
    verdicts: list[tuple[TaskDefinition, GapForecast | None]] = []
    for item in definitions:
        gaps = name_gaps(store, item.name)
        idle = None if item.timeout is None else item.timeout.idle
        verdicts.append(
            (item, None if gaps is None else forecast(gaps, graceful_stop=window, idle=idle))
        )
    if session.json:
        session.output.json(
            document(
                "tasks-checkpoints",
                graceful_stop=window,
                tasks=[
                    {
                        "name": item.name,
                        "idle": None if item.timeout is None else item.timeout.idle,
                        "checkpoints": None if verdict is None else verdict.to_dict(),
                    }
                    for item, verdict in verdicts
                ],
            )
        )
        return ExitCode.OK
    rows = []
    for item, verdict in verdicts:
        idle = None if item.timeout is None else item.timeout.idle
        if verdict is None:
            rows.append([item.name, "0", "-", "-", "-", f"{window:g}s", _secs(idle), "no runs"])
            continue
        flags = [
            flag
            for flag, on in (
                ("STOP MAY MISS", verdict.stop_warning),
                ("IDLE", verdict.idle_warning),
                ("BLOCKS LOOP", verdict.loop_warning),
            )
            if on
        ]
        rows.append(
            [
                item.name,
                str(verdict.gaps),
                format_seconds(verdict.p50),
                format_seconds(verdict.p99),
                format_seconds(verdict.max),
                f"{window:g}s",
                _secs(idle),
                ", ".join(flags) or "ok",
            ]
        )
    session.output.table(
        ["NAME", "GAPS", "P50", "P99", "MAX", "GRACE", "IDLE", "VERDICT"], rows, status_column=None
    )
    for _, verdict in verdicts:
        for warning in [] if verdict is None else verdict.warnings:
            session.output.print(f"warning: {warning}")
    return ExitCode.OK


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:g}s"
