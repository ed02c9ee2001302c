"""``schedules``, ``schedule show|pause|resume|set|reset|run NAME`` and ``health``.

Schedules are declared in code and run by workers; operators act on their control
records in the store through ``ScheduleAdmin``, from any process. Pause, resume and
pattern overrides are compare-and-set writes that every scheduler picks up within
one tick; a manual run is a command that a scheduler having the schedule claims, runs
and completes with the run's result (``--wait`` follows it).
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chongming_task.cli.commands._common import new_parser
from chongming_task.cli.errors import CommandFailed, ExitCode, UsageError
from chongming_task.cli.schema import document
from chongming_task.errors import ConfigurationError

if TYPE_CHECKING:
    from chongming_task.cli.session import Session
    from chongming_task.schedule.admin import ScheduleAdmin
    from chongming_task.schedule.control import ScheduleControl
    from chongming_task.schedule.stats import RunSummary

__all__ = ["add_parsers", "schedule_doc"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    new_parser(subparsers, "schedules", help="list schedules and their state", handler=cmd_list)
    new_parser(
        subparsers,
        "health",
        help="scheduling health (exit code 1 when unhealthy)",
        handler=cmd_health,
    )
    parser = new_parser(
        subparsers, "schedule", help="show or operate one schedule", handler=_no_action, json=False
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    for action, text in (
        ("show", "the control record, statistics and recent runs"),
        ("pause", "pause: firings are recorded as skipped until resumed"),
        ("resume", "resume a paused schedule"),
        ("set", "override the pattern (survives redeploys)"),
        ("reset", "drop the override: back to the pattern from code"),
        ("run", "ask a scheduler to run it now (a manual firing)"),
    ):
        sub = new_parser(actions, action, help=text, handler=cmd_schedule)
        sub.add_argument("name", metavar="NAME")
        if action == "set":
            sub.add_argument("pattern", metavar="PATTERN", help="cron expression or @every 30s")
            sub.add_argument("--timezone", help="IANA timezone (default: keep the current one)")
        if action in ("pause", "resume", "run"):
            sub.add_argument("--reason", help="why (recorded)")
        if action == "run":
            sub.add_argument("--correlation-id", help="your id for this request")
            sub.add_argument(
                "--wait",
                type=float,
                metavar="SECONDS",
                help="wait for the run to end; exit code 3 if it did not succeed",
            )
        if action == "show":
            sub.add_argument("--limit", type=int, default=10, help="recent runs shown")


def _no_action(args: argparse.Namespace, session: Session) -> int:
    raise UsageError("schedule needs an action: show, pause, resume, set, reset or run")


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def schedule_doc(control: ScheduleControl) -> dict[str, Any]:
    """One schedule's control record as ``--json`` prints it."""
    return {
        "name": control.name,
        "task": control.task,
        "status": control.status,
        "status_reason": control.status_reason,
        "pattern": control.pattern,
        "timezone": control.timezone,
        "default_pattern": control.default_pattern,
        "default_timezone": control.default_timezone,
        "overridden": control.overridden,
        "definition_revision": control.definition_revision,
        "description": control.description,
        "overlap": control.overlap,
        "max_runtime": control.max_runtime,
        "retry_attempts": control.retry_attempts,
        "retry_backoff": control.retry_backoff,
        "manual_run_enabled": control.manual_run_enabled,
        "misfire": control.misfire,
        "misfire_grace": control.misfire_grace,
        "bucket_key": control.bucket_key,
        "registered_at": _when(control.registered_at),
        "updated_at": _when(control.updated_at),
        "updated_by": control.updated_by,
        "runs": control.runs,
        "errors": control.errors,
        "skips": control.skips,
        "consecutive_failures": control.consecutive_failures,
        "last_run_at": _when(control.last_run_at),
        "last_status": control.last_status,
        "last_error": control.last_error,
        "next_run_at": _when(control.next_run_at),
    }


def _run_doc(run: RunSummary) -> dict[str, Any]:
    return {
        "task_id": run.task_id,
        "status": run.status.value,
        "trigger": run.trigger_type,
        "scheduled_at": _when(run.scheduled_at),
        "started_at": _when(run.started_at),
        "finished_at": _when(run.finished_at),
        "duration": run.duration,
        "error": run.error,
    }


def _admin(session: Session) -> ScheduleAdmin:
    from chongming_task.schedule.admin import ScheduleAdmin

    return ScheduleAdmin(session.open_store(create=False), actor=session.issuer)


def _short(value: datetime | None) -> str:
    return "-" if value is None else value.isoformat(timespec="seconds")


def cmd_list(args: argparse.Namespace, session: Session) -> int:
    controls = _admin(session).schedules()
    if session.json:
        session.output.json(document("schedules", schedules=[schedule_doc(c) for c in controls]))
        return ExitCode.OK
    if not controls:
        session.output.print("no schedules")
        return ExitCode.OK
    rows = [
        [
            c.name,
            c.task,
            c.pattern + (" (set)" if c.overridden else ""),
            c.timezone,
            c.status,
            _short(c.next_run_at),
            c.last_status or "-",
            str(c.runs),
            str(c.errors),
        ]
        for c in controls
    ]
    headers = ["NAME", "TASK", "PATTERN", "TZ", "STATUS", "NEXT_RUN", "LAST", "RUNS", "ERRORS"]
    session.output.table(headers, rows, status_column="LAST")
    if any(c.overridden for c in controls):
        session.output.print(
            "(set): pattern overridden by an operator; `schedule reset NAME` restores the code's"
        )
    return ExitCode.OK


def cmd_health(args: argparse.Namespace, session: Session) -> int:
    health = _admin(session).health()
    if session.json:
        session.output.json(
            document(
                "health",
                status=health.status,
                healthy=health.healthy,
                schedules=health.schedules,
                active=health.active,
                paused=health.paused,
                running=health.running,
                failing=list(health.failing),
                overdue=list(health.overdue),
                next_due=_when(health.next_due),
                next_due_schedule=health.next_due_schedule,
                problems=list(health.problems),
                checked_at=_when(health.checked_at),
            )
        )
    else:
        output = session.output
        output.print(
            f"{health.status}: {health.schedules} schedule(s), {health.active} active, "
            f"{health.paused} paused, {health.running} run(s) unfinished"
        )
        if health.next_due is not None:
            output.print(f"next due: {health.next_due_schedule} at {_short(health.next_due)}")
        for problem in health.problems:
            output.print(f"problem: {problem}")
    return ExitCode.OK if health.healthy else ExitCode.FAILED


def cmd_schedule(args: argparse.Namespace, session: Session) -> int:
    admin = _admin(session)
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
                statistics={
                    "runs": stats.runs,
                    "succeeded": stats.succeeded,
                    "errors": stats.errors,
                    "skipped": stats.skipped,
                    "unfinished": stats.unfinished,
                    "success_rate": stats.success_rate,
                    "average_duration": stats.average_duration,
                },
                runs=[_run_doc(run) for run in history],
            )
        )
        return ExitCode.OK
    output = session.output
    doc = schedule_doc(control)
    keys = (
        "name",
        "task",
        "status",
        "pattern",
        "timezone",
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
            _short(run.scheduled_at),
            "-" if run.duration is None else f"{run.duration:.2f}s",
            run.error or "-",
        ]
        for run in history
    ]
    output.table(["TASK_ID", "STATUS", "TRIGGER", "SCHEDULED", "DURATION", "ERROR"], rows)
    return ExitCode.OK


def _run(args: argparse.Namespace, session: Session, admin: ScheduleAdmin) -> int:
    if args.wait is not None and args.wait <= 0:
        raise UsageError(f"--wait must be > 0 seconds, got {args.wait}")
    try:
        command = admin.request_run(
            args.name, reason=args.reason, correlation_id=args.correlation_id
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
