"""PostgreSQL specifics beyond the contract: schema versions, roles without DDL rights,
killed connections, atomic failures, connection hygiene."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from store_builders import NOW, snap, step

from chongming_task.errors import StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores._base import Command, TaskQuery
from chongming_task.stores._codec import encode_transition
from chongming_task.stores._postgres import PostgresTaskStore
from chongming_task.stores._sql import SCHEMA_VERSION
from chongming_task.stores._sqlfile import load_sections
from chongming_task.stores._sqlrows import task_params
from chongming_task.testing import wait_until

psycopg = pytest.importorskip("psycopg")
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

pytestmark = pytest.mark.external_service


def schema_name(dsn: str) -> str:
    options = conninfo_to_dict(dsn)["options"]
    assert isinstance(options, str)
    return options.split("search_path=", 1)[1]


def admin(dsn: str, *statements: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    """Run statements as the DSN's (super)user; returns the last one's rows."""
    rows: list[tuple[Any, ...]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            cursor = conn.execute(statement, params or None)
            rows = cursor.fetchall() if cursor.description else []
    return rows


def layout(dsn: str) -> set[tuple[str, ...]]:
    """Tables, columns and index definitions of the DSN's schema, schema name removed."""
    schema = schema_name(dsn)
    columns = admin(
        dsn,
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
        " WHERE table_schema = %s",
        params=(schema,),
    )
    indexes = admin(
        dsn,
        "SELECT tablename, replace(indexdef, %s, '') FROM pg_indexes WHERE schemaname = %s",
        params=(f"{schema}.", schema),
    )
    return {tuple(map(str, row)) for row in columns} | {tuple(map(str, row)) for row in indexes}


@pytest.fixture
def app_name() -> str:
    return f"ct-test-{uuid.uuid4().hex[:10]}"


def backends(dsn: str, app_name: str) -> int:
    rows = admin(
        dsn,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
        params=(app_name,),
    )
    return int(str(rows[0][0]))


def test_schema_version_is_recorded(postgres_dsn: str) -> None:
    PostgresTaskStore(postgres_dsn).close()
    rows = admin(postgres_dsn, "SELECT value FROM ct_meta WHERE key = 'schema_version'")
    assert rows == [(SCHEMA_VERSION,)]


def test_an_older_schema_is_migrated_and_matches_a_fresh_one(postgres_dsn: str) -> None:
    with PostgresTaskStore(postgres_dsn) as store:
        store.create(snap("kept"), [step("kept", 0, TaskStatus.PENDING)])
    fresh = layout(postgres_dsn)
    admin(
        postgres_dsn,
        "DROP TABLE ct_schedules",
        "DROP TABLE ct_firings",
        "UPDATE ct_meta SET value = 1 WHERE key = 'schema_version'",
    )
    with PostgresTaskStore(postgres_dsn) as store:
        assert store.get("kept") == snap("kept")
        assert store.put_schedule("s", {"a": 1}, expect_revision=None).revision == 1
    assert layout(postgres_dsn) == fresh


_TABLES = "ct_meta, ct_tasks, ct_transitions, ct_commands, ct_schedules, ct_firings"


def schema_at_version(dsn: str, version: int) -> None:
    """Replace the DSN's tables with those a store of schema ``version`` created."""
    sections = load_sections("postgres")
    admin(dsn, f"DROP TABLE IF EXISTS {_TABLES}")
    for number in range(1, version + 1):
        admin(dsn, sections[f"migrate_{number}"])
    admin(
        dsn,
        "INSERT INTO ct_meta (key, value) VALUES ('schema_version', %s)",
        params=(version,),
    )


def test_a_version_2_schema_is_migrated_to_the_current_one(postgres_dsn: str) -> None:
    PostgresTaskStore(postgres_dsn).close()
    fresh = layout(postgres_dsn)
    schema_at_version(postgres_dsn, 2)
    PostgresTaskStore(postgres_dsn).close()
    assert layout(postgres_dsn) == fresh
    assert any("ct_commands_claim" in str(row) for row in fresh)
    assert not any("ct_commands_action" in str(row) for row in fresh)  # replaced (v4)


def before_version_13(statement: str) -> str:
    """``statement`` without the transitions' charted columns (added by version 13)."""
    charted = re.compile(
        r",\s*\(e ->> 'at'\)::timestamptz,\s*CASE WHEN e ->> 'to' IN \([^)]*\) THEN e ->> 'to' END"
    )
    return charted.sub("", statement.replace(", occurred_at, charted", ""))


def _v3_command(dsn: str, command_id: str, action: str, **doc: Any) -> None:
    """Insert a command as a schema-3 store did (no priority column)."""
    status = doc.pop("status", "pending")
    admin(
        dsn,
        "INSERT INTO ct_commands (command_id, kind, target, action, target_owner, status,"
        " claims, doc) VALUES (%s, 'task', %s, %s, NULL, %s, 0, %s::json)",
        params=(command_id, command_id, action, status, json.dumps(doc)),
    )


def before_version_12(insert: str, params: dict[str, Any]) -> str:
    """``insert_task`` as versions 6 to 11 wrote it (no meta_parent); drops its parameter."""
    del params["meta_parent"]
    return re.sub(r",\s*%\(meta_parent\)s", "", insert.replace(", meta_parent", ""))


def test_a_version_3_schema_keeps_its_data_and_queues_its_submissions(postgres_dsn: str) -> None:
    with PostgresTaskStore(postgres_dsn) as store:
        fresh = layout(postgres_dsn)
    schema_at_version(postgres_dsn, 3)
    # A task, as versions 1 to 5 wrote it (version 6 added the checkpoint_gaps column).
    step_0 = step("kept", 0, TaskStatus.PENDING)
    task = task_params(snap("kept"), store._instant, store._array)
    del task["checkpoint_gaps"]
    task["transitions"] = json.dumps([json.loads(encode_transition(step_0))])
    task.update(wake=False, channel="")  # insert_task's wake-up: none
    insert = before_version_13(before_version_12(load_sections("postgres")["insert_task"], task))
    insert = insert.replace(", checkpoint_gaps", "").replace(", %(checkpoint_gaps)s::json", "")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(insert, task)
    issued = {"issued_by": "ops", "issued_at": "2026-01-01T00:00:00+00:00"}
    for command_id, priority in (
        ("low", 1),
        ("unset", None),
        ("high", 7),
        ("huge", 10**30),
        ("fraction", 2.5),
        ("exponent", 1e3),
        ("below", -2),
    ):
        payload = {"name": "add", "task_id": command_id, "priority": priority}
        _v3_command(postgres_dsn, command_id, "submit", payload=payload, **issued)
    _v3_command(postgres_dsn, "stop", "stop", payload={"priority": 5}, **issued)
    _v3_command(
        postgres_dsn, "done", "submit", payload={"priority": 9}, status="completed", **issued
    )

    with PostgresTaskStore(postgres_dsn) as store:
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
    statuses = "SELECT command_id, status FROM ct_commands ORDER BY command_id"
    rows = admin(postgres_dsn, statuses)
    assert dict(rows) == {name: "completed" for name, _ in rows if name != "stop"} | {
        "stop": "claimed"
    }
    assert layout(postgres_dsn) == fresh
    # Idempotent: rewound to version 3, the schema migrates again to the same layout.
    admin(postgres_dsn, "UPDATE ct_meta SET value = 3 WHERE key = 'schema_version'")
    PostgresTaskStore(postgres_dsn).close()
    assert layout(postgres_dsn) == fresh
    assert (
        admin(postgres_dsn, "SELECT command_id, status FROM ct_commands ORDER BY command_id")
        == rows
    )


def test_a_version_7_schema_gets_unique_keys_and_keeps_its_tasks(postgres_dsn: str) -> None:
    PostgresTaskStore(postgres_dsn).close()
    fresh = layout(postgres_dsn)
    schema_at_version(postgres_dsn, 7)
    # An unfinished task whose metadata happens to say "unique_key": written before
    # unique work existed, it holds no key (the column starts NULL for every row).
    old = snap("kept", status=TaskStatus.QUEUED, metadata={"unique_key": "k"})
    params = task_params(old, lambda v: v, list)
    params["transitions"] = "[]"
    params.update(wake=False, channel="")  # insert_task's wake-up: none
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            before_version_13(before_version_12(load_sections("postgres")["insert_task"], params)),
            params,
        )
    with PostgresTaskStore(postgres_dsn) as store:
        assert store.get("kept") == old
        new = snap("new", status=TaskStatus.QUEUED, metadata={"unique_key": "k"})
        assert store.create_unique([(new, [])]) == [("new", True)]
        assert store.create_unique([(snap("again", metadata={"unique_key": "k"}), [])]) == [
            ("new", False)
        ]
    keys = dict(admin(postgres_dsn, "SELECT task_id, unique_key FROM ct_tasks"))
    assert keys == {"kept": None, "new": "k"}
    assert layout(postgres_dsn) == fresh
    # Idempotent: rewound to version 7, the schema migrates again to the same layout.
    admin(postgres_dsn, "UPDATE ct_meta SET value = 7 WHERE key = 'schema_version'")
    PostgresTaskStore(postgres_dsn).close()
    assert layout(postgres_dsn) == fresh


def test_a_version_10_schema_gets_child_links_and_keeps_its_tasks(postgres_dsn: str) -> None:
    """Version 11 adds meta_parent (indexed): a row written before it, whose metadata
    happens to say "parent", stays without a link; children stored after it are found."""
    from chongming_task.stores._queue_records import children_query

    PostgresTaskStore(postgres_dsn).close()
    fresh = layout(postgres_dsn)
    admin(
        postgres_dsn,
        "DROP INDEX ct_tasks_parent",
        "ALTER TABLE ct_tasks DROP COLUMN meta_parent",
        "UPDATE ct_meta SET value = 10 WHERE key = 'schema_version'",
    )
    old = snap("kept", status=TaskStatus.QUEUED, metadata={"parent": "p"})
    params = task_params(old, lambda v: v, list)
    params["transitions"] = "[]"
    params.update(wake=False, channel="")  # insert_task's wake-up: none
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(before_version_12(load_sections("postgres")["insert_task"], params), params)
    with PostgresTaskStore(postgres_dsn) as store:
        assert store.get("kept") == old
        store.create(snap("child", status=TaskStatus.QUEUED, metadata={"parent": "p"}))
        assert [t.task_id for t in store.query(children_query("p"))] == ["child"]
    assert dict(admin(postgres_dsn, "SELECT task_id, meta_parent FROM ct_tasks")) == {
        "kept": None,
        "child": "p",
    }
    assert layout(postgres_dsn) == fresh
    admin(postgres_dsn, "UPDATE ct_meta SET value = 10 WHERE key = 'schema_version'")
    PostgresTaskStore(postgres_dsn).close()
    assert layout(postgres_dsn) == fresh


def test_a_version_9_schema_gets_paused_queues_and_keeps_its_tasks(postgres_dsn: str) -> None:
    from chongming_task.stores._pauses import QueuePause

    with PostgresTaskStore(postgres_dsn) as store:
        store.create(snap("kept"), [step("kept", 0, TaskStatus.PENDING)])
    fresh = layout(postgres_dsn)
    admin(
        postgres_dsn,
        "DROP TABLE ct_queue_pauses",
        "UPDATE ct_meta SET value = 9 WHERE key = 'schema_version'",
    )
    with PostgresTaskStore(postgres_dsn) as store:
        assert store.get("kept") == snap("kept")
        pause = QueuePause(bucket=3, actor="ops", reason="r", paused_at=NOW)
        store.pause_queue(pause)
        assert store.list_queue_pauses() == [pause]
    assert layout(postgres_dsn) == fresh
    # Idempotent: rewound to version 9, the schema migrates again to the same layout.
    admin(postgres_dsn, "UPDATE ct_meta SET value = 9 WHERE key = 'schema_version'")
    PostgresTaskStore(postgres_dsn).close()
    assert layout(postgres_dsn) == fresh


def test_a_version_10_schema_gets_64_bit_priorities_and_keeps_its_tasks(
    postgres_dsn: str,
) -> None:
    with PostgresTaskStore(postgres_dsn) as store:
        store.create(snap("kept"), [step("kept", 0, TaskStatus.PENDING)])
    fresh = layout(postgres_dsn)
    admin(
        postgres_dsn,
        "ALTER TABLE ct_tasks ALTER COLUMN priority TYPE integer",
        "UPDATE ct_meta SET value = 10 WHERE key = 'schema_version'",
    )
    with PostgresTaskStore(postgres_dsn) as store:
        assert store.get("kept") == snap("kept")
        wide = snap("wide", priority=2**40)
        store.create(wide, [step("wide", 0, TaskStatus.PENDING)])
        assert store.get("wide") == wide
    assert layout(postgres_dsn) == fresh


def test_a_version_10_schema_gets_charted_transitions_and_keeps_its_history(
    postgres_dsn: str,
) -> None:
    from datetime import timedelta

    PostgresTaskStore(postgres_dsn).close()
    fresh = layout(postgres_dsn)
    admin(
        postgres_dsn,
        "DROP INDEX ct_transitions_at",
        "ALTER TABLE ct_transitions DROP COLUMN occurred_at, DROP COLUMN charted",
        "UPDATE ct_meta SET value = 10 WHERE key = 'schema_version'",
    )
    old_step = step("kept", 0, TaskStatus.PENDING)
    params = task_params(snap("kept"), lambda v: v, list)
    params["transitions"] = json.dumps([json.loads(encode_transition(old_step))])
    params.update(wake=False, channel="")  # insert_task's wake-up: none
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(before_version_13(load_sections("postgres")["insert_task"]), params)
    with PostgresTaskStore(postgres_dsn) as store:
        assert store.history("kept") == [old_step]
        running = step("kept", 1, TaskStatus.RUNNING)
        store.append(running)
        since = running.at.replace(second=0, microsecond=0)
        minute = timedelta(minutes=1)
        # Written before version 13, the first record has no charted columns: not counted.
        totals = store.activity(since=since, until=since + minute, step=minute).totals()
        assert totals == {"started": 1, "succeeded": 0, "failed": 0}
    rows = admin(
        postgres_dsn,
        "SELECT version, occurred_at, charted FROM ct_transitions ORDER BY version",
    )
    assert [tuple(r) for r in rows] == [(0, None, None), (1, running.at, "running")]
    assert layout(postgres_dsn) == fresh
    # Idempotent: rewound to version 10, the schema migrates again to the same layout.
    admin(postgres_dsn, "UPDATE ct_meta SET value = 10 WHERE key = 'schema_version'")
    PostgresTaskStore(postgres_dsn).close()
    assert layout(postgres_dsn) == fresh


def test_a_version_13_schema_gets_the_waiting_index_and_a_covering_name_index(
    postgres_dsn: str,
) -> None:
    """Version 15 indexes the work queue's waiting tasks by bucket (queue_health), widens
    ct_tasks_name with each task's status and tags (counts by name and tag) and keeps the
    whole store's counts per status and bucket, starting from the tasks there are."""
    from datetime import timedelta

    from chongming_task.stores._queue_records import RECIPE_KEY, Recipe
    from chongming_task.stores._records import TaskQuery, WaitingWork

    recipe = {RECIPE_KEY: Recipe(args=(1,)).to_dict()}
    queued_at = snap().created_at + timedelta(seconds=5)
    waiting = snap("w", status=TaskStatus.QUEUED, bucket=3, metadata=recipe, queued_at=queued_at)
    with PostgresTaskStore(postgres_dsn) as store:
        store.create(snap("a", name="mail.send", tags=frozenset({"io"})))
        store.create(waiting)
        store.create(snap("f", status=TaskStatus.SUCCEEDED, bucket=3))
    fresh = layout(postgres_dsn)
    # Back to version 14's indexes (its tables are version 15's).
    admin(
        postgres_dsn,
        "DROP INDEX ct_tasks_waiting",
        "DROP INDEX ct_tasks_name",
        "CREATE INDEX ct_tasks_name ON ct_tasks (name, created_at, seq)",
        "DROP TABLE ct_terminal_counts",
        "DROP FUNCTION ct_count_terminal, ct_count_terminal_removed, ct_count_terminal_emptied"
        " CASCADE",
        "UPDATE ct_meta SET value = 14 WHERE key = 'schema_version'",
    )
    assert layout(postgres_dsn) != fresh
    with PostgresTaskStore(postgres_dsn) as store:
        assert store.count_tasks(TaskQuery(tag="io", name_prefix="mail.")) == 1
        assert store.waiting_work() == {3: WaitingWork(1, queued_at)}
        # The finished tasks' counts start from the tasks the schema holds.
        assert store.count_by_status() == {
            TaskStatus.PENDING: 1,
            TaskStatus.QUEUED: 1,
            TaskStatus.SUCCEEDED: 1,
        }
        assert store.count_by_bucket() == {3: 2}
    counted = admin(postgres_dsn, "SELECT backend, kind, key, n FROM ct_terminal_counts")
    assert {tuple(row) for row in counted} == {
        (0, "status", "succeeded", 1),
        (0, "bucket", "3", 1),
    }
    assert layout(postgres_dsn) == fresh
    assert any("INCLUDE (status, tags)" in str(row) for row in fresh)
    # Idempotent: rewound to version 13, the schema migrates again to the same layout.
    admin(postgres_dsn, "UPDATE ct_meta SET value = 13 WHERE key = 'schema_version'")
    PostgresTaskStore(postgres_dsn).close()
    assert layout(postgres_dsn) == fresh


def scanned(dsn: str) -> tuple[dict[TaskStatus, int], dict[int, int]]:
    """The tasks per status and per bucket as a scan of ct_tasks counts them."""
    statuses = admin(dsn, "SELECT status, count(*) FROM ct_tasks GROUP BY status")
    buckets = admin(
        dsn, "SELECT bucket, count(*) FROM ct_tasks WHERE bucket IS NOT NULL GROUP BY bucket"
    )
    return (
        {TaskStatus(status): int(n) for status, n in statuses},
        {int(bucket): int(n) for bucket, n in buckets},
    )


def assert_counts_exact(store: PostgresTaskStore, dsn: str) -> None:
    statuses, buckets = scanned(dsn)
    assert store.count_by_status() == statuses
    assert store.count_by_bucket() == buckets
    assert store.count_tasks() == sum(statuses.values())
    # The filtered path (a scan) agrees with the kept counts.
    every = TaskQuery(statuses=frozenset(TaskStatus))
    assert store.count_by_status(every) == statuses


def test_the_whole_store_counts_follow_every_write_of_every_connection(postgres_dsn: str) -> None:
    """count_by_status(), count_tasks() and count_by_bucket() of the whole store: the
    finished tasks' counters (kept by triggers per writing backend) plus the unfinished
    tasks counted in place, exact after inserts (one and many, finished or not),
    transitions, retries, bucket moves, the side channel, deletes, prune and TRUNCATE."""
    import threading
    from dataclasses import replace

    stores = [PostgresTaskStore(postgres_dsn) for _ in range(3)]
    try:
        store = stores[0]
        assert_counts_exact(store, postgres_dsn)

        def write(index: int, writer: PostgresTaskStore) -> None:
            for n in range(20):
                task_id = f"w{index}-{n}"
                writer.create(snap(task_id, bucket=n % 4 if n % 5 else None))
                if n % 2:
                    stored = writer.get(task_id)
                    assert stored is not None
                    done = replace(stored, status=TaskStatus.SUCCEEDED, status_version=1)
                    writer.save(done, expect_version=0)

        threads = [
            threading.Thread(target=write, args=(index, writer))
            for index, writer in enumerate(stores)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert_counts_exact(store, postgres_dsn)
        backends = admin(postgres_dsn, "SELECT count(DISTINCT backend) FROM ct_terminal_counts")
        assert backends[0][0] >= 2  # each writing connection keeps rows of its own
        # Inserted finished (an import), one insert for many; a finished task moved to
        # another bucket; a finished one sent back to the queue (a retry).
        done = TaskStatus.SUCCEEDED
        store.create_many([snap(f"bulk-{n}", bucket=9, status=done) for n in range(50)])
        moved = store.get("w0-1")
        assert moved is not None
        store.save(replace(moved, bucket=7, status_version=2), expect_version=1)  # bucket only
        retried = store.get("w0-3")
        assert retried is not None
        store.save(replace(retried, status=TaskStatus.QUEUED, status_version=2), expect_version=1)
        store.touch("w0-2", progress=None, heartbeat_at=NOW)  # the side channel: no count
        assert_counts_exact(store, postgres_dsn)
        assert store.delete_tasks(["w1-0", "w1-1", "bulk-3"]) == 3
        assert store.prune(keep_terminal=5) > 0
        assert_counts_exact(store, postgres_dsn)
        admin(postgres_dsn, "TRUNCATE ct_tasks CASCADE")
        assert store.count_by_status() == {}
        assert store.count_by_bucket() == {}
        store.create(snap("after"))
        assert_counts_exact(store, postgres_dsn)
    finally:
        for opened in stores:
            opened.close()


def test_the_counts_of_gone_connections_are_folded_into_one_row(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chongming_task.stores import _sql

    done = TaskStatus.SUCCEEDED
    with PostgresTaskStore(postgres_dsn) as writer:
        for n in range(6):
            writer.create(snap(f"t{n}", bucket=n % 2, status=done))
    gone = {row[0] for row in admin(postgres_dsn, "SELECT backend FROM ct_terminal_counts")} - {0}
    assert gone

    def ended() -> bool:
        alive = admin(postgres_dsn, "SELECT pid FROM pg_stat_activity")
        return not gone & {row[0] for row in alive}

    wait_until(ended, message="the closed store's backends to end")
    monkeypatch.setattr(_sql, "FOLD_ABOVE", 0)
    with PostgresTaskStore(postgres_dsn) as reader:
        live = reader.count_by_status()  # sums, then folds
        assert live == {TaskStatus.SUCCEEDED: 6}
        rows = admin(postgres_dsn, "SELECT backend, kind, key, n FROM ct_terminal_counts")
        assert {tuple(row) for row in rows} == {
            (0, "status", "succeeded", 6),
            (0, "bucket", "0", 3),
            (0, "bucket", "1", 3),
        }
        # A live writer's rows stay its own.
        reader.create(snap("late", status=done))
        reader.count_by_status()
        backends = admin(postgres_dsn, "SELECT DISTINCT backend FROM ct_terminal_counts")
        assert {row[0] for row in backends} - {0}
        assert_counts_exact(reader, postgres_dsn)


def test_a_newer_schema_is_refused_with_a_clear_message(postgres_dsn: str) -> None:
    PostgresTaskStore(postgres_dsn).close()
    admin(postgres_dsn, "UPDATE ct_meta SET value = 99 WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=r"version 99.*newer.*upgrade chongming-task"):
        PostgresTaskStore(postgres_dsn)


@pytest.fixture
def limited_role(postgres_dsn: str) -> Iterator[str]:
    """A login role with data rights on the test schema but no CREATE; yields its DSN."""
    role = f"ct_limited_{uuid.uuid4().hex[:8]}"
    schema = schema_name(postgres_dsn)
    admin(
        postgres_dsn,
        f'CREATE ROLE "{role}" LOGIN',
        f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"',
        f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" '
        f'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "{role}"',
    )
    try:
        yield make_conninfo(postgres_dsn, user=role)
    finally:
        admin(postgres_dsn, f'DROP OWNED BY "{role}"', f'DROP ROLE "{role}"')


def test_a_role_without_ddl_rights_uses_existing_tables(
    postgres_dsn: str, limited_role: str
) -> None:
    PostgresTaskStore(postgres_dsn).close()  # the owner creates the schema once
    with PostgresTaskStore(limited_role) as store:
        store.create(snap("by-limited"))
        assert store.query(TaskQuery()) == [snap("by-limited")]
        command = store.submit_command(
            Command.new(
                kind="task", target="by-limited", action="stop", issued_by="ro", issued_at=NOW
            )
        )
        [claimed] = store.claim_commands("ro", lease=30)
        assert claimed.command_id == command.command_id


def test_a_role_without_ddl_rights_cannot_create_the_schema(limited_role: str) -> None:
    with pytest.raises(StoreError, match="cannot create or migrate") as caught:
        PostgresTaskStore(limited_role)
    assert isinstance(caught.value.__cause__, psycopg.errors.InsufficientPrivilege)


def test_a_killed_pooled_connection_is_replaced_on_the_next_call(
    postgres_dsn: str, app_name: str
) -> None:
    with PostgresTaskStore(
        postgres_dsn, application_name=app_name, min_connections=2, max_connections=2
    ) as store:
        store.create(snap("survivor"))
        wait_until(lambda: backends(postgres_dsn, app_name) == 2, message="two pooled backends")
        killed = admin(
            postgres_dsn,
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
            " WHERE application_name = %s",
            params=(app_name,),
        )
        assert killed == [(True,), (True,)]
        assert store.get("survivor") == snap("survivor")
        store.save(snap("survivor", status_version=1), expect_version=0)
        assert store.get("survivor") == snap("survivor", status_version=1)


def test_a_failing_write_leaves_nothing_half_written(postgres_dsn: str) -> None:
    with PostgresTaskStore(postgres_dsn) as store:
        store.create(snap("t1"), [step("t1", 0, TaskStatus.PENDING)])
        admin(
            postgres_dsn,
            "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'simulated disk failure'; END $$",
            "CREATE TRIGGER boom BEFORE INSERT ON ct_transitions "
            "FOR EACH ROW EXECUTE FUNCTION boom()",
        )
        with pytest.raises(StoreError, match="simulated disk failure"):
            store.create(snap("t2"), [step("t2", 0, TaskStatus.PENDING)])
        assert store.get("t2") is None
        queued = snap("t1", status=TaskStatus.QUEUED, status_version=1)
        with pytest.raises(StoreError, match="simulated disk failure"):
            store.save(queued, expect_version=0, transitions=[step("t1", 1, TaskStatus.QUEUED)])
        assert store.get("t1") == snap("t1")


def test_close_returns_every_connection(postgres_dsn: str, app_name: str) -> None:
    store = PostgresTaskStore(postgres_dsn, application_name=app_name, min_connections=2)
    store.claim_commands("w", lease=5)  # starts the LISTEN connection too
    # The pool may have grown past min_size while warming up; at least pool + listener.
    wait_until(lambda: backends(postgres_dsn, app_name) >= 3, message="pool + listener")
    store.close()
    assert store.open_connections == 0
    wait_until(lambda: backends(postgres_dsn, app_name) == 0, message="backends gone")


def test_an_unreachable_server_is_a_store_error_quickly() -> None:
    with pytest.raises(StoreError, match="cannot prepare"):
        PostgresTaskStore("postgresql://nobody@127.0.0.1:1/none", connect_timeout=1)


def test_the_ps_query_uses_an_index(postgres_dsn: str) -> None:
    with PostgresTaskStore(postgres_dsn) as store:
        store.create(snap())
    rows = admin(
        postgres_dsn,
        "SET enable_seqscan = off",
        "EXPLAIN SELECT doc FROM ct_tasks t WHERE t.status = 'running'"
        " ORDER BY t.created_at, t.seq LIMIT 100",
    )
    plan = " ".join(str(row[0]) for row in rows)
    assert "ct_tasks_status_created" in plan
    assert "Sort" not in plan
