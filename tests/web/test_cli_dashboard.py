"""``chongming-task dashboard``: the refusals before serving, and what it serves."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chongming_task.cli import main
from chongming_task.stores._sqlite import SqliteTaskStore


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "tasks.db"
    SqliteTaskStore(str(path)).close()
    return str(path)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Capture what would be served instead of serving it.

    ``served["check"](app)``, when set, runs while the command is serving: the command
    closes its store once serving ends.
    """
    import uvicorn

    seen: dict[str, Any] = {}

    def fake_run(app: Any, **options: Any) -> None:
        seen["app"] = app
        seen.update(options)
        if "check" in seen:
            seen["check"](app)

    monkeypatch.setattr(uvicorn, "run", fake_run)
    monkeypatch.delenv("CHONGMING_DASHBOARD_TOKEN", raising=False)
    return seen


def test_listed_in_help() -> None:
    code, out, _ = run("--help")
    assert code == 0
    assert "dashboard" in out


def test_refuses_off_loopback_without_a_token(db: str, served: dict[str, Any]) -> None:
    code, _, err = run("--db", db, "dashboard", "--host", "0.0.0.0")
    assert code == 2
    assert "refusing to serve on 0.0.0.0 without a token" in err
    assert "app" not in served


def test_loopback_without_a_token_prints_a_generated_one(db: str, served: dict[str, Any]) -> None:
    def check(app: Any) -> None:
        bearer = {"Authorization": f"Bearer {app.state.dashboard.generated_token}"}
        with TestClient(app) as client:
            assert client.get("/api/tasks").status_code == 401
            assert client.get("/api/tasks", headers=bearer).status_code == 200

    served["check"] = check
    code, out, _ = run("--db", db, "dashboard", "--port", "8411")
    assert code == 0
    assert "http://127.0.0.1:8411/" in out
    assert f"token: {served['app'].state.dashboard.generated_token}" in out
    assert (served["host"], served["port"]) == ("127.0.0.1", 8411)


def test_token_from_the_environment_off_loopback(
    db: str, served: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    bearer = {"Authorization": "Bearer " + "e" * 24}

    def check(app: Any) -> None:
        with TestClient(app) as client:
            assert '<span class="user">ops</span>' in client.get("/", headers=bearer).text
            refused = client.post("/api/tasks/x/stop", json={"reason": "r"}, headers=bearer)
            assert refused.status_code == 403

    served["check"] = check
    monkeypatch.setenv("CHONGMING_DASHBOARD_TOKEN", "e" * 24)
    code, out, _ = run("--db", db, "dashboard", "--host", "0.0.0.0", "--user", "ops", "--read-only")
    assert code == 0
    assert "e" * 24 not in out  # a configured token is never printed
    assert "read-only" in out


def test_token_file_with_labels(db: str, served: dict[str, Any], tmp_path: Path) -> None:
    def check(app: Any) -> None:
        with TestClient(app) as client:
            page = client.get("/", headers={"Authorization": "Bearer " + "b" * 20})
            assert '<span class="user">bob</span>' in page.text

    served["check"] = check
    tokens = tmp_path / "tokens"
    tokens.write_text("# who may look\nann " + "a" * 20 + "\nbob " + "b" * 20 + "\n")
    code, _, err = run("--db", db, "dashboard", "--host", "10.1.2.3", "--token-file", str(tokens))
    assert code == 0, err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "holds no token"),
        ("short\n", "at least 16"),
        ("a b c\n", "expected 'TOKEN' or 'LABEL TOKEN'"),
        ("x " + "a" * 20 + "\nx " + "b" * 20 + "\n", "appears twice"),
    ],
)
def test_bad_token_files(
    db: str, served: dict[str, Any], tmp_path: Path, content: str, message: str
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(content)
    code, _, err = run("--db", db, "dashboard", "--token-file", str(tokens))
    assert code == 1
    assert message in err
    assert "app" not in served


def test_missing_database_is_refused(tmp_path: Path, served: dict[str, Any]) -> None:
    code, _, err = run("--db", str(tmp_path / "nope.db"), "dashboard")
    assert code == 1
    assert "no database" in err
