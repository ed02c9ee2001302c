"""``dashboard``: serve the web dashboard over the store (needs the ``web`` extra).

On the loopback address without a token it makes one up and prints it; off loopback
it refuses to start without one (``--token-file`` or ``CHONGMING_DASHBOARD_TOKEN``),
since a dashboard anyone on the network can open is a door left open.
"""

from __future__ import annotations

import argparse
import ipaddress
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, ExitCode, UsageError
from chongming_task.cli._parsing import env, seconds
from chongming_task.cli.commands._common import new_parser
from chongming_task.errors import ConfigurationError

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from chongming_task.cli._session import Session

__all__ = ["add_parsers", "build_app", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8400


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "dashboard",
        help="serve the web dashboard (pip install 'chongming-task[web]')",
        handler=cmd_dashboard,
        json=False,
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address (default {DEFAULT_HOST})")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="file with the token ('TOKEN' or 'LABEL TOKEN' lines; env "
        "CHONGMING_DASHBOARD_TOKEN for one token); required off loopback",
    )
    parser.add_argument(
        "--user",
        default=None,
        metavar="LABEL",
        help="the label actions of CHONGMING_DASHBOARD_TOKEN are recorded under "
        "(default 'dashboard')",
    )
    parser.add_argument("--read-only", action="store_true", help="hide and refuse every control")
    parser.add_argument(
        "--live-interval",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="how often the live view reads the store (default 1)",
    )
    parser.add_argument(
        "--session-ttl",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="how long a login lasts (default 43200: 12 hours); logging out ends it at once",
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_app(args: argparse.Namespace, session: Session) -> tuple[Starlette, str | None]:
    """The app for ``args`` and the token made up for it (``None`` if one was given).

    Raises:
        UsageError: off loopback without a token, a weak token, a bad token file, or a
            bad option.
        CommandFailed: the web extra is missing.
    """
    from chongming_task.web import DEFAULT_SESSION_TTL, DEFAULT_USER, read_token_file

    try:
        from chongming_task.web import create_app
    except ImportError as exc:  # the face names the extra to install
        raise CommandFailed(str(exc)) from exc
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1..65535, got {args.port}")
    if args.live_interval <= 0:
        raise UsageError(f"--live-interval must be > 0, got {args.live_interval}")
    tokens: dict[str, str] | None = None
    try:
        if args.token_file:
            tokens = read_token_file(args.token_file)
        elif env("DASHBOARD_TOKEN"):
            tokens = {args.user or DEFAULT_USER: str(env("DASHBOARD_TOKEN"))}
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from exc
    if tokens is None and not is_loopback(args.host):
        raise UsageError(
            f"refusing to serve on {args.host} without a token: give --token-file or set "
            "CHONGMING_DASHBOARD_TOKEN (only a loopback address may use a generated token)"
        )
    store = session.open_store(create=False)
    try:
        app = create_app(
            store,
            tokens=tokens,
            user=args.user or DEFAULT_USER,
            read_only=args.read_only,
            live_interval=args.live_interval,
            session_ttl=DEFAULT_SESSION_TTL if args.session_ttl is None else args.session_ttl,
        )
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from exc
    generated: str | None = app.state.dashboard.generated_token
    return app, generated


def cmd_dashboard(args: argparse.Namespace, session: Session) -> int:
    app, generated = build_app(args, session)
    import uvicorn

    host = f"[{args.host}]" if ":" in args.host else args.host
    output = session.output
    output.print(f"dashboard of {session.options.shown_db} on http://{host}:{args.port}/")
    if generated is not None:
        output.print(f"token: {generated}")
    else:
        output.print("token: as configured (--token-file / CHONGMING_DASHBOARD_TOKEN)")
    if args.read_only:
        output.print("read-only: every control is hidden and refused")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return ExitCode.OK
