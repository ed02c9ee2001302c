"""Fleet limits: declared in the store, obeyed by every worker process, explained anywhere.

Three real ``chongming-task worker`` processes share one store (SQLite, PostgreSQL);
the bounds are read from the store while they run (the occupying tasks per
concurrency key, the slot rows, the recorded starts), never inferred from timing.
The store-level semantics (patterns, windows, both bounds) are in the store contract,
which also runs on the memory store.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from _workers import cli, on_path, spawn_worker, stop_workers
from chongming_task import Client, InMemoryTaskStore, SqliteTaskStore, TaskStatus
from chongming_task.errors import ConfigurationError
from chongming_task.states import OCCUPYING
from chongming_task.stores import QueueStore
from chongming_task.stores._base import TaskQuery, TaskStore
from chongming_task.stores._limits import LimitStart
from chongming_task.stores._queue_records import concurrency_key_of
from chongming_task.testing import wait_until

HERE = Path(__file__).parent
TASKS = str(HERE / "limtasks.py")
DEADLINE = 60.0
LIMIT = 2
LINGER = 1.0


@pytest.fixture(autouse=True)
def _tasks_on_path() -> Iterator[None]:
    with on_path(HERE):
        yield


def _workers(db: str, logs: Path, count: int = 3) -> list[subprocess.Popen[bytes]]:
    return [
        spawn_worker(
            db,
            logs / f"w{i}.log",
            options=["--owner", f"w{i}"],
            worker=["--tasks", TASKS, "--poll-interval", "0.05", "--max-parallel", "4"],
        )
        for i in range(1, count + 1)
    ]


def _until_registered(store: TaskStore, count: int) -> None:
    """Wait (with a deadline) until ``count`` workers have registered in ``store``."""
    assert isinstance(store, QueueStore)
    deadline = time.monotonic() + DEADLINE
    while len(store.list_workers()) < count:
        assert time.monotonic() < deadline, "the workers did not register in time"
        threading.Event().wait(0.05)


class Sampler:
    """Calls ``sample`` in a thread until stopped (the store read while workers run)."""

    def __init__(self, sample: Callable[[], None]) -> None:
        self.sample = sample
        self.count = 0
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.is_set():
            try:
                self.sample()
            except BaseException as exc:  # reported by stop()
                self.error = exc
                return
            self.count += 1
            self._done.wait(0.02)

    def stop(self) -> None:
        self._done.set()
        self._thread.join(10)
        if self.error is not None:
            raise self.error


def test_a_fleet_concurrency_limit_on_a_dynamic_key_holds_across_three_workers(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    assert isinstance(store, QueueStore)
    client = Client(store, tasks=__import__("limtasks"))
    client.set_limit("tenant:*", concurrency=LIMIT)
    logs = tmp_path / "logs"
    logs.mkdir()
    # The fleet first, then the work: enqueued before the workers were up, one worker
    # could claim everything on a loaded machine before the others registered.
    procs = _workers(db, logs)
    _until_registered(store, 3)
    ids: dict[str, list[str]] = {}
    for tenant in ("a", "b"):
        gates = tmp_path / f"gates-{tenant}"  # the bodies of one tenant meet each other
        gates.mkdir()
        ids[tenant] = [
            client.enqueue(
                "meet", str(gates), LIMIT, LINGER, concurrency_key=f"tenant:{tenant}"
            ).task_id
            for _ in range(5)
        ]
    peak: Counter[str] = Counter()
    slot_peak: Counter[str] = Counter()

    def sample() -> None:
        occupying = store.query(TaskQuery(statuses=frozenset(OCCUPYING), limit=1000))
        per_key = Counter(concurrency_key_of(s) for s in occupying)
        slots = Counter(s.name for s in store.list_global_slots())
        for key, n in per_key.items():
            assert key is not None
            assert n <= LIMIT, (key, n, occupying)
            peak[key] = max(peak[key], n)
        for key, n in slots.items():
            assert n <= LIMIT, (key, n)
            slot_peak[key] = max(slot_peak[key], n)

    sampler = Sampler(sample)
    try:
        for task_id in ids["a"] + ids["b"]:
            assert client.wait(task_id, DEADLINE).status is TaskStatus.SUCCEEDED
    finally:
        sampler.stop()
        stop_workers(procs, logs)
    assert sampler.count > 20
    # Reached, never exceeded (twelve worker slots would let five of a tenant meet).
    assert peak == {"tenant:a": LIMIT, "tenant:b": LIMIT}
    assert slot_peak == {"tenant:a": LIMIT, "tenant:b": LIMIT}
    assert store.list_global_slots() == []
    # Which of the three competing workers ran them is the claim race's business (a
    # worker that frees a slot claims again at once, so one may win every round on a
    # loaded machine): the limit above is what the fleet must never exceed.


def test_a_fleet_rate_limit_holds_across_three_workers(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    assert isinstance(store, QueueStore)
    client = Client(store, tasks=__import__("limtasks"))
    client.set_limit("mail", rate="3/s")
    logs = tmp_path / "logs"
    logs.mkdir()
    limited = [client.enqueue("free", concurrency_key="mail").task_id for _ in range(9)]
    plain = [client.enqueue("free").task_id for _ in range(3)]
    seen: dict[tuple[str, str], LimitStart] = {}

    def sample() -> None:  # a start lives a window (1 s): sampled every 20 ms, none missed
        for start in store.list_limit_starts():
            seen[(start.task_id, start.key)] = start

    procs = _workers(db, logs)
    sampler = Sampler(sample)
    try:
        for task_id in limited + plain:
            assert client.wait(task_id, DEADLINE).status is TaskStatus.SUCCEEDED
    finally:
        sampler.stop()
        stop_workers(procs, logs)
    sample()
    assert sorted(task_id for task_id, _ in seen) == sorted(limited)  # every start recorded
    times = sorted(start.started_at for start in seen.values())
    for i, first in enumerate(times):
        within = [t for t in times[i:] if t < first + timedelta(seconds=1)]
        assert len(within) <= 3, (first, within)
    # Nine starts at three a second need at least two full windows.
    assert times[-1] - times[0] >= timedelta(seconds=2)
    for task_id in limited:  # each task started after (never before) its recorded start
        start = seen[(task_id, "mail")].started_at
        running = [t.at for t in store.history(task_id) if t.to_status is TaskStatus.STARTING]
        assert running
        assert running[0] >= start


def test_explain_from_another_process_names_the_full_limit_and_its_holder(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    client = Client(store, tasks=__import__("limtasks"))
    client.set_limit("tenant:*", concurrency=1)
    gates, logs = tmp_path / "gates", tmp_path / "logs"
    gates.mkdir()
    logs.mkdir()
    first = client.enqueue("hold", str(gates), task_id="first", concurrency_key="tenant:x")
    second = client.enqueue("hold", str(gates), task_id="second", concurrency_key="tenant:x")
    other = client.enqueue("hold", str(gates), task_id="other", concurrency_key="tenant:y")
    procs = _workers(db, logs, count=1)
    try:
        wait_until((gates / "started-first").exists, timeout=DEADLINE)
        wait_until((gates / "started-other").exists, timeout=DEADLINE)
        assert (second.status, store.get("second").owner) == (TaskStatus.QUEUED, None)  # type: ignore[union-attr]
        done = cli(db, "explain", "second", "--json")
        assert done.returncode == 0, done.stderr
        reasons = json.loads(done.stdout)["reasons"]
        (full,) = [r for r in reasons if r["kind"] == "fleet_limit_full"]
        assert full["key"] == "tenant:x"
        assert full["rule"] == "tenant:*"
        assert full["concurrency"] == 1
        assert full["holders"] == ["first@w1"]
        text = cli(db, "explain", "second")
        assert "fleet limit 'tenant:x' (limit 'tenant:*') is full" in text.stdout
        assert "first@w1" in text.stdout
        listed = json.loads(cli(db, "limits", "--json").stdout)["limits"]
        assert listed[0]["key"] == "tenant:*"
        assert {u["key"]: [h["task_id"] for h in u["holders"]] for u in listed[0]["in_use"]} == {
            "tenant:x": ["first"],
            "tenant:y": ["other"],
        }
        (gates / "release").write_text("go")
        for handle in (first, second, other):
            assert handle.wait(DEADLINE).status is TaskStatus.SUCCEEDED
    finally:
        stop_workers(procs, logs)


def test_limits_are_set_listed_and_deleted_from_the_cli(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    done = cli(db, "limits", "set", "tenant:*", "--concurrency", "2", "--rate", "100/m")
    assert done.returncode == 0, done.stderr
    assert "tenant:*: concurrency 2 rate 100/m" in done.stdout
    assert cli(db, "limits", "set", "gpu", "--concurrency", "1").returncode == 0
    listed = json.loads(cli(db, "limits", "list", "--json").stdout)
    assert [(x["key"], x["concurrency"], x["rate"]) for x in listed["limits"]] == [
        ("gpu", 1, None),
        ("tenant:*", 2, "100/m"),
    ]
    assert cli(db, "limits", "delete", "gpu").returncode == 0
    plain = cli(db, "limits")
    assert plain.stdout.strip() == "tenant:*: concurrency 2 rate 100/m"
    missing = cli(db, "limits", "delete", "gpu")
    assert missing.returncode == 1
    assert "no limit 'gpu' is declared" in missing.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["set", "x"], "needs --concurrency N, --rate COUNT/UNIT, or both"),
        (["set", "x", "--concurrency", "0"], "concurrency must be an integer of at least 1"),
        (["set", "x", "--concurrency", "two"], "--concurrency"),
        (["set", "x", "--rate", "5/d"], "rate must be COUNT/UNIT with UNIT s, m or h"),
        (["set", "x", "--rate", "0/s"], "at least 1 start per window"),
        (["set", "a*b", "--concurrency", "1"], "'*' only at the end"),
        (["set", "a b", "--concurrency", "1"], "no spaces"),
    ],
)
def test_the_cli_refuses_bad_limits(args: list[str], message: str, tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    done = cli(db, "limits", *args)
    assert done.returncode == 2, done
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_submit_takes_a_concurrency_key(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    done = cli(db, "submit", "free", "--tasks", TASKS, "--concurrency-key", "tenant:7")
    assert done.returncode == 0, done.stderr
    with SqliteTaskStore(db) as store:
        stored = store.get(done.stdout.strip())
        assert stored is not None
        assert concurrency_key_of(stored) == "tenant:7"
    bad = cli(db, "submit", "free", "--tasks", TASKS, "--concurrency-key", "tenant:*")
    assert bad.returncode == 2, bad
    assert "patterns are for" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_limits_through_the_client(store: TaskStore) -> None:
    client = Client(store)
    assert client.limits() == []
    made = client.set_limit("tenant:*", concurrency=3)
    assert (made.key, made.concurrency, made.rate) == ("tenant:*", 3, None)
    client.set_limit("mail", rate="100/h")
    client.set_limit("tenant:*", concurrency=2, rate="5/s")  # replaced
    assert [x.to_dict() for x in client.limits()] == [
        {"key": "mail", "concurrency": None, "rate": "100/h"},
        {"key": "tenant:*", "concurrency": 2, "rate": "5/s"},
    ]
    assert client.delete_limit("mail") is True
    assert client.delete_limit("mail") is False
    handle = client.enqueue("job", concurrency_key="tenant:1")
    assert concurrency_key_of(handle.snapshot) == "tenant:1"
    (batch,) = client.enqueue_many("job", [()], concurrency_keys=["tenant:2"])
    assert concurrency_key_of(batch.snapshot) == "tenant:2"


@pytest.mark.parametrize(
    ("key", "options", "message"),
    [
        ("x", {}, "give concurrency=N, rate='N/s|m|h', or both"),
        ("x", {"concurrency": 0}, "concurrency must be an integer of at least 1, got 0"),
        ("x", {"concurrency": True}, "concurrency must be an integer of at least 1, got True"),
        ("x", {"concurrency": 1.5}, "concurrency must be an integer of at least 1, got 1.5"),
        ("x", {"rate": "100/d"}, "rate must be COUNT/UNIT with UNIT s, m or h"),
        ("x", {"rate": 100}, "rate must be COUNT/UNIT"),
        ("x", {"rate": "0/m"}, "at least 1 start per window"),
        ("", {"concurrency": 1}, "must be a non-empty string"),
        ("a*b", {"concurrency": 1}, "'*' only at the end"),
        ("k" * 201, {"concurrency": 1}, "at most 200 characters"),
    ],
)
def test_bad_limits_are_refused_and_change_nothing(
    key: str, options: dict[str, Any], message: str
) -> None:
    client = Client(InMemoryTaskStore())
    client.set_limit("kept", concurrency=1)
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        client.set_limit(key, **options)
    assert [x.key for x in client.limits()] == ["kept"]


def test_a_pattern_is_no_concurrency_key() -> None:
    client = Client(InMemoryTaskStore())
    with pytest.raises(ConfigurationError, match=r"patterns are for Client\.set_limit"):
        client.enqueue("job", concurrency_key="tenant:*")
    with pytest.raises(ConfigurationError, match="call 1: concurrency_key"):
        client.enqueue_many("job", [(), ()], concurrency_keys=["ok", ""])
    assert client.list_tasks() == []
