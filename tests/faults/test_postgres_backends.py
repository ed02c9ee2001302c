"""PostgreSQL backends terminated mid-run (``pg_terminate_backend``): the store's
connections come back without a restart, and every write converges."""

from __future__ import annotations

import threading
import uuid

import pytest

from chongming_task import Controller, TaskContext
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from ._checks import check_store
from .conftest import SCALE, record

pytestmark = [pytest.mark.timeout(180), pytest.mark.external_service]

S = TaskStatus


def test_backends_terminated_mid_run_recover_and_converge(postgres_dsn: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    from chongming_task.stores._postgres import PostgresTaskStore

    app = f"ct-fault-{uuid.uuid4().hex[:8]}"
    store = PostgresTaskStore(postgres_dsn, application_name=app)
    tasks = 30 * SCALE
    rounds = 5 * SCALE
    step = threading.Event()

    def job(ctx: TaskContext, n: int) -> int:
        for _ in range(5):
            ctx.checkpoint()
            step.wait(0.01)
        return n

    controller = Controller(store=store, max_parallel=8, owner="pg-victim")
    controller.register("job", job)
    terminated = 0
    runs = []
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        for round_ in range(rounds):
            runs += [
                controller.submit("job", n, task_id=f"r{round_}-{n}")
                for n in range(tasks // rounds)
            ]
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (app,),
            ).fetchall()
            terminated += sum(1 for (ok,) in rows if ok)
    for run in runs:
        assert run.wait(60).ok
    wait_until(lambda: not controller.pending_writes, timeout=60, message="writes converge")
    ids = [run.task_id for run in runs]
    statuses = check_store(store, ids)
    assert statuses == dict.fromkeys(ids, S.SUCCEEDED)
    transitions = sum(len(store.history(task_id)) for task_id in ids)
    controller.close()
    store.close()
    assert terminated > 0
    record(backends_terminated=terminated, transitions_checked=transitions, data_lost=0)
