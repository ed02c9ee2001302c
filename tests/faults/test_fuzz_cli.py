"""Property-based fuzzing of the CLI, in-process through ``main(argv)``: whatever the
command line, one clear line and a documented exit code -- no traceback, no
"internal error", no hang."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chongming_task.cli import main

from .conftest import SCALE, record

pytestmark = pytest.mark.timeout(600)

TASKS = str(Path(__file__).resolve().parents[1] / "cli" / "modules" / "cli_tasks.py")
DEEP = "[" * 3000 + "]" * 3000

#: Commands that do not block by design (``worker`` runs until stopped: not fuzzed).
COMMANDS = [
    ["tasks"], ["run"], ["submit"], ["ps"], ["status"], ["history"], ["stats"], ["buckets"],
    ["stop"], ["pause"], ["resume"], ["reconcile"], ["prune"], ["schedules"], ["health"],
    ["schedule", "show"], ["schedule", "pause"], ["schedule", "resume"], ["schedule", "set"],
    ["schedule", "reset"], ["schedule", "run"], ["schedule"], [], ["nosuch"],
]  # fmt: skip
OPTIONS = [
    "--json", "--tasks", "--arg", "--args-json", "--task-id", "--label", "--bucket-key",
    "--priority", "--tag", "--wait", "--timeout", "--status", "--name", "--bucket", "--limit",
    "--order", "--watch", "--interval", "--count", "--reason", "--dry-run", "--keep-terminal",
    "--timezone", "--correlation-id", "--num-buckets", "--owned-buckets", "--owner", "--help",
    "--version", "--no-such-option", "-x",
]  # fmt: skip
NASTY = [
    "", " ", "0", "1", "-1", "2", "3.5", "nan", "inf", "-inf", "1e309", "1e12", str(2**63),
    str(-(2**63) - 1), "99999999999999999999", "0x10", "true", "null", "[]", "{}", "a=1",
    "a=[1,2]", 'a={"b":null}', "b=x", "a=", "=1", "a b=1", f"a={DEEP}", DEEP, "\udcff",
    "a=\udcff", "\x00", "x" * 300, "é", "任务", "@every 1s", "@every 100000000h", "0 3 * * *",
    "* * * * * * *", "Europe/Paris", "Not/AZone", "add", "echo", "fail", "done", "nightly",
    "nosuch", "succeeded", "running", "bogus", "created", "-created", "priority", "0-3,8",
    "5-1", "65", TASKS, "no_such_module", "--", "-",
]  # fmt: skip
TASK_NAMES = ["add", "echo", "fail", "nosuch", "", "\udcff"]
#: Options whose value is a wait: capped so a fuzzed wait cannot outlast the suite.
WAITS = {"--wait", "--timeout", "--interval"}


def _cap_waits(argv: list[str]) -> list[str]:
    out = list(argv)
    for index, item in enumerate(out[:-1]):
        if item in WAITS:
            try:
                value = float(out[index + 1])
            except ValueError:
                continue
            if value == value and 0.05 < value < float("inf"):
                out[index + 1] = "0.01"
    if "--watch" in out:
        out += ["--count", "1", "--interval", "0"]
    if "submit" in out and "--wait" in out:
        out += ["--timeout", "0.01"]
    if "stop" in out or "pause" in out or "resume" in out or "run" in out:
        out += ["--wait", "0"] if "schedule" in out or "run" not in out else []
    return out


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    argv = list(draw(st.sampled_from(COMMANDS)))
    if argv and argv[0] in ("run", "submit"):
        argv.append(draw(st.sampled_from(TASK_NAMES)))
        argv += ["--tasks", draw(st.sampled_from([TASKS, TASKS, "no_such_module"]))]
    for _ in range(draw(st.integers(0, 3))):
        argv.append(draw(st.sampled_from([*NASTY, "done", "nightly"])))
    for _ in range(draw(st.integers(0, 4))):
        argv.append(draw(st.sampled_from(OPTIONS)))
        if draw(st.booleans()):
            argv.append(draw(st.sampled_from(NASTY) | st.text(max_size=12)))
    return _cap_waits(argv)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> str:
    from chongming_task.schedule import Schedule
    from chongming_task.schedule._admin import ScheduleAdmin
    from chongming_task.stores._sqlite import SqliteTaskStore

    db = str(tmp_path_factory.mktemp("fuzz") / "seeded.db")
    out, err = io.StringIO(), io.StringIO()
    argv = ["--db", db, "run", "add", "--tasks", TASKS, "--arg", "a=1", "--task-id", "done"]
    assert main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    with SqliteTaskStore(db) as store:
        # A string trigger is a UTC cron (Schedule.trigger's type does not say so yet).
        ScheduleAdmin(store).register(Schedule(name="nightly", task="add", trigger="0 3 * * *"))  # type: ignore[arg-type]
    return db


def test_the_cli_never_leaks_a_traceback(
    seeded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in list(os.environ):
        if key.startswith("CHONGMING_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    seen: dict[int, int] = {}

    @settings(
        max_examples=2000 * SCALE,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(argv=command_lines())
    def invocation(argv: list[str]) -> None:
        out, err = io.StringIO(), io.StringIO()
        code = main(["--db", seeded, *argv], stdout=out, stderr=err)
        text = out.getvalue() + err.getvalue()
        assert code in (0, 1, 2, 3), (argv, code, text)
        assert "Traceback" not in text, (argv, text)
        assert "internal error" not in text, (argv, text)
        if code in (1, 2):
            assert err.getvalue().strip(), (argv, "a failure says why")
        seen[code] = seen.get(code, 0) + 1

    invocation()
    record(cli_invocations=sum(seen.values()), tracebacks=0, internal_errors=0)
    print(json.dumps({"exit_codes": seen}))
