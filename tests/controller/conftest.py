"""Fixtures of the controller tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._helpers import Gate


@pytest.fixture
def gate() -> Iterator[Gate]:
    gate = Gate()
    yield gate
    gate.open()  # never leave a body spinning after a failed test
