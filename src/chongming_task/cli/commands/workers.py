"""``workers``: the worker registry (who runs, which buckets, last heartbeat)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli.commands._common import new_parser
from chongming_task.cli.commands.schedule_docs import when
from chongming_task.cli.errors import ExitCode
from chongming_task.cli.parsing import format_buckets
from chongming_task.cli.schema import document

if TYPE_CHECKING:
    from chongming_task.cli.session import Session

__all__ = ["add_parsers"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    new_parser(
        subparsers,
        "workers",
        help="list registered workers, their buckets and heartbeats",
        handler=cmd_workers,
    )


def cmd_workers(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.stores.queue_health import queue_health

    store = session.open_store(create=False)
    health = queue_health(store)
    now = health.checked_at
    rows = []
    for w in health.workers:
        state = (
            "live"
            if w.worker_id in health.live
            else ("stopped" if w.stopped_at is not None else "dead")
        )
        rows.append((w, state, (now - w.heartbeat_at).total_seconds()))
    if session.json:
        session.output.json(
            document(
                "workers",
                workers=[
                    {
                        **w.to_dict(),
                        "state": state,
                        "heartbeat_age": round(age, 3),
                    }
                    for w, state, age in rows
                ],
                orphaned_buckets=list(health.orphaned),
                queue_depth=health.depth,
                checked_at=when(now),
            )
        )
        return ExitCode.OK
    output = session.output
    if not rows:
        output.print("no workers registered")
    for w, state, age in rows:
        buckets = "all" if w.buckets is None else format_buckets(w.buckets)
        output.print(
            f"{w.worker_id}  {state}  host {w.host} pid {w.pid}  buckets {buckets}  "
            f"slots {w.slots}  heartbeat {age:.1f}s ago  version {w.version}"
        )
    for bucket in health.orphaned:
        output.print(
            f"bucket {bucket}: {health.depth.get(bucket, 0)} queued task(s), no live owner"
        )
    return ExitCode.OK
