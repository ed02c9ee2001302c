"""docs/design.md shows the transition table exactly as the code has it."""

from __future__ import annotations

from chongming_task._model import FailureKind
from chongming_task.states import TRANSITIONS, TaskStatus

from .design_doc import BEGIN, DESIGN, END, generated_block


def test_generated_block_is_up_to_date() -> None:
    document = DESIGN.read_text(encoding="utf-8")
    assert BEGIN in document
    assert END in document
    start = document.index(BEGIN)
    stop = document.index(END) + len(END)
    assert document[start:stop] == generated_block(), (
        "docs/design.md is stale: run .venv/bin/python -m tests.model.design_doc --write"
    )


def test_document_contains_every_edge_and_name() -> None:
    document = DESIGN.read_text(encoding="utf-8")
    for source, targets in TRANSITIONS.items():
        for target in targets:
            assert f"    {source.value} --> {target.value}: " in document
    for status in TaskStatus:
        assert f"`{status.value}`" in document
    for kind in FailureKind:
        assert f"`{kind.value}`" in document


def test_document_begins_with_the_model() -> None:
    document = DESIGN.read_text(encoding="utf-8")
    headings = [line for line in document.splitlines() if line.startswith("## ")]
    assert headings[0].startswith("## 1. The model")
    for needed in ("Orthogonal dimensions", "Single writer", "Honest states"):
        assert needed in document
