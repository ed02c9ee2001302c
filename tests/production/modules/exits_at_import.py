"""A task module that calls sys.exit() while being imported (a mistake the CLI must report)."""

import sys

from chongming_task import task


@task
def never(ctx: object) -> None:
    """Never registered: the import exits first."""


sys.exit(0)
