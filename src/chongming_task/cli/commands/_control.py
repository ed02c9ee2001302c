"""``stop``, ``pause``, ``resume``, ``reconcile`` and ``prune``: the control commands.

stop/pause/resume take the one control path (``Controller.stop`` & co): a task no
worker took is changed in the store at once (the output says what it is now);
a held one gets a command its holder applies (§8.9), and the output says exactly
that: "requested", never "stopped". ``pause`` across processes is unconfirmed by
design (exit code 0); ``--wait`` polls ``status`` for the caller.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, ExitCode, UsageError
from chongming_task.cli._parsing import integer, seconds
from chongming_task.cli._schema import document, task_doc
from chongming_task.cli.commands._common import (
    console_controller,
    new_parser,
    require_task,
    task_parser,
)
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot
    from chongming_task.cli._session import Session
    from chongming_task.controller import Controller

__all__ = ["add_parsers"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    for build in (_stop_parser, _pause_parser, _resume_parser, _reconcile_parser, _prune_parser):
        build(subparsers)


def _stop_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = task_parser(subparsers, "stop", help="request a task to stop", handler=cmd_stop)
    parser.add_argument("--reason", help="why (recorded in the task's history)")
    _add_wait(parser, "stop")


def _pause_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = task_parser(subparsers, "pause", help="request a task to pause", handler=cmd_pause)
    _add_wait(parser, "pause")


def _resume_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = task_parser(subparsers, "resume", help="resume a paused task", handler=cmd_resume)
    _add_wait(parser, "resume")


def _reconcile_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "reconcile",
        help="mark tasks whose holder is gone (lease expired) as lost",
        handler=cmd_reconcile,
    )
    parser.add_argument("--dry-run", action="store_true", help="report only, change nothing")


def _prune_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "prune",
        help="delete old finished tasks with their history",
        description="Delete finished tasks (succeeded, failed, stopped, ...) with their "
        "history: those older than --older-than, or all but the newest --keep-terminal. "
        "Unfinished tasks are never deleted.",
        handler=cmd_prune,
    )
    parser.add_argument(
        "--older-than",
        metavar="AGE",
        help="finished more than AGE ago: 90s, 30m, 12h, 7d, 2w",
    )
    parser.add_argument(
        "--keep-terminal", type=integer, metavar="N", help="keep only the newest N finished tasks"
    )
    parser.add_argument(
        "--status",
        action="append",
        metavar="STATUS",
        help="with --older-than: only these final statuses (repeatable or comma-separated)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="with --older-than: count, delete nothing"
    )


def _add_wait(parser: argparse.ArgumentParser, action: str) -> None:
    parser.add_argument(
        "--wait",
        type=seconds,
        metavar="SECONDS",
        help=f"poll until the {action} took effect, up to SECONDS (exit 1 if it did not)",
    )


_EFFECT: dict[str, frozenset[TaskStatus]] = {
    "stop": frozenset(status for status in TaskStatus if status.is_terminal),
    "pause": frozenset({TaskStatus.PAUSED}),
    "resume": frozenset(
        status for status in TaskStatus if status not in (TaskStatus.PAUSED, TaskStatus.PAUSING)
    ),
}


def _wait_for(
    controller: Controller, task_id: str, action: str, seconds: float
) -> TaskSnapshot | None:
    """Poll until the action's effect shows in the store; ``None`` on timeout."""
    deadline = time.monotonic() + seconds
    while True:
        snapshot = controller.get(task_id)
        if snapshot is not None and snapshot.status in _EFFECT[action]:
            return snapshot
        if snapshot is not None and action == "pause" and snapshot.is_terminal:
            return snapshot
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _control(args: argparse.Namespace, session: Session, action: str) -> int:
    if args.wait is not None and args.wait <= 0:
        raise UsageError(f"--wait must be > 0 seconds, got {args.wait}")
    store = session.open_store(create=False)
    controller = console_controller(session, store)
    snapshot = require_task(controller, store, args.task_id)
    if snapshot.is_terminal:
        raise CommandFailed(
            f"task {args.task_id!r} already finished ({snapshot.status.value}); nothing to {action}"
        )
    if action == "resume" and snapshot.status not in (TaskStatus.PAUSED, TaskStatus.PAUSING):
        raise CommandFailed(
            f"task {args.task_id!r} is {snapshot.status.value}, not paused; nothing to resume"
        )
    if action == "stop":
        accepted = controller.stop(args.task_id, reason=args.reason)
    elif action == "pause":
        accepted = controller.pause(args.task_id)
    else:
        accepted = controller.resume(args.task_id)
    holder = snapshot.lease_owner or snapshot.owner or "its holder"
    now = controller.get(args.task_id) if snapshot.owner is None else None
    if now is not None and now.owner is None and now.status is not snapshot.status:
        # queued and unheld: applied at once in the store (docs/queue.md)
        message = (
            f"{action}: {args.task_id} was {snapshot.status.value} and not taken by any "
            f"worker; now {now.status.value}"
        )
        accepted = True
    elif action == "pause" and not accepted:
        message = (
            f"pause requested for {args.task_id} (held by {holder}); unconfirmed across "
            f"processes: check `chongming-task status {args.task_id}`"
        )
    elif accepted:
        message = f"{action} requested for {args.task_id} (held by {holder})"
    else:
        raise CommandFailed(f"{action} of task {args.task_id!r} was not accepted")
    final = None
    if args.wait is not None:
        final = _wait_for(controller, args.task_id, action, args.wait)
        if final is None:
            current = controller.get(args.task_id)
            state = current.status.value if current else "unknown"
            raise CommandFailed(
                f"{action} of {args.task_id} requested, but after {args.wait:g}s it is {state}"
            )
        message = f"{message}; now {final.status.value}"
    if session.json:
        session.output.json(
            document(
                "control",
                action=action,
                task_id=args.task_id,
                accepted=bool(accepted),
                confirmed=final is not None or (accepted and action == "pause"),
                task=task_doc(final or controller.get(args.task_id) or snapshot),
            )
        )
    else:
        session.output.print(message)
    return ExitCode.OK


def cmd_stop(args: argparse.Namespace, session: Session) -> int:
    return _control(args, session, "stop")


def cmd_pause(args: argparse.Namespace, session: Session) -> int:
    return _control(args, session, "pause")


def cmd_resume(args: argparse.Namespace, session: Session) -> int:
    return _control(args, session, "resume")


def cmd_reconcile(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.controller._reconcile import reconcile
    from chongming_task.stores._queue_health import split_waiting

    store = session.open_store(create=False)
    controller = console_controller(session, store)
    # Through the reconcile function rather than a node controller: a controller that
    # declares owned buckets starts polling commands at once (§8.14), and a console
    # must never take commands meant for a worker.
    owned = session.options.owned_buckets if session.options.partitions else None
    report = reconcile(
        store,
        clock=controller.clock,
        actor=controller.owner,
        buckets=owned,
        held=(),
        dry_run=args.dry_run,
    )
    waiting, adoptable = split_waiting(store, report.adoptable)
    if session.json:
        session.output.json(
            document(
                "reconcile",
                dry_run=args.dry_run,
                lost=list(report.lost),
                adoptable=list(adoptable),
                skipped=list(report.skipped),
                waiting=list(waiting),
            )
        )
        return ExitCode.OK
    verb = "would mark" if args.dry_run else "marked"
    output = session.output
    output.print(f"{verb} {len(report.lost)} task(s) lost: {', '.join(report.lost) or '-'}")
    output.print(
        f"{len(adoptable)} task(s) adoptable (not running, nobody holds them; "
        f"resubmit to run): {', '.join(adoptable) or '-'}"
    )
    if waiting:
        output.print(
            f"{len(waiting)} queued task(s) waiting for a worker owning their bucket "
            f"(nothing to do): {', '.join(waiting[:20])}{' ...' if len(waiting) > 20 else ''}"
        )
    output.print(
        f"{len(report.skipped)} task(s) skipped (written meanwhile): "
        f"{', '.join(report.skipped) or '-'}"
    )
    return ExitCode.OK


def _prune_by_age(args: argparse.Namespace, session: Session) -> int:
    from chongming_task._retention import parse_age, prune_older_than
    from chongming_task.errors import ConfigurationError

    try:
        age = parse_age(args.older_than)
    except ConfigurationError as exc:
        raise UsageError(f"--older-than: {exc}") from None
    statuses = [item.strip() for value in args.status or () for item in value.split(",")]
    unknown = [item for item in statuses if item not in {status.value for status in TaskStatus}]
    if unknown:
        raise UsageError(f"--status {unknown[0]!r} is not a status")
    controller = console_controller(session, session.open_store(create=False))
    try:
        report = prune_older_than(
            controller.store,
            age,
            clock=controller.clock,
            statuses=statuses or None,
            dry_run=args.dry_run,
        )
    except ConfigurationError as exc:
        raise UsageError(f"--status: {exc}") from None
    if session.json:
        session.output.json(
            document(
                "prune",
                older_than=args.older_than,
                cutoff=report.cutoff.isoformat(),
                dry_run=report.dry_run,
                matched=report.matched,
                removed=report.removed,
                sample=list(report.sample),
            )
        )
    elif report.dry_run:
        shown = f" (oldest: {', '.join(report.sample)})" if report.sample else ""
        session.output.print(
            f"would prune {report.matched} finished task(s) older than {args.older_than}"
            f"{shown}; nothing deleted (--dry-run)"
        )
    else:
        session.output.print(
            f"pruned {report.removed} finished task(s) older than {args.older_than}"
        )
    return ExitCode.OK


def cmd_prune(args: argparse.Namespace, session: Session) -> int:
    if (args.older_than is None) == (args.keep_terminal is None):
        raise UsageError("give --older-than AGE or --keep-terminal N (one of them)")
    if args.older_than is not None:
        return _prune_by_age(args, session)
    if args.status or args.dry_run:
        raise UsageError("--status and --dry-run go with --older-than")
    if args.keep_terminal < 0:
        raise UsageError(f"--keep-terminal must be >= 0, got {args.keep_terminal}")
    controller = console_controller(session, session.open_store(create=False))
    removed = controller.prune(keep_terminal=args.keep_terminal)
    if session.json:
        session.output.json(
            document("prune", keep_terminal=args.keep_terminal, removed=int(removed))
        )
    else:
        session.output.print(
            f"pruned {removed} finished task(s); kept the newest {args.keep_terminal}"
        )
    return ExitCode.OK
