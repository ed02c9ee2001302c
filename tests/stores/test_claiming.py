"""Claiming by action from stores that have the filter and from stores that predate it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_task.core.clock import SystemClock
from chongming_task.errors import ConfigurationError
from chongming_task.stores._claiming import claim_actions, filters_actions
from chongming_task.stores.base import Command, TaskStore, validate_actions
from chongming_task.stores.memory import InMemoryTaskStore
from chongming_task.stores.sqlite import SqliteTaskStore


class Legacy(InMemoryTaskStore):
    """``claim_commands`` as a third-party store wrote it before ``actions`` existed."""

    calls: list[dict[str, Any]]

    def claim_commands(  # type: ignore[override]
        self, owner: str, *, lease: float, limit: int = 10, kinds: Any = None
    ) -> list[Command]:
        self.calls = [*getattr(self, "calls", []), {"kinds": kinds}]
        return super().claim_commands(owner, lease=lease, limit=limit, kinds=kinds)


class Forwarding(InMemoryTaskStore):
    """A wrapper that forwards whatever it is given (instrumentation, retries...)."""

    def claim_commands(self, owner: str, **options: Any) -> list[Command]:
        return super().claim_commands(owner, **options)


def _command(action: str) -> Command:
    return Command.new(
        kind="task", target="t", action=action, issued_by="ops", issued_at=SystemClock().now()
    )


@pytest.fixture
def legacy() -> Iterator[Legacy]:
    with Legacy() as store:
        yield store


def test_the_built_in_stores_filter_by_action(tmp_path: Path) -> None:
    with (
        InMemoryTaskStore() as memory,
        SqliteTaskStore(tmp_path / "s.db") as sqlite,
        Forwarding() as forwarding,
    ):
        stores: list[TaskStore] = [memory, sqlite, forwarding]
        assert all(filters_actions(store) for store in stores)


def test_a_store_without_the_filter_is_called_without_it_and_warned_about_once(
    legacy: Legacy, caplog: pytest.LogCaptureFixture
) -> None:
    stop = legacy.submit_command(_command("stop"))
    submit = legacy.submit_command(_command("submit"))
    with caplog.at_level(logging.WARNING, logger="chongming_task.stores"):
        assert not filters_actions(legacy)
        claimed = claim_actions(
            legacy, "w", lease=5, limit=10, kinds=("task",), actions=("submit",)
        )
        assert not filters_actions(Legacy())
    # Every action comes back: the caller hands back what it does not handle.
    assert [c.command_id for c in claimed] == [stop.command_id, submit.command_id]
    assert legacy.calls == [{"kinds": ("task",)}]
    warnings = [r for r in caplog.records if "takes no 'actions' filter" in r.getMessage()]
    assert len(warnings) == 1, "one warning per implementation, not per claim"
    assert "Legacy.claim_commands()" in warnings[0].getMessage()


def test_a_store_with_the_filter_gets_it(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path / "s.db") as store:
        store.submit_command(_command("stop"))
        submit = store.submit_command(_command("submit"))
        claimed = claim_actions(store, "w", lease=5, limit=10, kinds=("task",), actions={"submit"})
        assert [c.command_id for c in claimed] == [submit.command_id]


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
