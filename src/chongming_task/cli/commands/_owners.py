"""``buckets --owners`` and ``buckets handoff``: the bucket ownership registry (docs/buckets.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, ExitCode, UsageError
from chongming_task.cli._parsing import format_buckets, parse_bucket_ranges, seconds
from chongming_task.cli._schema import document
from chongming_task.cli.commands._common import new_parser

if TYPE_CHECKING:
    from chongming_task.buckets import OwnershipReport
    from chongming_task.cli._session import Session

__all__ = ["add_owner_parsers", "cmd_owners", "ownership_doc"]


def add_owner_parsers(parser: argparse.ArgumentParser) -> None:
    """``--owners`` on ``buckets``, and its ``handoff`` subcommand."""
    parser.add_argument(
        "--owners",
        action="store_true",
        help="who declares each bucket: duplicate owners, holes, orphaned tasks, stale "
        "declarations (exit 1 when any is found)",
    )
    actions = parser.add_subparsers(dest="buckets_action", metavar="ACTION")
    actions.required = False
    handoff = new_parser(
        actions,
        "handoff",
        help="move buckets from one live node to another and wait until it is done",
        handler=cmd_handoff,
    )
    handoff.add_argument("--from", dest="from_node", required=True, metavar="NODE")
    handoff.add_argument("--to", dest="to_node", required=True, metavar="NODE")
    handoff.add_argument(
        "--timeout",
        type=seconds,
        default=60.0,
        metavar="SECONDS",
        help="longest wait for both nodes (default 60); the handoff goes on after it",
    )
    handoff.add_argument(
        "--no-drain",
        action="store_true",
        help="confirm at once instead of waiting for the old owner's tasks of the buckets "
        "to finish (they still finish there, alongside the new owner)",
    )
    handoff.add_argument("buckets", metavar="BUCKETS", help="bucket ranges, e.g. 7 or 0-3,9")


def ownership_doc(report: OwnershipReport) -> dict[str, Any]:
    """The ``buckets --owners --json`` document (also ``health``'s ``buckets`` member)."""
    return report.to_dict()


def cmd_owners(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.buckets import ownership_report

    store = session.open_store(create=False)
    num_buckets = session.options.num_buckets if _num_buckets_given(args) else None
    report = ownership_report(store, num_buckets=num_buckets)
    code = ExitCode.OK if report.healthy else ExitCode.FAILED
    if session.json:
        session.output.json(document("bucket-owners", **ownership_doc(report)))
        return code
    output = session.output
    if not report.declared:
        output.print("no node has declared buckets in this store (no worker has run here)")
        return code
    output.print(f"{report.num_buckets} buckets, {len(report.nodes)} node(s) registered")
    rows = []
    for node in report.nodes:
        buckets = "all" if node.buckets is None else format_buckets(node.buckets) or "none"
        draining = format_buckets(node.draining) or "-"
        rows.append(
            [
                node.node_id,
                node.kind,
                node.state,
                buckets,
                draining,
                node.lease_until.isoformat(timespec="seconds"),
            ]
        )
    output.table(
        ["NODE", "KIND", "STATE", "BUCKETS", "DRAINING", "LEASE_UNTIL"], rows, status_column=None
    )
    if report.healthy and not report.holes and not report.draining:
        output.print("every bucket has a live owner; no partition is declared twice")
    elif report.healthy and report.holes:
        output.print(f"no live owner (not a partition): buckets {format_buckets(report.holes)}")
    for bucket, node_id in sorted(report.draining.items()):
        output.print(f"bucket {bucket}: being handed off by {node_id} (its tasks are finishing)")
    for problem in report.problems:
        output.print(f"problem: {problem}")
    return code


def cmd_handoff(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.buckets import HandoffError, handoff
    from chongming_task.errors import ConfigurationError

    if not args.timeout > 0 or args.timeout == float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    store = session.open_store(create=False)
    buckets = parse_bucket_ranges(
        args.buckets, num_buckets=session.options.num_buckets, option="BUCKETS"
    )
    try:
        result = handoff(
            store,
            buckets,
            from_node=args.from_node,
            to_node=args.to_node,
            timeout=args.timeout,
            drain=not args.no_drain,
            actor=session.options.owner,
        )
    except (HandoffError, ConfigurationError) as exc:
        # The command line was well formed; the registry or a node said no (exit 1).
        raise CommandFailed(str(exc)) from exc
    if session.json:
        session.output.json(document("bucket-handoff", **result.to_dict()))
        return ExitCode.OK
    line = (
        f"bucket(s) {format_buckets(result.buckets)}: {result.from_node} released them, "
        f"{result.to_node} owns them now"
    )
    if result.still_running:
        line += f" ({len(result.still_running)} task(s) still finishing on {result.from_node})"
    session.output.print(line)
    return ExitCode.OK


def _num_buckets_given(args: argparse.Namespace) -> bool:
    import os

    return hasattr(args, "num_buckets") or bool(os.environ.get("CHONGMING_NUM_BUCKETS"))
