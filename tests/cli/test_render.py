"""Output decisions: plain text off a terminal, rich on one, colour off with NO_COLOR."""

from __future__ import annotations

import io

import pytest

from chongming_task.cli._render import Output, display_width, plain_table


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_table_layout_matches_render_table_style() -> None:
    text = plain_table(["TASK_ID", "NAME"], [["t0", "转换-1"], ["t10", "x"]])
    assert text.splitlines() == [
        "TASK_ID  NAME",
        "-------  ------",
        "t0       转换-1",
        "t10      x",
    ]
    assert display_width("转换") == 4


def test_not_a_terminal_means_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = io.StringIO()
    output = Output(stream, io.StringIO())
    assert not output.rich
    output.table(["STATUS"], [["running"]])
    assert "\x1b[" not in stream.getvalue()
    assert stream.getvalue().splitlines()[-1] == "running"


def test_terminal_means_rich_with_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("CHONGMING_PLAIN", raising=False)
    stream = _Tty()
    output = Output(stream, io.StringIO())
    assert output.rich
    output.table(["TASK_ID", "STATUS"], [["t1", "failed"]])
    text = stream.getvalue()
    assert "t1" in text
    assert "\x1b[" in text  # coloured status


def test_no_color_keeps_rich_tables_without_escape_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    stream = _Tty()
    output = Output(stream, io.StringIO())
    assert output.rich
    assert not output.color
    output.table(["TASK_ID", "STATUS"], [["t1", "failed"]])
    assert "failed" in stream.getvalue()
    assert "\x1b[" not in stream.getvalue()


def test_chongming_plain_forces_plain_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHONGMING_PLAIN", "1")
    assert not Output(_Tty(), io.StringIO()).rich


def test_missing_rich_falls_back_to_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("rich"):
            raise ImportError("no rich")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.delenv("CHONGMING_PLAIN", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    output = Output(_Tty(), io.StringIO())
    assert not output.rich


def test_error_is_one_prefixed_line() -> None:
    err = io.StringIO()
    Output(io.StringIO(), err).error("first\nsecond")
    assert err.getvalue() == "chongming-task: error: first second\n"
