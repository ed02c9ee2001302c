"""Write docs/configuration.md: every CLI option, its environment variable and default.

Generated from the argparse parsers, so it cannot drift from ``--help``;
tests/production/test_docs.py fails when the file is not current. Run:

    PYTHONPATH=src python docs/gen_config_md.py
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HEADER = """# Configuration reference

Every option of every `chongming-task` command, with the environment variable that
sets it when the flag is not given and its default. Flags win over the environment.
Generated from the command's own parsers by `docs/gen_config_md.py`; the same text is
in `chongming-task COMMAND --help`.

OpenTelemetry is configured by the standard `OTEL_*` variables (`OTEL_TRACES_EXPORTER`,
`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME`, `OTEL_SDK_DISABLED`), read by
`worker` when the `otel` extra is installed; `submit` reads `TRACEPARENT`.
`CHONGMING_DEBUG=1` prints the traceback of an internal error.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _env(help_text: str) -> str:
    found = re.search(r"env (CHONGMING_[A-Z_]+|TRACEPARENT)", help_text)
    return f"`{found.group(1)}`" if found else "-"


def _default(action: argparse.Action, help_text: str) -> str:
    found = re.search(r"default:? ([^;)]+)", help_text)
    if found:
        return _cell(found.group(1).strip())
    if action.default in (None, False, argparse.SUPPRESS) or action.required:
        return "required" if action.required else "-"
    return f"`{action.default}`"


def _rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        name = ", ".join(action.option_strings) or action.metavar or action.dest
        if action.metavar and action.option_strings:
            name += f" {action.metavar}"
        elif action.choices and action.option_strings:
            name += " {" + ",".join(map(str, action.choices)) + "}"
        help_text = " ".join((action.help or "").split())
        rows.append(
            f"| `{_cell(str(name))}` | {_env(help_text)} | {_default(action, help_text)} "
            f"| {_cell(help_text)} |"
        )
    return rows


def render() -> str:
    from chongming_task.cli._app import build_parser

    parser = build_parser()
    lines = [HEADER]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        lines += [f"## `{name}`", "", _cell(sub.description or ""), ""]
        lines += ["| Option | Environment | Default | Meaning |", "|---|---|---|---|"]
        lines += [*_rows(sub), ""]
    lines += _limits()
    return "\n".join(lines).rstrip() + "\n"


def _limits() -> list[str]:
    """The limits on text the store keeps, from the constants that enforce them."""
    from chongming_task import _validation as v
    from chongming_task._redact import MESSAGE_MAX_LENGTH, TRACEBACK_MAX_LENGTH

    one_line = "one line: no control character (tab and newline included), valid UTF-8"
    rows = [
        ("task id, tag, task name, bucket key", f"{v.ID_MAX_LENGTH} characters", one_line),
        ("`label`", f"{v.LABEL_MAX_LENGTH} characters", one_line),
        ("`ctx.progress(unit=)`", f"{v.UNIT_MAX_LENGTH} characters", one_line),
        (
            "`ctx.progress(message=)`",
            f"{v.LINE_MAX_LENGTH} characters",
            f"{one_line}; a lone surrogate is kept as its escape (above)",
        ),
        ("`submit(skip_reason=)`, `submit(blocked=)`", f"{v.LINE_MAX_LENGTH} characters", one_line),
        (
            "`metadata`",
            f"{v.METADATA_MAX_BYTES} bytes of compact UTF-8 JSON",
            f"keys: one line of at most {v.ID_MAX_LENGTH} characters; strings valid UTF-8",
        ),
        (
            "outcome (what the task returns)",
            f"{v.OUTCOME_MAX_BYTES} bytes of compact UTF-8 JSON",
            "over it the attempt fails (`result_invalid`); a lone surrogate is kept as its escape",
        ),
        (
            "failure message, every recorded reason",
            f"{MESSAGE_MAX_LENGTH} characters, then `...`",
            "cut, not refused: control characters removed, secrets redacted",
        ),
        (
            "failure traceback",
            f"{TRACEBACK_MAX_LENGTH} characters",
            "the middle is cut, marked with how much was dropped",
        ),
    ]
    return [
        "## Limits on stored text",
        "",
        "What a caller passes is refused where it is passed, with a `ConfigurationError`",
        "naming the field and the limit (`ctx.progress` raises it in the task body: caught,",
        "the task carries on; not caught, the attempt fails with it and is stored `failed`).",
        "Text a task body produces (its outcome, a progress message, an exception, a",
        "`TaskSkipped` reason, a log line) may hold a lone surrogate -- what `os.listdir`,",
        "`os.environ` and `os.fsdecode` give for bytes that are not UTF-8: it is stored as",
        "its backslash escape, the undecodable byte for U+DC80..U+DCFF (`\\udcff` becomes",
        "the four characters `\\xff`), the code point otherwise (`\\ud800`), so the",
        "store can keep it and says what the run says. A body that needs the exact bytes",
        "returns `os.fsencode(name).hex()` or writes them to its artifact directory.",
        "",
        "| Text | At most | Rule |",
        "|---|---|---|",
        *(f"| {what} | {limit} | {_cell(rule)} |" for what, limit, rule in rows),
        "",
    ]


def main() -> int:
    target = Path(__file__).with_name("configuration.md")
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
