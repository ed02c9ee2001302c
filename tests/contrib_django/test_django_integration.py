"""The Django integration, in a real Django project (``project/``: settings, an app
``shop`` with a model, migrations and a ``tasks.py``), on SQLite and PostgreSQL.

Django is set up once for this module: the ``default`` database is a SQLite file, and
with ``CHONGMING_TEST_POSTGRES`` a ``pg`` database lives in a fresh schema of that
server. Each test names the database the tasks are kept in
(``CHONGMING_TASK['DATABASE']``, through ``override_settings``), so both run here. What
the store holds is read through the store's own connections (committed data only);
the worker is ``manage.py chongming_worker`` in a real subprocess, and the CLI
``manage.py chongming``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

django = pytest.importorskip("django")

from django.conf import settings  # noqa: E402
from django.core.checks import run_checks  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.management.base import CommandError  # noqa: E402
from django.db import IntegrityError, connections, transaction  # noqa: E402
from django.db.transaction import TransactionManagementError  # noqa: E402
from django.test import Client as Browser  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from _workers import READY, cli_env, stop_workers  # noqa: E402
from chongming_task import TaskStatus, run_task  # noqa: E402
from chongming_task.contrib.django import DjangoClient, get_client  # noqa: E402
from chongming_task.contrib.django._config import load_config  # noqa: E402
from chongming_task.contrib.django._project import (  # noqa: E402
    open_store,
    register_project_tasks,
    reset,
    task_modules,
)
from chongming_task.controller import Controller  # noqa: E402
from chongming_task.errors import ConfigurationError  # noqa: E402
from chongming_task.runtime.executors.inline import InlineExecutor  # noqa: E402
from chongming_task.stores._capabilities import require_queue  # noqa: E402
from chongming_task.worker import Worker  # noqa: E402

PROJECT = Path(__file__).resolve().parent / "project"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "django_project"
POSTGRES_ENV = "CHONGMING_TEST_POSTGRES"
DEADLINE = 60.0
S = TaskStatus


class Rollback(Exception):
    """Raised inside ``atomic()`` to roll it back."""


@pytest.fixture(scope="module", autouse=True)
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Django set up on the test project; its databases migrated. Yields the
    environment a ``manage.py`` subprocess needs for the same databases."""
    env = {"SHOP_SQLITE": str(tmp_path_factory.mktemp("django") / "shop.sqlite3")}
    dsn = os.environ.get(POSTGRES_ENV)
    schema = f"ct_django_{uuid.uuid4().hex[:12]}"
    if dsn:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        env.update(SHOP_POSTGRES=dsn, SHOP_PG_SCHEMA=schema)
    saved = {key: os.environ.get(key) for key in [*env, "DJANGO_SETTINGS_MODULE"]}
    os.environ.update(env, DJANGO_SETTINGS_MODULE="shopsite.settings")
    sys.path.insert(0, str(PROJECT))
    try:
        django.setup()
        for alias in settings.DATABASES:
            call_command("migrate", database=alias, verbosity=0)
        yield {**env, "DJANGO_SETTINGS_MODULE": "shopsite.settings"}
    finally:
        reset()
        connections.close_all()
        sys.path.remove(str(PROJECT))
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if dsn:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["default", pytest.param("pg", marks=pytest.mark.external_service)])
def alias(request: pytest.FixtureRequest) -> Iterator[str]:
    """The database alias the tasks are kept in for this test (a fresh client)."""
    name: str = request.param
    if name == "pg":
        from conftest import postgres_base_dsn

        postgres_base_dsn()  # skipped locally without PostgreSQL, an error in CI
    with override_settings(CHONGMING_TASK={"DATABASE": name}):
        yield name


def _order(alias: str) -> Any:
    from shop.models import Order

    return Order.objects.using(alias).create(email=f"{uuid.uuid4().hex[:8]}@example.com")


def _order_exists(alias: str, email: str) -> bool:
    from shop.models import Order

    return Order.objects.using(alias).filter(email=email).exists()


def _stored(client: DjangoClient, task_id: str) -> TaskStatus | None:
    """The task's status as the store's own connection reads it (committed data)."""
    snapshot = client.store.get(task_id)
    return None if snapshot is None else snapshot.status


# ---------------------------------------------------------------- enqueue in atomic()


def test_enqueue_inside_atomic_commits_and_rolls_back_with_the_data(alias: str) -> None:
    from shop.tasks import confirm_order

    client = get_client()
    assert client.alias == alias
    with contextlib.suppress(Rollback), transaction.atomic(using=alias):
        order = _order(alias)
        lost = client.enqueue(confirm_order, order.pk, using=alias)
        assert _stored(client, lost.task_id) is None  # not committed: nobody sees it
        raise Rollback
    assert not _order_exists(alias, order.email)
    assert _stored(client, lost.task_id) is None  # no order, no task

    with transaction.atomic(using=alias):
        order = _order(alias)
        kept = client.enqueue(confirm_order, order.pk, using=alias)
        assert _stored(client, kept.task_id) is None
    assert _order_exists(alias, order.email)
    snapshot = client.store.get(kept.task_id)
    assert snapshot is not None
    assert snapshot.status is S.QUEUED
    assert snapshot.name == "confirm_order"
    assert "mail" in snapshot.tags
    assert [t.to_status for t in client.store.history(kept.task_id)] == [S.PENDING, S.QUEUED]


def test_a_worker_is_woken_by_the_commit_and_its_task_sees_the_order(alias: str) -> None:
    """An in-process worker that would look for work only once a minute runs the task
    within seconds of the commit: only the commit's wake-up can have woken it. The
    task reads the order the same transaction wrote; its Django connection is closed
    once it ended (``close_old_connections``, as after a request)."""
    from shop.tasks import USED, confirm_order

    from chongming_task.contrib.django import tasks as project_tasks

    client = get_client()
    store = open_store(alias)
    controller = Controller(store=store)
    project_tasks.register(controller)
    worker = Worker(controller, poll_interval=60.0)
    worker.start()
    try:
        with transaction.atomic(using=alias):
            order = _order(alias)
            handle = client.enqueue(confirm_order, order.pk, using=alias)
        started = time.monotonic()
        outcome = handle.wait(timeout=DEADLINE)
        assert outcome.ok, outcome.failure
        assert time.monotonic() - started < 30.0  # far less than the poll interval
        assert outcome.value == order.email
        order.refresh_from_db()
        assert order.confirmed
        assert USED
        assert USED[-1].connection is None
    finally:
        require_queue(store, "test").notify_work()  # the intake ends now, not in a minute
        worker.shutdown(reason="test over", timeout=10)
        controller.close()


def test_enqueue_outside_atomic_commits_at_once(alias: str) -> None:
    from shop.tasks import confirm_order

    client = get_client()
    handle = client.enqueue(confirm_order, 123456, using=alias)
    assert _stored(client, handle.task_id) is S.QUEUED


def test_enqueue_many_inside_atomic_is_all_or_nothing_with_the_transaction(alias: str) -> None:
    client = get_client()
    with contextlib.suppress(Rollback), transaction.atomic(using=alias):
        handles = client.enqueue_many("confirm_order", [(1,), (2,)])
        raise Rollback
    assert [_stored(client, h.task_id) for h in handles] == [None, None]
    with transaction.atomic(using=alias):
        handles = client.enqueue_many("confirm_order", [(1,), (2,)])
    assert [_stored(client, h.task_id) for h in handles] == [S.QUEUED, S.QUEUED]


def test_a_broken_atomic_block_is_refused_as_django_refuses_a_query(alias: str) -> None:
    from shop.models import Order

    client = get_client()
    with transaction.atomic(using=alias):
        order = _order(alias)
        with contextlib.suppress(IntegrityError):  # no savepoint: the block is broken
            Order.objects.using(alias).create(pk=order.pk, email="dup@example.com")
        with pytest.raises(TransactionManagementError):
            client.enqueue("confirm_order", order.pk, task_id=f"broken-{order.pk}")
    assert not _order_exists(alias, order.email)  # the block rolled back
    assert _stored(client, f"broken-{order.pk}") is None


@pytest.mark.external_service
def test_postgres_without_use_tz_still_shares_the_transaction() -> None:
    """Django loads ``timestamptz`` in its ``TIME_ZONE``, naive without ``USE_TZ`` (and
    ``jsonb`` as text) on its connection: the store's statements read with psycopg's own
    loaders there, so the database is recognised and a unique key's task is found."""
    from conftest import postgres_base_dsn

    postgres_base_dsn()
    with override_settings(
        CHONGMING_TASK={"DATABASE": "pg"}, USE_TZ=False, TIME_ZONE="Asia/Shanghai"
    ):
        connections["pg"].close()  # the next connection gets Django's naive loaders
        try:
            client = get_client()
            key = f"order-{uuid.uuid4().hex[:8]}"
            with transaction.atomic(using="pg"):
                first = client.enqueue("confirm_order", 1, unique_key=key)
                again = client.enqueue("confirm_order", 1, unique_key=key)
            assert (again.task_id, again.created) == (first.task_id, False)
            assert _stored(client, first.task_id) is S.QUEUED
        finally:
            connections["pg"].close()


def test_a_task_run_inline_sees_the_rows_of_the_open_transaction(alias: str) -> None:
    """What docs/django.md advises inside Django's ``TestCase``: ``run_task`` with the
    ``InlineExecutor`` runs on the test's thread, inside its transaction."""
    from shop.tasks import confirm_order

    with contextlib.suppress(Rollback), transaction.atomic(using=alias):
        order = _order(alias)
        outcome = run_task(confirm_order, order.pk, using=alias, executor=InlineExecutor())
        assert (outcome.status, outcome.value) == (S.SUCCEEDED, order.email)
        order.refresh_from_db()
        assert order.confirmed
        raise Rollback
    assert not _order_exists(alias, order.email)


# ---------------------------------------------------------------- enqueue_on_commit


def test_enqueue_on_commit_writes_after_the_commit_and_never_after_a_rollback(
    alias: str,
) -> None:
    from shop.tasks import confirm_order

    client = get_client()
    dropped = f"dropped-{uuid.uuid4().hex[:8]}"
    with contextlib.suppress(Rollback), transaction.atomic(using=alias):
        client.with_options(task_id=dropped).enqueue_on_commit(confirm_order, 1)
        raise Rollback
    assert _stored(client, dropped) is None

    kept = f"kept-{uuid.uuid4().hex[:8]}"
    with transaction.atomic(using=alias):
        order = _order(alias)
        typed = client.with_options(task_id=kept, priority=3)
        typed.enqueue_on_commit(confirm_order, order.pk, using=alias)
        with pytest.raises(ConfigurationError, match="'priority' is the name of an option"):
            typed.enqueue_on_commit("confirm_order", order.pk, priority=1)
        assert _stored(client, kept) is None
    snapshot = client.store.get(kept)
    assert snapshot is not None
    assert snapshot.status is S.QUEUED
    assert snapshot.priority == 3

    at_once = f"at-once-{uuid.uuid4().hex[:8]}"
    client.enqueue_on_commit("confirm_order", 1, task_id=at_once)  # autocommit: now
    assert _stored(client, at_once) is S.QUEUED


def test_enqueue_on_commit_checks_everything_before_the_commit(alias: str) -> None:
    client = get_client()
    late = f"late-{uuid.uuid4().hex[:8]}"
    with transaction.atomic(using=alias):
        with pytest.raises(ConfigurationError, match="no_such_task"):
            client.enqueue_on_commit("no_such_task", task_id=late)
        with pytest.raises(ConfigurationError, match="confirm_order"):
            client.enqueue_on_commit("confirm_order", task_id=late)  # order_id missing
        with pytest.raises(ConfigurationError, match="only JSON"):
            client.enqueue_on_commit("confirm_order", object(), task_id=late)
        with pytest.raises(ConfigurationError, match="enqueue_on_commit"):
            client.enqueue_on_commit("confirm_order", 1, connection=object())
    assert _stored(client, late) is None


# ---------------------------------------------------------------- settings and checks


def test_settings_mistakes_are_reported_by_manage_py_check_and_get_client() -> None:
    with override_settings(CHONGMING_TASK={"DATABSE": "default"}):
        errors = run_checks(tags=["chongming_task"])
        assert [e.id for e in errors] == ["chongming_task.E001"]
        assert "did you mean 'DATABASE'" in errors[0].msg
        with pytest.raises(ImproperlyConfigured, match="DATABSE"):
            get_client()
    with override_settings(CHONGMING_TASK={"DATABASE": "nowhere"}):
        errors = run_checks(tags=["chongming_task"])
        assert [e.id for e in errors] == ["chongming_task.E002"]
        with pytest.raises(ImproperlyConfigured, match="'nowhere'"):
            get_client()
    with override_settings(CHONGMING_TASK={"NUM_BUCKETS": 0}):
        assert [e.id for e in run_checks(tags=["chongming_task"])] == ["chongming_task.E001"]
    assert run_checks(tags=["chongming_task"]) == []


def test_tasks_are_discovered_from_the_installed_apps() -> None:
    modules = task_modules(load_config())
    assert [m.__name__ for m in modules] == ["shop.tasks"]
    with Controller() as controller:
        assert register_project_tasks(controller, modules) == ["confirm_order"]
    with override_settings(CHONGMING_TASK={"TASK_MODULES": ["shop.tasks", "shop.tasks"]}):
        registry = get_client().registry
        assert registry is not None
        assert registry.names() == ["confirm_order"]
    from chongming_task.contrib.django import tasks as worker_module

    assert callable(worker_module.register_schedules)  # shop.tasks has SCHEDULES
    with override_settings(CHONGMING_TASK={"TASK_MODULES": ["shop.models"]}):
        assert get_client().registry is None  # only enqueues: workers check the names
        assert not hasattr(worker_module, "register_schedules")  # so no scheduler
        with Controller() as controller, pytest.raises(ConfigurationError, match="no task"):
            worker_module.register(controller)


# ---------------------------------------------------------------- manage.py


def _manage(project: dict[str, str], alias: str) -> tuple[list[str], dict[str, str]]:
    env = cli_env()
    env.update(project, SHOP_TASK_DATABASE=alias)
    return [sys.executable, str(PROJECT / "manage.py")], env


def _wait_for(condition: Any, what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_manage_py_chongming_worker_runs_a_task_to_succeeded(
    project: dict[str, str], alias: str, tmp_path: Path
) -> None:
    from shop.tasks import confirm_order

    manage, env = _manage(project, alias)
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [*manage, "chongming_worker", "--poll-interval", "0.2", "--max-parallel", "2"],
            cwd=PROJECT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        _wait_for(
            lambda: READY in log.read_text() or worker.poll() is not None, "the worker to start"
        )
        assert worker.poll() is None, log.read_text()
        assert "tasks confirm_order" in log.read_text()
        client = get_client()
        with transaction.atomic(using=alias):
            order = _order(alias)
            handle = client.enqueue(confirm_order, order.pk, using=alias)
        outcome = handle.wait(timeout=DEADLINE)
        assert outcome.status is S.SUCCEEDED, outcome.failure
        assert outcome.value == order.email
        order.refresh_from_db()
        assert order.confirmed

        ps = subprocess.run(
            [*manage, "chongming", "ps", "--all", "--json", "--name", "confirm_order"],
            cwd=PROJECT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert ps.returncode == 0, ps.stderr
        document = json.loads(ps.stdout)
        assert document["schema"] == "chongming-task.ps.v1"
        listed = {task["task_id"]: task for task in document["tasks"]}
        assert listed[handle.task_id]["status"] == "succeeded"
        assert listed[handle.task_id]["owner"] is not None
    finally:
        stop_workers([worker], tmp_path)
    assert worker.returncode == 0, log.read_text()[-3000:]


def test_manage_py_chongming_is_the_cli_on_the_project_store(
    project: dict[str, str], alias: str
) -> None:
    client = get_client()
    handle = client.enqueue("confirm_order", 7, label="from-call-command")
    out = io.StringIO()
    call_command("chongming", "status", handle.task_id, "--json", stdout=out)
    assert json.loads(out.getvalue())["task"]["status"] == "queued"
    with pytest.raises(CommandError, match="code 1"):
        call_command("chongming", "status", "nope", stdout=io.StringIO(), stderr=io.StringIO())

    manage, env = _manage(project, alias)
    for argv, message in (
        (["chongming", "--db", "other.db", "ps"], "the store is the project's database"),
        (["chongming_worker", "--executor", "process"], "Django set up"),
        (["chongming", "no-such-command"], "invalid choice"),
    ):
        done = subprocess.run(
            [*manage, *argv],
            cwd=PROJECT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, (argv, done.stderr)
        assert message in done.stderr
        assert "Traceback" not in done.stderr


def test_manage_py_commands_answer_help_and_report_an_unreachable_database(
    project: dict[str, str],
) -> None:
    manage, env = _manage(project, "default")

    def run(*argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*manage, *argv],
            cwd=PROJECT,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    worker_help = run("chongming_worker", "--help")
    assert worker_help.returncode == 0
    assert "--max-parallel" in worker_help.stdout
    assert "--drain-timeout" in worker_help.stdout
    cli_help = run("help", "chongming")
    assert cli_help.returncode == 0
    assert "retry" in cli_help.stdout
    # A PostgreSQL database nobody listens on: one line, exit 1, the password masked.
    down = run(
        "chongming",
        "ps",
        SHOP_POSTGRES="postgresql://postgres:s3cret-pw@127.0.0.1:1/test",
        SHOP_PG_SCHEMA="public",
        SHOP_TASK_DATABASE="pg",
    )
    assert down.returncode == 1, down.stderr
    assert down.stderr.startswith("chongming-task: error: database error")
    assert "Traceback" not in down.stderr
    assert "s3cret-pw" not in down.stderr
    bad = run("chongming", "ps", SHOP_TASK_DATABASE="nowhere")
    assert bad.returncode == 2
    assert "settings: settings.CHONGMING_TASK['DATABASE'] is 'nowhere'" in bad.stderr


# ---------------------------------------------------------------- the dashboard


def _user(*, staff: bool) -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_user(
        f"{'staff' if staff else 'user'}-{uuid.uuid4().hex[:8]}", password="pw", is_staff=staff
    )


def test_dashboard_refuses_anonymous_and_non_staff_users(alias: str) -> None:
    browser = Browser()
    page = browser.get("/tasks/")
    assert page.status_code == 302
    assert page["Location"] == "/admin/login/?next=/tasks/"
    api = browser.get("/tasks/api/overview")
    assert api.status_code == 401
    assert "error" in api.json()

    browser.force_login(_user(staff=False))
    assert browser.get("/tasks/tasks").status_code == 302
    assert browser.get("/tasks/api/tasks").status_code == 403
    assert browser.get("/tasks/events").status_code == 403


def test_dashboard_serves_staff_and_records_their_actions(alias: str) -> None:
    client = get_client()
    handle = client.enqueue("confirm_order", 99, label="for-the-dashboard")
    staff = _user(staff=True)
    browser = Browser()
    browser.force_login(staff)

    overview = browser.get("/tasks/")
    assert overview.status_code == 200
    html = overview.content.decode()
    assert staff.username in html
    assert 'href="/tasks/tasks' in html
    assert overview["Content-Security-Policy"].startswith("default-src 'none'")

    page = browser.get(f"/tasks/tasks/{handle.task_id}")
    assert page.status_code == 200
    assert handle.task_id in page.content.decode()
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.content.decode())
    assert found is not None
    api = browser.get(f"/tasks/api/tasks/{handle.task_id}")
    assert api.status_code == 200
    assert api.json()["task"]["status"] == "queued"

    refused = browser.post(f"/tasks/tasks/{handle.task_id}/stop", {"reason": "no csrf"})
    assert refused.status_code == 403
    assert _stored(client, handle.task_id) is S.QUEUED
    stopped = browser.post(
        f"/tasks/tasks/{handle.task_id}/stop", {"reason": "not needed", "csrf": found[1]}
    )
    assert stopped.status_code == 303
    assert stopped["Location"].startswith(f"/tasks/tasks/{handle.task_id}")
    assert _stored(client, handle.task_id) is S.STOPPED
    last = client.store.history(handle.task_id)[-1]
    assert (last.to_status, last.actor, last.reason) == (S.STOPPED, staff.username, "not needed")

    other = Browser()  # another session's token is not this one's
    other.force_login(staff)
    again = client.enqueue("confirm_order", 98)
    forged = other.post(f"/tasks/tasks/{again.task_id}/stop", {"reason": "x", "csrf": found[1]})
    assert forged.status_code == 403
    assert _stored(client, again.task_id) is S.QUEUED

    css = browser.get("/tasks/static/style.css")
    assert css.status_code == 200
    assert css["Content-Type"].startswith("text/css")

    events = browser.get("/tasks/events")  # the live stream: it never ends by itself
    assert events.status_code == 200
    assert events.streaming
    assert events["Content-Type"].startswith("text/event-stream")
    first = next(iter(events.streaming_content))  # type: ignore[attr-defined]
    assert bytes(first).startswith(b"retry: 3000\nevent: hello")
    from chongming_task.contrib.django.views import _dashboard

    live = _dashboard.get().app.state.dashboard.live
    assert live.subscribers == 1
    events.close()  # the browser left: the stream's call on the loop is cancelled
    _wait_for(lambda: live.subscribers == 0, "the event stream to end")


def test_dashboard_under_asgi_streams_its_events_without_buffering(alias: str) -> None:
    """Under ASGI (Django's ``AsyncClient``) the endless event stream is an async
    iterator, read as it comes, and closing it ends the stream on the dashboard's loop."""
    from asgiref.sync import sync_to_async
    from django.test import AsyncClient

    from chongming_task.contrib.django.views import _dashboard

    browser = Browser()
    browser.force_login(_user(staff=True))
    live = _dashboard.get().app.state.dashboard.live

    async def visit() -> tuple[int, int, bool, bytes]:
        client = AsyncClient()
        client.cookies = browser.cookies
        page = await client.get("/tasks/")
        anonymous = await AsyncClient().get("/tasks/api/overview")
        events = await client.get("/tasks/events")
        first = await anext(aiter(events.streaming_content))  # type: ignore[attr-defined]
        assert live.subscribers == 1
        events.close()
        # The views ran on asgiref's thread: its Django connections are closed there.
        await sync_to_async(connections.close_all)()
        streamed = bool(events.is_async)  # type: ignore[attr-defined]
        return page.status_code, anonymous.status_code, streamed, bytes(first)

    page, anonymous, streamed_async, first = asyncio.run(visit())
    assert (page, anonymous, streamed_async) == (200, 401, True)
    assert first.startswith(b"retry: 3000\nevent: hello")
    _wait_for(lambda: live.subscribers == 0, "the event stream to end")


# ---------------------------------------------------------------- the example


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_django_example_project_runs(tmp_path: Path) -> None:
    env = cli_env()
    for key in ("SHOP_SQLITE", "SHOP_POSTGRES", "SHOP_PG_SCHEMA", "DJANGO_SETTINGS_MODULE"):
        env.pop(key, None)
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "demo.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "confirmed by the worker" in done.stdout
