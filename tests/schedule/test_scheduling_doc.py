"""docs/scheduling.md's DST tables and preview examples are the command's own output."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_blocks_of_the_scheduling_doc_are_up_to_date() -> None:
    spec = importlib.util.spec_from_file_location(
        "gen_scheduling_md", ROOT / "docs" / "gen_scheduling_md.py"
    )
    assert spec is not None
    assert spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    current = (ROOT / "docs" / "scheduling.md").read_text(encoding="utf-8")
    assert generator.render(current) == current, (
        "docs/scheduling.md is out of date: run `python docs/gen_scheduling_md.py`"
    )
    assert "<!-- generated:dst-table-4 -->" in current
