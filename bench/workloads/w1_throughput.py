"""W1 throughput: N no-op tasks through 2 slots, first submit to last terminal.

Ours runs the full path a user gets from ``Controller(store=..., max_parallel=2)``:
submission, admission, a supervised run per task and every transition written
through to the store. ``ThreadPoolExecutor(2)`` is the bound without any durability
or control; Huey on SQLite with 2 worker threads is the durable peer, measured at
the same SQLite ``synchronous`` level as our store (NORMAL, our default) and at FULL
(Huey's default), each against ours at that level.

Two floors run beside them as references: W1's bare semantics with no library
(``bench/floor.py``) and the same on SQLite with the library's schema and the fewest
commits the store contract allows (``bench/floor_sqlite.py``). No implementation that
keeps the trajectory, and on SQLite the contract, can beat them, so every run shows
how far each target is from what is reachable at all on that machine.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import floor
import floor_sqlite
from harness import ours
from harness.core import Metric, Settings, Variant, Workload
from peers.huey_peer import HueyOnSqlite

SLOTS = 2
TIMEOUT_S = 300.0

#: (variant key, store kind, SQLite synchronous override or None for the default,
#: whether the tasks go in with one ``submit_many`` instead of a ``submit`` loop).
#: The targets are judged on the ``submit`` loop, the like-for-like of Huey's
#: one-by-one enqueue; the batch variants show what ``submit_many`` buys.
SIDES = (
    ("ours-memory", "memory", None, False),
    ("ours-memory-batch", "memory", None, True),
    ("ours-sqlite", "sqlite", None, False),
    ("ours-sqlite-batch", "sqlite", None, True),
    ("ours-sqlite-full", "sqlite", "FULL", False),
    ("ours-postgres", "postgres", None, False),
)

#: Like against like: durable against durable at the same sync level, and every
#: side of ours against the no-durability bound.
COMPARISONS = [
    ("ours-memory", "threadpool"),
    ("ours-memory-batch", "threadpool"),
    ("ours-sqlite", "threadpool"),
    ("ours-sqlite", "huey-sqlite"),
    ("ours-sqlite-batch", "huey-sqlite"),
    ("ours-sqlite-full", "huey-sqlite-full"),
    ("ours-postgres", "huey-sqlite-full"),
    ("ours-memory", "floor-memory"),
    ("ours-sqlite", "floor-sqlite"),
    ("floor-sqlite", "huey-sqlite"),
]


def noop(ctx: Any) -> None:
    """The task body: nothing, so only the machinery is measured."""
    return None


def _bare_noop() -> None:
    return None


class Throughput(Workload):
    """W1."""

    key = "W1"
    title = "Throughput: no-op tasks, 2 slots, first submit to last terminal"
    description = (
        "N no-op tasks submitted at once with 2 concurrent slots; time from the first "
        "submit to the moment the last task is terminal (all verified succeeded)."
    )
    ratio_metrics = ("tasks_per_s",)
    metrics = (Metric("tasks_per_s", "tasks/s", True, "throughput"), Metric("seconds", "s", False))
    # No target (issue 10's are withdrawn): the ratios to the floors and to Huey are
    # reported. Huey deletes its ~100-byte message when a task is taken and keeps no
    # trajectory (a crash loses it); we store every transition before it is announced.
    targets = ()

    def __init__(self) -> None:
        self.notes: dict[str, object] = {}

    def variants(self, settings: Settings) -> list[Variant]:
        n, dsn = settings.w1_tasks, settings.postgres_dsn
        out = []
        for key, kind, sync, batch in SIDES:
            reason = ours.probe(ours.CONTROLLER) or ours.store_probe(kind, dsn)
            label = f"chongming-task, {kind} store" + (f" (synchronous={sync})" if sync else "")
            if batch:
                label += ", one submit_many"
                if reason is None and not hasattr(
                    ours.require("chongming_task.controller", "Controller"), "submit_many"
                ):
                    reason = "Controller.submit_many has not landed"
            out.append(
                Variant(
                    key,
                    label,
                    lambda kind=kind, sync=sync, batch=batch: self._ours(kind, n, dsn, sync, batch),
                    unavailable=reason,
                    warmup_measure=lambda kind=kind, sync=sync, batch=batch: self._ours(
                        kind, max(1, n // 10), dsn, sync, batch
                    ),
                )
            )
        out.append(
            Variant(
                "threadpool",
                "ThreadPoolExecutor(2) (no durability)",
                lambda: self._pool(n),
                baseline=True,
            )
        )
        out.append(
            Variant(
                "floor-memory",
                "floor: W1's bare semantics, no library (bench/floor.py)",
                lambda: _rate(n, floor.one_round(n)),
                baseline=True,
            )
        )
        out.append(
            Variant(
                "floor-sqlite",
                "floor on SQLite: the same, the library's schema, the contract's fewest "
                "commits, no library (bench/floor_sqlite.py)",
                lambda: _rate(n, floor_sqlite.floor_round(n)[0]),
                baseline=True,
                warmup_measure=lambda: _rate(
                    max(1, n // 10), floor_sqlite.floor_round(max(1, n // 10))[0]
                ),
            )
        )
        for key, sync in (("huey-sqlite", "NORMAL"), ("huey-sqlite-full", "FULL")):
            out.append(
                Variant(
                    key,
                    f"Huey, SqliteHuey file, 2 threads (synchronous={sync})",
                    lambda sync=sync: self._huey(n, sync),
                    baseline=True,
                    warmup_measure=lambda sync=sync: self._huey(max(1, n // 10), sync),
                )
            )
        return out

    def comparisons(self, variants: Any) -> list[tuple[str, str]]:
        return COMPARISONS

    def _ours(
        self, kind: str, n: int, dsn: str | None, sync: str | None, batch: bool = False
    ) -> Mapping[str, float]:
        options = {"synchronous": sync} if sync else {}
        with ours.open_store(kind, dsn=dsn, **options) as store:
            ctl = ours.controller(store, max_parallel=SLOTS)
            try:
                ctl.register("noop", noop)
                if kind == "sqlite":
                    self.notes[f"ours_sqlite_{sync or 'default'}"] = ours.sqlite_settings(store)
                ids = [f"w1-{i}" for i in range(n)]
                t0 = time.perf_counter()
                if batch:
                    ctl.submit_many("noop", [()] * n, task_ids=ids)
                else:
                    for task_id in ids:
                        ctl.submit("noop", task_id=task_id)
                ctl.wait_all(timeout=TIMEOUT_S)
                elapsed = time.perf_counter() - t0
            finally:
                ours.close_controller(ctl)
            _verify_succeeded(store, n)
        return {"tasks_per_s": n / elapsed, "seconds": elapsed}

    @staticmethod
    def _pool(n: int) -> Mapping[str, float]:
        with ThreadPoolExecutor(SLOTS) as pool:
            t0 = time.perf_counter()
            futures = [pool.submit(_bare_noop) for _ in range(n)]
            wait(futures)
            elapsed = time.perf_counter() - t0
        return {"tasks_per_s": n / elapsed, "seconds": elapsed}

    def _huey(self, n: int, sync: str) -> Mapping[str, float]:
        with tempfile.TemporaryDirectory(prefix="ct-bench-huey-") as tmp:
            peer = HueyOnSqlite(Path(tmp) / "huey.db", workers=SLOTS, synchronous=sync)
            try:
                self.notes[f"huey_sqlite_{sync}"] = peer.settings()
                t0 = time.perf_counter()
                for _ in range(n):
                    peer.task()
                peer.wait_completed(n, TIMEOUT_S)
                elapsed = time.perf_counter() - t0
            finally:
                peer.close()
        return {"tasks_per_s": n / elapsed, "seconds": elapsed}

    def settings_notes(self) -> Mapping[str, object]:
        return self.notes


def _rate(n: int, tasks_per_s: float) -> Mapping[str, float]:
    """A floor's figures in the workload's metrics."""
    return {"tasks_per_s": tasks_per_s, "seconds": n / tasks_per_s}


def _verify_succeeded(store: Any, n: int) -> None:
    """Refuse to report a speed for work that did not all succeed."""
    counts = store.count_by_status()
    succeeded = sum(v for k, v in counts.items() if str(k) == "succeeded")
    if succeeded != n:
        raise RuntimeError(f"expected {n} succeeded tasks, store says {dict(counts)}")
