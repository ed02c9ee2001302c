"""``explain ID``: why a task is where it is, from what the store knows.

The console holds no task, so its explanation is the store view (``source: store``):
holder, lease, history, the holder's running tasks, the queue ahead, the worker
registry. With ``--tasks MODULE`` it also knows the task definition's timeouts (the
``start`` deadline, the ``idle`` timeout the checkpoint gaps are judged against).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import ExitCode
from chongming_task.cli._parsing import env, seconds
from chongming_task.cli._schema import document
from chongming_task.cli.commands._common import (
    add_tasks_option,
    console_controller,
    require_task,
    task_parser,
)

if TYPE_CHECKING:
    from chongming_task.cli._session import Session
    from chongming_task.controller import Controller

__all__ = ["DEFAULT_GRACEFUL_STOP", "add_graceful_stop_option", "add_parsers", "definitions_of"]

#: The graceful window judged against when ``--graceful-stop`` is not given: the
#: default of ``Controller`` and of ``chongming-task worker``.
DEFAULT_GRACEFUL_STOP = 5.0


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = task_parser(
        subparsers,
        "explain",
        help="why a task is waiting (or how it ended), as reasons",
        handler=cmd_explain,
    )
    add_tasks_option(parser)
    add_graceful_stop_option(parser)


def add_graceful_stop_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--graceful-stop",
        type=seconds,
        default=DEFAULT_GRACEFUL_STOP,
        metavar="SECONDS",
        help="graceful window of the controller or worker running the tasks, judged "
        f"against the checkpoint gaps (default {DEFAULT_GRACEFUL_STOP:g})",
    )


def definitions_of(args: argparse.Namespace, session: Session, controller: Controller) -> bool:
    """Register ``--tasks`` (or ``CHONGMING_TASKS``) on ``controller`` if given."""
    from chongming_task.cli._loader import load_task_module, register_tasks

    spec = args.tasks or env("TASKS")
    if not spec:
        return False
    register_tasks(controller, load_task_module(spec), spec)
    return True


def cmd_explain(args: argparse.Namespace, session: Session) -> int:
    from chongming_task._explain import explain
    from chongming_task.controller import _explaining as explaining

    store = session.open_store(create=False, read_only=True)
    controller = console_controller(session, store)
    definitions_of(args, session, controller)
    snapshot = require_task(controller, args.task_id)
    definition = controller.registry.get(snapshot.name)
    facts = explaining.store_facts(
        store,
        snapshot,
        now=store.clock.now(),
        timeout=None if definition is None else definition.timeout,
        graceful_stop=args.graceful_stop,
    )
    explanation = explain(facts)
    if session.json:
        session.output.json(document("explain", **explanation.to_dict()))
        return ExitCode.OK
    session.output.print(explanation.render())
    return ExitCode.OK
