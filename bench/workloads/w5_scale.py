"""W5 scale: ps/get on a million stored tasks, reconcile of 100k, memory of 100k queued.

* ``ps``: ``query(TaskQuery(statuses={running}, limit=100))`` and ``get`` by id on a
  store seeded with ``w5_big`` tasks (1% running, 1% queued, the rest terminal),
  SQLite file and PostgreSQL. The store is seeded once (bulk, outside the timing);
  each round times ``w5_queries`` calls of each and reports their median.
* ``reconcile``: a fresh Controller's ``reconcile()`` over ``w5_reconcile`` tasks left
  by a dead owner (half running with an expired lease -> lost, half queued ->
  adoptable) in a SQLite file; each round works on a fresh copy of the seeded file.
* ``memory``: resident-set growth and thread count with ``w5_memory`` queued tasks,
  ours (in-memory store) against ``ThreadPoolExecutor(2)``, each in a fresh process.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness import ours, seeding
from harness.core import Metric, Settings, Target, Variant, Workload
from harness.stats import median

CHILD = Path(__file__).with_name("w5_memory_child.py")


class Scale(Workload):
    """W5."""

    key = "W5"
    title = "Scale: ps/get at 1M tasks, reconcile 100k, memory of 100k queued"
    description = (
        "ps = first 100 running tasks, get = one task by id, on a store holding the "
        "big seed; reconcile over the reconcile seed; RSS growth and threads with the "
        "memory seed queued."
    )
    ratio_metrics = ("rss_mb", "threads")
    metrics = (
        Metric("ps_ms", "ms", False, "ps (100 running)"),
        Metric("get_ms", "ms", False, "get"),
        Metric("reconcile_s", "s", False, "reconcile"),
        Metric("rss_mb", "MiB", False, "RSS growth"),
        Metric("threads", "threads", False),
        Metric("submit_s", "s", False, "queueing time"),
    )
    targets = (
        Target("W5 SQLite ps <= 50 ms at 1M", "ours-sqlite-1M", "ps_ms", "<=", 50),
        Target("W5 SQLite get <= 50 ms at 1M", "ours-sqlite-1M", "get_ms", "<=", 50),
        Target("W5 Postgres ps <= 50 ms at 1M", "ours-postgres-1M", "ps_ms", "<=", 50),
        Target("W5 Postgres get <= 50 ms at 1M", "ours-postgres-1M", "get_ms", "<=", 50),
        Target("W5 reconcile of 100k <= 2 s", "ours-reconcile", "reconcile_s", "<=", 2),
        # The issue says 300 MB; RSS is read in MiB, so the bound is 300e6 / 2**20 MiB.
        Target("W5 100k queued <= 300 MB (286.1 MiB)", "ours-queued", "rss_mb", "<=", 286.1),
        Target("W5 no thread per queued task (<= 50)", "ours-queued", "threads", "<=", 50),
    )

    def variants(self, settings: Settings) -> list[Variant]:
        out: list[Variant] = []
        for kind in ("sqlite", "postgres"):
            big = BigStore(kind, settings)
            out.append(
                Variant(
                    f"ours-{kind}-1M",
                    f"chongming-task {kind} store, {settings.w5_big:,} tasks",
                    big.measure,
                    unavailable=ours.store_probe(kind, settings.postgres_dsn)
                    or seeding.probe(kind),
                    setup=big.setup,
                    teardown=big.teardown,
                )
            )
        rec = Reconcile(settings.w5_reconcile)
        out.append(
            Variant(
                "ours-reconcile",
                f"chongming-task reconcile(), SQLite, {settings.w5_reconcile:,} tasks",
                rec.measure,
                unavailable=ours.probe(ours.CONTROLLER) or ours.store_probe("sqlite"),
                warmup=False,  # every round reconciles a fresh copy of a file just read
                setup=rec.setup,
                teardown=rec.teardown,
            )
        )
        n = settings.w5_memory
        out.append(
            Variant(
                "ours-queued",
                f"chongming-task Controller, {n:,} queued (in-memory store)",
                lambda: _memory("ours", n),
                unavailable=ours.probe(ours.CONTROLLER) or ours.store_probe("memory"),
                warmup=False,
            )
        )
        out.append(
            Variant(
                "threadpool-queued",
                f"ThreadPoolExecutor(2), {n:,} queued futures",
                lambda: _memory("threadpool", n),
                baseline=True,
                warmup=False,
            )
        )
        return out

    def comparisons(self, variants: Any) -> list[tuple[str, str]]:
        return [("ours-queued", "threadpool-queued")]


class BigStore:
    """A store seeded once with the big population; queried every round."""

    def __init__(self, kind: str, settings: Settings) -> None:
        self.kind, self.settings = kind, settings
        self.tmp: tempfile.TemporaryDirectory[str] | None = None
        self.store: Any = None
        self.cleanup: Any = None
        self.running_ids: list[str] = []

    def setup(self) -> None:
        n = self.settings.w5_big
        self.store, self.cleanup = seeding.open_seeded(self.kind, n, self.settings.postgres_dsn)
        self.ids = [seeding.task_id(i) for i in random.Random(7).sample(range(n), 1000)]

    def measure(self) -> Mapping[str, float]:
        query_cls = ours.require("chongming_task.stores._base", "TaskQuery")
        status = ours.require("chongming_task.states", "TaskStatus")
        q = query_cls(statuses=frozenset({status.RUNNING}), limit=100)
        ps, get = [], []
        for i in range(self.settings.w5_queries):
            t0 = time.perf_counter()
            rows = self.store.query(q)
            ps.append(time.perf_counter() - t0)
            if len(rows) != 100:
                raise RuntimeError(f"ps returned {len(rows)} rows, expected 100")
            task_id = self.ids[i % len(self.ids)]
            t0 = time.perf_counter()
            snap = self.store.get(task_id)
            get.append(time.perf_counter() - t0)
            if snap is None:
                raise RuntimeError(f"get({task_id!r}) found nothing")
        return {"ps_ms": median(ps) * 1000, "get_ms": median(get) * 1000}

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()
        if self.cleanup is not None:
            self.cleanup()


class Reconcile:
    """A SQLite file left by a dead owner; each round reconciles a fresh copy."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.tmp: tempfile.TemporaryDirectory[str] | None = None
        self.template: Path | None = None

    def setup(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="ct-bench-w5-")
        self.template = Path(self.tmp.name) / "template.db"
        seeding.seed_dead_owner(self.template, self.n)

    def measure(self) -> Mapping[str, float]:
        assert self.tmp is not None
        assert self.template is not None
        copy = Path(self.tmp.name) / "round.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(self.template, copy)
        with ours.open_store("sqlite", path=copy) as store:
            ctl = ours.controller(store, max_parallel=2, owner="w5-reconciler")
            try:
                t0 = time.perf_counter()
                report = ctl.reconcile()
                seconds = time.perf_counter() - t0
            finally:
                ours.close_controller(ctl)
        lost, adoptable = len(report.lost), len(report.adoptable)
        if lost + adoptable != self.n:
            raise RuntimeError(f"reconcile saw lost={lost} adoptable={adoptable} of {self.n}")
        return {"reconcile_s": seconds}

    def teardown(self) -> None:
        if self.tmp is not None:
            self.tmp.cleanup()


def _memory(side: str, n: int) -> Mapping[str, float]:
    proc = subprocess.run(
        [sys.executable, str(CHILD), side, str(n)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory child failed: {proc.stderr.strip()[-500:]}")
    data: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data
