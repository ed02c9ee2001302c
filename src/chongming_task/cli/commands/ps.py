"""``ps``: the task table, filtered, once or refreshed in place with ``--watch``.

Without a terminal the table is the library's ``render_table`` text (stable for
scripts and diffs); on a terminal it is a rich table with coloured statuses.
``--watch`` redraws in place on a terminal and prints one table (or one JSON line)
per refresh otherwise; Ctrl-C ends it with exit code 0.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chongming_task.cli.commands._common import console_controller, new_parser
from chongming_task.cli.errors import ExitCode, UsageError
from chongming_task.cli.parsing import integer, seconds
from chongming_task.cli.schema import document, tasks_docs
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task.cli.session import Session
    from chongming_task.controller import Controller
    from chongming_task.model import TaskSnapshot

__all__ = ["add_parsers", "task_rows"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers, "ps", help="list tasks (all processes sharing the store)", handler=cmd_ps
    )
    parser.add_argument(
        "--status",
        action="append",
        metavar="STATUS",
        help="only these statuses (repeatable or comma-separated: running,paused)",
    )
    parser.add_argument("--name", metavar="PREFIX", help="only task names starting with PREFIX")
    parser.add_argument("--tag", help="only tasks carrying this tag")
    parser.add_argument("--bucket", type=integer, help="only tasks in this bucket")
    parser.add_argument("--limit", type=integer, help="at most N tasks (in --order)")
    parser.add_argument(
        "--order",
        choices=["created", "-created", "updated", "-updated", "priority"],
        default="created",
        help="sort: created (default), -created (newest first), updated, -updated, priority",
    )
    parser.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    parser.add_argument(
        "--interval", type=seconds, default=1.0, help="seconds between --watch refreshes"
    )
    parser.add_argument(
        "--count", type=integer, help="with --watch: stop after N refreshes (for scripts)"
    )


def _statuses(values: list[str] | None) -> list[TaskStatus] | None:
    if not values:
        return None
    result: list[TaskStatus] = []
    for value in values:
        for item in value.split(","):
            try:
                result.append(TaskStatus(item.strip()))
            except ValueError:
                known = ", ".join(status.value for status in TaskStatus)
                raise UsageError(
                    f"--status {item!r} is not a status; choose from {known}"
                ) from None
    return result


def _filters(args: argparse.Namespace, session: Session) -> dict[str, Any]:
    options = session.options
    if args.bucket is not None and not 0 <= args.bucket < options.num_buckets:
        raise UsageError(
            f"--bucket {args.bucket} is outside 0..{options.num_buckets - 1} "
            f"(--num-buckets {options.num_buckets})"
        )
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {args.limit}")
    if args.interval <= 0:
        raise UsageError(f"--interval must be > 0, got {args.interval}")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count must be >= 1, got {args.count}")
    filters: dict[str, Any] = {
        "status": _statuses(args.status),
        "name_prefix": args.name,
        "tag": args.tag,
        "bucket": args.bucket,
        "limit": args.limit,
        "order": args.order,
    }
    if options.partitions:
        # A node's view: only the buckets it owns (§8.14).
        filters["buckets"] = sorted(options.owned_buckets or ())
    return {key: value for key, value in filters.items() if value is not None}


def task_rows(snapshots: list[TaskSnapshot], now: datetime) -> list[list[str]]:
    """The cells of ``render_table``'s columns, for the rich table."""
    from chongming_task.controller.table import elapsed_seconds, format_elapsed

    rows = []
    for snapshot in snapshots:
        elapsed = elapsed_seconds(snapshot, now)
        rows.append(
            [
                snapshot.task_id,
                snapshot.label or snapshot.name,
                snapshot.status.value,
                f"{snapshot.attempt}/{snapshot.max_attempts}",
                format_elapsed(elapsed),
                snapshot.progress.render() if snapshot.progress else "-",
                snapshot.failure.kind.value if snapshot.failure else "-",
                "-" if snapshot.bucket is None else str(snapshot.bucket),
            ]
        )
    return rows


def _render(
    session: Session,
    snapshots: list[TaskSnapshot],
    *,
    compact: bool,
    corrupt: dict[str, str] | None = None,
) -> Any:
    """Print the JSON or plain table; return a rich renderable on a terminal.

    Rows the store could not decode are listed as ``corrupt`` (their warning went to
    stderr already): one broken row never hides the others.
    """
    from chongming_task.controller.table import COLUMNS, render_table

    corrupt = corrupt or {}
    output = session.output
    if session.json:
        broken = [{"task_id": task_id, "error": error} for task_id, error in corrupt.items()]
        output.json(
            document("ps", count=len(snapshots), tasks=tasks_docs(snapshots), corrupt=broken),
            compact=compact,
        )
        return None
    now = datetime.now(UTC)
    blank = ["-"] * (len(COLUMNS) - 3)
    if output.rich:
        rows = task_rows(snapshots, now)
        rows.extend([task_id, "-", "corrupt", *blank] for task_id in corrupt)
        return output.rich_table(COLUMNS, rows)
    lines = [render_table(snapshots, now=now)] if snapshots else []
    lines.extend(f"{task_id}  corrupt: {error}" for task_id, error in corrupt.items())
    output.print("\n".join(lines) if lines else "no tasks")
    return None


def _query(
    session: Session, controller: Controller, filters: dict[str, Any]
) -> tuple[list[TaskSnapshot], dict[str, str]]:
    from chongming_task.stores._salvage import query_skipping_corrupt

    def warn(task_id: str, error: str) -> None:
        session.output.notice(f"warning: skipping corrupt task row {task_id!r}: {error}")

    return query_skipping_corrupt(lambda: list(controller.list_tasks(**filters)), warn)


def cmd_ps(args: argparse.Namespace, session: Session) -> int:
    filters = _filters(args, session)
    controller = console_controller(session, session.open_store(create=False))
    if not args.watch:
        snapshots, corrupt = _query(session, controller, filters)
        table = _render(session, snapshots, compact=False, corrupt=corrupt)
        if table is not None:
            session.output.console.print(table)
        return ExitCode.OK
    return _watch(args, session, controller, filters)


def _watch(
    args: argparse.Namespace, session: Session, controller: Controller, filters: dict[str, Any]
) -> int:
    output = session.output
    refreshes = 0
    try:
        if output.rich and not session.json:
            from rich.live import Live

            with Live(console=output.console, auto_refresh=False) as live:
                while args.count is None or refreshes < args.count:
                    snapshots, corrupt = _query(session, controller, filters)
                    live.update(
                        _render(session, snapshots, compact=True, corrupt=corrupt), refresh=True
                    )
                    refreshes += 1
                    if args.count is None or refreshes < args.count:
                        time.sleep(args.interval)
            return ExitCode.OK
        while args.count is None or refreshes < args.count:
            if refreshes and not session.json:
                output.print("")
            snapshots, corrupt = _query(session, controller, filters)
            _render(session, snapshots, compact=True, corrupt=corrupt)
            refreshes += 1
            if args.count is None or refreshes < args.count:
                time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return ExitCode.OK
