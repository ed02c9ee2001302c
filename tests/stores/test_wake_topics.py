"""Work and commands wake different waiters.

A worker's intake waits with ``wait_for_work`` (queued work or a command); its
controller's command poller waits with ``wait_for_commands`` (commands only). A busy
queue NOTIFYs on every enqueue: were the command poller woken by each, it would claim
commands that are not there once per task (about an eighth of a busy PostgreSQL
worker's time, sampled with py-spy). The memory store and PostgreSQL keep the two
apart (PostgreSQL by the NOTIFY's payload); SQLite's cross-process counter is shared,
which the contract allows (``wait_for_commands`` *need not* wake for work).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from chongming_task import InMemoryTaskStore, PostgresTaskStore
from chongming_task.errors import ConfigurationError
from chongming_task.stores import Command, CommandStore, QueueStore, TaskStore
from chongming_task.testing import FakeClock

PROMPT = 5.0  # real seconds a woken waiter may take


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.external_service)])
def stores(request: pytest.FixtureRequest) -> Iterator[tuple[TaskStore, TaskStore, FakeClock]]:
    """The waiters' store, the writer's store (another connection on PostgreSQL) and
    their fake clock: waits end only when woken."""
    clock = FakeClock()
    if request.param == "memory":
        with InMemoryTaskStore(clock=clock) as store:
            yield store, store, clock
        return
    dsn: str = request.getfixturevalue("postgres_dsn")
    with PostgresTaskStore(dsn, clock=clock) as waiter:
        with PostgresTaskStore(dsn, clock=clock) as writer:
            yield waiter, writer, clock


def _waiting(wait: Callable[[float], None]) -> tuple[threading.Thread, threading.Event]:
    woke = threading.Event()

    def run() -> None:
        wait(3600.0)
        woke.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, woke


def test_work_wakes_the_intake_and_not_the_command_poller(
    stores: tuple[TaskStore, TaskStore, FakeClock],
) -> None:
    waiter, writer, clock = stores
    assert isinstance(waiter, QueueStore)
    assert isinstance(waiter, CommandStore)
    assert isinstance(writer, QueueStore)
    assert isinstance(writer, CommandStore)
    poller, for_commands = _waiting(waiter.wait_for_commands)
    intake, for_work = _waiting(waiter.wait_for_work)
    clock.wait_for_sleepers(2)

    writer.notify_work()
    assert for_work.wait(PROMPT), "notify_work did not wake wait_for_work"
    # Woken by the same relay, in the same call, had it been meant for both.
    assert not for_commands.is_set(), "notify_work woke a command poller"

    intake, for_work = _waiting(waiter.wait_for_work)
    clock.wait_for_sleepers(2)
    command = Command.new(
        kind="task", target="t", action="stop", issued_by="ops", issued_at=clock.now()
    )
    writer.submit_command(command)
    assert for_commands.wait(PROMPT), "a command did not wake wait_for_commands"
    assert for_work.wait(PROMPT), "a command did not wake wait_for_work"
    poller.join(PROMPT)
    intake.join(PROMPT)


def test_the_default_wait_for_work_of_a_store_without_commands_says_what_to_do() -> None:
    class QueueOnly(QueueStore):  # the queue part alone: no commands to wait for
        pass

    QueueOnly.__abstractmethods__ = frozenset()
    with pytest.raises(ConfigurationError, match=r"no command part .* implement wait_for_work"):
        QueueOnly().wait_for_work(0.01)  # type: ignore[abstract]
