"""A third-party store in one file, proven by the shipped contract suite (guide §8.7).

``DictTaskStore`` keeps every record as JSON text in plain dictionaries, the way a
document database or a key-value service would; its task part, ``DictTaskRecords``, is
a backend of its own (a store may implement only that part). It reuses, from
``chongming_task.stores``, the library's codec (``encode_snapshot`` and the rest) so
fidelity is exact, the rules a store holding its rows in Python shares with the
in-memory one (``select_tasks``, ``prune_choice``, ``touch_changes``...), the checks of
``validate_claim``, and ``CommandSignal`` for ``wait_for_commands``; what is left is
its storage. Then ``StoreContract`` checks it: the same cases the built-in stores
pass. Run: ``python examples/07_custom_store.py``.
"""

from __future__ import annotations

import threading
import unittest
import uuid
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from chongming_task import Clock, Progress, TaskQuery, TaskSnapshot, Transition
from chongming_task.errors import (
    ClaimLost,
    ConcurrencyConflict,
    ConfigurationError,
    ScheduleConflict,
    StoreError,
    TaskNotFound,
)
from chongming_task.states import TaskStatus
from chongming_task.stores import (
    Command,
    CommandSignal,
    JSONValue,
    ScheduleRecord,
    TaskRecordStore,
    TaskRow,
    TaskStore,
    decode_snapshot,
    decode_transition,
    dumps,
    encode_json,
    encode_snapshot,
    encode_transition,
    loads,
    prune_choice,
    require_aware,
    select_tasks,
    to_micros,
    touch_changes,
    validate_claim,
)
from chongming_task.testing.store_contract import StoreContract


class DictTaskRecords(TaskRecordStore):
    """The task part: every record is JSON text in a dict; one lock makes each method atomic.

    A backend may stop here: a controller runs, stops and waits for its own tasks on
    it, ``TaskRecordStoreContract`` checks it, and what needs another part (commands,
    schedules, the work queue) refuses it by name.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self.lock = threading.Lock()
        self.tasks: dict[str, tuple[int, str]] = {}  # task_id -> (insertion number, JSON)
        self.history_docs: dict[tuple[str, int], str] = {}
        self.closed = False
        self.counter = 0

    def guard(self) -> None:
        if self.closed:
            raise StoreError(f"{type(self).__name__} is closed")

    def load(self, task_id: str) -> TaskSnapshot | None:
        row = self.tasks.get(task_id)
        return None if row is None else decode_snapshot(row[1])

    # snapshots and history -----------------------------------------------------------
    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        doc = encode_snapshot(snapshot)  # enforces OUTCOME_MAX_BYTES
        with self.lock:
            self.guard()
            if snapshot.task_id in self.tasks:
                raise ConfigurationError(f"task id {snapshot.task_id!r} already exists")
            self.counter += 1
            self.tasks[snapshot.task_id] = (self.counter, doc)
            self.add_history(transitions)

    def save(
        self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        doc = encode_snapshot(snapshot)
        with self.lock:
            self.guard()
            current = self.load(snapshot.task_id)
            if current is None:
                raise TaskNotFound(snapshot.task_id)
            if current.status_version != expect_version:
                raise ConcurrencyConflict(snapshot.task_id, expect_version, current.status_version)
            self.tasks[snapshot.task_id] = (self.tasks[snapshot.task_id][0], doc)
            self.add_history(transitions)

    def add_history(self, transitions: Sequence[Transition]) -> None:
        for t in transitions:
            self.history_docs.setdefault((t.task_id, t.version), encode_transition(t))

    def get(self, task_id: str) -> TaskSnapshot | None:
        with self.lock:
            self.guard()
            return self.load(task_id)

    def all_rows(self) -> list[TaskRow]:
        with self.lock:
            self.guard()
            return [TaskRow(n, decode_snapshot(doc)) for n, doc in self.tasks.values()]

    # count_by_status and count_by_bucket: the defaults count what query returns.
    def query(self, query: TaskQuery = TaskQuery()) -> list[TaskSnapshot]:  # noqa: B008
        return select_tasks(self.all_rows(), query)

    def prune(self, keep_terminal: int) -> int:
        doomed = prune_choice(self.all_rows(), keep_terminal)
        with self.lock:
            for s in doomed:
                del self.tasks[s.task_id]
                for key in [k for k in self.history_docs if k[0] == s.task_id]:
                    del self.history_docs[key]
        return len(doomed)

    def append(self, transition: Transition) -> None:
        with self.lock:
            self.guard()
            self.add_history([transition])

    def history(self, task_id: str) -> list[Transition]:
        with self.lock:
            self.guard()
            keys = sorted(k for k in self.history_docs if k[0] == task_id)
            return [decode_transition(self.history_docs[k]) for k in keys]

    # side channel -------------------------------------------------------------------
    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
        pid: int | None = None,
    ) -> bool:
        changes = touch_changes(progress, heartbeat_at, lease_owner, lease_until, pid)
        with self.lock:
            self.guard()
            current = self.load(task_id)
            if current is None:
                return False
            row = self.tasks[task_id]
            self.tasks[task_id] = (row[0], encode_snapshot(current.replace(**changes)))
            return True

    def renew_leases(self, owner: str, task_ids: Collection[str], lease_until: datetime) -> int:
        require_aware(lease_until, "lease_until")
        renewed = 0
        with self.lock:
            self.guard()
            for task_id in set(task_ids):
                current = self.load(task_id)
                if current is not None and current.lease_owner == owner:
                    row = self.tasks[task_id]
                    doc = encode_snapshot(current.replace(lease_until=lease_until))
                    self.tasks[task_id] = (row[0], doc)
                    renewed += 1
        return renewed

    def close(self) -> None:
        self.closed = True


class DictTaskStore(DictTaskRecords, TaskStore):
    """The task part with commands and schedules: the full store of the user guide."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self.commands: dict[str, dict[str, Any]] = {}  # insertion-ordered: oldest first
        self.schedules: dict[str, dict[str, Any]] = {}
        self.firings: set[tuple[str, int]] = set()
        self.signal = CommandSignal()

    # commands -----------------------------------------------------------------------
    def submit_command(self, command: Command) -> Command:
        data = loads(encode_json(command.to_dict(), "command"))
        data.update(status="pending", claimed_by=None, claim_token=None, lease_until=None)
        data.update(claims=0, completed_at=None, result=None)  # stored as never claimed
        with self.lock:
            self.guard()
            data = self.commands.setdefault(command.command_id, data)
        self.signal.notify()
        return Command.from_dict(data)

    def claim_commands(
        self,
        owner: str,
        *,
        lease: float,
        limit: int = 10,
        kinds: Collection[str] | None = None,
        actions: Collection[str] | None = None,  # a consumer claims only what it handles
    ) -> list[Command]:
        actions = validate_claim(lease, limit, actions)
        self.signal.mark_seen()
        claimed = []
        with self.lock:
            self.guard()
            now = self.clock.now()
            found = []
            for data in self.commands.values():  # in submission order
                command = Command.from_dict(data)
                until = command.lease_until
                expired = data["status"] == "claimed" and until is not None and until <= now
                eligible = data["status"] == "pending" or expired
                mine = data["target_owner"] in (None, owner)
                wanted = (kinds is None or data["kind"] in kinds) and (
                    actions is None or data["action"] in actions
                )
                if eligible and mine and wanted:
                    found.append(data)
            for data in found[:limit]:  # oldest first
                data.update(
                    status="claimed",
                    claimed_by=owner,
                    claim_token=uuid.uuid4().hex,
                    lease_until=(now + timedelta(seconds=lease)).isoformat(),
                    claims=data["claims"] + 1,
                )
                claimed.append(Command.from_dict(data))
        return claimed

    def fenced(self, command_id: str, token: str) -> dict[str, Any]:
        self.guard()
        data = self.commands.get(command_id)
        if data is None:
            raise StoreError(f"command {command_id!r} does not exist")
        if data["status"] != "claimed" or data["claim_token"] != token:
            raise ClaimLost(command_id, token, f"it is {data['status']} by {data['claimed_by']}")
        return data

    def complete_command(self, command_id: str, claim_token: str, result: JSONValue = None) -> None:
        stored = loads(encode_json(result, "result"))
        with self.lock:
            data = self.fenced(command_id, claim_token)
            data.update(
                status="completed",
                result=stored,
                lease_until=None,
                completed_at=self.clock.now().isoformat(),
            )

    def release_command(self, command_id: str, claim_token: str) -> None:
        with self.lock:
            data = self.fenced(command_id, claim_token)
            data.update(status="pending", claimed_by=None, claim_token=None, lease_until=None)
        self.signal.notify()

    def extend_command(self, command_id: str, claim_token: str, lease: float) -> None:
        if lease <= 0:
            raise ConfigurationError("lease must be > 0")
        with self.lock:
            data = self.fenced(command_id, claim_token)
            data["lease_until"] = (self.clock.now() + timedelta(seconds=lease)).isoformat()

    def get_command(self, command_id: str) -> Command | None:
        with self.lock:
            self.guard()
            data = self.commands.get(command_id)
            return None if data is None else Command.from_dict(data)

    def wait_for_commands(self, timeout: float) -> None:
        self.guard()
        self.signal.wait(self.clock, timeout)

    # schedules ----------------------------------------------------------------------
    def put_schedule(
        self, name: str, data: Mapping[str, JSONValue], *, expect_revision: int | None
    ) -> ScheduleRecord:
        text = encode_json(dict(data), "schedule data")
        with self.lock:
            self.guard()
            current = self.schedules.get(name)
            actual = None if current is None else current["revision"]
            if actual != expect_revision:
                raise ScheduleConflict(name, expect_revision, actual)
            now = self.clock.now()
            self.schedules[name] = {"revision": (actual or 0) + 1, "at": now, "data": text}
            return ScheduleRecord(
                name=name, data=loads(text), revision=(actual or 0) + 1, updated_at=now
            )

    def get_schedule(self, name: str) -> ScheduleRecord | None:
        with self.lock:
            self.guard()
            row = self.schedules.get(name)
            if row is None:
                return None
            return ScheduleRecord(
                name=name, data=loads(row["data"]), revision=row["revision"], updated_at=row["at"]
            )

    def list_schedules(self) -> list[ScheduleRecord]:
        with self.lock:
            names = sorted(self.schedules)
        return [record for name in names if (record := self.get_schedule(name)) is not None]

    def delete_schedule(self, name: str) -> bool:
        with self.lock:
            self.guard()
            return self.schedules.pop(name, None) is not None

    def claim_firing(self, schedule: str, scheduled_at: datetime, owner: str, task_id: str) -> bool:
        require_aware(scheduled_at, "scheduled_at")
        key = (schedule, to_micros(scheduled_at))  # the same instant in any timezone
        with self.lock:
            self.guard()
            if key in self.firings:
                return False
            self.firings.add(key)
            return True

    def close(self) -> None:
        super().close()
        self.signal.close()


class DictStoreContract(StoreContract):
    """How a backend author tests their store: subclass, make_store, done."""

    def make_store(self, clock: Clock) -> DictTaskStore:
        return DictTaskStore(clock=clock)

    def corrupt_status(self, store: TaskStore, task_id: str) -> None:
        assert isinstance(store, DictTaskStore)
        number, doc = store.tasks[task_id]
        store.tasks[task_id] = (number, doc.replace('"status":"pending"', '"status":"exploded"'))


def main() -> None:
    # A quick tour: the store behaves like any other...
    store = DictTaskStore()
    now = store.clock.now()
    snap = TaskSnapshot(
        task_id="job-1", name="sync", status=TaskStatus.PENDING, status_version=0,
        created_at=now, updated_at=now, metadata={"租户": "A"},
    )  # fmt: skip
    store.create(snap)
    store.save(snap.replace(status=TaskStatus.QUEUED, status_version=1), expect_version=0)
    try:
        store.save(snap.replace(status=TaskStatus.CANCELLED, status_version=1), expect_version=0)
    except ConcurrencyConflict as exc:
        print("optimistic concurrency works:", exc)
    else:
        raise AssertionError("a stale save must conflict")
    assert store.touch("job-1", progress=Progress(done=3, total=10))
    stored = store.get("job-1")
    assert stored is not None
    assert stored.status_version == 1
    assert dumps(stored.metadata) == '{"租户":"A"}'
    store.close()

    # ...and the contract suite says so, case by case.
    cases = unittest.defaultTestLoader.loadTestsFromTestCase(
        type("DictStoreContractCase", (DictStoreContract, unittest.TestCase), {})
    )
    outcome = unittest.TextTestRunner(verbosity=0).run(cases)
    print(f"contract: {outcome.testsRun} cases, {len(outcome.skipped)} skipped (optional hooks)")
    assert outcome.wasSuccessful(), "DictTaskStore breaks the store contract"


if __name__ == "__main__":
    main()
