"""``retry``: run finished tasks again, by id or by the filters of ``ps``.

A thin adapter over :meth:`chongming_task.Client.retry` and ``retry_many``
(docs/queue.md "Run it again"): a retried task keeps its id and history and is queued
again for any worker that may claim it. By filter the count comes first, and
``--dry-run`` changes nothing.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CliError, ExitCode, UsageError
from chongming_task.cli._parsing import integer
from chongming_task.cli._schema import document, task_doc
from chongming_task.cli.commands._common import new_parser
from chongming_task.cli.commands._ps import _statuses, _window

if TYPE_CHECKING:
    from chongming_task.cli._session import Session
    from chongming_task.queue import Client

__all__ = ["add_parsers"]

_FILTERS = ("status", "name", "tag", "bucket", "since", "until")


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "retry",
        help="run finished tasks again (failed, stopped, cancelled, lost)",
        description="Queue finished tasks again, by id or by filter: each keeps its id and "
        "history (the retry is recorded with who asked and why) and runs again from its "
        "stored arguments on any worker that may claim it. Only tasks enqueued through the "
        "queue (Client.enqueue, submit) store their arguments.",
        handler=cmd_retry,
    )
    parser.add_argument("task_ids", nargs="*", metavar="TASK_ID", help="the tasks to retry")
    parser.add_argument("--reason", help="why (recorded in each task's history)")
    parser.add_argument(
        "--status",
        action="append",
        metavar="STATUS",
        help="by filter: only these statuses (failed, stopped, cancelled, lost; default all four)",
    )
    parser.add_argument("--name", metavar="PREFIX", help="by filter: task names starting with it")
    parser.add_argument("--tag", help="by filter: tasks carrying this tag")
    parser.add_argument("--bucket", type=integer, help="by filter: tasks in this bucket")
    parser.add_argument(
        "--since", metavar="WHEN", help="by filter: created at or after WHEN (30m, 2h, ISO time)"
    )
    parser.add_argument("--until", metavar="WHEN", help="by filter: created before WHEN")
    parser.add_argument(
        "--dry-run", action="store_true", help="by filter: count and list, change nothing"
    )


def cmd_retry(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.queue import Client

    filtered = any(getattr(args, name) is not None for name in _FILTERS)
    if args.task_ids and filtered:
        raise UsageError("give task ids or filters (--status, --name, ...), not both")
    if not args.task_ids and not filtered:
        raise UsageError(
            "give the ids of the tasks to retry, or filters: --status failed, --name PREFIX, "
            "--tag, --bucket, --since, --until"
        )
    if args.task_ids and args.dry_run:
        raise UsageError("--dry-run goes with filters (--status, --name, ...)")
    client = Client(session.open_store(create=False), actor=session.issuer)
    if args.task_ids:
        return _by_id(args, session, client)
    return _by_filter(args, session, client)


def _by_id(args: argparse.Namespace, session: Session, client: Client) -> int:
    from chongming_task.errors import ConfigurationError, UnknownTask

    retried: list[str] = []
    refused: dict[str, str] = {}
    code = ExitCode.OK
    for task_id in dict.fromkeys(args.task_ids):
        before = client.store.get(task_id)
        try:
            if before is None:
                raise UnknownTask(task_id, f"unknown task id {task_id!r} (see `chongming-task ps`)")
            client.retry(task_id, reason=args.reason)
        except UnknownTask as exc:
            refused[task_id] = str(exc)
            code = max(code, ExitCode.FAILED)
            continue
        except ConfigurationError as exc:
            refused[task_id] = str(exc)
            code = ExitCode.USAGE
            continue
        retried.append(task_id)
        if not session.json and before is not None:
            session.output.print(
                f"retried {task_id}: {before.status.value} -> queued "
                f"(attempt {before.attempt + 1} next; history kept)"
            )
    if session.json:
        tasks = [task_doc(s) for s in map(client.store.get, retried) if s is not None]
        session.output.json(document("retry", retried=retried, refused=refused, tasks=tasks))
    if refused:
        first = "; ".join(refused.values())
        if len(refused) == 1 and not retried:
            raise CliError(first, code=code)
        total = len(refused) + len(retried)
        raise CliError(f"{len(refused)} of {total} refused: {first}", code=code)
    return ExitCode.OK


def _by_filter(args: argparse.Namespace, session: Session, client: Client) -> int:
    options = session.options
    if args.bucket is not None and not 0 <= args.bucket < options.num_buckets:
        raise UsageError(
            f"--bucket {args.bucket} is outside 0..{options.num_buckets - 1} "
            f"(--num-buckets {options.num_buckets})"
        )
    since, until = _window(args, session)
    filters: dict[str, Any] = {
        "status": _statuses(args.status),
        "name_prefix": args.name,
        "tag": args.tag,
        "bucket": args.bucket,
        "created_after": since,
        "created_before": until,
    }
    report = client.retry_many(
        reason=args.reason,
        dry_run=args.dry_run,
        **{key: value for key, value in filters.items() if value is not None},
    )
    if session.json:
        session.output.json(document("retry", **report.to_dict()))
        return ExitCode.OK
    out = session.output
    out.print(f"{len(report.matched)} task(s) match")
    verb = "would retry" if report.dry_run else "retried"
    out.print(f"{verb} {len(report.retried)}: {', '.join(report.retried) or '-'}")
    for task_id, why in report.refused.items():
        out.print(f"refused {task_id}: {why}")
    if report.dry_run:
        out.print("--dry-run: nothing changed")
    return ExitCode.OK
