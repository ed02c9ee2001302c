"""``workers``: the worker registry (who runs, which buckets, last heartbeat)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, ExitCode
from chongming_task.cli._parsing import format_buckets, seconds
from chongming_task.cli._schema import document
from chongming_task.cli.commands._common import new_parser
from chongming_task.cli.commands._schedule_docs import when

if TYPE_CHECKING:
    from chongming_task.cli._session import Session

__all__ = ["add_parsers"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "workers",
        help="list registered workers, their buckets and heartbeats",
        handler=cmd_workers,
    )
    parser.add_argument(
        "--forget",
        action="append",
        metavar="WORKER_ID",
        default=[],
        help="delete the record of this stopped or dead worker (repeatable); a live one is refused",
    )
    parser.add_argument(
        "--forget-stale",
        type=seconds,
        metavar="SECONDS",
        help="delete the records of every stopped or dead worker whose last heartbeat is "
        "older than SECONDS",
    )


def cmd_workers(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.stores._queue_health import queue_health

    store = session.open_store(create=False)
    health = queue_health(store)
    now = health.checked_at
    rows = []
    for w in health.workers:
        rows.append((w, health.state_of(w), (now - w.heartbeat_at).total_seconds()))
    if args.forget or args.forget_stale is not None:
        return _forget(args, session, store, rows)
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


def _forget(
    args: argparse.Namespace,
    session: Session,
    store: Any,
    rows: list[tuple[Any, str, float]],
) -> int:
    """Delete worker records a user named, or every stale one; never a live worker's.

    A record is the registry's memory of a worker: ``health`` calls a dead one a
    problem until it is forgotten. Forgetting changes nothing else (its tasks are
    reconciled by their leases, its buckets stay orphaned until a live worker owns them).
    """
    known = {w.worker_id: (state, age) for w, state, age in rows}
    doomed: list[str] = []
    for worker_id in args.forget:
        if worker_id not in known:
            raise CommandFailed(f"no worker {worker_id!r} is registered (see `workers`)")
        if known[worker_id][0] == "live":
            raise CommandFailed(
                f"worker {worker_id!r} is live (heartbeat {known[worker_id][1]:.1f}s ago); "
                "stop it first -- a live worker writes its record again anyway"
            )
        doomed.append(worker_id)
    if args.forget_stale is not None:
        doomed += [
            worker_id
            for worker_id, (state, age) in known.items()
            if state != "live" and age > args.forget_stale and worker_id not in doomed
        ]
    forgotten = [worker_id for worker_id in doomed if store.delete_worker(worker_id)]
    if session.json:
        session.output.json(document("workers-forgotten", forgotten=forgotten))
    else:
        for worker_id in forgotten:
            state, age = known[worker_id]
            session.output.print(f"forgot worker {worker_id} ({state}, heartbeat {age:.1f}s ago)")
        if not forgotten:
            session.output.print("no worker record to forget")
    return ExitCode.OK
