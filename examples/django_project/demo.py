"""A Django shop whose order confirmations are chongming-task tasks (docs/django.md).

The project (``mysite`` settings, an ``orders`` app with a model, a view and a
``tasks.py``) is an ordinary Django project with ``chongming_task.contrib.django`` in
``INSTALLED_APPS``. This script plays it through on a fresh SQLite database, asserting
what it shows:

1. ``POST /orders/`` creates the order and enqueues its confirmation inside one
   ``transaction.atomic()``: the task is stored with the order;
2. a transaction that rolls back leaves neither order nor task;
3. ``enqueue_on_commit`` writes its task only once the transaction commits;
4. ``manage.py chongming_worker`` (a real worker process) runs the tasks, which read
   and update the orders through the ORM;
5. ``manage.py chongming ps`` lists them;
6. the dashboard at ``/admin/tasks/`` answers staff users only.

    python examples/django_project/demo.py     # needs Django (in the dev extra)

Day to day, in the project's directory: ``python manage.py migrate``, ``python
manage.py runserver`` and, beside it, ``python manage.py chongming_worker``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Rollback(Exception):
    pass


def main() -> None:
    try:
        import django
    except ImportError:  # pragma: no cover - the message is the point
        sys.exit('this example needs Django: pip install "chongming-task[django]"')

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ORDERS_DB"] = str(Path(tmp) / "shop.sqlite3")
        os.environ["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
        sys.path.insert(0, str(HERE))
        django.setup()

        from django.contrib.auth.models import User
        from django.core.management import call_command
        from django.db import transaction
        from django.test import Client as Browser
        from orders.models import Order
        from orders.tasks import send_confirmation

        from chongming_task.contrib.django import get_client

        call_command("migrate", verbosity=0)
        client = get_client()
        browser = Browser()

        # 1. The view: the order and its task in one transaction.
        placed = browser.post("/orders/", {"email": "ada@example.com"})
        assert placed.status_code == 201, placed.content
        order_id, task_id = placed.json()["order"], placed.json()["task_id"]
        print(f"POST /orders/ -> order {order_id}, task {task_id}:", client.get(task_id).status)
        assert browser.post("/orders/", {"email": "nope"}).status_code == 400

        # 2. A rollback takes the task with it.
        try:
            with transaction.atomic():
                ghost = Order.objects.create(email="ghost@example.com")
                lost = client.enqueue(send_confirmation, ghost.pk)
                raise Rollback
        except Rollback:
            pass
        assert client.get(lost.task_id) is None
        assert not Order.objects.filter(pk=ghost.pk)
        print("rolled back: no order, no task", lost.task_id)

        # 3. enqueue_on_commit: checked now, written after the commit.
        with transaction.atomic():
            later = Order.objects.create(email="grace@example.com")
            on_commit = client.with_options(task_id=f"confirm-{later.pk}")
            on_commit.enqueue_on_commit(send_confirmation, later.pk)
            assert client.get(f"confirm-{later.pk}") is None  # not before the commit
        print("after the commit:", client.get(f"confirm-{later.pk}").status)

        # 4. A worker: manage.py chongming_worker, with Django set up.
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
        manage = [sys.executable, str(HERE / "manage.py")]
        with (Path(tmp) / "worker.log").open("wb") as log:
            worker = subprocess.Popen(
                [*manage, "chongming_worker", "--poll-interval", "0.1"],
                cwd=HERE,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            for tid, oid in ((task_id, order_id), (f"confirm-{later.pk}", later.pk)):
                outcome = client.get(tid).wait(timeout=60)
                assert outcome.ok, outcome.failure
                assert Order.objects.get(pk=oid).confirmation_sent
                print(f"{tid}: {outcome.status}, {outcome.value} confirmed by the worker")

            # 5. The CLI on the project's database.
            ps = subprocess.run(
                [*manage, "chongming", "ps", "--all"],
                cwd=HERE,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            print("manage.py chongming ps --all:\n" + ps.stdout)
            assert task_id in ps.stdout
            assert "succeeded" in ps.stdout
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=30)
        assert code == 0, (Path(tmp) / "worker.log").read_text()

        # 6. The dashboard, behind Django's staff login.
        assert browser.get("/admin/tasks/").status_code == 302  # to the admin's login
        browser.force_login(User.objects.create_user("clerk", password="pw"))
        assert browser.get("/admin/tasks/").status_code == 302  # not staff
        browser.force_login(User.objects.create_user("ops", password="pw", is_staff=True))
        page = browser.get(f"/admin/tasks/tasks/{task_id}")
        assert page.status_code == 200
        assert b"succeeded" in page.content
        print("dashboard: staff only; /admin/tasks/ answers", page.status_code, "to ops")
        client.store.close()


if __name__ == "__main__":
    main()
