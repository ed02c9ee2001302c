"""``limits``: the fleet limits declared in the store (list / set / delete).

A thin adapter over :meth:`chongming_task.Client.set_limit` and friends
(docs/queue.md, "Limits"): ``limits`` lists each limit with how full it is now (the
keys with holders or starts in the current window), ``limits set KEY --concurrency N
--rate 100/m`` declares or replaces one, ``limits delete KEY`` forgets it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, ExitCode, UsageError
from chongming_task.cli._parsing import integer
from chongming_task.cli._schema import document
from chongming_task.cli.commands._common import new_parser

if TYPE_CHECKING:
    from chongming_task.cli._session import Session
    from chongming_task.stores._limits import LimitUse

__all__ = ["add_parsers"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "limits",
        help="list, set or delete the fleet limits every worker obeys",
        description="Fleet limits cap, per key (a tag, a concurrency key, or a pattern "
        "such as tenant:* meaning one limit per matching key), how many tasks hold a slot "
        "at once across every worker (--concurrency) and how many start per window "
        "(--rate 100/m; /s, /m, /h). Without an action: list them with their use.",
        handler=cmd_limits,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    new_parser(actions, "list", help="the declared limits and their use", handler=cmd_limits)
    sub = new_parser(actions, "set", help="declare or replace a limit", handler=cmd_limits)
    sub.add_argument(
        "key", metavar="KEY", help="a tag, a concurrency key, or a pattern ending in *"
    )
    sub.add_argument("--concurrency", type=integer, metavar="N", help="at most N holders at once")
    sub.add_argument("--rate", metavar="COUNT/UNIT", help="at most COUNT starts per s, m or h")
    sub = new_parser(actions, "delete", help="forget a limit", handler=cmd_limits)
    sub.add_argument("key", metavar="KEY")


def cmd_limits(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.queue import Client

    action = getattr(args, "action", None) or "list"
    if action == "set" and args.concurrency is None and args.rate is None:
        raise UsageError("limits set needs --concurrency N, --rate COUNT/UNIT, or both")
    store = session.open_store(create=action == "set")
    client = Client(store, actor=session.issuer)
    output = session.output
    if action == "set":
        limit = client.set_limit(args.key, concurrency=args.concurrency, rate=args.rate)
        if session.json:
            output.json(document("limit", limit=limit.to_dict()))
        else:
            output.print(f"limit {_describe(limit.key, limit.concurrency, limit.rate)} set")
        return ExitCode.OK
    if action == "delete":
        if not client.delete_limit(args.key):
            raise CommandFailed(f"no limit {args.key!r} is declared (see `limits`)")
        if session.json:
            output.json(document("limit-deleted", key=args.key))
        else:
            output.print(f"limit {args.key!r} deleted")
        return ExitCode.OK
    from chongming_task.stores._queue_store import fleet_view

    view = fleet_view(store)
    if session.json:
        output.json(
            document(
                "limits",
                limits=[
                    {**limit.to_dict(), "in_use": [_use_doc(u) for u in uses]}
                    for limit, uses in view
                ],
            )
        )
        return ExitCode.OK
    if not view:
        output.print("no limits declared")
    for limit, uses in view:
        output.print(_describe(limit.key, limit.concurrency, limit.rate))
        for use in uses:
            output.print(f"  {use_line(use)}")
    return ExitCode.OK


def _describe(key: str, concurrency: int | None, rate: object) -> str:
    parts = [f"{key}:"]
    if concurrency is not None:
        parts.append(f"concurrency {concurrency}")
    if rate is not None:
        parts.append(f"rate {rate}")
    return " ".join(parts)


def use_line(use: LimitUse) -> str:
    """One line of a key's use: holders and starts against its bounds."""
    parts = [use.key]
    if use.concurrency is not None:
        held = ", ".join(f"{h.task_id} ({h.owner})" for h in use.holders) or "none"
        parts.append(f"{len(use.holders)}/{use.concurrency} held by {held}")
    if use.rate is not None:
        text = f"{len(use.starts)}/{use.rate.count} started in the last {use.rate.window}"
        if use.opens_at is not None:
            text += f", next start at {use.opens_at.isoformat()}"
        parts.append(text)
    return "  ".join(parts)


def _use_doc(use: LimitUse) -> dict[str, Any]:
    return {
        "key": use.key,
        "holders": [{"task_id": h.task_id, "owner": h.owner} for h in use.holders],
        "starts": len(use.starts),
        "opens_at": None if use.opens_at is None else use.opens_at.isoformat(),
    }
