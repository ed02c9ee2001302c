"""The work queue behind a FastAPI app: enqueue from an endpoint, return the id, poll, wait.

The web process never runs a task: its endpoints hand work to the workers through the
store with an :class:`chongming_task.AsyncClient` and read the task back by id.

* ``POST /reports`` enqueues a report and answers ``202`` with its ``task_id``
  (``422`` with the reason when the arguments do not fit the task);
* ``GET /tasks/{task_id}`` is the status to poll (``404`` for an unknown id);
* ``GET /tasks/{task_id}/wait?timeout=5`` waits for the outcome without blocking the
  event loop (``200`` with the outcome, or ``202`` when still unfinished);
* ``POST /tasks/{task_id}/stop`` cancels it (immediate while no worker holds it).

Run it as a server with ``CHONGMING_DB=tasks.db uvicorn 17_queue_fastapi:app`` (from
``examples/``) next to ``chongming-task --db tasks.db worker --tasks queue_tasks.py``.
Run as a script it starts such a worker and drives the app with FastAPI's
``TestClient`` (no server), asserting every answer.

    python examples/17_queue_fastapi.py      # needs fastapi (in the dev extra)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

try:
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel
except ImportError:  # pragma: no cover - the message is the point
    sys.exit('this example needs FastAPI: pip install fastapi  (or "chongming-task[dev]")')

import queue_tasks

from chongming_task import AsyncClient, SqliteTaskStore, TaskSnapshot
from chongming_task.errors import ConfigurationError

TASKS = Path(__file__).resolve().with_name("queue_tasks.py")


class ReportRequest(BaseModel):
    tenant: str
    pages: int = 3


def describe(snapshot: TaskSnapshot) -> dict[str, Any]:
    """What the API shows of a task: JSON only, read from the store."""
    progress = snapshot.progress
    return {
        "task_id": snapshot.task_id,
        "name": snapshot.name,
        "status": snapshot.status.value,
        "progress": None if progress is None else progress.to_dict(),
        "attempt": snapshot.attempt,
    }


def create_app(db: str) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = SqliteTaskStore(db)  # or PostgresTaskStore("postgresql://...")
        app.state.queue = AsyncClient(store, tasks=queue_tasks)
        try:
            yield
        finally:
            store.close()

    app = FastAPI(title="reports", lifespan=lifespan)

    def queue(request: Request) -> AsyncClient:
        client: AsyncClient = request.app.state.queue
        return client

    @app.post("/reports", status_code=202)
    async def create_report(body: ReportRequest, request: Request) -> dict[str, Any]:
        try:
            handle = await queue(request).enqueue(
                "report", body.tenant, pages=body.pages, bucket_key=body.tenant
            )
        except ConfigurationError as exc:  # bad input: nothing was stored
            raise HTTPException(status_code=422, detail=str(exc)) from None
        return {"task_id": handle.task_id, "status": (await handle.status()).value}

    @app.get("/tasks/{task_id}")
    async def task_status(task_id: str, request: Request) -> dict[str, Any]:
        handle = await queue(request).get(task_id)
        if handle is None:
            raise HTTPException(status_code=404, detail=f"no task {task_id!r}")
        return describe(await handle.snapshot())

    @app.get("/tasks/{task_id}/wait", response_model=None)
    async def task_wait(
        task_id: str, request: Request, timeout: float = 5.0
    ) -> dict[str, Any] | JSONResponse:
        handle = await queue(request).get(task_id)
        if handle is None:
            raise HTTPException(status_code=404, detail=f"no task {task_id!r}")
        try:
            outcome = await handle.wait(timeout=min(max(timeout, 0.0), 30.0))
        except TimeoutError:  # still running: poll again later
            return JSONResponse(describe(await handle.snapshot()), status_code=202)
        failure = outcome.failure
        return {
            **describe(outcome.snapshot),
            "ok": outcome.ok,
            "value": outcome.value,
            "failure": None if failure is None else failure.message,
        }

    @app.post("/tasks/{task_id}/stop")
    async def task_stop(task_id: str, request: Request) -> dict[str, Any]:
        handle = await queue(request).get(task_id)
        if handle is None:
            raise HTTPException(status_code=404, detail=f"no task {task_id!r}")
        accepted = await handle.stop("cancelled through the API")
        return {**describe(await handle.snapshot()), "accepted": accepted}

    return app


def main() -> None:
    from fastapi.testclient import TestClient

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "tasks.db")
        with TestClient(create_app(db)) as http:
            # Before any worker: enqueued, visible, cancellable.
            created = http.post("/reports", json={"tenant": "acme", "pages": 40})
            assert created.status_code == 202, created.text
            cancelled = created.json()
            print("POST /reports ->", created.status_code, cancelled)
            assert cancelled["status"] == "queued"
            stopped = http.post(f"/tasks/{cancelled['task_id']}/stop").json()
            print("POST /tasks/.../stop ->", stopped["status"])
            assert (stopped["accepted"], stopped["status"]) == (True, "stopped")

            # Refused by the client (an empty tenant is no bucket key): 422, nothing stored.
            bad = http.post("/reports", json={"tenant": ""})
            print("POST /reports (empty tenant) ->", bad.status_code, bad.json()["detail"])
            assert bad.status_code == 422
            assert "bucket_key" in bad.json()["detail"]
            assert http.post("/reports", json={"tenant": "a", "pages": "x"}).status_code == 422
            assert http.get("/tasks/nope").status_code == 404

            early = http.post("/reports", json={"tenant": "initech"}).json()["task_id"]
            not_yet = http.get(f"/tasks/{early}/wait", params={"timeout": 0.1})
            print("GET /tasks/.../wait (no worker yet) ->", not_yet.status_code, not_yet.json())
            assert (not_yet.status_code, not_yet.json()["status"]) == (202, "queued")

            worker = subprocess.Popen(
                [sys.executable, "-m", "chongming_task.cli", "--db", db, "worker",
                 "--tasks", str(TASKS), "--poll-interval", "0.05"],
                env={k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                task_id = http.post("/reports", json={"tenant": "globex"}).json()["task_id"]
                done = http.get(f"/tasks/{task_id}/wait", params={"timeout": 30})
                print("GET /tasks/.../wait ->", done.status_code, done.json())
                assert done.status_code == 200
                assert done.json()["ok"] is True
                assert done.json()["value"] == "globex-report-3p.pdf"
                polled = http.get(f"/tasks/{task_id}").json()
                assert polled["status"] == "succeeded"
                assert polled["progress"]["done"] == 3
                waited = http.get(f"/tasks/{early}/wait", params={"timeout": 30})
                assert waited.json()["value"] == "initech-report-3p.pdf"  # queued before
            finally:
                worker.send_signal(signal.SIGTERM)
                assert worker.wait(timeout=30) == 0
            final = http.get(f"/tasks/{cancelled['task_id']}").json()
            assert final["status"] == "stopped"  # the worker never ran the cancelled one
            print("cancelled task is still", final["status"])


if os.environ.get("CHONGMING_DB"):  # served by uvicorn: the app on that store
    app = create_app(os.environ["CHONGMING_DB"])

if __name__ == "__main__":
    main()
