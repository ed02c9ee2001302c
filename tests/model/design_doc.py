"""Renders the generated part of docs/design.md from ``states.TRANSITIONS``.

Edge labels are the public methods observed to perform each edge (``edges.witnesses``),
so the diagram cannot drift from the code. Regenerate with::

    .venv/bin/python -m tests.model.design_doc --write

``test_design_doc.py`` fails when the document is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path

from chongming_task.states import GUIDE_ADDITIONS, OCCUPYING, TERMINAL, TRANSITIONS, TaskStatus

from .edges import witnesses

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"
BEGIN = "<!-- BEGIN GENERATED: transitions (python -m tests.model.design_doc --write) -->"
END = "<!-- END GENERATED: transitions -->"


def _label(source: TaskStatus, target: TaskStatus, methods: list[str]) -> str:
    label = " / ".join(methods)
    if (source, target) in GUIDE_ADDITIONS:
        label += " (addition)"
    return label


def transition_table() -> str:
    """One row per source state, like guide §9.2, with the slot column of §9.2's rule."""
    lines = [
        "| From | Occupying | Legal targets |",
        "|---|---|---|",
    ]
    for source in TaskStatus:
        targets = ", ".join(f"`{t.value}`" for t in TaskStatus if t in TRANSITIONS[source])
        if source in TERMINAL:
            targets = "none (terminal)"
        slot = "yes" if source in OCCUPYING else "no"
        lines.append(f"| `{source.value}` | {slot} | {targets} |")
    return "\n".join(lines)


def edge_table() -> str:
    """Every edge with the methods that perform it."""
    found = witnesses()
    lines = ["| Edge | Performed by |", "|---|---|"]
    for source in TaskStatus:
        for target in TaskStatus:
            if target in TRANSITIONS[source]:
                methods = ", ".join(f"`{m}()`" for m in found[(source, target)])
                if (source, target) in GUIDE_ADDITIONS:
                    methods += " — our addition to §9.2"
                lines.append(f"| `{source.value} -> {target.value}` | {methods} |")
    return "\n".join(lines)


def mermaid() -> str:
    """A stateDiagram-v2 with every edge of the table, labelled with its methods."""
    found = witnesses()
    lines = ["```mermaid", "stateDiagram-v2", "    [*] --> pending: create"]
    for source in TaskStatus:
        for target in TaskStatus:
            if target in TRANSITIONS[source]:
                label = _label(source, target, found[(source, target)])
                lines.append(f"    {source.value} --> {target.value}: {label}")
    lines.extend(f"    {status.value} --> [*]" for status in TaskStatus if status in TERMINAL)
    lines.append("```")
    return "\n".join(lines)


def generated_block() -> str:
    return "\n\n".join(
        [
            BEGIN,
            "Transition table (guide §9.2, verbatim):",
            transition_table(),
            "State diagram; each edge is labelled with the public methods that perform it:",
            mermaid(),
            "The same edges as a list:",
            edge_table(),
            END,
        ]
    )


def render(document: str) -> str:
    """``document`` with its generated block replaced by a fresh one."""
    start = document.index(BEGIN)
    stop = document.index(END) + len(END)
    return document[:start] + generated_block() + document[stop:]


def main(argv: list[str]) -> int:
    current = DESIGN.read_text(encoding="utf-8")
    fresh = render(current)
    if "--write" in argv:
        DESIGN.write_text(fresh, encoding="utf-8")
        return 0
    if fresh != current:
        print(f"{DESIGN} is out of date; run with --write")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
