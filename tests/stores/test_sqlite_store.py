"""SQLite specifics beyond the contract: schema versions, failures, durability settings."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from store_builders import NOW, snap, step

from chongming_task._model import TaskSnapshot, dumps
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores import _sqlite as sqlite_module
from chongming_task.stores._base import TaskQuery
from chongming_task.stores._codec import encode_transition, to_micros
from chongming_task.stores._dialect import Cursor
from chongming_task.stores._sql import SCHEMA_VERSION
from chongming_task.stores._sqlfile import load_sections, split_statements
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.stores._sqlite_group import _Operation
from chongming_task.stores._sqlrows import task_params


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "tasks.db")


@pytest.fixture
def store(path: str) -> Iterator[SqliteTaskStore]:
    with SqliteTaskStore(path) as opened:
        yield opened


def schema_of(path: str) -> set[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        ).fetchall()
        return {(kind, name, sql or "") for kind, name, sql in rows}
    finally:
        conn.close()


def raw(path: str, *statements: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def test_the_file_uses_wal_and_records_the_schema_version(
    store: SqliteTaskStore, path: str
) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        found = conn.execute("SELECT value FROM ct_meta WHERE key = 'schema_version'").fetchone()
        assert found[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_an_older_schema_is_migrated_and_keeps_its_data(path: str, tmp_path: Path) -> None:
    with SqliteTaskStore(path) as store:
        store.create(snap("kept"), [step("kept", 0, TaskStatus.PENDING)])
    # Turn the file back into a version-1 database (before schedules existed).
    raw(
        path,
        "DROP TABLE ct_schedules",
        "DROP TABLE ct_firings",
        "UPDATE ct_meta SET value = 1 WHERE key = 'schema_version'",
    )
    with SqliteTaskStore(path) as store:
        assert store.get("kept") == snap("kept")
        assert len(store.history("kept")) == 1
        assert store.put_schedule("s", {}, expect_revision=None).revision == 1
    fresh = str(tmp_path / "fresh.db")
    SqliteTaskStore(fresh).close()
    assert schema_of(path) == schema_of(fresh)


def file_at_version(path: str, version: int) -> None:
    """A database exactly as a store of schema ``version`` created it: its migrations."""
    sections = load_sections("sqlite")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for step in range(1, version + 1):
            for statement in split_statements(sections[f"migrate_{step}"]):
                conn.execute(statement)
        conn.execute(sections["set_schema_version"], {"version": version})
    finally:
        conn.close()


def test_a_version_2_file_is_migrated_to_the_current_schema(path: str, tmp_path: Path) -> None:
    file_at_version(path, 2)
    with SqliteTaskStore(path) as store:
        store.create(snap("kept"))
        assert store.get("kept") == snap("kept")
    fresh = str(tmp_path / "fresh.db")
    SqliteTaskStore(fresh).close()
    assert schema_of(path) == schema_of(fresh)
    names = {name for _, name, _ in schema_of(path)}
    assert "ct_commands_claim" in names
    assert "ct_commands_action" not in names  # replaced by ct_commands_claim (version 4)


def _v3_command(conn: sqlite3.Connection, command_id: str, action: str, **doc: Any) -> None:
    """Insert a command as a schema-3 store did (no priority column)."""
    status = doc.pop("status", "pending")
    conn.execute(
        "INSERT INTO ct_commands (command_id, kind, target, action, target_owner, status,"
        " claims, doc) VALUES (?, 'task', ?, ?, NULL, ?, 0, ?)",
        (command_id, command_id, action, status, json.dumps(doc)),
    )


def before_version_6(insert: str) -> str:
    """``insert_task`` as versions 1 to 5 wrote it: without the checkpoint_gaps column
    (nor meta_parent, a column since version 12)."""
    for column in ("checkpoint_gaps", "meta_parent"):
        insert = insert.replace(f", {column}", "").replace(f", :{column}", "")
    return insert


def before_version_12(insert: str) -> str:
    """``insert_task`` as versions 6 to 11 wrote it: without the meta_parent column."""
    return insert.replace(", meta_parent", "").replace(", :meta_parent", "")


def old_params(snapshot: TaskSnapshot) -> dict[str, object]:
    """``task_params`` of ``snapshot`` for :func:`before_version_12`'s insert."""
    params = task_params(snapshot, to_micros, lambda v: dumps(list(v)))
    del params["meta_parent"]
    return params


def test_a_version_3_file_keeps_its_data_and_queues_its_submissions(
    path: str, tmp_path: Path
) -> None:
    file_at_version(path, 3)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        sections = load_sections("sqlite")
        params = task_params(snap("kept"), to_micros, lambda v: dumps(list(v)))
        del params["checkpoint_gaps"], params["meta_parent"]  # columns since versions 6, 11
        conn.execute(before_version_6(sections["insert_task"]), params)
        step_0 = step("kept", 0, TaskStatus.PENDING)
        conn.execute(
            "INSERT INTO ct_transitions (task_id, version, doc) VALUES (:task_id, :version, :doc)",
            {"task_id": "kept", "version": 0, "doc": encode_transition(step_0)},
        )
        issued = {"issued_by": "ops", "issued_at": "2026-01-01T00:00:00+00:00"}
        for command_id, priority in (
            ("low", 1),
            ("unset", None),
            ("high", 7),
            ("huge", 10**30),
            ("fraction", 2.5),
            ("below", -2),
        ):
            payload = {"name": "add", "task_id": command_id, "priority": priority}
            _v3_command(conn, command_id, "submit", payload=payload, **issued)
        _v3_command(conn, "stop", "stop", payload={"priority": 5}, **issued)
        _v3_command(conn, "done", "submit", payload={"priority": 9}, status="completed", **issued)
    finally:
        conn.close()

    with SqliteTaskStore(path) as store:
        assert store.get("kept") == snap("kept")
        assert store.history("kept") == [step_0]
        stop = store.get_command("stop")
        assert stop is not None
        assert (stop.action, stop.payload, stop.issued_by) == ("stop", {"priority": 5}, "ops")
        # Version 14 turned the pending submissions into queued tasks of their priority;
        # those no worker could accept (a priority that is no 64-bit integer) are refused.
        queued = store.query(TaskQuery(statuses=frozenset({TaskStatus.QUEUED})))
        assert sorted((t.task_id, t.priority) for t in queued) == [
            ("below", -2),
            ("high", 7),
            ("low", 1),
            ("unset", 0),
        ]
        refused = store.get_command("huge")
        assert refused is not None
        assert refused.payload["priority"] == 10**30  # the payload itself is untouched
        assert refused.status == "completed"
        assert isinstance(refused.result, dict)
        assert refused.result["accepted"] is False
        assert store.get("done") is None  # completed before: nothing to take
        # Commands have no priority since version 14: claimed oldest first.
        assert [c.command_id for c in store.claim_commands("w", lease=30)] == ["stop"]
    with closing(sqlite3.connect(path)) as conn:
        statuses = dict(conn.execute("SELECT command_id, status FROM ct_commands").fetchall())
    assert statuses == {name: "completed" for name in statuses if name != "stop"} | {
        "stop": "claimed"
    }
    fresh = str(tmp_path / "fresh.db")
    SqliteTaskStore(fresh).close()
    assert schema_of(path) == schema_of(fresh)
    # Idempotent: rewound to version 3, the file migrates again to the same schema.
    raw(path, "UPDATE ct_meta SET value = 3 WHERE key = 'schema_version'")
    SqliteTaskStore(path).close()
    assert schema_of(path) == schema_of(fresh)
    with closing(sqlite3.connect(path)) as conn:
        found = conn.execute("SELECT value FROM ct_meta WHERE key = 'schema_version'").fetchone()
    assert found[0] == SCHEMA_VERSION == 15


def test_a_version_7_file_gets_unique_keys_and_keeps_its_tasks(path: str, tmp_path: Path) -> None:
    file_at_version(path, 7)
    sections = load_sections("sqlite")
    # An unfinished task whose metadata happens to say "unique_key": written before
    # unique work existed, it holds no key (the column starts NULL for every row).
    old = snap("kept", status=TaskStatus.QUEUED, metadata={"unique_key": "k"})
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(before_version_12(sections["insert_task"]), old_params(old))
    with SqliteTaskStore(path) as store:
        assert store.get("kept") == old
        new = snap("new", status=TaskStatus.QUEUED, metadata={"unique_key": "k"})
        assert store.create_unique([(new, [])]) == [("new", True)]
        assert store.create_unique([(snap("again", metadata={"unique_key": "k"}), [])]) == [
            ("new", False)
        ]
    with closing(sqlite3.connect(path)) as conn:
        keys = dict(conn.execute("SELECT task_id, unique_key FROM ct_tasks").fetchall())
    assert keys == {"kept": None, "new": "k"}
    fresh = str(tmp_path / "fresh.db")
    SqliteTaskStore(fresh).close()
    assert schema_of(path) == schema_of(fresh)
    names = {name for _, name, _ in schema_of(path)}
    assert {"ct_tasks_unique_unfinished", "ct_tasks_unique_key"} <= names
    # Idempotent: rewound to version 7, the file migrates again to the same schema.
    raw(path, "UPDATE ct_meta SET value = 7 WHERE key = 'schema_version'")
    SqliteTaskStore(path).close()
    assert schema_of(path) == schema_of(fresh)


def test_a_version_9_file_gets_paused_queues_and_keeps_its_tasks(path: str, tmp_path: Path) -> None:
    from chongming_task.stores._pauses import QueuePause

    file_at_version(path, 9)
    old = snap("kept", status=TaskStatus.QUEUED)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(before_version_12(load_sections("sqlite")["insert_task"]), old_params(old))
    with SqliteTaskStore(path) as store:
        assert store.get("kept") == old
        pause = QueuePause(name="kept", actor="ops", reason="r", paused_at=old.created_at)
        store.pause_queue(pause)
        assert store.list_queue_pauses() == [pause]
    fresh = str(tmp_path / "fresh.db")
    SqliteTaskStore(fresh).close()
    assert schema_of(path) == schema_of(fresh)
    # Idempotent: rewound to version 9, the file migrates again to the same schema.
    raw(path, "UPDATE ct_meta SET value = 9 WHERE key = 'schema_version'")
    with SqliteTaskStore(path) as store:
        assert [p.name for p in store.list_queue_pauses()] == ["kept"]
    assert schema_of(path) == schema_of(fresh)


def test_a_version_10_file_gets_child_links_and_keeps_its_tasks(path: str, tmp_path: Path) -> None:
    """Version 11 copies metadata["parent"] into meta_parent, indexed: a row written
    before it (whose metadata happens to say "parent") stays a task without a parent
    link; the children stored after the migration are found through ct_tasks_parent."""
    from chongming_task.stores._queue_records import children_query

    file_at_version(path, 10)
    old = snap("kept", status=TaskStatus.QUEUED, metadata={"parent": "p"})
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(before_version_12(load_sections("sqlite")["insert_task"]), old_params(old))
    with SqliteTaskStore(path) as store:
        assert store.get("kept") == old
        store.create(snap("child", status=TaskStatus.QUEUED, metadata={"parent": "p"}))
        assert [t.task_id for t in store.query(children_query("p"))] == ["child"]
    with closing(sqlite3.connect(path)) as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT seq FROM ct_tasks t WHERE t.meta_parent = 'p'"
        ).fetchall()
    assert "ct_tasks_parent" in " ".join(row[3] for row in plan)
    fresh = str(tmp_path / "fresh.db")
    SqliteTaskStore(fresh).close()
    assert schema_of(path) == schema_of(fresh)


def test_a_version_10_file_gets_charted_transitions_and_keeps_its_history(
    path: str, tmp_path: Path
) -> None:
    from datetime import timedelta

    file_at_version(path, 10)
    old = snap("kept", status=TaskStatus.QUEUED)
    old_step = step("kept", 1, TaskStatus.QUEUED)
    sections = load_sections("sqlite")
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(before_version_12(sections["insert_task"]), old_params(old))
        conn.execute(
            "INSERT INTO ct_transitions (task_id, version, doc) VALUES (?, ?, ?)",
            ("kept", 1, encode_transition(old_step)),
        )
    with SqliteTaskStore(path) as store:
        assert store.history("kept") == [old_step]
        running = step("kept", 2, TaskStatus.RUNNING)
        store.append(running)
        since = running.at.replace(second=0, microsecond=0)
        minute = timedelta(minutes=1)
        # Written before version 13, the first record has no charted columns: not counted.
        totals = store.activity(since=since, until=since + minute, step=minute).totals()
        assert totals == {"started": 1, "succeeded": 0, "failed": 0}
    with closing(sqlite3.connect(path)) as conn:
        columns = conn.execute(
            "SELECT version, occurred_at, charted FROM ct_transitions ORDER BY version"
        ).fetchall()
    assert columns == [(1, None, None), (2, to_micros(running.at), "running")]
    fresh = str(tmp_path / "fresh.db")
    SqliteTaskStore(fresh).close()
    assert schema_of(path) == schema_of(fresh)
    assert "ct_transitions_at" in {name for _, name, _ in schema_of(path)}
    # Idempotent: rewound to version 10, the file migrates again to the same schema.
    raw(path, "UPDATE ct_meta SET value = 10 WHERE key = 'schema_version'")
    SqliteTaskStore(path).close()
    assert schema_of(path) == schema_of(fresh)


def test_a_version_13_file_gets_tag_names_and_the_waiting_index(path: str, tmp_path: Path) -> None:
    """Version 15 copies each tag row's task name (a search by tag and name prefix is one
    index range) and indexes the work queue's waiting tasks by bucket (queue_health)."""
    from datetime import timedelta

    from chongming_task.stores._queue_records import RECIPE_KEY, Recipe
    from chongming_task.stores._records import TaskQuery, WaitingWork

    file_at_version(path, 13)
    recipe = {RECIPE_KEY: Recipe(args=(1,)).to_dict()}
    queued_at = NOW + timedelta(seconds=5)
    rows = [
        snap("a", name="mail.send", tags=frozenset({"io"})),
        snap("b", name="mail.other", tags=frozenset({"io", "db"})),
        snap("c", name="report", tags=frozenset({"io"})),
        snap("w", status=TaskStatus.QUEUED, bucket=3, metadata=recipe, queued_at=queued_at),
    ]
    insert = load_sections("sqlite")["insert_task"]
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for row in rows:
            conn.execute(insert, task_params(row, to_micros, lambda v: dumps(list(v))))
    with SqliteTaskStore(path) as store:
        assert store.count_tasks(TaskQuery(tag="io", name_prefix="mail.")) == 2
        found = store.query(TaskQuery(tag="io", name_prefix="mail.", order="-created", limit=5))
        assert sorted(s.task_id for s in found) == ["a", "b"]
        assert store.waiting_work() == {3: WaitingWork(1, queued_at)}
        renamed = store.get("c")
        assert renamed is not None
        store.save(replace(renamed, name="mail.late", status_version=1), expect_version=0)
        # The tags of a renamed task carry its new name.
        assert store.count_tasks(TaskQuery(tag="io", name_prefix="mail.")) == 3
    with closing(sqlite3.connect(path)) as conn:
        names = conn.execute("SELECT tag, seq, name FROM ct_task_tags ORDER BY tag, seq").fetchall()
    assert [(tag, name) for tag, _, name in names] == [
        ("db", "mail.other"),
        ("io", "mail.send"),
        ("io", "mail.other"),
        ("io", "mail.late"),
    ]
    fresh = str(tmp_path / "fresh.db")
    SqliteTaskStore(fresh).close()
    assert schema_of(path) == schema_of(fresh)
    assert {"ct_tasks_waiting", "ct_task_tags_name"} <= {n for _, n, _ in schema_of(path)}
    # Idempotent: rewound to version 13, the file migrates again to the same schema.
    raw(path, "UPDATE ct_meta SET value = 13 WHERE key = 'schema_version'")
    SqliteTaskStore(path).close()
    assert schema_of(path) == schema_of(fresh)


def test_a_page_walks_the_creation_index_then_leaves_rare_matches_to_their_index(
    store: SqliteTaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of a name prefix or a tag walks ct_tasks_created up to WALK tasks: a page
    that fills there is final; rarer matches are read through their own index instead."""
    from datetime import timedelta

    from chongming_task.stores import _sql
    from chongming_task.stores._records import TaskQuery

    monkeypatch.setattr(_sql, "WALK", 4)
    for index in range(12):
        old = index < 2  # the only "old.job" tasks are the two oldest
        name, tag = ("old.job", "old") if old else ("new.job", "new")
        at = NOW + timedelta(seconds=index)
        store.create(snap(f"t{index:02}", name=name, tags=frozenset({tag}), created_at=at))
    newest = ["t11", "t10", "t09"]
    cases = [  # query, its page, whether the walk found it
        (TaskQuery(name_prefix="new.", order="-created", limit=3), newest, True),
        (TaskQuery(tag="new", order="-created", limit=3), newest, True),
        (
            TaskQuery(tag="old", name_prefix="old.", order="-created", limit=3),
            ["t01", "t00"],
            False,
        ),
        (TaskQuery(name_prefix="old.", order="created", limit=1), ["t00"], True),
        (
            TaskQuery(tag="new", order="created", limit=20),
            [f"t{i:02}" for i in range(2, 12)],
            False,
        ),
    ]
    for query, page, walked in cases:
        assert [s.task_id for s in store.query(query)] == page, query
        assert [h.task_id for h in store.query_heads(query)] == page, query
        assert (store._walk("select_tasks", query) is not None) is walked, query


def _query_plan(path: str, statement: str, **params: object) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement, params)]


def test_the_waiting_work_reads_its_partial_index_only(store: SqliteTaskStore, path: str) -> None:
    """queue_health's depth per bucket: the partial index, never every queued row."""
    plan = _query_plan(path, load_sections("sqlite")["waiting_work"])
    reads = [line for line in plan if line.startswith(("SCAN", "SEARCH")) and "ct_tasks" in line]
    assert reads
    assert all("ct_tasks_waiting" in line for line in reads), plan


def test_a_count_by_tag_and_name_prefix_reads_the_tag_index_only(
    store: SqliteTaskStore, path: str
) -> None:
    sections = load_sections("sqlite")
    statement = f"{sections['count_tag']} AND {sections['count_tag_name_range']}"
    plan = _query_plan(path, statement, tag="io", name_low="a", name_high="b")
    assert plan == ["SEARCH g USING COVERING INDEX ct_task_tags_name (tag=? AND name>? AND name<?)"]


def _claim_plan(store: SqliteTaskStore, path: str, section: str, **params: object) -> str:
    """The query plan of the row search inside a claim statement."""
    statement = store._sql[section]
    select = statement[statement.index("SELECT seq") : statement.index(")\nRETURNING")]
    conn = sqlite3.connect(path)
    try:
        bound = {"now": 0, "owner": "w", "kinds": '["task"]', "limit": 5, **params}
        return " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + select, bound))
    finally:
        conn.close()


def test_a_claim_by_action_searches_the_index_not_the_backlog(
    store: SqliteTaskStore, path: str
) -> None:
    """A poller claiming stop/pause/resume must not walk every pending command of other
    actions (bucket handoffs, schedule runs)."""
    plan = _claim_plan(store, path, "claim_commands_actions", actions='["stop", "pause"]')
    assert "USING INDEX ct_commands_claim (action=?)" in plan


def test_a_newer_schema_is_refused_with_a_clear_message(path: str) -> None:
    SqliteTaskStore(path).close()
    raw(path, "UPDATE ct_meta SET value = 99 WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=r"schema version 99.*newer.*upgrade chongming-task"):
        SqliteTaskStore(path)


def test_two_stores_on_one_file_share_one_schema(path: str) -> None:
    first, second = SqliteTaskStore(path), SqliteTaskStore(path)
    try:
        first.create(snap("a"))
        assert second.get("a") == snap("a")
    finally:
        first.close()
        second.close()


def test_a_read_only_database_refuses_writes_with_store_error(path: str) -> None:
    with SqliteTaskStore(path) as store:
        store.create(snap("before"))
    with SqliteTaskStore(f"file:{path}?mode=ro") as read_only:
        assert read_only.get("before") == snap("before")
        with pytest.raises(StoreError, match="readonly") as caught:
            read_only.create(snap("after"))
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        with pytest.raises(StoreError):
            read_only.save(snap("before", status_version=1), expect_version=0)
        assert read_only.get("after") is None
        assert read_only.get("before") == snap("before")


def test_a_locked_database_is_a_store_error_after_the_busy_timeout(path: str) -> None:
    SqliteTaskStore(path).close()
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with SqliteTaskStore(path, timeout=0.05) as store:
            with pytest.raises(StoreError, match="locked"):
                store.create(snap("blocked"))
            blocker.execute("ROLLBACK")
            store.create(snap("blocked"))
            assert store.get("blocked") == snap("blocked")
    finally:
        blocker.close()


def test_a_failing_write_leaves_nothing_half_written(store: SqliteTaskStore, path: str) -> None:
    store.create(snap("t1"), [step("t1", 0, TaskStatus.PENDING)])
    # The transition insert fails after the snapshot row was written in the same transaction.
    raw(
        path,
        "CREATE TRIGGER boom BEFORE INSERT ON ct_transitions BEGIN "
        "SELECT RAISE(ABORT, 'simulated disk failure'); END",
    )
    with pytest.raises(StoreError, match="simulated disk failure") as caught:
        store.create(snap("t2"), [step("t2", 0, TaskStatus.PENDING)])
    assert isinstance(caught.value.__cause__, sqlite3.Error)
    assert store.get("t2") is None
    queued = snap("t1", status=TaskStatus.QUEUED, status_version=1)
    with pytest.raises(StoreError, match="simulated disk failure"):
        store.save(queued, expect_version=0, transitions=[step("t1", 1, TaskStatus.QUEUED)])
    assert store.get("t1") == snap("t1")
    raw(path, "DROP TRIGGER boom")
    store.save(queued, expect_version=0, transitions=[step("t1", 1, TaskStatus.QUEUED)])
    assert store.get("t1") == queued


def test_memory_databases_are_private_to_their_store() -> None:
    with SqliteTaskStore(":memory:") as one, SqliteTaskStore(":memory:") as two:
        one.create(snap("only-in-one"))
        assert two.get("only-in-one") is None
        assert one.open_connections == 1


def test_durability_mode_is_configurable_and_validated(path: str) -> None:
    with SqliteTaskStore(path, synchronous="FULL") as store:
        store.create(snap())
    with pytest.raises(ConfigurationError, match="synchronous"):
        SqliteTaskStore(path, synchronous="OFF")  # type: ignore[arg-type]


def test_reads_use_pooled_connections_and_close_releases_them(path: str) -> None:
    store = SqliteTaskStore(path)
    store.create(snap())
    store.get("t1")
    assert store.open_connections == 2  # the writer plus one idle reader
    store.close()
    assert store.open_connections == 0


def test_the_indexes_back_the_ps_query(store: SqliteTaskStore, path: str) -> None:
    conn = sqlite3.connect(path)
    try:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT doc FROM ct_tasks t WHERE t.status = 'running' "
            "ORDER BY t.created_at, t.seq LIMIT 100"
        ).fetchall()
    finally:
        conn.close()
    detail = " ".join(str(row[-1]) for row in plan)
    assert "ct_tasks_status_created" in detail
    assert "TEMP B-TREE" not in detail  # no sort: the index delivers the order


# ---------------------------------------------------------------- group commit


def test_concurrent_writes_succeed_or_fail_independently(store: SqliteTaskStore) -> None:
    store.create(snap("shared"))
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def writer(index: int) -> None:
        barrier.wait(10)
        for round_ in range(20):
            try:
                store.create(snap(f"own-{index}-{round_}"))
                store.create(snap(f"dup-{round_}"))
            except ConfigurationError:
                result = "duplicate"
            else:
                result = "created"
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert outcomes.count("created") == 20  # each dup-N exactly once
    assert outcomes.count("duplicate") == 8 * 20 - 20
    assert len(store.query()) == 1 + 8 * 20 + 20


def test_an_operation_that_breaks_the_transaction_fails_its_whole_group(path: str) -> None:
    with SqliteTaskStore(path) as store:
        group = store._dialect.group

        def write(task_id: str) -> Callable[[Cursor], int]:
            return lambda cur: store._dialect.write_task(
                cur, "insert_task", task_params(snap(task_id), store._instant, store._array), []
            )

        def break_transaction(cur: Cursor) -> None:
            cur.execute("ROLLBACK")  # what SQLite itself does on SQLITE_FULL / IOERR
            raise sqlite3.OperationalError("database or disk is full")

        batch = [_Operation(write("a"), False), _Operation(break_transaction, False)]
        batch.append(_Operation(write("b"), False))
        group._execute(batch)
        first, broken, last = batch
        assert isinstance(first.error, StoreError)
        assert "rolled back with its commit group" in str(first.error)
        assert isinstance(broken.error, StoreError)
        assert last.error is None
        assert store.get("a") is None
        assert store.get("b") == snap("b")


def test_a_failed_statement_in_a_group_undoes_only_itself(store: SqliteTaskStore) -> None:
    """Non-atomic writes share the group's transaction without a savepoint each."""
    group = store._dialect.group

    def write(task_id: str) -> Callable[[Cursor], int]:
        return lambda cur: store._dialect.write_task(
            cur, "insert_task", task_params(snap(task_id), store._instant, store._array), []
        )

    def half_then_fail(cur: Cursor) -> None:
        write("half")(cur)
        raise RuntimeError("after one statement")

    store.create(snap("taken"))
    batch = [
        _Operation(write("a"), False),
        _Operation(write("taken"), False),  # UNIQUE: SQLite undoes this statement alone
        _Operation(write("b"), False),
        _Operation(half_then_fail, True),  # atomic: its savepoint undoes its first write
    ]
    group._execute(batch)
    a, taken, b, half = batch
    assert a.error is None
    assert b.error is None
    assert taken.error is not None
    assert "UNIQUE" in str(taken.error)
    assert isinstance(half.error, RuntimeError)
    assert store.get("a") == snap("a")
    assert store.get("b") == snap("b")
    assert store.get("half") is None
    assert store.get("taken") == snap("taken")


def test_command_poll_interval_is_how_often_other_processes_commands_are_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the files cannot be watched, the wait polls at that interval."""
    monkeypatch.setattr(sqlite_module, "watch_files", lambda path: None)

    from chongming_task import SystemClock

    class Recording(SystemClock):
        def __init__(self) -> None:
            self.waits: list[float | None] = []

        def wait(self, event: threading.Event, timeout: float | None) -> bool:
            self.waits.append(timeout)
            return super().wait(event, timeout)

    clock = Recording()
    opened = SqliteTaskStore(tmp_path / "poll.db", clock=clock, command_poll_interval=0.05)
    try:
        opened.wait_for_commands(0.2)
    finally:
        opened.close()
    polls = [w for w in clock.waits if w is not None]
    assert polls
    assert max(polls) == pytest.approx(0.05)  # the default would have polled every 0.01 s
    for bad in (0, -1, float("nan"), float("inf"), True):
        with pytest.raises(ConfigurationError, match="command_poll_interval"):
            SqliteTaskStore(tmp_path / "bad.db", command_poll_interval=bad)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_another_process_s_write_wakes_a_waiter_without_polling(tmp_path: Path) -> None:
    """With the files watched, a wait sleeps (no reads every 10 ms) until another
    process writes work: the clock below never moves, so only the write can wake it."""
    from chongming_task import Client
    from chongming_task.testing import FakeClock

    clock = FakeClock()
    path = tmp_path / "watched.db"
    waiting = SqliteTaskStore(path, clock=clock)
    other = SqliteTaskStore(path)  # its own signal: to the waiter, another process
    woke = threading.Event()

    def wait() -> None:
        waiting.wait_for_commands(3600)
        woke.set()

    waiter = threading.Thread(target=wait, daemon=True)
    try:
        assert waiting._dialect._file_watch() is not None
        waiter.start()
        clock.wait_for_sleepers(1)
        assert not woke.is_set()  # asleep, and time does not move
        Client(other).enqueue("anything")
        assert woke.wait(10), "the write of another store did not wake the waiter"
        waiter.join(10)
    finally:
        other.close()
        waiting.close()


def test_a_store_dropped_without_close_closes_its_connections(tmp_path: Path) -> None:
    """``Controller(store=SqliteTaskStore(...))`` as the guide writes it never closes
    the store; collecting it closes its connections (sqlite3 would warn otherwise)."""
    import gc

    dropped = SqliteTaskStore(tmp_path / "dropped.db")
    assert dropped.query() == []  # a reader connection too
    connections = list(dropped._dialect.connections)
    assert len(connections) >= 2
    del dropped
    gc.collect()
    for conn in connections:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            conn.execute("SELECT 1")


def test_a_version_8_file_gets_fleet_limits_and_keeps_its_queue(tmp_path: Path) -> None:
    from datetime import timedelta

    from chongming_task.queue import Client

    path = str(tmp_path / "v8.db")
    with SqliteTaskStore(path) as store:
        queued = Client(store).enqueue("job", concurrency_key="tenant:1").task_id
    with closing(sqlite3.connect(path)) as conn:  # as version 8 left it
        conn.execute("DROP TABLE ct_limits")
        conn.execute("DROP TABLE ct_limit_starts")
        conn.execute("UPDATE ct_meta SET value = 8 WHERE key = 'schema_version'")
        conn.commit()
    with SqliteTaskStore(path) as store:
        client = Client(store)
        client.set_limit("tenant:*", concurrency=1, rate="1/h")
        assert [x.key for x in client.limits()] == ["tenant:*"]
        until = store.clock.now() + timedelta(seconds=30)
        (claimed,) = store.claim_queued("w", buckets=None, limit=5, lease_until=until)
        assert claimed.task_id == queued
        assert [(s.name, s.task_id) for s in store.list_global_slots()] == [("tenant:1", queued)]
        assert [s.task_id for s in store.list_limit_starts()] == [queued]
    with closing(sqlite3.connect(path)) as conn:
        found = conn.execute("SELECT value FROM ct_meta WHERE key = 'schema_version'").fetchone()
    assert found[0] == SCHEMA_VERSION
