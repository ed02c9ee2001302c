"""Regenerate the DST tables and preview examples of docs/scheduling.md.

    .venv/bin/python docs/gen_scheduling_md.py          # rewrites docs/scheduling.md
    .venv/bin/python docs/gen_scheduling_md.py --check  # exit 1 if it is out of date

Every block between ``<!-- generated:NAME -->`` and ``<!-- /generated -->`` is the
output of ``chongming-task schedule preview`` itself (run in-process through the
console's ``main``, so no store and no clock are involved): the worked tables are
built from its ``--json`` document, the console blocks are its text output. The
prose around them lives in the Markdown file. tests/schedule/test_scheduling_doc.py
fails when the file and this script disagree.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "scheduling.md"
POLICIES = ("default", "skip", "vixie")

#: (title, zone, day of the change, expressions, hours of the local day shown)
CHANGES: tuple[tuple[str, str, str, tuple[str, ...], int], ...] = (
    (
        "America/New_York, spring forward (8 March 2026, 02:00 -> 03:00)",
        "America/New_York",
        "2026-03-08",
        ("30 2 * * *", "0,30 2 * * *", "*/15 2 * * *", "0 */2 * * *", "*/30 * * * *"),
        4,
    ),
    (
        "America/New_York, fall back (1 November 2026, 02:00 -> 01:00)",
        "America/New_York",
        "2026-11-01",
        ("30 1 * * *", "*/20 1 * * *", "0 */1 * * *", "@hourly"),
        3,
    ),
    (
        "Australia/Lord_Howe, spring forward (4 October 2026, 02:00 -> 02:30)",
        "Australia/Lord_Howe",
        "2026-10-04",
        ("15 2 * * *", "*/15 2 * * *", "*/30 * * * *"),
        4,
    ),
    (
        "Australia/Lord_Howe, fall back (5 April 2026, 02:00 -> 01:30)",
        "Australia/Lord_Howe",
        "2026-04-05",
        ("45 1 * * *", "*/15 1 * * *", "*/30 * * * *"),
        3,
    ),
)

#: Console examples: the text output of the command.
EXAMPLES: tuple[tuple[str, ...], ...] = (
    (
        "schedule", "preview", "--cron", "30 2 * * *", "--tz", "America/New_York",
        "--from", "2026-03-07T00:00", "--count", "3",
    ),
    (
        "schedule", "preview", "--cron", "*/30 * * * *", "--tz", "Australia/Lord_Howe",
        "--dst", "vixie", "--from", "2026-04-05T01:00", "--count", "4",
    ),
)


def cli(*args: str) -> str:
    """``chongming-task ARGS`` in this process; its standard output."""
    from chongming_task.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    if code != 0:
        raise SystemExit(f"chongming-task {shlex.join(args)} failed ({code}): {err.getvalue()}")
    return out.getvalue().rstrip("\n")


def _cell(entries: list[dict[str, Any]], day: str, hours: int) -> str:
    start = datetime.fromisoformat(f"{day}T00:00")
    end = start + timedelta(hours=hours)
    shown: list[str] = []
    for entry in entries:
        wall = entry["wall"] or (entry["local"] and entry["local"][:19])
        local = entry["local"]
        when = datetime.fromisoformat(local[:19]) if local else datetime.fromisoformat(wall)
        if not start <= when < end:
            continue
        offset = local[19:] if local else ""
        if entry["fired"]:
            text = f"{local[11:16]} ({offset})"
            if entry["stands_for"]:
                text += " for " + ", ".join(wall[11:16] for wall in entry["stands_for"])
        else:
            text = f"~~{(entry['wall'] or local)[11:16]}~~"
            text += " (nonexistent)" if entry["utc"] is None else f" ({offset}, 2nd)"
        shown.append(text)
    return ", ".join(shown) or "-"


def table(zone: str, day: str, expressions: tuple[str, ...], hours: int) -> str:
    rows = [
        f"| Expression | {' | '.join(f'`dst={p}`' for p in POLICIES)} |",
        "|---|" + "---|" * len(POLICIES),
    ]
    for expression in expressions:
        cells = []
        for policy in POLICIES:
            document = json.loads(
                cli(
                    "schedule", "preview", "--cron", expression, "--tz", zone, "--dst", policy,
                    "--from", f"{day}T00:00", "--count", "40", "--json",
                )
            )
            cells.append(_cell(document["entries"], day, hours))
        rows.append(f"| `{expression}` | {' | '.join(cells)} |")
    return "\n".join(rows)


def blocks() -> dict[str, str]:
    found: dict[str, str] = {}
    for number, (title, zone, day, expressions, hours) in enumerate(CHANGES, 1):
        found[f"dst-table-{number}"] = (
            f"**{title}**, local times 00:00-{hours:02d}:00 (offset in brackets; "
            "~~struck~~: named by the expression, not fired):\n\n"
            + table(zone, day, expressions, hours)
        )
    for number, args in enumerate(EXAMPLES, 1):
        found[f"preview-{number}"] = (
            f"```console\n$ chongming-task {shlex.join(args)}\n{cli(*args)}\n```"
        )
    return found


_BLOCK = re.compile(
    r"(<!-- generated:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)", re.S
)


def render(text: str) -> str:
    """``text`` with every generated block replaced by fresh output."""
    fresh = blocks()
    missing = set(fresh) - set(_BLOCK_NAMES(text))
    if missing:
        raise SystemExit(f"docs/scheduling.md lacks generated blocks: {sorted(missing)}")
    return _BLOCK.sub(lambda m: m.group(1) + fresh[m.group("name")] + "\n" + m.group(4), text)


def _BLOCK_NAMES(text: str) -> list[str]:  # noqa: N802
    return [m.group("name") for m in _BLOCK.finditer(text)]


def main() -> int:
    current = DOC.read_text(encoding="utf-8")
    updated = render(current)
    if "--check" in sys.argv:
        if updated != current:
            print("docs/scheduling.md is out of date; run docs/gen_scheduling_md.py")
            return 1
        return 0
    DOC.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
