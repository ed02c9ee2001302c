"""``queue``: pause and resume intake of a queue (a task name or a bucket), list pauses.

A thin adapter over :meth:`chongming_task.Client.pause_queue` and friends
(docs/queue.md, "Pause intake"): ``queue pause --name noop --reason "deploy"`` stores
the pause (who, why, when) and every worker stops claiming that queue's tasks at its
next claim; ``queue resume --name noop`` lets them claim again; ``queue`` (or ``queue
list``) lists the paused queues. Running tasks are not touched.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, ExitCode
from chongming_task.cli._parsing import env, integer
from chongming_task.cli._schema import document
from chongming_task.cli.commands._common import new_parser

if TYPE_CHECKING:
    from chongming_task.cli._session import Session
    from chongming_task.queue import Client

__all__ = ["add_parsers"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "queue",
        help="pause or resume intake of a queue (a task name or a bucket); list pauses",
        description="A paused queue keeps its queued tasks: no worker claims them until it "
        "is resumed (every worker obeys at its next claim; running tasks go on). Without "
        "an action: list the paused queues with who paused them, when and why.",
        handler=cmd_queue,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    new_parser(actions, "list", help="the paused queues", handler=cmd_queue)
    for action, text in (
        ("pause", "stop intake: workers leave the queue's queued tasks alone"),
        ("resume", "let workers claim the queue's tasks again"),
    ):
        sub = new_parser(actions, action, help=text, handler=cmd_queue)
        which = sub.add_mutually_exclusive_group(required=True)
        which.add_argument("--name", metavar="TASK_NAME", help="the queue of one task name")
        which.add_argument("--bucket", type=integer, metavar="N", help="the queue of bucket N")
        sub.add_argument(
            "--tasks",
            metavar="MODULE",
            help="the task module the workers load (env CHONGMING_TASKS): --name must be "
            "one of its registered names",
        )
        if action == "pause":
            sub.add_argument(
                "--reason",
                required=True,
                metavar="TEXT",
                help="why (required): shown by ps, health, explain and the dashboard",
            )


def _client(args: argparse.Namespace, session: Session, *, create: bool) -> Client:
    from chongming_task.queue import Client

    tasks = None
    spec = getattr(args, "tasks", None) or env("TASKS")
    if spec and getattr(args, "name", None) is not None:
        from chongming_task.cli._loader import load_task_module

        tasks = load_task_module(spec)
    return Client(
        session.open_store(create=create),
        tasks=tasks,
        num_buckets=session.options.num_buckets,
        actor=session.issuer,
    )


def cmd_queue(args: argparse.Namespace, session: Session) -> int:
    action = getattr(args, "action", None) or "list"
    output = session.output
    if action == "pause":
        pause = _client(args, session, create=True).pause_queue(
            name=args.name, bucket=args.bucket, reason=args.reason
        )
        if session.json:
            output.json(document("queue-paused", pause=pause.to_dict()))
        else:
            output.print(f"intake paused: {pause.describe()}")
        return ExitCode.OK
    if action == "resume":
        from chongming_task.stores._pauses import queue_label

        label = queue_label(args.name, args.bucket)
        if not _client(args, session, create=False).resume_queue(
            name=args.name, bucket=args.bucket
        ):
            raise CommandFailed(f"{label} is not paused (see `chongming-task queue`)")
        if session.json:
            output.json(document("queue-resumed", name=args.name, bucket=args.bucket))
        else:
            output.print(f"intake resumed: {label}")
        return ExitCode.OK
    pauses = _client(args, session, create=False).queue_pauses()
    if session.json:
        output.json(document("queue-pauses", pauses=[p.to_dict() for p in pauses]))
        return ExitCode.OK
    if not pauses:
        output.print("no queue is paused")
    for pause in pauses:
        output.print(f"intake paused: {pause.describe()}")
    return ExitCode.OK
