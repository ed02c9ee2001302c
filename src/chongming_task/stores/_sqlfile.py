"""Load the SQL of a dialect from ``stores/sql/<dialect>.sql``, split into named sections.

A section starts at a line ``-- name: <section>`` and runs to the next one. Keeping the
SQL in files (rather than Python strings) lets it be read, diffed and reviewed as SQL,
and lets the two dialects be compared side by side section by section.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Final

__all__ = ["load_sections", "split_statements"]

_HEADER: Final = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@cache
def load_sections(dialect: str) -> Mapping[str, str]:
    """Every section of ``sql/<dialect>.sql``, stripped.

    Single statements lose their final ``;`` so they can be composed (a ``WHERE`` is
    appended to ``select_tasks``); ``migrate_<n>`` scripts keep theirs.
    """
    text = resources.files("chongming_task.stores").joinpath("sql", f"{dialect}.sql")
    source = text.read_text(encoding="utf-8")
    sections: dict[str, str] = {}
    headers = list(_HEADER.finditer(source))
    for index, match in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(source)
        name, body = match.group(1), source[match.end() : end].strip()
        if name in sections:
            raise RuntimeError(f"duplicate SQL section {name!r} in {dialect}.sql")
        if not name.startswith("migrate_"):
            body = body.removesuffix(";").rstrip()
        sections[name] = body
    return MappingProxyType(sections)


def split_statements(script: str) -> Iterator[str]:
    """The statements of a migration section, for drivers that run one at a time.

    Uses ``sqlite3.complete_statement`` so ``CREATE TRIGGER ... BEGIN ...; END;`` stays
    whole. Comment-only remainders are dropped.
    """
    import sqlite3

    buffer: list[str] = []
    for line in script.splitlines(keepends=True):
        buffer.append(line)
        candidate = "".join(buffer)
        if sqlite3.complete_statement(candidate):
            statement = candidate.strip()
            if statement:
                yield statement
            buffer.clear()
    rest = "".join(buffer).strip()
    if rest and not all(line.strip().startswith("--") for line in rest.splitlines()):
        yield rest
