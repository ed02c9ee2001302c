"""``lint --tasks MODULE``: task bodies with loops that never reach a checkpoint.

A static check of the source (nothing runs, no database): each loop of a task body
with no ``checkpoint()`` / ``acheckpoint()`` / ``is_stop_requested`` in it is reported
with its file, line and why. Exit code 1 when there are findings, 0 when clean, so it
can gate a CI job.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import ExitCode
from chongming_task.cli._schema import document
from chongming_task.cli.commands._common import add_tasks_option, new_parser, scratch_controller

if TYPE_CHECKING:
    from chongming_task.cli._session import Session

__all__ = ["add_parsers"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "lint",
        help="flag task bodies with loops that never reach a checkpoint (exit 1 if any)",
        handler=cmd_lint,
    )
    add_tasks_option(parser)


def cmd_lint(args: argparse.Namespace, session: Session) -> int:
    from chongming_task._checkpoint_lint import lint_function

    controller, _, spec = scratch_controller(args, session)
    definitions = controller.registry.definitions()
    findings = [finding for item in definitions for finding in lint_function(item.name, item.fn)]
    if session.json:
        session.output.json(
            document(
                "lint",
                module=spec,
                tasks=[item.name for item in definitions],
                clean=not findings,
                findings=[finding.to_dict() for finding in findings],
            )
        )
    else:
        for finding in findings:
            session.output.print(
                f"{finding.file}:{finding.line}: task {finding.task!r}: {finding.why}"
            )
        flagged = len({finding.task for finding in findings})
        session.output.print(
            f"{len(findings)} loop(s) without a checkpoint in {flagged} of "
            f"{len(definitions)} task(s)"
            if findings
            else f"no loop without a checkpoint in {len(definitions)} task(s)"
        )
    return ExitCode.FAILED if findings else ExitCode.OK
