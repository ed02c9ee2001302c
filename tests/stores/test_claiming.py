"""The ``actions`` filter of ``claim_commands``: how every CommandStore checks it.

That the stores honour it is the contract's part (``CommandStoreContract``).
"""

from __future__ import annotations

from typing import Any

import pytest

from chongming_task.errors import ConfigurationError
from chongming_task.stores._base import validate_actions


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ("submit", r"not the string 'submit' \(did you mean \('submit',\)\?\)"),
        ([], "at least one action"),
        (["stop", ""], "non-empty strings; got ''"),
        ([None], "non-empty strings; got None"),
    ],
)
def test_bad_action_filters_say_what_is_allowed(actions: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        validate_actions(actions)


def test_good_action_filters_are_frozen() -> None:
    assert validate_actions(None) is None
    assert validate_actions(["stop", "pause", "stop"]) == frozenset({"stop", "pause"})
