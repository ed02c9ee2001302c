"""The pipeline page: a run's DAG drawn server-side as SVG, every node with its state in
words and a link to its task page (ids with ``/``, ``%`` and ``#`` encoded), the table
fallback, the JSON, 404 and the CSP; a node's task page links back. On SQLite and
PostgreSQL: a fleet run enqueued by ``Client.enqueue_pipeline`` (the store settles
its nodes), and an in-process run (``controller.submit_pipeline``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import pytest
from starlette.testclient import TestClient

from chongming_task import Client, JoinMode, Pipeline, TaskStatus
from chongming_task.core.state_machine import StateMachine
from chongming_task.stores._base import TaskStore
from chongming_task.web import create_app
from chongming_task.web._app import CONTENT_SECURITY_POLICY
from chongming_task.web._urls import pipeline_url, task_url

from .conftest import BEARER, TOKEN, USER, Holder
from .test_safe import AsUvicorn

S = TaskStatus
RUN = "etl/1%41 nightly"
#: The run's path segment: every reserved character of the raw id escaped.
RUN_PATH = "/pipelines/etl%2F1%2541%20nightly"


@pytest.fixture
def client(store: TaskStore) -> Iterator[TestClient]:
    """Paths decoded once, as uvicorn does (the run id holds ``%41``)."""
    with TestClient(
        AsUvicorn(create_app(store, token=TOKEN, user=USER)), base_url="http://127.0.0.1"
    ) as made:
        yield made


def _enqueue(store: TaskStore) -> None:
    """a, b#2 -> c (any succeeded) -> d, and a -> d directly (an edge across a layer)."""
    pipeline = Pipeline("etl")
    a = pipeline.node("extract", node_id="a")
    b = pipeline.node("extract", node_id="b#2")
    c = pipeline.node("load", node_id="c", depends_on=[a, b], join=JoinMode.ANY_SUCCEEDED)
    pipeline.node("report", node_id="d", depends_on=[c, a])
    Client(store).enqueue_pipeline(pipeline, run_id=RUN)


def _succeed(store: TaskStore, task_id: str) -> None:
    """What a worker writes for a node that ran and succeeded."""
    stored = store.get(task_id)
    assert stored is not None
    assert stored.status is S.QUEUED, stored
    machine = StateMachine(stored, clock=store.clock)
    machine.mark_starting()
    machine.mark_running()
    machine.mark_succeeded(outcome=1)
    store.save(
        machine.snapshot, expect_version=stored.status_version, transitions=machine.transitions
    )


def _boxes(page: str) -> dict[str, tuple[str, str]]:
    """Node id -> (href, state text) of every box of the SVG drawing."""
    svg = page[page.index("<svg") : page.index("</svg>")]
    found = re.findall(
        r'<a href="([^"]+)" class="node s-[a-z_]+" data-node="([^"]+)".*?'
        r'class="node-state">([a-z_]+)</text>',
        svg,
        re.S,
    )
    return {unescape(node): (href, state) for href, node, state in found}


def _edges(page: str) -> set[tuple[str, str]]:
    pairs = re.findall(
        r'<path class="edge" d="[^"]+" marker-end="url\(#arrow\)" '
        r'data-from="([^"]+)" data-to="([^"]+)"',
        page,
    )
    return {(unescape(a), unescape(b)) for a, b in pairs}


def test_the_page_draws_every_node_with_its_state_and_links(
    client: TestClient, store: TaskStore
) -> None:
    _enqueue(store)
    assert pipeline_url("", RUN) == RUN_PATH
    response = client.get(RUN_PATH, headers=BEARER)
    assert response.status_code == 200, response.text
    page = response.text
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    expected = {"a": S.QUEUED, "b#2": S.QUEUED, "c": S.BLOCKED, "d": S.BLOCKED}
    boxes = _boxes(page)
    assert boxes == {
        node: (task_url("", f"{RUN}/{node}"), status.value) for node, status in expected.items()
    }
    assert boxes["b#2"][0] == "/tasks/etl%2F1%2541%20nightly%2Fb%232"
    assert _edges(page) == {("a", "c"), ("b#2", "c"), ("c", "d"), ("a", "d")}
    assert 'marker id="arrow"' in page
    # The table says the same in text, with what each node waits for.
    for node, status in expected.items():
        row = re.search(rf'<tr data-node="{re.escape(node)}">(.*?)</tr>', page, re.S)
        assert row is not None, node
        assert f'href="{task_url("", f"{RUN}/{node}")}"' in row.group(1)
        assert f'<span class="status s-{status.value}">{status.value}</span>' in row.group(1)
    assert 'a, b#2 <span class="small muted">(any_succeeded)</span>' in page
    assert '<span class="status s-running">running</span>' in page
    # The live region refreshes from the page's own encoded URL.
    assert f'hx-get="{RUN_PATH}?partial=1"' in page

    # A node settles in the store: the page shows what the store decided.
    _succeed(store, f"{RUN}/a")
    boxes = _boxes(client.get(RUN_PATH, headers=BEARER).text)
    assert {node: state for node, (_, state) in boxes.items()} == {
        "a": "succeeded",
        "b#2": "queued",
        "c": "queued",  # any_succeeded: released by a's success
        "d": "blocked",
    }
    assert store.get(f"{RUN}/c").status is S.QUEUED  # type: ignore[union-attr]


def test_every_node_task_page_links_to_its_pipeline_page(
    client: TestClient, store: TaskStore
) -> None:
    _enqueue(store)
    for node in ("a", "b#2", "d"):
        page = client.get(task_url("", f"{RUN}/{node}"), headers=BEARER).text
        assert (
            f'<dt>Pipeline</dt><dd><a class="mono" href="{RUN_PATH}" data-testid="pipeline">'
            f'{RUN}</a>, node <span class="mono">{node}</span></dd>'
        ) in page
    Client(store).enqueue("extract", task_id="plain")
    assert 'data-testid="pipeline"' not in client.get("/tasks/plain", headers=BEARER).text


def test_the_json_document(client: TestClient, store: TaskStore) -> None:
    _enqueue(store)
    _succeed(store, f"{RUN}/b#2")
    document = client.get(f"/api{RUN_PATH}", headers=BEARER).json()
    assert document["run_id"] == RUN
    assert (document["pipeline"], document["kind"], document["status"]) == (
        "etl",
        "fleet",
        "running",
    )
    assert document["counts"] == {"queued": 2, "succeeded": 1, "blocked": 1}
    nodes = {n["node"]: n for n in document["nodes"]}
    assert {n: (d["task_id"], d["status"], d["layer"]) for n, d in nodes.items()} == {
        "a": (f"{RUN}/a", "queued", 0),
        "b#2": (f"{RUN}/b#2", "succeeded", 0),
        "c": (f"{RUN}/c", "queued", 1),
        "d": (f"{RUN}/d", "blocked", 2),
    }
    assert nodes["c"]["upstream"] == ["a", "b#2"]
    assert nodes["c"]["join"] == "any_succeeded"
    assert nodes["a"]["downstream"] == ["c", "d"]
    assert {(e["from"], e["to"]) for e in document["edges"]} == {
        ("a", "c"),
        ("b#2", "c"),
        ("c", "d"),
        ("a", "d"),
    }


def test_an_unknown_run_is_404_and_the_page_needs_a_login(
    client: TestClient, store: TaskStore
) -> None:
    _enqueue(store)
    for path in ("/pipelines/nope", "/api/pipelines/nope", "/pipelines/etl", "/api/pipelines/etl"):
        response = client.get(path, headers=BEARER)
        assert response.status_code == 404, path
        assert "no pipeline run" in response.text
    # The decoded id of the page's URL is not another run.
    assert client.get("/pipelines/etl%2F1A%20nightly", headers=BEARER).status_code == 404
    assert client.get(RUN_PATH).status_code == 401
    assert client.get(f"/api{RUN_PATH}").status_code == 401


def test_the_page_has_no_inline_script_or_style(client: TestClient, store: TaskStore) -> None:
    _enqueue(store)
    text = client.get(RUN_PATH, headers=BEARER).text
    for chunk in text.split("<script")[1:]:
        assert chunk.lstrip().startswith("src="), chunk[:80]
    assert " style=" not in text
    assert "<style" not in text
    assert " on" + "click=" not in text


def test_an_in_process_run_shows_its_nodes_without_edges(
    client: TestClient, holder: Holder, store: TaskStore
) -> None:
    pipeline = Pipeline("local")
    first = pipeline.node("quick", node_id="first")
    pipeline.node("quick", node_id="second", depends_on=[first])
    run = holder.controller.submit_pipeline(pipeline, run_id="local-1")
    assert run.wait(15).status is S.SUCCEEDED
    page = client.get("/pipelines/local-1", headers=BEARER).text
    assert {n: state for n, (_, state) in _boxes(page).items()} == {
        "first": "succeeded",
        "second": "succeeded",
    }
    assert _edges(page) == set()
    assert 'data-testid="in-process"' in page
    assert '<span class="status s-succeeded">succeeded</span>' in page
    document = client.get("/api/pipelines/local-1", headers=BEARER).json()
    assert (document["kind"], document["status"]) == ("in-process", "succeeded")
    task_page = client.get("/tasks/local-1%2Fsecond", headers=BEARER).text
    assert 'href="/pipelines/local-1" data-testid="pipeline">local-1</a>' in task_page
