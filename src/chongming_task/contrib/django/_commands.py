"""``manage.py chongming`` and ``manage.py chongming_worker``: the CLI on the project's store.

Both run ``chongming-task`` in the ``manage.py`` process (Django set up, the
settings' database as ``--db``, ``CHONGMING_TASK['NUM_BUCKETS']`` as
``--num-buckets``) with the arguments as given, so every command, option, output and
exit code is the CLI's (docs/cli.md). ``chongming_worker ARGS`` is ``chongming-task
worker --tasks chongming_task.contrib.django.tasks ARGS``. The store's schema is
created (or migrated) first, as ``migrate`` would for a model.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, Final, TextIO

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from chongming_task.cli import ExitCode, Output, describe, main
from chongming_task.contrib.django._config import load_config
from chongming_task.contrib.django._project import database_problem, open_store, store_location

__all__ = ["CliCommand"]

#: The task module ``manage.py chongming_worker`` loads.
WORKER_TASKS: Final = "chongming_task.contrib.django.tasks"
#: Options manage.py has read already (the settings module, the path).
_DJANGO_OPTIONS: Final = ("--settings", "--pythonpath")
#: Options that would point the CLI at another store than the project's.
_STORE_OPTIONS: Final = ("--db", "--dsn")


def _without_django_options(argv: Sequence[str]) -> list[str]:
    result: list[str] = []
    skip = False
    for index, word in enumerate(argv):
        if skip:
            skip = False
            continue
        if word == "--":
            result.extend(argv[index:])
            break
        if word in _DJANGO_OPTIONS:
            skip = True
            continue
        if word.startswith(tuple(f"{option}=" for option in _DJANGO_OPTIONS)):
            continue
        result.append(word)
    return result


def _executor(argv: Sequence[str]) -> str:
    """The ``--executor`` a worker would use (the last given, else the environment's)."""
    chosen = os.environ.get("CHONGMING_EXECUTOR", "")
    for index, word in enumerate(argv):
        if word == "--":
            break
        if word == "--executor" and index + 1 < len(argv):
            chosen = argv[index + 1]
        elif word.startswith("--executor="):
            chosen = word.partition("=")[2]
    return chosen.strip().lower()


def _refusal(argv: Sequence[str], *, worker: bool) -> str | None:
    """Why ``argv`` cannot run under Django, or ``None``."""
    for word in argv:
        if word == "--":
            break
        name = word.split("=", 1)[0]
        if name in _STORE_OPTIONS:
            return (
                f"{name}: the store is the project's database "
                "(settings.CHONGMING_TASK['DATABASE']); use chongming-task for another one"
            )
    if worker and _executor(argv) == "process":
        return (
            "--executor process (or CHONGMING_EXECUTOR=process): a spawned child would "
            "import the task modules without Django set up; manage.py chongming_worker "
            "runs task bodies in threads (run several workers for parallel CPU work)"
        )
    return None


class CliCommand(BaseCommand):
    """A management command that is the ``chongming-task`` CLI (``worker`` or all of it)."""

    #: ``True``: ``chongming_worker`` (the arguments are the worker's).
    worker: bool = False
    requires_system_checks = ()  # the CLI checks its own input; run() checks ours

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("args", nargs="*", help="arguments of the chongming-task CLI")

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        """Django's parser, but every argument goes to the CLI as given (``call_command(
        "chongming_worker", "--max-parallel", "2")``): the CLI parses them."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        defaults = parser.parse_args

        def parse_args(args: Sequence[str] | None = None, namespace: Any = None) -> Any:
            options = defaults([], namespace)  # Django's own options, at their defaults
            options.args = list(sys.argv[2:] if args is None else args)
            return options

        parser.parse_args = parse_args  # type: ignore[method-assign,assignment]
        return parser

    def run(self, argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
        """Run the CLI with ``argv`` on the project's store; returns its exit code.

        Every failure is one line on ``stderr`` and an exit code, as the CLI's own: 2
        for a refused argument or a settings mistake, 1 for a database that fails.
        """
        output = Output(stdout, stderr)
        refusal = _refusal(argv, worker=self.worker)
        if refusal is not None:
            output.error(refusal)
            return ExitCode.USAGE
        try:
            config = load_config()
            problem = database_problem(config.database)
            if problem is not None:
                raise ImproperlyConfigured(problem[0])
            location = store_location(config.database)
            if not any(word in ("-h", "--help", "--version") for word in argv):
                open_store(config.database).close()  # the schema, before a command reads
        except ImproperlyConfigured as exc:
            output.error(f"settings: {exc}")
            return ExitCode.USAGE
        except Exception as exc:  # the database: unreachable, refused, foreign tables
            message, code = describe(exc)
            output.error(message)
            return code
        prefix = ["--db", location, "--num-buckets", str(config.num_buckets)]
        if self.worker:
            prefix += ["worker", "--tasks", WORKER_TASKS]
        return main([*prefix, *argv], stdout=stdout, stderr=stderr)

    def run_from_argv(self, argv: list[str]) -> None:
        """``manage.py NAME ARGS...``: the CLI parses ``ARGS`` (``--help`` is its help)."""
        try:
            code = self.run(_without_django_options(argv[2:]), sys.stdout, sys.stderr)
        finally:
            connections.close_all()
        sys.exit(code)

    def print_help(self, prog_name: str, subcommand: str) -> None:
        """``manage.py help NAME``: the CLI's own help."""
        self.run(["--help"], sys.stdout, sys.stderr)

    def handle(self, *args: str, **options: Any) -> None:
        """``call_command(NAME, "ps", "--json", stdout=...)``: a failure is a CommandError."""
        stdout = options.get("stdout") or sys.stdout
        stderr = options.get("stderr") or sys.stderr
        code = self.run(list(args), stdout, stderr)
        if code != ExitCode.OK:
            raise CommandError(f"chongming-task exited with code {code}", returncode=code)
