"""The ``chongming-task`` console script (placeholder until the CLI lands)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from chongming_task import __version__

    print(f"chongming-task {__version__}")
    return 0


def entry_point() -> None:
    sys.exit(main(sys.argv[1:]))
