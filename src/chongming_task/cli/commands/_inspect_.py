"""``status``, ``history``, ``stats`` and ``buckets``: read-only views of the store."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chongming_task._redact import printable, redact, redact_json, redact_secrets
from chongming_task.cli._errors import ExitCode
from chongming_task.cli._parsing import format_buckets
from chongming_task.cli._schema import counts_doc, document, task_doc, transition_doc
from chongming_task.cli.commands._common import (
    console_controller,
    new_parser,
    require_task,
    task_parser,
)
from chongming_task.core import utc_now
from chongming_task.states import TaskStatus
from chongming_task.stores._queue_records import children_query, parent_of

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot
    from chongming_task.cli._session import Session

__all__ = ["LOG_LINES", "add_parsers", "status_lines"]

#: How many of the task's last log lines ``status`` shows.
LOG_LINES = 10


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    for name, text, handler in (
        ("status", "one task: snapshot, failure, progress, last log lines", cmd_status),
        ("history", "one task's transitions with trigger, actor, reason, version", cmd_history),
    ):
        task_parser(subparsers, name, help=text, handler=handler)
    new_parser(subparsers, "stats", help="task counts per status", handler=cmd_stats)
    _buckets_parser(subparsers)


def _buckets_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    from chongming_task.cli.commands._owners import add_owner_parsers

    parser = new_parser(
        subparsers,
        "buckets",
        help="task counts per bucket; --owners: who owns them; handoff: move them",
        handler=cmd_buckets,
    )
    add_owner_parsers(parser)


def _when(value: Any) -> str:
    return "-" if value is None else value.isoformat(timespec="milliseconds")


def _logs(snapshot: TaskSnapshot) -> list[str]:
    from chongming_task.worker import stored_tail

    return stored_tail(snapshot, LOG_LINES)


def status_lines(snapshot: TaskSnapshot, now: datetime | None = None) -> list[tuple[str, str]]:
    """``(field, value)`` pairs of the ``status`` view, in display order.

    ``elapsed`` of an unfinished task counts to ``now`` (default: the wall clock).
    What the task wrote is redacted as in ``--json`` and the dashboard (the progress
    message, the outcome, the failure), and every value is one line a terminal shows
    as text (``chongming_task._redact.printable``: no escape sequences).
    """
    from chongming_task.controller._table import elapsed_seconds, format_elapsed

    owner = snapshot.lease_owner or snapshot.owner or "-"
    if snapshot.pid is not None:
        owner = f"{owner} (pid {snapshot.pid})"
    if snapshot.lease_until is not None and not snapshot.is_terminal:
        owner = f"{owner}, lease until {_when(snapshot.lease_until)}"
    bucket = "-" if snapshot.bucket is None else str(snapshot.bucket)
    if snapshot.bucket_key is not None:
        bucket = f"{bucket} (key {snapshot.bucket_key!r})"
    pairs = [
        ("task_id", snapshot.task_id),
        ("name", snapshot.name + (f" ({snapshot.label})" if snapshot.label else "")),
        ("status", f"{snapshot.status.value} (version {snapshot.status_version})"),
        ("attempt", f"{snapshot.attempt}/{snapshot.max_attempts}"),
        ("owner", owner),
        ("bucket", bucket),
        ("tags", ", ".join(sorted(snapshot.tags)) or "-"),
        ("priority", str(snapshot.priority)),
        ("created", _when(snapshot.created_at)),
        ("started", _when(snapshot.first_started_at or snapshot.started_at)),
        ("finished", _when(snapshot.finished_at)),
        ("elapsed", format_elapsed(elapsed_seconds(snapshot, now or utc_now()))),
        ("progress", (redact(snapshot.progress.render()) or "-") if snapshot.progress else "-"),
        ("heartbeat", _when(snapshot.last_heartbeat_at)),
    ]
    if snapshot.progress is not None and snapshot.progress.message:
        pairs.append(("message", redact(snapshot.progress.message) or ""))
    if snapshot.status is TaskStatus.SUCCEEDED:
        pairs.append(("outcome", repr(redact_json(snapshot.outcome))))
    if snapshot.failure is not None:
        failure = snapshot.failure
        kind = failure.kind.value
        short_type = (failure.exception_type or "").rpartition(".")[2]
        if short_type and not failure.message.startswith(short_type):
            kind = f"{kind} ({failure.exception_type})"
        pairs.append(("failure", f"{kind}: {redact(failure.message)}"))
    late = _late_result(snapshot)
    if late is not None:
        pairs.append(("late result", redact_secrets(late)))
    parent = parent_of(snapshot)
    if parent is not None:
        pairs.append(("parent", parent))
    return [(key, printable(value)) for key, value in pairs]


def _late_result(snapshot: TaskSnapshot) -> str | None:
    """The newest late result (a lost attempt that finished after all), as one line."""
    from chongming_task.controller._late_results import LATE_RESULTS_KEY

    records = snapshot.metadata.get(LATE_RESULTS_KEY)
    if not isinstance(records, list) or not records or not isinstance(records[-1], dict):
        return None
    last = records[-1]
    more = f"; {len(records)} recorded" if len(records) > 1 else ""
    return (
        f"attempt {last.get('attempt')} ended {last.get('status')} at "
        f"{last.get('finished_at')} on {last.get('by')}, after the store called it "
        f"{last.get('stored_status')} (the status stands{more})"
    )


def cmd_status(args: argparse.Namespace, session: Session) -> int:
    store = session.open_store(create=False, read_only=True)
    controller = console_controller(session, store)
    snapshot = require_task(controller, args.task_id)
    logs = _logs(snapshot)
    children = [child.task_id for child in store.query(children_query(snapshot.task_id))]
    if session.json:
        session.output.json(
            document("status", task=task_doc(snapshot), logs=logs, children=children)
        )
        return ExitCode.OK
    pairs = status_lines(snapshot)
    if children:
        pairs.append(("children", printable(", ".join(children))))
    width = max(len(key) for key, _ in pairs) + 1
    session.output.print("\n".join(f"{key + ':':<{width}} {value}" for key, value in pairs))
    if logs:
        session.output.print(f"last {len(logs)} log line(s):")
        session.output.print("\n".join(f"  {printable(line)}" for line in logs))
    return ExitCode.OK


def cmd_history(args: argparse.Namespace, session: Session) -> int:
    store = session.open_store(create=False, read_only=True)
    controller = console_controller(session, store)
    require_task(controller, args.task_id)
    transitions = store.history(args.task_id)
    if session.json:
        session.output.json(
            document(
                "history",
                task_id=args.task_id,
                transitions=[transition_doc(item) for item in transitions],
            )
        )
        return ExitCode.OK
    rows = [
        [
            str(item.version),
            _when(item.at),
            item.from_status.value if item.from_status else "-",
            item.to_status.value,
            item.trigger,
            item.actor or "-",
            redact(item.reason) or "-",
            str(item.attempt),
        ]
        for item in transitions
    ]
    session.output.table(
        ["VERSION", "AT", "FROM", "TO", "TRIGGER", "ACTOR", "REASON", "ATTEMPT"],
        rows,
        status_column="TO",
    )
    return ExitCode.OK


def cmd_stats(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.controller._stats import ControllerStats
    from chongming_task.stores._salvage import counts_skipping_corrupt

    def warn(task_id: str, error: str) -> None:
        session.output.notice(f"warning: skipping corrupt task row {task_id!r}: {error}")

    controller = console_controller(session, session.open_store(create=False, read_only=True))
    store = controller.store
    counts, _ = counts_skipping_corrupt(store.count_by_status, store.query, warn=warn)
    stats = ControllerStats.from_counts(counts)
    counts = {status: stats.by_status.get(status, 0) for status in TaskStatus}
    if session.json:
        session.output.json(
            document(
                "stats",
                counts=counts_doc(counts),
                total=stats.total,
                unfinished=stats.unfinished,
                finished=stats.finished,
            )
        )
        return ExitCode.OK
    rows = [[status.value, str(count)] for status, count in counts.items() if count]
    rows.append(["(total)", str(stats.total)])
    rows.append(["(unfinished)", str(stats.unfinished)])
    session.output.table(["STATUS", "COUNT"], rows)
    return ExitCode.OK


def cmd_buckets(args: argparse.Namespace, session: Session) -> int:
    if getattr(args, "owners", False):
        from chongming_task.cli.commands._owners import cmd_owners

        return cmd_owners(args, session)
    controller = console_controller(session, session.open_store(create=False, read_only=True))
    counts = controller.bucket_counts()
    options = session.options
    owned = options.owned_buckets

    def is_owned(bucket: int) -> bool:
        return owned is None or bucket in owned

    if session.json:
        session.output.json(
            document(
                "buckets",
                num_buckets=options.num_buckets,
                owned_buckets=None if owned is None else sorted(owned),
                buckets=[
                    {"bucket": bucket, "tasks": count, "owned": is_owned(bucket)}
                    for bucket, count in sorted(counts.items())
                ],
            )
        )
        return ExitCode.OK
    header = f"{len(counts)} of {options.num_buckets} buckets hold tasks"
    if owned is not None:
        header += f"; this node owns {format_buckets(owned)}"
    session.output.print(header)
    rows = [
        [str(bucket), str(count), "yes" if is_owned(bucket) else "no"]
        for bucket, count in sorted(counts.items())
    ]
    session.output.table(["BUCKET", "TASKS", "OWNED"], rows, status_column=None)
    return ExitCode.OK
