"""docs/queue.md's table of option names says what the source does.

The table lists every option name of ``Client.enqueue``, ``Client.enqueue_many``,
``Controller.submit`` and ``Controller.submit_many``, and the CLI ``submit`` flag that
sets each. Its rows must be exactly the names registration refuses as keyword-only
parameters (``OPTION_NAMES``), and each column exactly the keyword options of its call
(read from the signatures and the ``TypedDict`` of its options), so an option added,
renamed or dropped in the source fails here until the docs say so.
"""

from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chongming_task import Client, Controller
from chongming_task.cli._app import build_parser
from chongming_task.controller._registry import (
    ENQUEUE_OPTIONS,
    OPTION_NAMES,
    SUBMIT_OPTIONS,
    SubmitOptions,
)
from chongming_task.controller._submission import BatchOptions
from chongming_task.queue._client import EnqueueOptions

ROOT = Path(__file__).resolve().parents[2]
TABLE = re.compile(r"<!-- option-names:start -->\n(.*?)<!-- option-names:end -->", re.DOTALL)
COLUMNS = ("enqueue", "enqueue_many", "submit", "submit_many", "cli")
ABSENT = "—"


def _table() -> dict[str, dict[str, str]]:
    """Option name -> column -> cell, from the marked table of docs/queue.md."""
    text = (ROOT / "docs" / "queue.md").read_text(encoding="utf-8")
    found = TABLE.search(text)
    assert found is not None, "docs/queue.md lost its <!-- option-names --> table"
    rows: dict[str, dict[str, str]] = {}
    for line in found.group(1).strip().splitlines()[2:]:  # after the header and ---
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) == len(COLUMNS) + 2, f"a row needs {len(COLUMNS) + 2} cells: {line}"
        name = cells[0].strip("`")
        assert name not in rows, f"option {name!r} is listed twice"
        options = zip(COLUMNS, cells[1:-1], strict=True)
        rows[name] = {column: cell.strip("`") for column, cell in options}
    return rows


ROWS = _table()


def _keyword_only(fn: Callable[..., Any]) -> set[str]:
    return {
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def _column(column: str) -> dict[str, str]:
    """Option -> the name the call takes it under, for the options the column has."""
    names = {}
    for option, cells in ROWS.items():
        cell = cells[column]
        if cell != ABSENT:
            names[option] = option if cell == "yes" else cell
    return names


def test_the_rows_are_every_option_name() -> None:
    assert set(ROWS) == set(OPTION_NAMES)
    assert set(OPTION_NAMES) == set(SUBMIT_OPTIONS) | set(ENQUEUE_OPTIONS)


# AsyncClient.enqueue and enqueue_many hand their keywords to these unchanged.


def test_the_enqueue_column_is_its_signature() -> None:
    documented = _column("enqueue")
    assert all(option == name for option, name in documented.items())
    assert set(documented) == _keyword_only(Client.enqueue)
    assert set(documented) == set(EnqueueOptions.__optional_keys__)


def test_the_enqueue_many_column_is_its_signature() -> None:
    assert set(_column("enqueue_many").values()) == _keyword_only(Client.enqueue_many)


def test_the_submit_column_is_its_signature() -> None:
    documented = _column("submit")
    assert all(option == name for option, name in documented.items())
    assert set(documented) == _keyword_only(Controller.submit) == set(SUBMIT_OPTIONS)
    assert set(SUBMIT_OPTIONS) == set(SubmitOptions.__optional_keys__)


def test_the_submit_many_column_is_its_options() -> None:
    assert set(_column("submit_many").values()) == set(BatchOptions.__optional_keys__)


def test_the_cli_column_names_flags_of_submit() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    submit = commands.choices["submit"]
    flags = {flag for action in submit._actions for flag in action.option_strings}
    documented = _column("cli")
    assert documented, "the CLI column is empty"
    for option, flag in documented.items():
        assert flag in flags, f"{option}: {flag} is no flag of `chongming-task submit`"
        dest = next(a.dest for a in submit._actions if flag in a.option_strings)
        assert dest in {option, option.rstrip("s")}, f"{flag} sets {dest!r}, not {option!r}"
