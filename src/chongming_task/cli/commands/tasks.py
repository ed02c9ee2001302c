"""``tasks --tasks MODULE``: the definitions a module registers, with their parameters.

Listing needs no database: the definitions live in code, and a person checking a
deployment's task module should not need a store to do so.
"""

from __future__ import annotations

import argparse
import inspect
from typing import TYPE_CHECKING, Any

from chongming_task.cli.commands._common import add_tasks_option, format_parameter, new_parser
from chongming_task.cli.errors import ExitCode
from chongming_task.cli.loader import load_task_module, register_tasks
from chongming_task.cli.parsing import env
from chongming_task.cli.schema import document

if TYPE_CHECKING:
    from chongming_task.cli.session import Session
    from chongming_task.controller.registry import TaskDefinition

__all__ = ["add_parsers", "parameters_of"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "tasks",
        help="list the task definitions a module registers",
        handler=cmd_tasks,
    )
    add_tasks_option(parser)


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
    from chongming_task.controller import Controller

    spec = args.tasks or env("TASKS")
    module = load_task_module(spec)
    controller = session.track(Controller())
    register_tasks(controller, module, spec or "")
    definitions = controller.registry.definitions()
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
