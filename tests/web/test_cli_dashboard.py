"""``chongming-task dashboard``: the refusals before serving, and what it serves."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chongming_task.cli import main
from chongming_task.stores._sqlite import SqliteTaskStore

from .conftest import ANN, BOB

EVE = "eve-token-0123456789abcdefGHIJKLMN"


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
    bearer = {"Authorization": "Bearer " + EVE}

    def check(app: Any) -> None:
        with TestClient(app) as client:
            assert '<span class="user">ops</span>' in client.get("/", headers=bearer).text
            refused = client.post("/api/tasks/x/stop", json={"reason": "r"}, headers=bearer)
            assert refused.status_code == 403

    served["check"] = check
    monkeypatch.setenv("CHONGMING_DASHBOARD_TOKEN", EVE)
    code, out, _ = run("--db", db, "dashboard", "--host", "0.0.0.0", "--user", "ops", "--read-only")
    assert code == 0
    assert EVE not in out  # a configured token is never printed
    assert "read-only" in out


def test_token_file_with_labels(db: str, served: dict[str, Any], tmp_path: Path) -> None:
    def check(app: Any) -> None:
        with TestClient(app) as client:
            page = client.get("/", headers={"Authorization": "Bearer " + BOB})
            assert '<span class="user">bob</span>' in page.text

    served["check"] = check
    tokens = tmp_path / "tokens"
    tokens.write_text("# who may look\nann " + ANN + "\nbob " + BOB + "\n")
    code, _, err = run("--db", db, "dashboard", "--host", "10.1.2.3", "--token-file", str(tokens))
    assert code == 0, err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "holds no token"),
        ("short\n", "at least 32 characters, got 5"),
        ("a" * 40 + "\n", "too easy to guess"),
        ("0123456789" * 4 + "\n", "too easy to guess"),
        ("a b c\n", "expected 'TOKEN' or 'LABEL TOKEN'"),
        ("x " + ANN + "\nx " + BOB + "\n", "appears twice"),
    ],
)
def test_bad_token_files(
    db: str, served: dict[str, Any], tmp_path: Path, content: str, message: str
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(content)
    code, _, err = run("--db", db, "dashboard", "--token-file", str(tokens))
    assert code == 2  # a usage error: the operator gave a bad token file
    assert message in err
    assert len(err.strip().splitlines()) == 1  # one line, no traceback
    assert "app" not in served


@pytest.mark.parametrize(
    "token",
    ["x" * 31, "abababababababababababababababab", "abcdefghijklmnopqrstuvwxyzabcdefgh"],
)
def test_a_weak_token_in_the_environment_is_refused_at_start(
    db: str, served: dict[str, Any], monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    """Too short, too few distinct characters, all one kind: exit 2, one line."""
    monkeypatch.setenv("CHONGMING_DASHBOARD_TOKEN", token)
    code, _, err = run("--db", db, "dashboard", "--host", "0.0.0.0")
    assert code == 2
    assert "the token of dashboard user 'dashboard'" in err
    assert len(err.strip().splitlines()) == 1
    assert "app" not in served


def test_session_ttl_option(db: str, served: dict[str, Any]) -> None:
    code, _, _ = run("--db", db, "dashboard", "--session-ttl", "600")
    assert code == 0
    assert served["app"].state.dashboard.ring.session_ttl == 600
    code, _, err = run("--db", db, "dashboard", "--session-ttl", "0")
    assert code == 2
    assert "session_ttl must be a positive number of seconds" in err


def test_missing_database_is_refused(tmp_path: Path, served: dict[str, Any]) -> None:
    code, _, err = run("--db", str(tmp_path / "nope.db"), "dashboard")
    assert code == 1
    assert "no database" in err
