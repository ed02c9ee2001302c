"""Count the package's distinct functions and files one warm task meets (all threads).

``python bench/path_count.py``: a ``Controller(SqliteTaskStore)`` submit -> wait -> get,
after one warm-up task, traced with ``sys.setprofile``/``threading.setprofile`` over the
frames of ``chongming_task`` only. Figures for the notes, never for tests.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from chongming_task import Controller, SqliteTaskStore  # noqa: E402

PACKAGE = str(ROOT / "src" / "chongming_task")


def noop(ctx: Any) -> None:
    return None


def main() -> None:
    seen: set[tuple[str, str]] = set()
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            calls += 1
            seen.add((frame.f_code.co_filename, frame.f_code.co_qualname))

    with (
        tempfile.TemporaryDirectory() as tmp,
        SqliteTaskStore(Path(tmp) / "t.db") as store,
        Controller(store) as controller,
    ):
        controller.register("noop", noop)
        controller.submit("noop").wait(30)  # warm-up
        threading.setprofile(profile)
        sys.setprofile(profile)
        handle = controller.submit("noop")
        handle.wait(30)
        controller.get(handle.task_id)
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    files = {f for f, _ in seen}
    print(
        f"Controller(SqliteTaskStore) submit -> wait -> get: {len(files)} files, "
        f"{len(seen)} distinct functions, {calls} calls"
    )


if __name__ == "__main__":
    main()
