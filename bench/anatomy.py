"""Where a task's time goes, by cause: ``python bench/anatomy.py [--only w1,store,w3]``.

The workloads of ``bench/run.py`` say *how fast*; ``bench/profile.py`` says *which
functions* hold the GIL. This script answers the questions in between, which the
performance notes kept re-deriving with scratch scripts (docs/performance.md):

* **w1** -- W1's shape (N no-op tasks, 2 slots, a ``submit`` loop) on the memory and
  the SQLite store, per task: process CPU split into user and kernel time
  (``getrusage``), and the voluntary / involuntary context switches of each kind of
  thread (submitter, carriers, the write flusher; read from
  ``/proc/self/task``, Linux only). A voluntary switch is a thread blocking (a lock,
  a condition, a commit's follower); with one GIL each one is a hand-off.
* **store** -- the store alone: the store calls of one W1 run on the memory store are
  recorded, then replayed on a fresh SQLite store from one thread. Its cost per task
  against the SQLite row of **w1** minus the memory row separates what the store
  costs from what the threads around it cost.
* **w3** -- one W3 round on SQLite (a 1 s interval and a per-second cron, two firings
  per instant), with timestamps along the path at each instant: the release begins,
  the group commit begins and ends, each carrier is handed its run and begins, each
  body begins. Printed as the median step durations, in ms.

Nothing here is a target or a workload: the figures are evidence for the notes. The
w3 section patches three library methods for timestamps (``ControllerInternals.release_many``,
the SQLite group commit, ``CarrierPool.launch``); the test suite runs this script, so a
rename there fails a test instead of this script.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workloads.w3_lateness import run_schedules

from chongming_task import Controller
from chongming_task.schedule import Scheduler
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.stores._sqlite import SqliteTaskStore

SLOTS = 2
_TASKS = "/proc/self/task"


def _noop(ctx: Any) -> None:
    """The task body: nothing, so only the machinery is measured."""


def _role(name: str) -> str:
    """The kind of thread a thread name belongs to."""
    if name == "MainThread":
        return "submitter"
    if name.startswith("chongming-task:"):
        return "carriers"
    if name.startswith("chongming-writes"):
        return "write flusher"
    return "other"


def _switches() -> dict[int, tuple[str, int, int]] | None:
    """Per native thread id: (role, voluntary, involuntary) switches so far; None off Linux."""
    if not os.path.isdir(_TASKS):
        return None
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    out: dict[int, tuple[str, int, int]] = {}
    for entry in os.listdir(_TASKS):
        counts = {"voluntary_ctxt_switches": 0, "nonvoluntary_ctxt_switches": 0}
        try:
            with open(f"{_TASKS}/{entry}/status") as status:
                for line in status:
                    key, _, value = line.partition(":")
                    if key in counts:
                        counts[key] = int(value)
        except OSError:
            continue  # the thread ended meanwhile
        tid = int(entry)
        role = _role(names.get(tid, "?"))
        out[tid] = (role, counts["voluntary_ctxt_switches"], counts["nonvoluntary_ctxt_switches"])
    return out


def _open(kind: str, directory: str, tag: str) -> Any:
    if kind == "memory":
        return InMemoryTaskStore()
    return SqliteTaskStore(os.path.join(directory, f"{tag}.db"))


def w1_round(kind: str, n: int, directory: str, tag: str) -> dict[str, Any]:
    """One W1 round: throughput, CPU per task and switches per task by thread role."""
    store = _open(kind, directory, tag)
    ctl = Controller(store=store, max_parallel=SLOTS, owner="anatomy")
    try:
        ctl.register("noop", _noop)
        ctl.submit("noop", task_id=f"{tag}-first").wait(30)  # carriers and caches up
        before, usage = _switches(), resource.getrusage(resource.RUSAGE_SELF)
        began = time.perf_counter()
        for i in range(n):
            ctl.submit("noop", task_id=f"{tag}-{i}")
        ctl.wait_all(timeout=300)
        elapsed = time.perf_counter() - began
        after, used = _switches(), resource.getrusage(resource.RUSAGE_SELF)
    finally:
        ctl.close(close_store=True)
    row: dict[str, Any] = {
        "tasks_per_s": n / elapsed,
        "user_us": (used.ru_utime - usage.ru_utime) / n * 1e6,
        "sys_us": (used.ru_stime - usage.ru_stime) / n * 1e6,
        "wall_us": elapsed / n * 1e6,
    }
    if before is not None and after is not None:
        voluntary: Counter[str] = Counter()
        involuntary: Counter[str] = Counter()
        for tid, (role, vol, invol) in after.items():
            _, vol0, invol0 = before.get(tid, (role, 0, 0))
            voluntary[role] += vol - vol0
            involuntary[role] += invol - invol0
        row["voluntary"] = {role: count / n for role, count in sorted(voluntary.items())}
        row["involuntary"] = {role: count / n for role, count in sorted(involuntary.items())}
    return row


class _Recorder(InMemoryTaskStore):
    """The memory store, keeping every write call it gets (to replay them elsewhere)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def create(self, snapshot: Any, transitions: Any = ()) -> None:
        self.calls.append(("create", (snapshot, list(transitions)), {}))
        super().create(snapshot, transitions)

    def save(self, snapshot: Any, *, expect_version: int, transitions: Any = ()) -> None:
        kwargs = {"expect_version": expect_version, "transitions": list(transitions)}
        self.calls.append(("save", (snapshot,), kwargs))
        super().save(snapshot, expect_version=expect_version, transitions=transitions)


def store_replay(n: int, rounds: int, directory: str) -> dict[str, Any]:
    """The store calls of a W1 run on memory, replayed on SQLite from one thread."""
    recorder = _Recorder()
    ctl = Controller(store=recorder, max_parallel=SLOTS, owner="anatomy")
    try:
        ctl.register("noop", _noop)
        for i in range(n):
            ctl.submit("noop", task_id=f"replay-{i}")
        ctl.wait_all(timeout=300)
    finally:
        ctl.close()
    figures: list[tuple[float, float, float]] = []
    for r in range(rounds):
        store = SqliteTaskStore(os.path.join(directory, f"replay-{r}.db"))
        try:
            usage, began = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for method, args, kwargs in recorder.calls:
                getattr(store, method)(*args, **kwargs)
            elapsed, used = time.perf_counter() - began, resource.getrusage(resource.RUSAGE_SELF)
        finally:
            store.close()
        figures.append(
            (
                elapsed / n * 1e6,
                (used.ru_utime - usage.ru_utime) / n * 1e6,
                (used.ru_stime - usage.ru_stime) / n * 1e6,
            )
        )
    wall, user, kernel = (statistics.median(column) for column in zip(*figures, strict=True))
    return {
        "writes_per_task": len(recorder.calls) / n,
        "wall_us": wall,
        "user_us": user,
        "sys_us": kernel,
    }


@contextmanager
def _timestamps(marks: dict[int, list[tuple[str, float]]]) -> Iterator[None]:
    """Record ``(label, time.time())`` at the release, the group commit and each launch."""
    from chongming_task.controller._internal import ControllerInternals
    from chongming_task.runtime.executors import _carriers as carriers
    from chongming_task.stores import _sqlite_group

    def mark(label: str) -> None:
        now = time.time()
        marks[round(now)].append((label, now))

    release = ControllerInternals.release_many
    commit = _sqlite_group.GroupCommitter.run
    launch = carriers.CarrierPool.launch

    def timed_release(self: ControllerInternals, *args: Any, **kwargs: Any) -> Any:
        mark("release")
        return release(self, *args, **kwargs)

    def timed_commit(self: Any, fn: Any, atomic: bool, check_open: Any) -> Any:
        mark("commit_in")
        try:
            return commit(self, fn, atomic, check_open)
        finally:
            mark("commit_out")

    def timed_launch(self: Any, job: Callable[[], None], *, name: str) -> None:
        mark("launch")

        def begun() -> None:
            mark("carrier")
            job()

        launch(self, begun, name=name)

    patches: list[tuple[Any, str, Any, Any]] = [
        (ControllerInternals, "release_many", release, timed_release),
        (_sqlite_group.GroupCommitter, "run", commit, timed_commit),
        (carriers.CarrierPool, "launch", launch, timed_launch),
    ]
    for owner, name, _, timed in patches:
        setattr(owner, name, timed)
    try:
        yield
    finally:
        for owner, name, original, _ in patches:
            setattr(owner, name, original)


#: The steps of an instant, each from the first event named on the left to the next.
_STEPS = (
    ("release -> commit begins", "release", "commit_in"),
    ("commit", "commit_in", "commit_out"),
    ("commit -> first launch", "commit_out", "launch"),
    ("first launch -> its carrier runs", "launch", "carrier"),
    ("first carrier -> its body", "carrier", "body"),
)


def instant_steps(events: list[tuple[str, float]]) -> dict[str, float]:
    """Each step of one instant in ms: its first start event to the next stop event after it.

    ``events`` are (label, seconds after the instant) in time order. A stop event that
    came before the step's start (another commit of the same second, say, under load)
    belongs to something else and is skipped, so a step is never negative; a step
    whose start or stop is missing is left out.
    """
    out: dict[str, float] = {}
    for title, start, stop in _STEPS:
        began = next((at for label, at in events if label == start), None)
        if began is None:
            continue
        ended = next((at for label, at in events if label == stop and at >= began), None)
        if ended is not None:
            out[title] = (ended - began) * 1e3
    return out


def w3_timeline(seconds: float, directory: str) -> dict[str, Any]:
    """W3's SQLite side for ``seconds``, with the median duration of each step at an instant."""
    marks: dict[int, list[tuple[str, float]]] = defaultdict(list)
    bodies: list[float] = []

    def body(ctx: Any) -> None:
        now = time.time()
        bodies.append(now)
        marks[round(now)].append(("body", now))

    begin = math.floor(time.time()) + 1.0
    end = begin + seconds
    store = SqliteTaskStore(os.path.join(directory, "w3.db"))
    ctl = Controller(store=store, max_parallel=4, owner="anatomy-w3")
    try:
        with _timestamps(marks):
            ctl.register("w3", body)
            run_schedules(ctl, Scheduler, "w3", begin, end)
    finally:
        ctl.close(close_store=True)
    steps: dict[str, list[float]] = defaultdict(list)
    second_bodies: list[float] = []
    for instant in range(int(begin), int(end)):
        events = sorted(
            ((label, at - instant) for label, at in marks.get(instant, []) if at >= instant),
            key=lambda event: event[1],
        )
        for title, ms in instant_steps(events).items():
            steps[title].append(ms)
        body_offsets = [offset for label, offset in events if label == "body"]
        if len(body_offsets) >= 2:
            second_bodies.append(body_offsets[1] * 1e3)
    lateness = sorted((at - round(at)) * 1e3 for at in bodies if begin <= round(at) < end)
    return {
        "instants": len(second_bodies),
        "steps_ms": {title: statistics.median(values) for title, values in steps.items()},
        "second_body_ms": statistics.median(second_bodies) if second_bodies else None,
        "lateness_p50_ms": statistics.median(lateness) if lateness else None,
        "lateness_max_ms": max(lateness) if lateness else None,
    }


def _w1_text(rows: dict[str, list[dict[str, Any]]]) -> list[str]:
    out = ["## w1: a no-op task through 2 slots, per task (median of the rounds)", ""]
    for kind, results in rows.items():

        def med(key: str, results: list[dict[str, Any]] = results) -> float:
            return statistics.median(row[key] for row in results)

        out.append(
            f"- {kind}: {med('tasks_per_s'):,.0f} tasks/s; wall {med('wall_us'):.0f} µs, "
            f"CPU user {med('user_us'):.0f} + kernel {med('sys_us'):.0f} µs"
        )
        if "voluntary" in results[0]:
            roles = sorted({role for row in results for role in row["voluntary"]})
            per_role = {
                role: statistics.median(row["voluntary"].get(role, 0.0) for row in results)
                for role in roles
            }
            parts = [f"{role} {count:.2f}" for role, count in per_role.items() if count >= 0.005]
            out.append(f"  - voluntary switches: {', '.join(parts)}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per w1 round and replay")
    parser.add_argument("--rounds", type=int, default=3, help="w1 rounds per store")
    parser.add_argument("--w3-seconds", type=float, default=10.0, help="length of the w3 round")
    parser.add_argument("--only", default="w1,store,w3", help="sections, comma-separated")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    sections = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = sorted(set(sections) - {"w1", "store", "w3"})
    if unknown or not sections:
        parser.error(f"--only takes w1, store and w3, comma-separated; got {args.only!r}")
    if args.tasks < 1 or args.rounds < 1 or args.w3_seconds < 2:
        parser.error("--tasks and --rounds must be at least 1 and --w3-seconds at least 2")
    figures: dict[str, Any] = {"tasks": args.tasks}
    lines = [f"# Anatomy of a task ({args.tasks} tasks a round)", ""]
    with tempfile.TemporaryDirectory(prefix="chongming-anatomy-") as directory:
        if "w1" in sections:
            rows: dict[str, list[dict[str, Any]]] = {"memory": [], "sqlite": []}
            for r in range(args.rounds):
                for kind, results in rows.items():  # interleaved: a slow stretch hits both
                    results.append(w1_round(kind, args.tasks, directory, f"{kind}-{r}"))
            figures["w1"] = rows
            lines += [*_w1_text(rows), ""]
        if "store" in sections:
            replay = store_replay(args.tasks, args.rounds, directory)
            figures["store"] = replay
            lines += [
                "## store: W1's store writes replayed on SQLite from one thread, per task",
                "",
                f"- {replay['writes_per_task']:.2f} writes, each its own commit (the controller "
                "on SQLite groups them into fewer); wall "
                f"{replay['wall_us']:.0f} µs, CPU user {replay['user_us']:.0f} + kernel "
                f"{replay['sys_us']:.0f} µs",
                "",
            ]
        if "w3" in sections:
            timeline = w3_timeline(args.w3_seconds, directory)
            figures["w3"] = timeline
            lines += [
                f"## w3: one SQLite instant, two firings (medians of {timeline['instants']})",
                "",
            ]
            lines += [f"- {title}: {ms:.3f} ms" for title, ms in timeline["steps_ms"].items()]
            if timeline["second_body_ms"] is not None:
                lines.append(f"- second body begins: {timeline['second_body_ms']:.3f} ms")
            if timeline["lateness_p50_ms"] is not None:
                lines.append(
                    f"- lateness of the bodies: p50 {timeline['lateness_p50_ms']:.3f}, "
                    f"max {timeline['lateness_max_ms']:.3f} ms"
                )
            lines.append("")
    print("\n".join(lines))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
