"""A complete multi-node setup to copy from (guide §8.14, docs/distributed.md).

Two nodes share one store and split the buckets between them. The template covers,
in order: deployment parameters, the bucket split (``buckets_for_node``), task
definitions, node wiring (``build_node``), reconcile at start-up, submission routed
by bucket, a stop issued by one node for a task the other node runs, and the checks
to make at shutdown. Every step asserts what it shows.

Both nodes live in this one process to keep the demo self-contained; each has its own
store connection, exactly as two machines would.

    python examples/11_best_practice.py                  # SQLite file in a temp dir
    python examples/11_best_practice.py --dsn postgresql://user@host/db
    CHONGMING_TEST_POSTGRES=postgresql://... python examples/11_best_practice.py
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

from chongming_task import (
    BucketPolicy,
    ConcurrencyPolicy,
    Controller,
    RetryPolicy,
    TaskContext,
    TaskStatus,
    task,
)
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.stores import TaskStore
from chongming_task.testing import wait_until

log = logging.getLogger("best_practice")

# ---------------------------------------------------------------- 1. deployment parameters

#: Fixed for the life of the deployment: changing it moves almost every key to
#: another bucket (tasks record bucket_key so a migration could rebucket them).
NUM_BUCKETS = 64
#: Every node, in a fixed order; a node's index decides its share of the buckets.
NODES = ("node-a", "node-b")
#: Per node, not global: give each node its share of the scarce resources.
MAX_PARALLEL = 8
DB_CONNECTIONS_PER_NODE = 2
MAX_PER_TENANT = 1
#: How long after a crash another node may declare the crashed node's tasks lost.
LEASE_TTL = 30.0


# ---------------------------------------------------------------- 2. the bucket split


def buckets_for_node(index: int, count: int, num_buckets: int = NUM_BUCKETS) -> range:
    """Contiguous, disjoint shares that cover every bucket exactly once."""
    if not 0 <= index < count:
        raise ValueError(f"node index {index} is outside 0..{count - 1}")
    per_node, extra = divmod(num_buckets, count)
    start = index * per_node + min(index, extra)
    return range(start, start + per_node + (1 if index < extra else 0))


def check_split(count: int) -> None:
    """Every bucket owned by exactly one node: no overlap, no hole."""
    owned = [bucket for index in range(count) for bucket in buckets_for_node(index, count)]
    assert sorted(owned) == list(range(NUM_BUCKETS)), "the split must cover every bucket once"


# ---------------------------------------------------------------- 3. task definitions


@task(tags={"db"}, retry=RetryPolicy(max_attempts=3))
def sync_tenant(ctx: TaskContext, tenant: str, rows: int = 5) -> dict[str, object]:
    """Copy one tenant's rows; idempotent, so a lost run can simply be resubmitted."""
    for row in range(1, rows + 1):
        ctx.checkpoint()  # stop and pause take effect here
        ctx.progress(row, total=rows, unit="rows")
        time.sleep(0.005)
    return {"tenant": tenant, "rows": rows}


@task
def follow_orders(ctx: TaskContext, source: str) -> int:
    """A resident worker: runs until stopped, then returns what it processed (§4.5)."""
    processed = 0
    while not ctx.is_stop_requested:
        ctx.checkpoint()
        processed += 1
        ctx.progress(processed, unit="batch")
        time.sleep(0.01)
    ctx.log(f"stop requested: processed {processed} batches from {source}")
    return processed


TASKS = (sync_tenant, follow_orders)


# ---------------------------------------------------------------- 4. node wiring


def build_node(name: str, store: TaskStore) -> Controller:
    """One node: its owner name, its buckets, its limits, its whitelist."""
    index = NODES.index(name)
    node = Controller(
        store=store,
        owner=name,
        bucket_policy=BucketPolicy(num_buckets=NUM_BUCKETS),
        owned_buckets=buckets_for_node(index, len(NODES)),
        concurrency=ConcurrencyPolicy(
            max_parallel=MAX_PARALLEL, limits={"db": DB_CONNECTIONS_PER_NODE}
        ),
        max_parallel_per_bucket=MAX_PER_TENANT,
        lease_ttl=LEASE_TTL,
    )
    node.register_all(*TASKS)
    return node


def start_node(name: str, store: TaskStore) -> Controller:
    """Build, then reconcile before submitting anything (§8.11)."""
    node = build_node(name, store)
    report = node.reconcile()
    if report.lost or report.adoptable:
        log.warning(
            "%s: %d task(s) lost by a previous process, %d adoptable (resubmit them)",
            name,
            len(report.lost),
            len(report.adoptable),
        )
    owned = sorted(node.owned_buckets or ())
    print(
        f"{name}: owns buckets {owned[0]}..{owned[-1]}; reconcile: lost={list(report.lost)} "
        f"adoptable={list(report.adoptable)}"
    )
    return node


def node_for(key: str, nodes: dict[str, Controller]) -> Controller:
    """Route a business key to the node that owns its bucket."""
    policy = BucketPolicy(num_buckets=NUM_BUCKETS)
    bucket = policy.bucket_for(key)
    owners = [node for node in nodes.values() if node.owns_bucket(bucket)]
    assert len(owners) == 1, f"bucket {bucket} must have exactly one owner"
    return owners[0]


# ---------------------------------------------------------------- the walkthrough


def leave_a_crashed_predecessor(store: TaskStore, task_id: str) -> None:
    """Demo only: what a node killed mid-task leaves behind -- ``running``, lease expired."""
    machine = StateMachine.create(
        task_id, "sync_tenant", owner="node-a", bucket=0, bucket_key="tenant-crashed"
    )
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    expired = machine.snapshot.replace(
        lease_owner="node-a", lease_until=store.clock.now() - timedelta(minutes=5)
    )
    store.create(expired, machine.transitions)


def demo(open_store: Callable[[], TaskStore]) -> None:
    check_split(len(NODES))
    run_id = uuid.uuid4().hex[:6]  # keeps ids unique if the demo reuses a database
    stores = {name: open_store() for name in NODES}
    crashed_id = f"{run_id}-crashed"
    leave_a_crashed_predecessor(stores["node-a"], crashed_id)

    # 5. Start-up: each node reconciles its own buckets before it submits anything.
    nodes = {name: start_node(name, stores[name]) for name in NODES}
    lost = nodes["node-a"].get(crashed_id)
    assert lost is not None
    assert lost.status is TaskStatus.LOST  # honest: the result is unknown
    assert nodes["node-b"].get(crashed_id) == lost  # node-b never touched bucket 0
    node_a, node_b = nodes["node-a"], nodes["node-b"]

    # 6. Submission by bucket: each key goes to the node that owns its bucket.
    tenants = [f"tenant-{i}" for i in range(12)]
    for tenant in tenants:
        node_for(tenant, nodes).submit(
            "sync_tenant", tenant, task_id=f"{run_id}-sync-{tenant}", bucket_key=tenant
        )
    # A key submitted to the wrong node is refused: it would never run anywhere.
    wrong = node_b if node_for(tenants[0], nodes) is node_a else node_a
    try:
        wrong.submit("sync_tenant", tenants[0], bucket_key=tenants[0])
        raise AssertionError("a submission into another node's bucket must be refused")
    except ConfigurationError as exc:
        print("refused as expected:", str(exc).split(";")[0])

    # A resident worker on whichever node owns the "orders" key.
    holder = node_for("orders", nodes)
    other = node_b if holder is node_a else node_a
    orders_id = f"{run_id}-orders"
    holder.submit("follow_orders", "kafka://orders", task_id=orders_id, bucket_key="orders")
    wait_until(
        lambda: (
            (s := other.get(orders_id)) is not None
            and s.progress is not None
            and s.progress.done >= 3
        ),
        timeout=30,
    )

    # 7. Cross-node stop: the other node sees the task in the store and stops it.
    assert other.run(orders_id) is None  # not held there
    assert other.stop(orders_id, reason="maintenance window") is True  # accepted
    outcome = holder.wait(orders_id, timeout=30)
    assert outcome.status is TaskStatus.SUCCEEDED  # it returned what it had processed
    assert isinstance(outcome.value, int)
    stopping = next(t for t in other.history(orders_id) if t.to_status is TaskStatus.STOPPING)
    assert (stopping.actor, stopping.reason) == (other.owner, "maintenance window")
    print(f"{orders_id} stopped by {stopping.actor}, processed {outcome.value} batches")

    # 8. Shutdown checks.
    for node in nodes.values():
        outcomes = node.wait_all(timeout=60)
        assert all(o.ok for o in outcomes), [o.failure for o in outcomes if not o.ok]
    for name, node in nodes.items():
        mine = node.list_tasks(buckets=node.owned_buckets)
        unfinished = [s.task_id for s in mine if s.task_id.startswith(run_id) and not s.is_terminal]
        assert unfinished == [], f"{name} leaves unfinished tasks: {unfinished}"
        assert not node.persist_failures, list(node.persist_failures)
        assert node.active_count == 0
        node.close(reason="shutdown", timeout=30)
    console_view = node_a.list_tasks(name_prefix="sync_tenant")
    ours = [s for s in console_view if s.task_id.startswith(run_id)]
    assert len(ours) == len(tenants) + 1  # the crashed one is there, marked lost
    ours = [s for s in ours if s.task_id != crashed_id]
    assert all(s.status is TaskStatus.SUCCEEDED for s in ours)
    per_node = {s.owner for s in ours}
    print(f"{len(ours)} tenant syncs succeeded on {sorted(per_node)}")
    for store in stores.values():
        store.close()


# ---------------------------------------------------------------- store selection


@contextlib.contextmanager
def sqlite_store_factory() -> Iterator[Callable[[], TaskStore]]:
    from chongming_task import SqliteTaskStore

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "tasks.db"
        yield lambda: SqliteTaskStore(path)


@contextlib.contextmanager
def postgres_store_factory(dsn: str) -> Iterator[Callable[[], TaskStore]]:
    """Demo isolation only: a throwaway schema, so repeated runs never meet old tasks."""
    import psycopg

    from chongming_task import PostgresTaskStore

    schema = f"ct_example_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in dsn else "?"
    scoped = f"{dsn}{separator}options=-csearch_path%3D{schema}"
    try:
        yield lambda: PostgresTaskStore(scoped)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("CHONGMING_TEST_POSTGRES"))
    parser.add_argument("--sqlite", action="store_true", help="ignore --dsn and the env")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.dsn and not args.sqlite:
        print("store: PostgreSQL")
        factory = postgres_store_factory(args.dsn)
    else:
        print("store: SQLite")
        factory = sqlite_store_factory()
    with factory as open_store:
        demo(open_store)
    print("ok")


if __name__ == "__main__":
    main()
