"""The ``chongming-task`` console script: a thin adapter over the Controller (guide §8.10).

``main(argv) -> int`` runs one invocation and returns its exit code (tests call it
in-process); ``entry_point()`` is what the console script calls. Exit codes: 0
success, 1 command failed, 2 usage error, 3 the command succeeded but the task did
not. The walkthrough with real output is docs/cli.md.
"""

from __future__ import annotations

import os
import sys

from chongming_task.cli._app import main
from chongming_task.cli._errors import ExitCode, describe
from chongming_task.cli._loader import module_schedules
from chongming_task.cli._render import Output

__all__ = ["ExitCode", "Output", "describe", "entry_point", "main", "module_schedules"]


def entry_point() -> None:
    """The ``chongming-task`` console script."""
    try:
        code = main(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        # `chongming-task ps | head -1`: the reader has gone; say nothing more, and keep
        # Python from complaining while it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = ExitCode.FAILED
    sys.exit(code)
