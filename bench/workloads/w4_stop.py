"""W4 stop latency: stop request -> terminal for a task looping on checkpoint + 10 ms sleep.

In-process sides time ``stop()`` -> ``wait()`` returning. Cross-process sides issue the
stop from this process through a console Controller on the shared store (it becomes
a command that the holder's poller claims) and take the terminal transition's
recorded time (``Transition.at``, written by the holder on this same host's clock)
minus the wall time just before ``stop()``. Each stop happens at a random phase of
the loop. Baselines: the same loop on a bare ``threading.Event`` / ``multiprocessing
.Event`` — the floor of half a period plus a join, with no state machine at all.
"""

from __future__ import annotations

import multiprocessing
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import ours, pg
from harness.core import Metric, Settings, Target, Unavailable, Variant, Workload
from harness.stats import latency_metrics

from chongming_task.states import TERMINAL
from workloads.w4_bodies import PERIOD_S, checkpoint_loop, event_loop

WORKER = Path(__file__).with_name("w4_worker.py")
TIMEOUT_S = 10.0


def _phase() -> None:
    """Sleep a random part of a loop period so stops land at any phase."""
    time.sleep(random.uniform(0.0, PERIOD_S))


class StopLatency(Workload):
    """W4."""

    key = "W4"
    title = "Stop latency: checkpoint() + sleep(10 ms) loop, stop -> terminal"
    description = (
        "A task loops on checkpoint() + sleep(0.01); latency from the stop request to "
        "the terminal state, per executor and across processes through each store."
    )
    metrics = (
        Metric("p50_ms", "ms", False, "p50"),
        Metric("p99_ms", "ms", False, "p99"),
        Metric("max_ms", "ms", False, "max"),
    )
    targets = (
        Target("W4 thread p50 <= half period + 1 ms (6 ms)", "ours-thread", "p50_ms", "<=", 6.0),
        Target("W4 process p99 <= 25 ms", "ours-process", "p99_ms", "<=", 25.0),
        Target("W4 cross-process SQLite p99 <= 100 ms", "ours-xproc-sqlite", "p99_ms", "<=", 100),
        Target("W4 cross-process Postgres p99 <= 20 ms", "ours-xproc-postgres", "p99_ms", "<=", 20),
    )

    def variants(self, settings: Settings) -> list[Variant]:
        n = settings.w4_stops
        run_reason = ours.probe(ours.RUNTIME)
        out = [
            Variant(
                "ours-thread",
                "chongming-task TaskRun, ThreadExecutor",
                lambda: _ours_local(ours.THREAD_EXECUTOR, n),
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
                lambda: _ours_local(ours.PROCESS_EXECUTOR, n),
                unavailable=run_reason or ours.probe(ours.PROCESS_EXECUTOR),
            ),
            Variant(
                "bare-process",
                "bare spawned process + multiprocessing.Event",
                lambda: _bare_process(n),
                baseline=True,
            ),
        ]
        for kind in ("sqlite", "postgres"):
            worker = CrossProcess(kind, settings.postgres_dsn)
            out.append(
                Variant(
                    f"ours-xproc-{kind}",
                    f"chongming-task, stop from another process via {kind}",
                    lambda worker=worker: worker.measure(n),
                    unavailable=ours.probe(ours.CONTROLLER)
                    or ours.store_probe(kind, settings.postgres_dsn),
                    setup=worker.start,
                    teardown=worker.stop,
                )
            )
        return out

    def comparisons(self, variants: Any) -> list[tuple[str, str]]:
        return [("ours-thread", "bare-thread"), ("ours-process", "bare-process")]


def _timed(samples: list[float], stop: Callable[[], object], done: Callable[[], object]) -> None:
    t0 = time.perf_counter()
    stop()
    done()
    samples.append(time.perf_counter() - t0)


def _ours_local(executor_feature: str, n: int) -> Mapping[str, float]:
    task_run = ours.require("chongming_task.run", "TaskRun")
    executor_cls = ours.require(*executor_feature.split(":"))
    samples: list[float] = []
    for _ in range(n):
        run = task_run(checkpoint_loop, executor=executor_cls())
        run.start()
        _wait_for(lambda run=run: str(run.status) == "running", "task never ran")
        time.sleep(PERIOD_S * 2)
        _phase()
        _timed(samples, lambda run=run: run.stop("bench"), lambda run=run: run.wait(TIMEOUT_S))
        if str(run.status) != "stopped":
            raise RuntimeError(f"expected stopped, got {run.status}")
    return latency_metrics(samples)


def _bare_thread(n: int) -> Mapping[str, float]:
    samples: list[float] = []
    for _ in range(n):
        stop, entered = threading.Event(), threading.Event()
        thread = threading.Thread(target=event_loop, args=(stop, entered), daemon=True)
        thread.start()
        entered.wait(TIMEOUT_S)
        _phase()
        _timed(samples, stop.set, lambda thread=thread: thread.join(TIMEOUT_S))
    return latency_metrics(samples)


def _bare_process(n: int) -> Mapping[str, float]:
    ctx = multiprocessing.get_context("spawn")
    samples: list[float] = []
    for _ in range(n):
        stop, entered = ctx.Event(), ctx.Event()
        proc = ctx.Process(target=event_loop, args=(stop, entered), daemon=True)
        proc.start()
        entered.wait(TIMEOUT_S)
        _phase()
        _timed(samples, stop.set, lambda proc=proc: proc.join(TIMEOUT_S))
    return latency_metrics(samples)


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
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), self.kind, where],
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
        recorded: list[float] = []
        observed: list[float] = []
        for _ in range(n):
            self.counter += 1
            task_id = f"w4-{self.kind}-{self.counter}"
            self.proc.stdin.write(f"start {task_id}\n")
            self.proc.stdin.flush()
            self._expect(f"running {task_id}")
            _phase()
            wall0, t0 = time.time(), time.perf_counter()
            self.console.stop(task_id, reason="bench")
            _wait_for(lambda task_id=task_id: _terminal(self.console.get(task_id)), "no stop")
            observed.append(time.perf_counter() - t0)
            last = self.store.history(task_id)[-1]
            if str(last.to_status) != "stopped":
                raise RuntimeError(f"expected stopped, got {last.to_status}")
            recorded.append(last.at.timestamp() - wall0)
        return {**latency_metrics(recorded), **latency_metrics(observed, "observed_")}

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
