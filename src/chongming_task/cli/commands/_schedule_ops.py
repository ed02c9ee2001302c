"""``schedule show|pause|resume|set|reset|run NAME``: operating one schedule.

Pause, resume and pattern overrides are compare-and-set writes on the control record
(``ScheduleAdmin``), applied by every running scheduler within one tick. A manual run
is a command that a scheduler having the schedule claims, runs and completes with
the run's result; ``--wait`` follows it and maps the result to the exit code.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from chongming_task.cli._errors import CommandFailed, ExitCode, UsageError
from chongming_task.cli._parsing import parse_json_object
from chongming_task.cli._schema import document
from chongming_task.cli.commands._schedule_docs import admin_for, run_doc, schedule_doc, short
from chongming_task.errors import ConfigurationError

if TYPE_CHECKING:
    from chongming_task.cli._session import Session
    from chongming_task.schedule import ScheduleAdmin, ScheduleControl

__all__ = ["cmd_schedule"]


def cmd_schedule(args: argparse.Namespace, session: Session) -> int:
    admin = admin_for(session)
    try:
        control = admin.get(args.name)
    except ConfigurationError as exc:
        raise CommandFailed(str(exc)) from exc
    if args.action == "show":
        return _show(args, session, admin, control)
    if args.action == "run":
        return _run(args, session, admin)
    if args.action == "pause":
        control = admin.pause(args.name, reason=args.reason)
    elif args.action == "resume":
        control = admin.resume(args.name, reason=args.reason)
    elif args.action == "set":
        control = admin.set_pattern(args.name, args.pattern, timezone=args.timezone)
    else:
        control = admin.reset_pattern(args.name)
    if session.json:
        session.output.json(document("schedule", schedule=schedule_doc(control)))
    else:
        session.output.print(
            f"{control.name}: {control.status}, pattern {control.pattern!r} in {control.timezone}"
            f"{' (overridden)' if control.overridden else ''}; running schedulers apply it "
            "within one tick"
        )
    return ExitCode.OK


def _show(
    args: argparse.Namespace, session: Session, admin: ScheduleAdmin, control: ScheduleControl
) -> int:

    if args.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {args.limit}")
    stats = admin.statistics(args.name)
    history = admin.history(args.name, limit=args.limit)
    if session.json:
        session.output.json(
            document(
                "schedule",
                schedule=schedule_doc(control),
                statistics=stats.counts(),
                runs=[run_doc(run) for run in history],
            )
        )
        return ExitCode.OK
    output = session.output
    doc = schedule_doc(control)
    keys = (
        "name",
        "display_name",
        "task",
        "status",
        "pattern",
        "timezone",
        "dst",
        "default_pattern",
        "overlap",
        "max_runtime",
        "retry_attempts",
        "manual_run_enabled",
        "misfire",
        "next_run_at",
        "last_run_at",
        "last_status",
        "last_error",
        "updated_by",
    )
    width = max(map(len, keys)) + 1
    output.print("\n".join(f"{key + ':':<{width}} {doc[key]}" for key in keys))
    rate = "-" if stats.success_rate is None else f"{stats.success_rate:.0f}%"
    mean = "-" if stats.average_duration is None else f"{stats.average_duration:.2f}s"
    output.print(
        f"runs: {stats.runs} (succeeded {stats.succeeded}, errors {stats.errors}, skipped "
        f"{stats.skipped}, unfinished {stats.unfinished}); success rate {rate}; mean {mean}"
    )
    rows = [
        [
            run.task_id,
            run.status.value,
            run.trigger_type or "-",
            short(run.scheduled_at),
            "-" if run.duration is None else f"{run.duration:.2f}s",
            run.error or "-",
        ]
        for run in history
    ]
    output.table(["TASK_ID", "STATUS", "TRIGGER", "SCHEDULED", "DURATION", "ERROR"], rows)
    return ExitCode.OK


def _run(args: argparse.Namespace, session: Session, admin: ScheduleAdmin) -> int:
    if args.wait is not None and not args.wait > 0:  # NaN too
        raise UsageError(f"--wait must be > 0 seconds, got {args.wait}")
    payload = None
    if args.input is not None:
        payload = parse_json_object(args.input, "--input")
    try:
        command = admin.request_run(
            args.name, reason=args.reason, correlation_id=args.correlation_id, input=payload
        )
    except ConfigurationError as exc:
        raise CommandFailed(str(exc)) from exc
    if args.wait is None:
        if session.json:
            session.output.json(
                document(
                    "schedule-run", schedule=args.name, command_id=command.command_id, result=None
                )
            )
        else:
            session.output.print(
                f"manual run of {args.name} requested (command {command.command_id}); a worker "
                "running this schedule will start it"
            )
        return ExitCode.OK
    try:
        done = admin.wait_for_command(command.command_id, timeout=args.wait)
    except TimeoutError as exc:
        raise CommandFailed(str(exc)) from exc
    result = done.result if isinstance(done.result, dict) else {}
    if session.json:
        session.output.json(
            document(
                "schedule-run", schedule=args.name, command_id=command.command_id, result=result
            )
        )
    else:
        text = f"{args.name}: run {result.get('task_id', '?')} {result.get('status', '?')}"
        if result.get("error"):
            text += f": {result['error']}"
        session.output.print(text)
    return ExitCode.OK if result.get("ok") else ExitCode.TASK_NOT_SUCCEEDED
