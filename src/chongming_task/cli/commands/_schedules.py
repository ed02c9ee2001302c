"""``schedules``, ``schedule show|pause|resume|set|reset|run NAME`` and ``health``.

Schedules are declared in code and run by workers; operators act on their control
records in the store through ``ScheduleAdmin``, from any process. Pause, resume and
pattern overrides are compare-and-set writes that every scheduler picks up within
one tick; a manual run is a command that a scheduler having the schedule claims, runs
and completes with the run's result (``--wait`` follows it).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import ExitCode, UsageError
from chongming_task.cli._parsing import integer, seconds
from chongming_task.cli._schema import document
from chongming_task.cli.commands._common import new_parser
from chongming_task.cli.commands._schedule_docs import admin_for, schedule_doc, short, when
from chongming_task.cli.commands._schedule_ops import cmd_schedule
from chongming_task.cli.commands._schedule_preview import add_cancel_parser, add_preview_parser

if TYPE_CHECKING:
    from chongming_task.cli._session import Session

__all__ = ["add_parsers"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    for build in (_schedules_parser, _health_parser, _schedule_parser):
        build(subparsers)


def _schedules_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    new_parser(subparsers, "schedules", help="list schedules and their state", handler=cmd_list)


def _health_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    new_parser(
        subparsers,
        "health",
        help="scheduling health (exit code 1 when unhealthy)",
        handler=cmd_health,
    )


#: ``schedule ACTION NAME``: each action and its one-line help.
_ACTIONS = (
    ("show", "the control record, statistics and recent runs"),
    ("pause", "pause: firings are recorded as skipped until resumed"),
    ("resume", "resume a paused schedule"),
    ("set", "override the pattern (survives redeploys)"),
    ("reset", "drop the override: back to the pattern from code"),
    ("run", "ask a scheduler to run it now (a manual firing)"),
    ("cancel-run", "cancel a manual-run request no scheduler has claimed yet"),
    ("preview", "the next firings with UTC and local times, DST changes explained"),
)


def _schedule_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers, "schedule", help="show or operate one schedule", handler=_no_action, json=False
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    for action, text in _ACTIONS:
        if action == "preview":
            add_preview_parser(actions)
            continue
        if action == "cancel-run":
            add_cancel_parser(actions)
            continue
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
                "--input",
                metavar="JSON",
                help="a JSON object for the run: metadata.input, and the task's `input` "
                "argument if it declares one",
            )
            sub.add_argument(
                "--wait",
                type=seconds,
                metavar="SECONDS",
                help="wait for the run to end; exit code 3 if it did not succeed",
            )
        if action == "show":
            sub.add_argument("--limit", type=integer, default=10, help="recent runs shown")


def _no_action(args: argparse.Namespace, session: Session) -> int:
    raise UsageError(
        "schedule needs an action: show, pause, resume, set, reset, run, cancel-run or preview"
    )


def cmd_list(args: argparse.Namespace, session: Session) -> int:
    controls = admin_for(session).schedules()
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
            short(c.next_run_at),
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
    from chongming_task.buckets import fleet_health

    # The verdict of the whole command (its exit code): schedules, queue and buckets.
    verdict = fleet_health(session.open_store(create=False), admin_for(session))
    health, queue, owners = verdict.schedules, verdict.queue, verdict.owners
    assert health is not None  # an admin was given
    status, healthy, problems = verdict.status, verdict.healthy, list(verdict.problems)
    if session.json:
        session.output.json(
            document(
                "health",
                status=status,
                healthy=healthy,
                schedules_status=health.status,
                schedules_healthy=health.healthy,
                schedules=health.schedules,
                active=health.active,
                paused=health.paused,
                running=health.running,
                failing=list(health.failing),
                overdue=list(health.overdue),
                next_due=when(health.next_due),
                next_due_schedule=health.next_due_schedule,
                stale_runs=health.stale_runs,
                blocked=list(health.blocked),
                error=health.error,
                problems=problems,
                checked_at=when(health.checked_at),
                queue={
                    "healthy": queue.healthy,
                    "workers_live": list(queue.live),
                    "workers_dead": list(queue.dead),
                    "depth": queue.depth,
                    "oldest_queued_age": queue.oldest_age,
                    "orphaned_buckets": list(queue.orphaned),
                    "lease_expired": list(queue.expired),
                    "paused": [pause.to_dict() for pause in queue.paused],
                },
                buckets=owners.to_dict(),
            )
        )
    else:
        output = session.output
        output.print(
            f"{status}: {health.schedules} schedule(s), {health.active} active, "
            f"{health.paused} paused, {health.running} run(s) unfinished"
        )
        if health.next_due is not None:
            output.print(f"next due: {health.next_due_schedule} at {short(health.next_due)}")
        output.print(
            f"queue: {len(queue.live)} live worker(s), {len(queue.dead)} dead, "
            f"{sum(queue.depth.values())} queued task(s)"
        )
        for pause in queue.paused:
            output.print(f"queue: intake paused: {pause.describe()}")
        if owners.declared:
            output.print(
                f"buckets: {len(owners.holes)} without a live owner, "
                f"{len(owners.duplicates)} declared twice, {owners.orphaned_tasks} orphaned "
                f"task(s), {len(owners.stale)} stale declaration(s)"
            )
        for problem in problems:
            output.print(f"problem: {problem}")
    return ExitCode.OK if healthy else ExitCode.FAILED
