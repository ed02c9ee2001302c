"""``python -m chongming_task.cli``: the console script without the installed wrapper."""

from __future__ import annotations

from chongming_task.cli import entry_point

if __name__ == "__main__":
    entry_point()
