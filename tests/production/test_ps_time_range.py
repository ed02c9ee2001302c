"""``ps --since/--until``: the tasks created in a time window, ages or ISO times."""

from __future__ import annotations

import json
from datetime import UTC, timedelta, timezone

import pytest

from chongming_task.stores._sqlite import SqliteTaskStore

from .conftest import Seed
from .test_ps_defaults import ids, run


def test_since_an_age_lists_only_the_recent_tasks(seed: Seed) -> None:
    seed(3, age=timedelta(days=3), prefix="old")
    db = seed(2, age=timedelta(minutes=30), prefix="new")
    code, out, err = run("--db", db, "ps", "--since", "2h")
    assert (code, err) == (0, "")
    assert ids(out) == ["new0005", "new0004"]
    code, out, _ = run("--db", db, "ps", "--until", "1d")
    assert ids(out) == ["old0003", "old0002", "old0001"]
    # The footer's total counts the same window.
    code, out, _ = run("--db", db, "ps", "--json", "--since", "4d", "--until", "1h", "--limit", "1")
    document = json.loads(out)
    assert (code, document["count"], document["total"]) == (0, 1, 3)


def test_since_and_until_take_iso_times_with_an_offset(seed: Seed) -> None:
    db = seed(2, age=timedelta(days=2), prefix="a")
    seed(2, age=timedelta(hours=1), prefix="b")
    store = SqliteTaskStore(db)
    try:
        b3 = store.get("b0003")
        assert b3 is not None
        edge = b3.created_at
    finally:
        store.close()
    code, out, err = run("--db", db, "ps", "--since", edge.isoformat())
    assert (code, err) == (0, "")
    assert ids(out) == ["b0004", "b0003"]  # inclusive
    code, out, _ = run("--db", db, "ps", "--until", edge.isoformat())
    assert ids(out) == ["a0002", "a0001"]  # exclusive
    # The same instant in another offset, and with "Z".
    shanghai = edge.astimezone(timezone(timedelta(hours=8))).isoformat()
    code, out, _ = run("--db", db, "ps", "--since", shanghai)
    assert ids(out) == ["b0004", "b0003"]
    zulu = edge.astimezone(UTC).isoformat().replace("+00:00", "Z")
    code, out, _ = run("--db", db, "ps", "--until", zulu)
    assert ids(out) == ["a0002", "a0001"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "yesterday"], "--since 'yesterday' is not a time"),
        (["--since", "2026-03-01T08:00:00"], "has no UTC offset"),
        (["--until=-2h"], "--until '-2h'"),
        (["--since", ""], "--since is empty"),
        (["--since", "1h", "--until", "2h"], "must be after --since"),
    ],
)
def test_bad_times_exit_2_with_a_message(seed: Seed, argv: list[str], message: str) -> None:
    code, out, err = run("--db", seed(1), "ps", *argv)
    assert code == 2, (out, err)
    assert message in err
    assert "Traceback" not in err
