"""``schedule preview NAME | --cron EXPR --tz ZONE`` and ``schedule cancel-run ID``.

``preview`` lists the next firings (UTC and local time) of a stored schedule, or of an
expression given on the command line (no store needed), and marks each DST gap or
overlap that changes a firing with what the schedule's DST policy did and why.
``cancel-run`` cancels a manual-run request that no scheduler has claimed yet.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, ExitCode, UsageError
from chongming_task.cli._schema import document
from chongming_task.cli.commands._common import new_parser
from chongming_task.cli.commands._schedule_docs import admin_for
from chongming_task.errors import ConfigurationError

if TYPE_CHECKING:
    from chongming_task.cli._session import Session
    from chongming_task.schedule import Preview

__all__ = ["add_cancel_parser", "add_preview_parser", "render_preview"]


def add_preview_parser(actions: argparse._SubParsersAction[Any]) -> None:
    sub = new_parser(
        actions,
        "preview",
        help="the next firings with UTC and local times, DST changes explained",
        handler=cmd_preview,
    )
    sub.add_argument("name", metavar="NAME", nargs="?", help="a stored schedule")
    sub.add_argument("--cron", metavar="EXPR", help="preview this expression instead of NAME")
    sub.add_argument("--tz", metavar="ZONE", default=None, help="IANA zone of --cron (UTC)")
    sub.add_argument(
        "--dst",
        metavar="POLICY",
        default=None,
        help="DST policy: default, skip or vixie (default: the schedule's, or default)",
    )
    sub.add_argument("--count", default="10", metavar="N", help="firings to list (1-1000)")
    sub.add_argument(
        "--from",
        dest="start",
        metavar="ISO",
        default=None,
        help="start after this instant (ISO 8601; without offset: local time; default now)",
    )


def add_cancel_parser(actions: argparse._SubParsersAction[Any]) -> None:
    sub = new_parser(
        actions,
        "cancel-run",
        help="cancel a manual-run request no scheduler has claimed yet",
        handler=cmd_cancel_run,
    )
    sub.add_argument("command_id", metavar="COMMAND_ID", help="as `schedule run` printed it")
    sub.add_argument("--reason", help="why (recorded)")


def cmd_preview(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.schedule import parse_count, preview

    if (args.name is None) == (args.cron is None):
        raise UsageError("schedule preview needs NAME or --cron EXPR (not both)")
    if args.cron is None and args.tz is not None:
        raise UsageError("--tz goes with --cron; a stored schedule has its own timezone")
    try:
        count = parse_count(args.count)
    except ConfigurationError as exc:
        raise UsageError(f"--count: {exc}") from exc
    if args.cron is not None:
        trigger: Any = args.cron
        zone = args.tz or "UTC"
        now = datetime.now().astimezone()
    else:
        admin = admin_for(session)
        try:
            control = admin.get(args.name)
        except ConfigurationError as exc:
            raise CommandFailed(str(exc)) from exc
        trigger = control.trigger
        zone = control.timezone
        now = admin.clock.now()
    try:
        result = preview(trigger, timezone=zone, dst=args.dst, count=count, start=args.start or now)
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from exc
    if session.json:
        session.output.json(document("schedule-preview", **result.to_dict()))
        return ExitCode.OK
    session.output.print(render_preview(result))
    return ExitCode.OK


def _local(value: datetime | None) -> str:
    if value is None:
        return "-"
    offset = value.strftime("%z")
    return f"{value:%Y-%m-%d %H:%M:%S} {value.tzname()} ({offset[:3]}:{offset[3:]})"


def render_preview(result: Preview) -> str:
    """The text ``schedule preview`` prints."""
    lines = [
        f"{result.pattern} in {result.timezone}, dst={result.dst}; firings after "
        f"{result.start.isoformat()}:"
    ]
    number = 0
    for entry in result.entries:
        if entry.fired:
            number += 1
            mark = f"{number:>4}"
        else:
            mark = "   -"
        utc = "-" if entry.utc is None else f"{entry.utc:%Y-%m-%d %H:%M:%S}Z"
        local = _local(entry.local)
        if not entry.fired and entry.utc is None and entry.wall is not None:
            local = f"{entry.wall:%Y-%m-%d %H:%M:%S} (nonexistent)"
        status = "fires" if entry.fired else "NOT FIRED"
        lines.append(f"{mark}  {utc:<21} {local:<42} {status}")
        if entry.note:
            lines.append(f"        {entry.dst}: {entry.note}")
    return "\n".join(lines)


def cmd_cancel_run(args: argparse.Namespace, session: Session) -> int:
    admin = admin_for(session)
    try:
        command = admin.cancel_run(args.command_id, reason=args.reason)
    except ConfigurationError as exc:
        raise CommandFailed(str(exc)) from exc
    if session.json:
        session.output.json(
            document(
                "schedule-cancel-run",
                command_id=command.command_id,
                schedule=command.target,
                result=command.result,
            )
        )
    else:
        session.output.print(
            f"manual run request {command.command_id} of {command.target} cancelled; no "
            "scheduler will run it"
        )
    return ExitCode.OK
