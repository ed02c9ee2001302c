"""``import chongming_task`` needs no PostgreSQL driver; using the store without one says how to
install it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from chongming_task.errors import ConfigurationError


def test_the_package_imports_without_psycopg() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["psycopg"] = None  # any import of it now fails
        sys.modules["psycopg_pool"] = None
        import chongming_task
        from chongming_task import PostgresTaskStore, SqliteTaskStore
        assert "psycopg" not in [m for m in sys.modules if sys.modules[m] is not None]
        try:
            PostgresTaskStore("postgresql://localhost/none")
        except chongming_task.errors.ConfigurationError as exc:
            print(exc)
        else:
            raise SystemExit("expected ConfigurationError")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert 'pip install "chongming-task[postgres]"' in done.stdout


def test_the_error_is_raised_in_process_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from chongming_task.stores._postgres import PostgresTaskStore

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"chongming-task\[postgres\]"):
        PostgresTaskStore("postgresql://localhost/none")
