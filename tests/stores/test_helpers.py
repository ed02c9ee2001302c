"""The small pieces under the stores: prefix ranges, instants, the SQL file, the signal."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chongming_task.stores._codec import from_micros, to_micros
from chongming_task.stores._signal import CommandSignal
from chongming_task.stores._sqlfile import load_sections, split_statements
from chongming_task.stores._sqlrows import prefix_upper_bound
from chongming_task.testing import FakeClock

# Storable text: no surrogates (not UTF-8), no NUL (not allowed by either database).
text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"))


@given(prefix=text, candidate=text)
def test_prefix_range_is_exactly_starts_with(prefix: str, candidate: str) -> None:
    high = prefix_upper_bound(prefix)
    in_range = candidate >= prefix and (high is None or candidate < high)
    assert in_range == candidate.startswith(prefix)


@given(prefix=text, suffix=text)
def test_extensions_of_a_prefix_are_in_range(prefix: str, suffix: str) -> None:
    high = prefix_upper_bound(prefix)
    assert high is None or prefix + suffix < high


def test_prefix_bounds_at_the_edges() -> None:
    assert prefix_upper_bound("ab") == "ac"
    assert prefix_upper_bound("a\U0010ffff") == "b"
    assert prefix_upper_bound("\U0010ffff") is None
    assert prefix_upper_bound("") is None
    assert prefix_upper_bound("\ud7ff") == "\ue000"


@given(st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30))])))
def test_micros_round_trip_exactly(value: datetime) -> None:
    assert from_micros(to_micros(value)) == value


def test_both_dialects_define_the_same_sections() -> None:
    sqlite, postgres = load_sections("sqlite"), load_sections("postgres")
    # lock_slots, unique_lock: SQLite's BEGIN IMMEDIATE already serialises those writes.
    only_postgres = {"current_schema", "migration_lock", "lock_slots", "unique_lock"}
    # enqueue(connection=...): PostgreSQL checks the database and sets the search_path,
    # SQLite takes the write lock.
    only_postgres |= {"database_identity", "set_search_path"}
    only_postgres |= {"pipeline_lock"}  # a pipeline's join settles under it (SQLite: as above)
    # Counter rows of gone connections (SQLite's writers share one row per status).
    only_postgres |= {"fold_lock", "fold_counts"}
    only_sqlite = {"commands_rev", "update_task_hot", "select_lost", "mark_lost"}
    only_sqlite |= {"take_write_lock"}
    # A planner without statistics: pages of a name prefix or a tag walk the creation
    # index, and a tag's tasks carry their name (PostgreSQL plans from its statistics
    # and counts a tag with a name prefix from ct_tasks_name, which carries the tags).
    only_sqlite |= {"walk_tasks", "walk_heads", "walk_edge", "filter_walk_from", "filter_walk_to"}
    only_sqlite |= {"filter_tag_probe", "filter_tag_name_range", "filter_tag_name_from"}
    only_sqlite |= {"count_tag", "count_tag_name_range", "count_tag_name_from"}
    assert set(sqlite) - only_sqlite == set(postgres) - only_postgres


def test_split_statements_keeps_trigger_bodies_whole() -> None:
    script = (
        "CREATE TABLE a (x INT);\nCREATE TRIGGER t AFTER INSERT ON a BEGIN\n  SELECT 1;\nEND;\n"
        "-- tail"
    )
    assert list(split_statements(script)) == [
        "CREATE TABLE a (x INT);",
        "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  SELECT 1;\nEND;",
    ]


def test_signal_remembers_notifications_since_the_last_claim() -> None:
    clock = FakeClock()
    signal = CommandSignal()
    signal.mark_seen()
    signal.notify()
    signal.wait(clock, 3600)  # returns at once: something happened since mark_seen
    done = threading.Event()

    def waiter() -> None:
        signal.wait(clock, 10)
        done.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    clock.wait_for_sleepers(1)
    signal.notify()
    thread.join(5)
    assert done.is_set()


def test_a_closed_signal_never_blocks() -> None:
    signal = CommandSignal()
    signal.close()
    signal.wait(FakeClock(), 3600)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_the_kept_counts_name_every_status_once(dialect: str) -> None:
    """The finished statuses the triggers count (migrate_15) are TERMINAL, and the
    ranges counted in place (status_totals, bucket_totals) lie between them."""
    import itertools
    import re

    from chongming_task.states import TERMINAL

    sections = load_sections(dialect)
    terminal = {s.value for s in TERMINAL}
    finished = re.findall(r"IN (\([^)]*\))", sections["migrate_15"])
    assert len(finished) >= 5
    assert all(set(re.findall(r"'(\w+)'", group)) == terminal for group in finished)
    for section in ("status_totals", "bucket_totals"):
        counted_in_place = sections[section].split("UNION ALL", 1)[1]
        bounds = re.findall(r"status ([<>]) '(\w+)'", counted_in_place)
        edges = sorted(terminal)
        # Below the first terminal status, between each two, above the last.
        wanted = [("<", edges[0])]
        for low, high in itertools.pairwise(edges):
            wanted += [(">", low), ("<", high)]
        wanted.append((">", edges[-1]))
        assert bounds == wanted, section
