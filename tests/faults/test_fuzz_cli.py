"""Property-based fuzzing of the CLI, in-process through ``main(argv)``: whatever the
command line, one clear line and a documented exit code -- no traceback, no
"internal error", no hang, and no password of a mistyped URL echoed.

``worker`` and ``dashboard`` are fuzzed up to the point where they would start serving
(their option checks and the store they open); serving itself is stubbed out.
``--db`` draws from damaged and foreign files (see ``bad_files``) as well as the
seeded store.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chongming_task.cli import main

from .conftest import SCALE, record

pytestmark = pytest.mark.timeout(600)

TASKS = str(Path(__file__).resolve().parents[1] / "cli" / "modules" / "cli_tasks.py")
DEEP = "[" * 3000 + "]" * 3000
DEEP_OBJECT = '{"a": ' + "[" * 2000 + "]" * 2000 + "}"
PASSWORD = "S3cretPw"

#: Commands that do not block by design (``worker`` runs until stopped: not fuzzed).
COMMANDS = [
    ["tasks"], ["run"], ["submit"], ["ps"], ["status"], ["history"], ["stats"], ["buckets"],
    ["stop"], ["pause"], ["resume"], ["reconcile"], ["prune"], ["schedules"], ["health"],
    ["schedule", "show"], ["schedule", "pause"], ["schedule", "resume"], ["schedule", "set"],
    ["schedule", "reset"], ["schedule", "run"], ["schedule"], [], ["nosuch"], ["worker"],
    ["dashboard"], ["prune", "--older-than"], ["schedule", "set", "nightly"],
    ["schedule", "run", "nightly", "--input"], ["explain"], ["workers"], ["queue"],
    ["queue", "pause"], ["queue", "resume"],
]  # fmt: skip
OPTIONS = [
    "--json", "--tasks", "--arg", "--args-json", "--task-id", "--label", "--bucket-key",
    "--priority", "--tag", "--wait", "--timeout", "--status", "--name", "--bucket", "--limit",
    "--order", "--watch", "--interval", "--count", "--reason", "--dry-run", "--keep-terminal",
    "--timezone", "--correlation-id", "--num-buckets", "--owned-buckets", "--owner", "--help",
    "--version", "--no-such-option", "-x", "--older-than", "--keep-finished-for",
    "--live-interval", "--input", "--create-schema", "--db", "--dsn", "--lease-ttl",
    "--poll-interval", "--shutdown-timeout", "--keep-finished", "--max-parallel", "--port",
]  # fmt: skip
NASTY = [
    "", " ", "0", "1", "-1", "2", "3.5", "nan", "inf", "-inf", "1e309", "1e12", str(2**63),
    str(-(2**63) - 1), "99999999999999999999", "0x10", "true", "null", "[]", "{}", "a=1",
    "a=[1,2]", 'a={"b":null}', "b=x", "a=", "=1", "a b=1", f"a={DEEP}", DEEP, "\udcff",
    "a=\udcff", "\x00", "x" * 300, "é", "任务", "@every 1s", "@every 100000000h", "0 3 * * *",
    "* * * * * * *", "Europe/Paris", "Not/AZone", "add", "echo", "fail", "done", "nightly",
    "nosuch", "succeeded", "running", "bogus", "created", "-created", "priority", "0-3,8",
    "5-1", "65", TASKS, "no_such_module", "--", "-", "99999999999", str(2**63 - 1),
    "99999999999999", "9" * 400 + "d", f"@every {'9' * 5000}s", "@every 99999999999s",
    DEEP_OBJECT, '{"a": NaN}', '{"a": Infinity}', "7d", "1e-320", "-0", "0.0", "1_000",
    "１２", "²", "9" * 5000,
]  # fmt: skip
#: What ``--db``/``--dsn`` point at (``bad_files`` fills in the paths).
DB_VALUES = [
    "seeded", "foreign", "random", "empty", "directory", "truncated", "text", "missing",
    f"postgresql//app:{PASSWORD}@db/prod", f"postgres:/app:{PASSWORD}@db/prod",
    f"mysql://app:{PASSWORD}@db/prod", f"postgresql://app:{PASSWORD}@127.0.0.1:1/x",
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
        out += ["--wait", "0.01"] if "schedule" in out or "run" not in out else []
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
        option = draw(st.sampled_from(OPTIONS))
        argv.append(option)
        if option in ("--db", "--dsn"):
            argv.append(draw(st.sampled_from(DB_VALUES)))
        elif draw(st.booleans()):
            argv.append(draw(st.sampled_from(NASTY) | st.text(max_size=12)))
    return _cap_waits(argv)


#: Well-formed commands with one value slot, so a value lands where it is parsed
#: (random command lines mostly stop at the parser, before any value is looked at).
#: ``True``: a number slot, where a value that is no finite number is a usage error.
SUBMIT = ["submit", "add", "--tasks", TASKS]
WORKER = ["worker", "--tasks", TASKS]
ADD = [*SUBMIT, "--arg", "a=1"]
SLOTS: list[tuple[list[str], str | None, bool]] = [
    (["prune", "--older-than"], None, True), (["prune", "--keep-terminal"], None, True),
    (["prune", "--older-than", "1d", "--status"], None, False),
    (WORKER, "--keep-finished-for", True), (WORKER, "--lease-ttl", True),
    (WORKER, "--max-parallel", True), (WORKER, "--keep-finished", True),
    (WORKER, "--metrics-port", True), (WORKER, "--poll-interval", True),
    (WORKER, "--shutdown-timeout", True), (WORKER, "--global-limit", False),
    (["dashboard"], "--live-interval", True), (["dashboard"], "--port", True),
    (SUBMIT, "--args-json", False), (SUBMIT, "--arg", False),
    (ADD, "--priority", True), (ADD, "--task-id", False), (ADD, "--label", False),
    (ADD, "--bucket-key", False), (ADD, "--tag", False),
    (["schedule", "run", "nightly"], "--input", False),
    (["schedule", "set", "nightly"], None, False), (["ps"], "--since", False),
    (["ps"], "--until", False), (["ps"], "--limit", True), (["ps"], "--bucket", True),
    (["ps"], "--status", False), (["status"], None, False), (["history"], None, False),
    (["stop", "done"], "--reason", False), (["schedule", "preview"], "--cron", False),
    (["buckets", "handoff", "--from", "a", "--to", "b", "0"], "--timeout", True),
    (["ps", "--num-buckets"], None, True), (["ps", "--owned-buckets"], None, False),
    (["queue", "pause", "--reason", "r"], "--name", False),
    (["queue", "pause", "--reason", "r"], "--bucket", True),
    (["queue", "pause", "--name", "add"], "--reason", False),
    (["queue", "resume"], "--bucket", True),
]  # fmt: skip
#: No number slot takes these.
NOT_FINITE = frozenset({"nan", "inf", "-inf", "1e309"})


def slot_line(prefix: list[str], option: str | None, value: str) -> list[str]:
    """``prefix [option] value``; a trailing ``--opt`` takes the value glued (``--opt=v``),
    so a value starting with ``-`` stays a value."""
    if option is None and prefix[-1].startswith("--"):
        return _cap_waits([*prefix[:-1], f"{prefix[-1]}={value}"])
    return _cap_waits([*prefix, *([option] if option else []), value])


@st.composite
def value_lines(draw: st.DrawFn) -> list[str]:
    prefix, option, _ = draw(st.sampled_from(SLOTS))
    return slot_line(prefix, option, draw(st.sampled_from(NASTY) | st.text(max_size=12)))


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory, seeded: str) -> dict[str, str]:
    """``DB_VALUES`` name -> path: the seeded store, and files no command may trust."""
    import random
    import shutil
    import sqlite3

    root = tmp_path_factory.mktemp("bad")
    rng = random.Random(34)
    foreign = root / "foreign.db"
    lite = sqlite3.connect(foreign)
    lite.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    lite.commit()
    lite.close()
    (root / "random.db").write_bytes(rng.randbytes(8192))
    (root / "empty.db").touch()
    (root / "directory.db").mkdir()
    shutil.copy(seeded, root / "truncated.db")
    with (root / "truncated.db").open("r+b") as handle:
        handle.truncate(4096)
    (root / "text.db").write_text("not a database\n")
    paths = {name: str(root / f"{name}.db") for name in DB_VALUES if "/" not in name}
    paths["seeded"] = seeded
    return paths


def check_invocation(db: str, argv: list[str]) -> int:
    """Run ``--db DB argv`` in-process; assert one clear line and a documented code."""
    out, err = io.StringIO(), io.StringIO()
    code = main(["--db", db, *argv], stdout=out, stderr=err)
    text = out.getvalue() + err.getvalue()
    assert code in (0, 1, 2, 3), (argv, code, text)
    assert "Traceback" not in text, (argv, text)
    assert "internal error" not in text, (argv, text)
    assert PASSWORD not in text, (argv, text)
    if code in (1, 2):
        # Why, in one error line (``health`` says it in its verdict on stdout instead).
        assert text.strip(), (argv, "a failure says why")
        errors = [line for line in err.getvalue().splitlines() if " error: " in line]
        assert len(errors) == (1 if code == 2 else len(errors[:1])), (argv, err.getvalue())
    return code


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
    seeded: str, bad_files: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _quiet_environment(tmp_path, monkeypatch)
    seen: dict[int, int] = {}

    @settings(
        max_examples=2000 * SCALE,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(argv=command_lines() | value_lines())
    def invocation(argv: list[str]) -> None:
        code = check_invocation(seeded, [bad_files.get(item, item) for item in argv])
        seen[code] = seen.get(code, 0) + 1

    invocation()
    record(cli_invocations=sum(seen.values()), tracebacks=0, internal_errors=0)
    print(json.dumps({"exit_codes": seen}))


def test_every_value_in_every_slot(
    seeded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each value of ``NASTY`` in each slot of ``SLOTS``, once: what the random lines
    reach only by chance (a 5,000-digit interval, a 2,000-deep --input...) is certain."""
    _quiet_environment(tmp_path, monkeypatch)
    seen: dict[int, int] = {}
    for prefix, option, number in SLOTS:
        for value in NASTY:
            argv = slot_line(prefix, option, value)
            code = check_invocation(seeded, argv)
            if number and value in NOT_FINITE:
                assert code == 2, (argv, code, "no number slot takes a value that is not finite")
            seen[code] = seen.get(code, 0) + 1
    record(cli_invocations=sum(seen.values()), tracebacks=0, internal_errors=0)
    print(json.dumps({"exit_codes": seen}))


def _quiet_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No CHONGMING_* from outside; ``worker`` and ``dashboard`` stop before serving."""
    for key in list(os.environ):
        if key.startswith("CHONGMING_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("chongming_task.cli.commands._worker._serve", _opens_the_store)
    uvicorn = pytest.importorskip("uvicorn")
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)


def _opens_the_store(args: Any, session: Any, **_: Any) -> int:
    """``worker``'s serving loop, stubbed: open the store as it would, then stop."""
    session.open_store(create=True)
    return 0
