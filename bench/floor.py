"""The floor of W1 in CPython: ``python bench/floor.py [--tasks N] [--rounds R]``.

W1's in-memory target (20,000 no-op tasks/s through 2 slots) is a budget of 50 µs per
task for everything. This script measures how much of that budget the bare
*semantics* take, with nothing of the library: per task a frozen 26-field snapshot,
four transitions (each a copied snapshot, a transition record, the row and the history
entry written under a store lock), a queue hand-off to two worker threads, and the
count of finished tasks. No validation, no leases, no policies, no events, no
supervisor, no timeouts, no stop/pause control: what is left when a runner keeps an
honest trajectory and nothing else.

It is evidence for docs/performance.md ("Still missed, and why"), not a workload: the
library is not compared against it by a target.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Snapshot:
    """As many fields as ``TaskSnapshot`` (26), so a copy costs what ours does."""

    task_id: str
    name: str
    status: str
    version: int
    created_at: datetime
    updated_at: datetime
    f1: object = None
    f2: object = None
    f3: object = None
    f4: object = None
    f5: object = None
    f6: object = None
    f7: object = None
    f8: object = None
    f9: object = None
    f10: object = None
    f11: object = None
    f12: object = None
    f13: object = None
    f14: object = None
    f15: object = None
    f16: object = None
    f17: object = None
    f18: object = None
    f19: object = None
    f20: object = None


@dataclass(frozen=True, slots=True)
class Record:
    """One transition of the trajectory."""

    task_id: str
    from_status: str | None
    to_status: str
    version: int
    at: datetime
    trigger: str


class Run:
    """A task in memory: its snapshot and trajectory under its own lock."""

    __slots__ = ("lock", "records", "snapshot")

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.records = [Record(snapshot.task_id, None, "pending", 0, snapshot.created_at, "new")]
        self.lock = threading.Lock()


class Store:
    """Rows and history in dicts under one lock: the in-memory store's shape."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[str, Snapshot] = {}
        self.history: dict[str, list[Record]] = {}

    def create(self, run: Run) -> None:
        with self.lock:
            self.rows[run.snapshot.task_id] = run.snapshot
            self.history[run.snapshot.task_id] = list(run.records)

    def save(self, snapshot: Snapshot, record: Record) -> None:
        with self.lock:
            self.rows[snapshot.task_id] = snapshot
            self.history[snapshot.task_id].append(record)


def step(run: Run, to_status: str, trigger: str) -> tuple[Snapshot, Record]:
    """One transition in memory: a new snapshot and record, kept by the run."""
    with run.lock:
        before = run.snapshot
        now = datetime.now(UTC)
        after = replace(before, status=to_status, version=before.version + 1, updated_at=now)
        record = Record(before.task_id, before.status, to_status, after.version, now, trigger)
        run.snapshot = after
        run.records.append(record)
    return after, record


def move(store: Store, run: Run, to_status: str, trigger: str) -> None:
    """One transition, written through to the store."""
    store.save(*step(run, to_status, trigger))


def submit(store: Store, index: int) -> Run:
    """A new task, stored and moved to ``queued``: the submitting side of one task."""
    now = datetime.now(UTC)
    run = Run(Snapshot(f"t{index}", "noop", "pending", 0, now, now))
    store.create(run)
    move(store, run, "queued", "submitted")
    return run


def carry_out(store: Store, run: Run) -> None:
    """The carrier's side of one no-op task: its three remaining transitions."""
    move(store, run, "starting", "admitted")
    move(store, run, "running", "started")
    move(store, run, "succeeded", "returned")


class Carrier(Protocol):
    """One worker thread's side: ``carry`` each task it takes, ``finish`` when none are left."""

    def carry(self, run: Run) -> None: ...

    def finish(self) -> None: ...


def hand_off(
    tasks: int, slots: int, submit_one: Callable[[int], Run], carrier: Callable[[], Carrier]
) -> float:
    """Seconds from the first submission until every carrier has finished.

    The submitting thread makes ``tasks`` runs with ``submit_one`` and hands each to
    ``slots`` worker threads through one condition, as a pool's queue does; each worker
    gets its own ``carrier()`` (so it can keep state, such as writes to take along) and
    calls its ``finish`` once the last task is done.
    """
    queue: deque[Run] = deque()
    ready = threading.Condition()
    left = [tasks]

    def work() -> None:
        mine = carrier()
        while True:
            with ready:
                while not queue and left[0] > 0:
                    ready.wait()
                run = queue.popleft() if queue else None
            if run is None:
                mine.finish()
                return
            mine.carry(run)
            with ready:
                left[0] -= 1
                if left[0] == 0:
                    ready.notify_all()

    threads = [threading.Thread(target=work) for _ in range(slots)]
    for thread in threads:
        thread.start()
    t0 = time.perf_counter()
    for index in range(tasks):
        run = submit_one(index)
        with ready:
            queue.append(run)
            ready.notify()
    for thread in threads:
        thread.join()
    return time.perf_counter() - t0


class _MemoryCarrier:
    def __init__(self, store: Store) -> None:
        self.store = store

    def carry(self, run: Run) -> None:
        carry_out(self.store, run)

    def finish(self) -> None:
        return None


def one_round(tasks: int, slots: int = 2) -> float:
    """Tasks per second from the first submission until both workers are done."""
    store = Store()
    elapsed = hand_off(
        tasks, slots, lambda index: submit(store, index), lambda: _MemoryCarrier(store)
    )
    return tasks / elapsed


def one_thread(tasks: int) -> float:
    """Microseconds per task for the same semantics on one thread, with no hand-off.

    No queue, no worker threads: each task is created, written and moved through its
    four transitions by the calling thread. What is left measures how fast the
    interpreter runs this kind of Python right now, independent of where the OS puts
    threads; ``bench/run.py`` records it as the run's CPU speed (``harness.calibration``).
    """
    store = Store()
    t0 = time.perf_counter()
    for index in range(tasks):
        carry_out(store, submit(store, index))
    return (time.perf_counter() - t0) / tasks * 1e6


def positive_int(text: str) -> int:
    """An ``argparse`` type for counts: a whole number of at least 1, or a usage error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=positive_int, default=2000, help="tasks a round")
    parser.add_argument("--rounds", type=positive_int, default=7, help="rounds measured")
    args = parser.parse_args()
    one_round(max(1, args.tasks // 10))  # warm-up
    figures = [one_round(args.tasks) for _ in range(args.rounds)]
    print(
        f"floor of W1 semantics: {statistics.median(figures):,.0f} tasks/s median "
        f"({min(figures):,.0f}-{max(figures):,.0f}) over {args.rounds} rounds of {args.tasks}"
    )


if __name__ == "__main__":
    main()
