"""The fault suite: real processes, real signals, real stores, counted.

Every test here is marked ``faults`` (run by default, in CI too). Counts are sized for
two cores and scale with ``CHONGMING_FAULT_SCALE`` (an integer, default 1): e.g.
``CHONGMING_FAULT_SCALE=10`` runs ten times the kills, firings and fuzz examples.
The figures of a run (kills survived, transitions checked, duplicates, misses...)
are printed at the end of the session and, with ``CHONGMING_FAULT_FIGURES=PATH``,
written there as JSON (docs/reliability.md quotes them).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

#: How much bigger than the CI size this run is.
SCALE = max(1, int(os.environ.get("CHONGMING_FAULT_SCALE", "1") or 1))

#: Figures of this session, summed by the tests (see ``record``).
FIGURES: Counter[str] = Counter()


def record(**counts: int) -> None:
    """Add to the session's figures (``kills=1``, ``transitions=38`` ...)."""
    FIGURES.update(counts)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FIGURES:
        return
    figures = dict(sorted(FIGURES.items()))
    terminalreporter.write_line(
        f"fault suite figures (CHONGMING_FAULT_SCALE={SCALE}): "
        + ", ".join(f"{key}={value}" for key, value in figures.items())
    )
    target = os.environ.get("CHONGMING_FAULT_FIGURES")
    if target:
        Path(target).write_text(json.dumps({"scale": SCALE, **figures}, indent=2) + "\n")
