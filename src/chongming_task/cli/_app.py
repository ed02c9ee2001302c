"""``main(argv) -> int``: the parser, the dispatch and the error boundary.

The CLI is a thin adapter over the Controller (guide §8.10): it parses, calls the
library, renders. Everything that can go wrong is turned into one line on stderr and
an exit code here, in one place, so no command can leak a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO

from chongming_task.cli._errors import ExitCode, UsageError, describe
from chongming_task.cli._parsing import check_argv
from chongming_task.cli._render import Output
from chongming_task.cli._session import Session
from chongming_task.cli.commands import add_global_options, register_all

__all__ = ["Handler", "build_parser", "main"]

#: A subcommand's implementation: parsed arguments in, exit code out.
Handler = Callable[[argparse.Namespace, Session], int]

PROG = "chongming-task"


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors become one line and exit code 2.

    argparse's default prints the whole usage block before the error; a usage error
    here is one sentence like every other error, with ``--help`` one flag away.
    """

    def error(self, message: str) -> NoReturn:
        # argparse quotes what it could not place, a mistyped URL included
        # (``postgresql//app:pw@db``, which mask_dsn does not recognise): mask
        # ``user:password@`` wherever it appears.
        message = _CREDENTIALS.sub(r"\1:***@", message)
        raise UsageError(f"{message} (see {self.prog} --help)")


_CREDENTIALS = re.compile(r"([\w.%+-]+):[^\s@/:]+@")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: global options and one subparser per command."""
    from chongming_task import __version__

    parser = _Parser(
        prog=PROG,
        description="Run, watch and control chongming-task tasks from the shell.",
        epilog="Exit codes: 0 success, 1 command failed, 2 usage error, "
        "3 command succeeded but the task did not succeed.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    add_global_options(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    register_all(subparsers)
    return parser


#: Options whose values may start with ``-`` (``ps --order -created``). argparse takes
#: a word starting with ``-`` for an option and refuses ``--order -created``; these are
#: glued into ``--order=-created`` before parsing.
DASH_VALUE_OPTIONS: frozenset[str] = frozenset({"--order"})


def join_dash_values(argv: Sequence[str]) -> list[str]:
    """``["--order", "-created"]`` -> ``["--order=-created"]``; everything else as given."""
    result: list[str] = []
    words = list(argv)
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            result.extend(words[index:])
            break
        if word.startswith("--") and word.endswith("=--"):
            # argparse (3.11, 3.12) turns ``--label=--`` into an empty list, not "--".
            raise UsageError(f"{word}: '--' cannot be the value of an option (it ends the options)")
        following = words[index + 1] if index + 1 < len(words) else None
        if (
            word in DASH_VALUE_OPTIONS
            and following is not None
            and following.startswith("-")
            and following[1:2].isalpha()
        ):
            result.append(f"{word}={following}")
            index += 2
            continue
        result.append(word)
        index += 1
    return result


def _run(argv: Sequence[str], output: Output) -> int:
    check_argv(argv)
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(output.stdout):
            args = parser.parse_args(join_dash_values(argv))
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if not isinstance(exc.code, str) else ExitCode.USAGE
    handler: Handler = args.handler
    session = Session(args, output)
    try:
        return int(handler(args, session))
    finally:
        session.close()


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run one ``chongming-task`` invocation and return its exit code.

    Args:
        argv: The arguments after the program name (default ``sys.argv[1:]``).
        stdout: Where results go (tests pass a ``StringIO``).
        stderr: Where the one-line errors go.

    Returns:
        0 success, 1 command failed, 2 usage error, 3 the task did not succeed.
    """
    output = Output(stdout, stderr)
    try:
        return _run(sys.argv[1:] if argv is None else argv, output)
    except KeyboardInterrupt:
        output.error("interrupted")
        return ExitCode.FAILED
    except BrokenPipeError:
        raise  # the reader went away (`| head`): entry_point ends quietly
    except Exception as exc:
        message, code = describe(exc)
        if os.environ.get("CHONGMING_DEBUG"):
            traceback.print_exception(exc, file=output.stderr)
        output.error(message)
        return code
