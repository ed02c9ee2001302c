"""``ps``: the task table, filtered, once or refreshed in place with ``--watch``.

Without a terminal the table is the library's ``render_table`` text (stable for
scripts and diffs); on a terminal it is a rich table with coloured statuses.
``--watch`` redraws in place on a terminal and prints one table (or one JSON line)
per refresh otherwise; Ctrl-C ends it with exit code 0.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from chongming_task.cli._errors import ExitCode, UsageError
from chongming_task.cli._parsing import integer, seconds
from chongming_task.cli._schema import document, tasks_docs
from chongming_task.cli.commands._common import console_controller, new_parser
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot
    from chongming_task.cli._session import Session
    from chongming_task.controller import Controller
    from chongming_task.stores._pauses import QueuePause

__all__ = ["DEFAULT_LIMIT", "ORDERS", "add_parsers", "task_rows"]

#: Tasks ``ps`` lists without ``--limit``/``--all``: a store with a million finished
#: tasks must not print (or read) them all because someone typed ``ps``.
DEFAULT_LIMIT = 50

#: ``--order`` values; the ``-`` ones look like options to argparse, so
#: ``app.join_dash_values`` glues ``--order -created`` into ``--order=-created``.
ORDERS = ("created", "-created", "updated", "-updated", "priority")


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "ps",
        help="list tasks (all processes sharing the store)",
        handler=cmd_ps,
        own_globals=frozenset({"--owner"}),
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
    parser.add_argument(
        "--owner",
        dest="holder",
        metavar="OWNER",
        help="only tasks held by the worker with this owner id (see `workers`); the "
        "process identity --owner goes before the command",
    )
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only tasks created at or after WHEN: an age (30m, 2h, 7d) or an ISO time "
        "with its offset (2026-03-01T08:00:00+08:00)",
    )
    parser.add_argument(
        "--until",
        metavar="WHEN",
        help="only tasks created before WHEN (same forms as --since)",
    )
    parser.add_argument(
        "--limit",
        type=integer,
        help=f"at most N tasks, in --order (default {DEFAULT_LIMIT}; --all for every task)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="every matching task, however many (no default limit)",
    )
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default="-created",
        help="sort: -created (newest first, the default), created (oldest first), "
        "updated, -updated, priority",
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
    if args.limit is not None and args.all:
        raise UsageError("give either --limit N or --all, not both")
    if args.interval <= 0:
        raise UsageError(f"--interval must be > 0, got {args.interval}")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count must be >= 1, got {args.count}")
    since, until = _window(args, session)
    filters: dict[str, Any] = {
        "status": _statuses(args.status),
        "name_prefix": args.name,
        "tag": args.tag,
        "bucket": args.bucket,
        "owner": args.holder,
        "created_after": since,
        "created_before": until,
        "limit": None if args.all else (args.limit or DEFAULT_LIMIT),
        "order": args.order,
    }
    if options.partitions:
        # A node's view: only the buckets it owns (§8.14).
        filters["buckets"] = sorted(options.owned_buckets or ())
    return {key: value for key, value in filters.items() if value is not None}


def _window(args: argparse.Namespace, session: Session) -> tuple[datetime | None, datetime | None]:
    """``--since``/``--until`` as instants (ages counted back from now)."""
    from chongming_task._timespec import parse_instant
    from chongming_task.errors import ConfigurationError

    now = datetime.now(UTC)
    bounds: list[datetime | None] = []
    for option, text in (("--since", args.since), ("--until", args.until)):
        try:
            bounds.append(None if text is None else parse_instant(text, now=now, name=option))
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
    since, until = bounds
    if since is not None and until is not None and until <= since:
        raise UsageError(
            f"--until ({until.isoformat()}) must be after --since ({since.isoformat()})"
        )
    return since, until


def task_rows(snapshots: list[TaskSnapshot], now: datetime) -> list[list[str]]:
    """The cells of ``render_table``'s columns (sanitised, redacted), for the rich table."""
    from chongming_task.controller._table import row_cells

    return [list(row_cells(snapshot, now)) for snapshot in snapshots]


def _paused(controller: Controller) -> list[QueuePause]:
    """The paused queues of the store (docs/queue.md, "Pause intake")."""
    from chongming_task.stores._queue_store import QueueStore

    store = controller.store
    if isinstance(store, QueueStore) and store.supports_queue_pauses:
        return store.list_queue_pauses()
    return []


def _render(
    session: Session, page: Page, *, compact: bool, paused: Sequence[QueuePause] = ()
) -> Any:
    """Print the JSON or plain table; return a rich renderable on a terminal.

    Rows the store could not decode are listed as ``corrupt`` (their warning went to
    stderr already): one broken row never hides the others. Each paused queue gets a
    line on stderr (``intake paused: queue 'noop' paused by ...``), so the table a
    script reads stays as it is; the JSON lists them as ``paused_queues``.
    """
    from chongming_task.controller._table import COLUMNS, render_table

    snapshots, total, corrupt = page
    output = session.output
    if session.json:
        broken = [{"task_id": task_id, "error": error} for task_id, error in corrupt.items()]
        output.json(
            document(
                "ps",
                count=len(snapshots),
                total=total,
                tasks=tasks_docs(snapshots),
                corrupt=broken,
                paused_queues=[pause.to_dict() for pause in paused],
            ),
            compact=compact,
        )
        return None
    if not (compact and output.rich):
        for pause in paused:
            output.notice(f"intake paused: {pause.describe()}")
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


def _footer(session: Session, page: Page) -> None:
    """``showing 50 of 1234 tasks``, on stderr so a script reading the table gets none."""
    shown, total = len(page[0]) + len(page[2]), page[1]
    if shown < total and not session.json:
        session.output.notice(
            f"showing {shown} of {total} tasks (--all for every one, or --limit N)"
        )


#: One look at the store: the tasks shown, how many matched in all, and the rows that
#: could not be decoded (task id -> error).
Page: TypeAlias = "tuple[list[TaskSnapshot], int, dict[str, str]]"


def _query(session: Session, controller: Controller, filters: dict[str, Any]) -> Page:
    from chongming_task.stores._salvage import query_skipping_corrupt

    def warn(task_id: str, error: str) -> None:
        session.output.notice(f"warning: skipping corrupt task row {task_id!r}: {error}")

    snapshots, corrupt = query_skipping_corrupt(
        lambda: list(controller.list_tasks(**filters)), warn
    )
    found = len(snapshots) + len(corrupt)
    limit = filters.get("limit")
    if limit is None or found < limit:
        return snapshots, found, corrupt
    return snapshots, max(_count(controller, filters), found), corrupt


def _count(controller: Controller, filters: dict[str, Any]) -> int:
    """How many tasks match ``filters`` (limit and order aside), from the store's counts."""
    from chongming_task.controller._options import task_query

    scope = {key: value for key, value in filters.items() if key not in ("limit", "order")}
    return sum(controller.store.count_by_status(task_query(**scope)).values())


def cmd_ps(args: argparse.Namespace, session: Session) -> int:
    filters = _filters(args, session)
    controller = console_controller(session, session.open_store(create=False, read_only=True))
    if not args.watch:
        page = _query(session, controller, filters)
        table = _render(session, page, compact=False, paused=_paused(controller))
        if table is not None:
            session.output.console.print(table)
        _footer(session, page)
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
                    live.update(
                        _render(session, _query(session, controller, filters), compact=True),
                        refresh=True,
                    )
                    refreshes += 1
                    if args.count is None or refreshes < args.count:
                        time.sleep(args.interval)
            return ExitCode.OK
        while args.count is None or refreshes < args.count:
            if refreshes and not session.json:
                output.print("")
            page = _query(session, controller, filters)
            _render(session, page, compact=True, paused=_paused(controller))
            refreshes += 1
            if args.count is None or refreshes < args.count:
                time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return ExitCode.OK
