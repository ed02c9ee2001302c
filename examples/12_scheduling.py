"""Cron and interval schedules with a shared control plane (docs/scheduling.md).

A Scheduler beside the Controller fires schedules as ordinary tasks. A FakeClock
moves a working day through in about a second, so every claim the output makes is
asserted: the firings, a pause recorded as a skipped run, an operator's pattern
override picked up within one tick, a manual run requested "from another process"
and reported back, statistics and health.

    python examples/12_scheduling.py
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chongming_task import (
    Controller,
    CronTrigger,
    IntervalTrigger,
    Schedule,
    ScheduleAdmin,
    Scheduler,
    SqliteTaskStore,
    TaskContext,
    task,
)
from chongming_task.errors import StaleScheduleEdit
from chongming_task.testing import FakeClock, wait_until

START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)  # Monday 08:00 in Shanghai


@task
def sync_orders(ctx: TaskContext, region: str) -> str:
    """Pretend to pull the new orders of ``region``."""
    ctx.checkpoint()
    return f"orders of {region} synced"


@task
def daily_report(ctx: TaskContext) -> str:
    """Pretend to build yesterday's report."""
    ctx.checkpoint()
    return "report built"


def step(clock: FakeClock, scheduler: Scheduler, seconds: float) -> list[str]:
    """Move fake time, tick once, and wait (real time) for what it fired to finish."""
    clock.advance(seconds)
    fired = scheduler.tick().fired
    for task_id in fired:
        wait_until(lambda: scheduler.store.get(task_id).is_terminal)  # type: ignore[union-attr]  # noqa: B023
    return fired


def main() -> None:
    clock = FakeClock(START)
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteTaskStore(Path(tmp) / "tasks.db", clock=clock)
        controller = Controller(store, clock=clock, owner="node-a")
        controller.register_all(sync_orders, daily_report)
        scheduler = Scheduler(controller, tick=60, misfire_tolerance=600)

        print("== schedules from code ==")
        scheduler.add(
            Schedule(
                name="orders-eu",
                task="sync_orders",
                trigger=IntervalTrigger(timedelta(minutes=30)),
                kwargs={"region": "eu"},
                overlap="forbid",  # a firing while a run is unfinished is recorded as skipped
                retry_attempts=2,
                retry_backoff=30,
                max_runtime=600,  # the whole run, all attempts: Timeout(total=600)
            )
        )
        scheduler.add(
            Schedule(
                name="report",
                task="daily_report",
                trigger=CronTrigger("0 12 * * 1-5", "Asia/Shanghai"),  # 04:00 UTC
                misfire="run_once",  # after downtime: one catch-up within the grace
                misfire_grace=3600,
            )
        )
        for name in scheduler.names:
            trigger = scheduler.get(name).trigger  # the effective trigger of the record
            print(f"{name:10} {trigger.describe():40} first: {trigger.next_after(clock.now())}")

        print("\n== four hours, ticking every 10 minutes ==")
        fired = [f for _ in range(24) for f in step(clock, scheduler, 600)]
        print("\n".join(fired))
        half_hours = [START + timedelta(minutes=30 * n) for n in range(1, 9)]
        expected = [f"orders-eu@{t:%Y%m%dT%H%M%S}Z" for t in half_hours]
        assert fired == [*expected, "report@20260302T040000Z"], fired

        print("\n== an operator in another process pauses and overrides ==")
        admin = ScheduleAdmin(store, clock=clock, actor="ops")  # needs only the store
        admin.pause("orders-eu", operator="alice", reason="warehouse migration")
        skipped = step(clock, scheduler, 1800)
        run = store.get(skipped[0])
        assert run is not None
        assert run.status.value == "skipped"
        print(f"{skipped[0]}: {run.status.value} -- {store.history(run.task_id)[-1].reason}")
        admin.resume("orders-eu", operator="alice")
        seen = admin.get("orders-eu").definition_revision  # what two operators loaded
        admin.set_pattern(  # survives redeploys
            "orders-eu", "*/10 * * * *", operator="alice", expect_definition_revision=seen
        )
        try:  # bob's edit was based on the same, now stale, revision: refused, nothing written
            admin.set_pattern(
                "orders-eu", "*/30 * * * *", operator="bob", expect_definition_revision=seen
            )
        except StaleScheduleEdit as exc:
            print(f"bob's edit: {exc}")
        else:
            raise AssertionError("a stale edit must be refused")
        fired = step(clock, scheduler, 600)
        print(f"after the override: {fired}")
        assert scheduler.get("orders-eu").pattern == "*/10 * * * *"
        assert len(fired) == 1

        print("\n== a manual run requested through the store ==")
        command = admin.request_run("report", operator="bob", reason="numbers fixed")
        scheduler.tick()  # claims the command and starts the run
        task_id = scheduler.pending_commands[command.command_id]
        wait_until(lambda: store.get(task_id).is_terminal)  # type: ignore[union-attr]
        scheduler.tick()  # completes the command with the run's result
        done = store.get_command(command.command_id)
        assert done is not None
        assert done.status == "completed"
        print(f"command {done.status}: {done.result}")
        assert done.result["ok"] is True

        print("\n== statistics and health ==")
        wait_until(lambda: scheduler.get("orders-eu").runs == 10)
        stats = scheduler.statistics("orders-eu")
        print(
            f"orders-eu: {stats.runs} runs, {stats.skipped} skipped, "
            f"success rate {stats.success_rate:.0f}%, next {stats.next_run_at}"
        )
        assert (stats.runs, stats.skipped, stats.errors) == (10, 1, 0)
        health = scheduler.health()
        print(f"health: {health.status}, {health.schedules} schedules, next due {health.next_due}")
        assert health.status == "ok"

        scheduler.close()
        controller.close(close_store=True)
    print("\nok")


if __name__ == "__main__":
    main()
