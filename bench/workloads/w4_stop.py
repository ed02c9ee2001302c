"""W4 stop latency: stop request -> terminal for a task looping on checkpoint + 10 ms sleep.

In-process sides time ``stop()`` -> ``wait()`` returning. Cross-process sides issue the
stop from this process through a console Controller on the shared store (it becomes
a command that the holder's poller claims) and take the terminal transition's
recorded time (``Transition.at``, written by the holder on this same host's clock)
minus the wall time just before ``stop()``. Baselines: the same loop on a bare
``threading.Event`` / ``multiprocessing.Event`` -- the floor of half a period plus a
join, with no state machine at all.

The phase is uniform by construction. Every body marks a shared beacon at each check
(``w4_bodies.Beacon``), and the n stops of a round aim at n stratified phases of
the period -- one drawn uniformly in each n-th of it, in shuffled order -- counted
from the body's latest check (extrapolated by whole measured periods when that
phase has passed). So the floor (stop -> the body's next check) is spread evenly over 0..10 ms
on every side, instead of being n random draws whose median alone moved by 2 ms from
run to run. The beacon also gives each stop's floor exactly (the request -> the
body's first check after it), hence ``cost`` = latency - floor: what the machinery
adds beyond the loop itself, whatever the phase (a request that reaches the body
after that check, e.g. a command still in the store, is cost too). The
ThreadExecutor side also stops a bare thread at each of its own phases, right after
its own stop, and reports ``machinery`` = its cost percentile - the bare thread's,
from the same round, the same phases and the same machine load.
"""

from __future__ import annotations

import multiprocessing
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import ours, pg
from harness.core import Metric, Settings, Target, Unavailable, Variant, Workload
from harness.stats import latency_metrics, percentile

from chongming_task.states import TERMINAL
from workloads.w4_bodies import PERIOD_S, Beacon, checkpoint_loop, event_loop

WORKER = Path(__file__).with_name("w4_worker.py")
TIMEOUT_S = 10.0
#: Time the stopping thread needs to be asleep before the phase it aims at.
LEAD_S = 0.0003


def stratified(n: int, rng: random.Random) -> list[float]:
    """``n`` fractions of a period, one uniform draw in each n-th of it, shuffled."""
    fractions = [(i + rng.random()) / n for i in range(n)]
    rng.shuffle(fractions)
    return fractions


def aim(beacon: Beacon, fraction: float) -> None:
    """Sleep until ``fraction`` of a period after a check of the body behind ``beacon``.

    The target is counted from the latest check, plus whole periods of the loop as
    measured on the beacon (``PERIOD_S`` plus the sleep's overshoot) if that moment
    has passed already. The stopping thread's own sleep overshoots too, by tens of
    microseconds: the floor and the cost of each stop are measured, not assumed.
    """
    now = time.monotonic()
    period = beacon.period()
    target = beacon.latest() + fraction * period
    while target < now + LEAD_S:
        target += period
    time.sleep(target - now)


class Samples:
    """Latencies and their costs beyond the floor, in seconds.

    The floor of one stop is the time from the request to the body's first check
    after it: no implementation can be faster. Whatever delays the stop past that
    check (a slow ``stop()``, a command still in the store) is cost, like the time
    from the check to the terminal state.
    """

    def __init__(self) -> None:
        self.latency: list[float] = []
        self.cost: list[float] = []

    def add(self, t0: float, t1: float, beacon: Beacon) -> None:
        """One stop asked at ``t0`` and done at ``t1`` (``time.monotonic()``)."""
        self.latency.append(t1 - t0)
        check = beacon.first_after(t0)
        if check is None:  # the body checked 16 times without stopping: all of it is cost
            check = t0
        self.cost.append(t1 - check)

    def metrics(self) -> dict[str, float]:
        return {**latency_metrics(self.latency), **_cost_metrics(self.cost)}


def _cost_metrics(cost: Sequence[float], prefix: str = "cost_") -> dict[str, float]:
    ms = [c * 1000.0 for c in cost]
    return {f"{prefix}p50_ms": percentile(ms, 50), f"{prefix}p99_ms": percentile(ms, 99)}


def _machinery(ours: Samples, bare: Samples) -> dict[str, float]:
    o, b = _cost_metrics(ours.cost), _cost_metrics(bare.cost)
    return {
        "machinery_p50_ms": o["cost_p50_ms"] - b["cost_p50_ms"],
        "machinery_p99_ms": o["cost_p99_ms"] - b["cost_p99_ms"],
    }


class _Beacons:
    """A directory of beacon files, one per variant; removed at exit of the process."""

    def __init__(self) -> None:
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def new(self, name: str) -> Beacon:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="ct-bench-w4-beacons-")
        return Beacon.create(Path(self._dir.name) / f"{name}.beacon")


BEACONS = _Beacons()


class StopLatency(Workload):
    """W4."""

    key = "W4"
    title = "Stop latency: checkpoint() + sleep(10 ms) loop, stop -> terminal"
    description = (
        "A task loops on checkpoint() + sleep(0.01); latency from the stop request to "
        "the terminal state, per executor and across processes through each store. "
        "Stops aim at stratified phases of the loop (uniform by construction); cost = "
        "latency - (request -> the body's next check); ours - bare = the thread side's "
        "cost minus a bare thread's at the same phases, same round."
    )
    metrics = (
        Metric("p50_ms", "ms", False, "p50"),
        Metric("p99_ms", "ms", False, "p99"),
        Metric("max_ms", "ms", False, "max"),
        Metric("cost_p50_ms", "ms", False, "cost p50"),
        Metric("cost_p99_ms", "ms", False, "cost p99"),
        Metric("machinery_p50_ms", "ms", False, "ours − bare p50"),
        Metric("machinery_p99_ms", "ms", False, "ours − bare p99"),
    )
    ratio_metrics = ("p50_ms", "p99_ms", "max_ms")
    targets = (
        Target("W4 thread p50 <= half period + 1 ms (6 ms)", "ours-thread", "p50_ms", "<=", 6.0),
        Target("W4 process p99 <= 25 ms", "ours-process", "p99_ms", "<=", 25.0),
        Target("W4 cross-process SQLite p99 <= 100 ms", "ours-xproc-sqlite", "p99_ms", "<=", 100),
        Target("W4 cross-process Postgres p99 <= 20 ms", "ours-xproc-postgres", "p99_ms", "<=", 20),
    )

    def variants(self, settings: Settings) -> list[Variant]:
        n, n_proc = settings.w4_stops, settings.w4_process_stops
        run_reason = ours.probe(ours.RUNTIME)
        out = [
            Variant(
                "ours-thread",
                "chongming-task TaskRun, ThreadExecutor",
                lambda: _ours_local(ours.THREAD_EXECUTOR, n, paired=True),
                unavailable=run_reason or ours.probe(ours.THREAD_EXECUTOR),
            ),
            Variant(
                "bare-thread",
                "bare thread + threading.Event",
                lambda: _bare_thread(n),
                baseline=True,
            ),
            Variant(
                "ours-process",
                "chongming-task TaskRun, ProcessExecutor",
                lambda: _ours_local(ours.PROCESS_EXECUTOR, n_proc),
                unavailable=run_reason or ours.probe(ours.PROCESS_EXECUTOR),
            ),
            Variant(
                "bare-process",
                "bare spawned process + multiprocessing.Event",
                lambda: _bare_process(n_proc),
                baseline=True,
            ),
        ]
        for kind in ("sqlite", "postgres"):
            worker = CrossProcess(kind, settings.postgres_dsn)
            out.append(
                Variant(
                    f"ours-xproc-{kind}",
                    f"chongming-task, stop from another process via {kind}",
                    lambda worker=worker: worker.measure(n_proc),
                    unavailable=ours.probe(ours.CONTROLLER)
                    or ours.store_probe(kind, settings.postgres_dsn),
                    setup=worker.start,
                    teardown=worker.stop,
                )
            )
        return out

    def comparisons(self, variants: Any) -> list[tuple[str, str]]:
        return [("ours-thread", "bare-thread"), ("ours-process", "bare-process")]


def _ours_local(executor_feature: str, n: int, *, paired: bool = False) -> Mapping[str, float]:
    """n stops of TaskRuns; ``paired``: a bare thread stopped at each phase too."""
    task_run = ours.require("chongming_task.run", "TaskRun")
    executor_cls = ours.require(*executor_feature.split(":"))
    beacon = BEACONS.new(executor_feature.rpartition(":")[2])
    bare_beacon = BEACONS.new("paired-bare-thread") if paired else None
    samples, bare = Samples(), Samples()
    for fraction in stratified(n, random.Random()):
        run = task_run(checkpoint_loop, kwargs={"beacon": beacon.path}, executor=executor_cls())
        run.start()
        _wait_for(lambda run=run: str(run.status) == "running", "task never ran")
        time.sleep(PERIOD_S * 2)  # the body is in its loop and has marked the beacon
        aim(beacon, fraction)
        t0 = time.monotonic()
        run.stop("bench")
        run.wait(TIMEOUT_S)
        samples.add(t0, time.monotonic(), beacon)
        if str(run.status) != "stopped":
            raise RuntimeError(f"expected stopped, got {run.status}")
        if bare_beacon is not None:
            _bare_thread_stop(bare, bare_beacon, fraction)
    metrics = samples.metrics()
    if paired:
        metrics.update(_machinery(samples, bare))
    return metrics


def _bare_thread_stop(samples: Samples, beacon: Beacon, fraction: float) -> None:
    stop, entered = threading.Event(), threading.Event()
    thread = threading.Thread(target=event_loop, args=(stop, entered, beacon.path), daemon=True)
    thread.start()
    entered.wait(TIMEOUT_S)
    time.sleep(PERIOD_S * 2)
    aim(beacon, fraction)
    t0 = time.monotonic()
    stop.set()
    thread.join(TIMEOUT_S)
    samples.add(t0, time.monotonic(), beacon)


def _bare_thread(n: int) -> Mapping[str, float]:
    beacon = BEACONS.new("bare-thread")
    samples = Samples()
    for fraction in stratified(n, random.Random()):
        _bare_thread_stop(samples, beacon, fraction)
    return samples.metrics()


def _bare_process(n: int) -> Mapping[str, float]:
    ctx = multiprocessing.get_context("spawn")
    beacon = BEACONS.new("bare-process")
    samples = Samples()
    for fraction in stratified(n, random.Random()):
        stop, entered = ctx.Event(), ctx.Event()
        proc = ctx.Process(target=event_loop, args=(stop, entered, beacon.path), daemon=True)
        proc.start()
        entered.wait(TIMEOUT_S)
        time.sleep(PERIOD_S * 2)
        aim(beacon, fraction)
        t0 = time.monotonic()
        stop.set()
        proc.join(TIMEOUT_S)
        samples.add(t0, time.monotonic(), beacon)
    return samples.metrics()


def _wait_for(cond: Callable[[], bool], what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.0005)


class CrossProcess:
    """A worker process holding the tasks; this process stops them through the store."""

    def __init__(self, kind: str, dsn: str | None) -> None:
        self.kind, self.base_dsn = kind, dsn
        self.proc: subprocess.Popen[str] | None = None
        self._cleanup: list[Callable[[], None]] = []
        self.store: Any = None
        self.console: Any = None
        self.beacon: Beacon | None = None
        self.counter = 0

    def start(self) -> None:
        if self.kind == "sqlite":
            tmp = tempfile.TemporaryDirectory(prefix="ct-bench-w4-")
            self._cleanup.append(tmp.cleanup)
            where = str(Path(tmp.name) / "tasks.db")
        else:
            if self.base_dsn is None:
                raise Unavailable("PostgreSQL disabled")
            schema = f"ct_bench_w4_{random.getrandbits(40):x}"
            import psycopg

            with psycopg.connect(self.base_dsn, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            base = self.base_dsn
            self._cleanup.append(lambda: pg.drop_schema(base, schema))
            where = pg.dsn_with_schema(self.base_dsn, schema)
        cls = ours.require(*ours.STORE_CLASSES[self.kind].split(":"))
        self.store = cls(where)
        self.beacon = BEACONS.new(f"xproc-{self.kind}")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), self.kind, where, self.beacon.path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._expect("ready")
        self.console = ours.controller(self.store, max_parallel=1)
        self.console_owner = "w4-console"

    def _expect(self, line: str) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        got = self.proc.stdout.readline().strip()
        if got != line:
            raise RuntimeError(f"worker said {got!r}, expected {line!r}")

    def measure(self, n: int) -> Mapping[str, float]:
        assert self.proc is not None
        assert self.proc.stdin is not None
        assert self.beacon is not None
        recorded = Samples()
        observed: list[float] = []
        for fraction in stratified(n, random.Random()):
            self.counter += 1
            task_id = f"w4-{self.kind}-{self.counter}"
            self.proc.stdin.write(f"start {task_id}\n")
            self.proc.stdin.flush()
            self._expect(f"running {task_id}")
            aim(self.beacon, fraction)
            wall0, t0 = time.time(), time.monotonic()
            self.console.stop(task_id, reason="bench")
            _wait_for(lambda task_id=task_id: _terminal(self.console.get(task_id)), "no stop")
            observed.append(time.monotonic() - t0)
            last = self.store.history(task_id)[-1]
            if str(last.to_status) != "stopped":
                raise RuntimeError(f"expected stopped, got {last.to_status}")
            # The recorded terminal time, on the monotonic axis of t0 (both from this host).
            recorded.add(t0, t0 + (last.at.timestamp() - wall0), self.beacon)
        return {**recorded.metrics(), **latency_metrics(observed, "observed_")}

    def stop(self) -> None:
        try:
            if self.console is not None:
                ours.close_controller(self.console)
            if self.proc is not None and self.proc.stdin is not None:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(TIMEOUT_S)
        finally:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.store is not None:
                self.store.close()
            for fn in reversed(self._cleanup):
                fn()


def _terminal(snapshot: Any) -> bool:
    return snapshot is not None and snapshot.status in TERMINAL
