"""``stop``, ``pause``, ``resume``, ``reconcile`` and ``prune``: the control commands.

stop/pause/resume take the one control path
(:func:`~chongming_task.controller._control.control_task`), and what they print is
what it did: a task no worker holds is changed in the store at once ("stopped ...
at once; now stopped"); a held one gets a command its holder applies, and the output
says exactly that: "requested from <holder>", confirmed only when ``--wait`` saw the
effect in the store (exit 1 if it did not within the time given). ``--reason`` is
recorded in the task's history by whoever applies the action.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any, Final

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
    from chongming_task.controller._control import Controlled

__all__ = ["add_parsers"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    for build in (_stop_parser, _pause_parser, _resume_parser, _reconcile_parser, _prune_parser):
        build(subparsers)


def _stop_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = task_parser(subparsers, "stop", help="stop a task", handler=cmd_stop)
    _add_control_options(parser, "stop")


def _pause_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = task_parser(subparsers, "pause", help="pause a task", handler=cmd_pause)
    _add_control_options(parser, "pause")


def _resume_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = task_parser(subparsers, "resume", help="resume a paused task", handler=cmd_resume)
    _add_control_options(parser, "resume")


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


def _add_control_options(parser: argparse.ArgumentParser, action: str) -> None:
    parser.description = (
        f"{action.capitalize()} TASK_ID. A task no worker holds is changed in the store at "
        f"once; a task a worker holds gets a request its holder applies (confirmed only "
        f"with --wait)."
    )
    parser.add_argument("--reason", help="why (recorded in the task's history)")
    parser.add_argument(
        "--wait",
        type=seconds,
        metavar="SECONDS",
        help=f"when a worker holds the task: wait up to SECONDS for its holder to "
        f"{action} it (exit 1 if it did not)",
    )


#: The statuses that show an action took effect.
_EFFECT: Final[dict[str, frozenset[TaskStatus]]] = {
    "stop": frozenset(status for status in TaskStatus if status.is_terminal),
    "pause": frozenset({TaskStatus.PAUSED}),
    "resume": frozenset(
        status for status in TaskStatus if status not in (TaskStatus.PAUSED, TaskStatus.PAUSING)
    ),
}
_DONE: Final = {"stop": "stopped", "pause": "paused", "resume": "resumed"}


def _wait_for(
    controller: Controller, task_id: str, action: str, seconds: float
) -> TaskSnapshot | None:
    """Poll until the action's effect (or the task's end) shows; ``None`` on timeout."""
    deadline = time.monotonic() + seconds
    while True:
        snapshot = controller.get(task_id)
        if snapshot is not None and (snapshot.status in _EFFECT[action] or snapshot.is_terminal):
            return snapshot
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _refusal(task_id: str, action: str, done: Controlled, before: TaskSnapshot) -> str:
    """The one line of an action the control path did not accept."""
    current = done.snapshot or before
    state = current.status.value
    if done.outcome == "finished":
        return f"task {task_id!r} already finished ({state}); nothing to {action}"
    if done.outcome == "not_found":
        return f"unknown task id {task_id!r} (see `chongming-task ps`)"
    if done.outcome == "not_held":
        return (
            f"task {task_id!r} is recorded as held by {current.lease_owner or current.owner}, "
            f"this command's own --owner, which holds no task: an earlier process with that "
            f"name; run `chongming-task reconcile`, or give another --owner"
        )
    if current.status.occupies_slot and (current.lease_owner or current.owner) is None:
        return (
            f"cannot {action} task {task_id!r}: it is {state} but no worker holds it "
            f"(its holder is gone); run `chongming-task reconcile`"
        )
    return f"cannot {action} task {task_id!r}: it is {state}"


def _control(args: argparse.Namespace, session: Session, action: str) -> int:
    from chongming_task._redact import redact_reason
    from chongming_task.controller._control import control_task

    if args.wait is not None and args.wait <= 0:
        raise UsageError(f"--wait must be > 0 seconds, got {args.wait}")
    store = session.open_store(create=False)
    controller = console_controller(session, store)
    task_id = args.task_id
    before = require_task(controller, task_id)
    if (
        action == "resume"
        and not before.is_terminal
        and before.status not in (TaskStatus.PAUSED, TaskStatus.PAUSING)
    ):
        # Checked here: a held task would get a request its holder ignores.
        raise CommandFailed(
            f"task {task_id!r} is {before.status.value}, not paused; nothing to resume"
        )
    done = control_task(
        store,
        task_id,
        action,
        actor=controller.owner,
        clock=controller.clock,
        reason=args.reason,
    )
    if done.outcome not in ("applied", "requested"):
        raise CommandFailed(_refusal(task_id, action, done, before))
    final = done.snapshot or before  # set for both outcomes: the task as stored
    if done.outcome == "applied":
        # Nobody held it: one guarded write, true in the store now.
        message = (
            f"{_DONE[action]} {task_id} at once (it was {before.status.value}, held by no "
            f"worker); now {final.status.value}"
        )
        confirmed = True
    else:
        holder = final.lease_owner or final.owner
        message = f"{action} of {task_id} requested from its holder {holder}"
        confirmed = False
        if args.wait is None:
            message += (
                f"; not confirmed yet (see `chongming-task status {task_id}`, or pass --wait)"
            )
        else:
            seen = _wait_for(controller, task_id, action, args.wait)
            if seen is None or seen.status not in _EFFECT[action]:
                current = seen or controller.get(task_id)
                state = current.status.value if current else "gone"
                why = f"after {args.wait:g}s it is {state}" if seen is None else f"it ended {state}"
                raise CommandFailed(f"{message}; not confirmed: {why}")
            message += f"; confirmed: now {seen.status.value}"
            confirmed = True
            final = seen
    if session.json:
        session.output.json(
            document(
                "control",
                action=action,
                task_id=task_id,
                outcome=done.outcome,
                accepted=True,
                confirmed=confirmed,
                reason=redact_reason(args.reason),
                task=task_doc(final),
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
