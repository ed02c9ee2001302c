"""The benchmark harness still runs (sizes and timings are not asserted: that is bench/'s job)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_bench_script(name: str) -> ModuleType:
    """bench/<name>.py as a module, with bench/ on sys.path while it loads (as when it runs)."""
    added = str(ROOT / "bench") not in sys.path
    if added:
        sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
    finally:
        if added and str(ROOT / "bench") in sys.path:
            sys.path.remove(str(ROOT / "bench"))
    return module


def _load_bench_run() -> ModuleType:
    """bench/run.py as a module."""
    return _load_bench_script("run")


def _bench(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python bench/<script> <args>`` from the repository root, its output captured."""
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _quick_run(
    out: Path, only: str, *options: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``bench/run.py --quick`` of ``only`` with one round, no PostgreSQL, results in ``out``."""
    return _bench(
        "run.py",
        *("--quick", *options, "--only", only, "--rounds", "1"),
        *("--postgres", "off", "--out", str(out)),
        timeout=timeout,
    )


@pytest.mark.timeout(240)
def test_bench_quick_smoke_run_writes_results(tmp_path: Path) -> None:
    result = _quick_run(tmp_path, "W2,W6", timeout=230)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "FAILED" not in result.stdout, result.stdout[-3000:]
    document = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    assert document, "latest.json is empty"
    assert document["isolation"] == "process per workload"
    speed = document["calibration"]
    assert 0 < speed["start"]["low_us"] <= speed["start"]["median_us"] <= speed["start"]["high_us"]
    assert speed["end"]["median_us"] > 0
    assert speed["compared_with"] is None  # a fresh directory: nothing to compare with
    markdown = (tmp_path / "latest.md").read_text(encoding="utf-8")
    assert "- **CPU speed**: " in markdown
    assert "no earlier calibrated result in this directory" in markdown


@pytest.mark.timeout(60)
def test_the_floor_script_runs_and_reports_a_rate() -> None:
    result = _bench("floor.py", "--tasks", "200", "--rounds", "1", timeout=50)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("floor of W1 semantics: "), result.stdout
    assert "tasks/s median" in result.stdout


@pytest.mark.timeout(120)
def test_the_async_bench_runs_and_prints_its_figures() -> None:
    result = _bench(
        "async_bench.py", "--store", "sqlite", "--tasks", "40", "--sleep", "0.2", timeout=110
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = result.stdout.strip()
    assert line.startswith("sqlite: 40 tasks awaiting 0.2 s on one worker: wall "), line
    assert "peak threads " in line
    assert "peak RSS " in line
    assert line.endswith("[ok]"), line


@pytest.mark.timeout(120)
def test_the_sqlite_floor_script_runs_beside_huey_and_the_library() -> None:
    result = _bench("floor_sqlite.py", "--tasks", "60", "--rounds", "1", timeout=110)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("floor of W1 on SQLite (the library's schema): "), lines
    assert "commits a task" in lines[0]
    # Two commits a task is the contract's minimum (the submission and the start), plus
    # one last terminal commit per carrier: 122 for 60 tasks through 2 slots.
    commits = float(lines[0].split(", ")[-1].split()[0])
    assert 2.0 <= commits <= 122 / 60 + 0.001, lines[0]
    assert lines[1].startswith("chongming-task on SQLite: "), lines
    assert "x the floor" in lines[1]
    assert lines[2].startswith("huey on SQLite: "), lines
    assert lines[3].startswith("floor / huey: "), lines


@pytest.mark.parametrize("script", ["floor.py", "floor_sqlite.py"])
@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--tasks", "0"), "expected at least 1, got 0"),
        (("--rounds", "0"), "expected at least 1, got 0"),
        (("--tasks", "many"), "expected a whole number, got 'many'"),
    ],
)
def test_the_floor_scripts_refuse_a_bad_count(
    script: str, flags: tuple[str, ...], expected: str
) -> None:
    result = _bench(script, *flags, timeout=50)
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_a_baseline_round_that_raises_is_measured_once_more_and_reported() -> None:
    """A peer's rare flake does not take its numbers out of a run; ours are never retried."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from harness.core import Metric, Settings, Variant, Workload
        from harness.report import workload_markdown
        from harness.runner import run_workload
    finally:
        sys.path.remove(str(ROOT / "bench"))
    calls = {"peer": 0, "ours": 0}

    def peer() -> dict[str, float]:
        calls["peer"] += 1
        if calls["peer"] == 2:
            raise RuntimeError("cannot start a transaction within a transaction")
        return {"rate": 1.0}

    def ours() -> dict[str, float]:
        calls["ours"] += 1
        if calls["ours"] == 2:
            raise RuntimeError("a bug of ours")
        return {"rate": 2.0}

    class Flaky(Workload):
        key = "WX"
        title = "flaky peer"
        metrics = (Metric("rate", "1/s", True),)

        def variants(self, settings: Settings) -> list[Variant]:
            return [
                Variant("ours", "ours", ours),
                Variant("peer", "peer", peer, baseline=True),
            ]

    result = run_workload(Flaky(), Settings(rounds=3, warmup=0), log=lambda message: None)
    peer_result, ours_result = result.by_key("peer"), result.by_key("ours")
    assert peer_result is not None
    assert ours_result is not None
    assert peer_result.error is None
    assert peer_result.samples["rate"] == [1.0, 1.0, 1.0]  # the failed round, measured again
    assert len(peer_result.retried) == 1
    assert peer_result.retried[0].startswith(
        "RuntimeError: cannot start a transaction within a transaction"
    )
    assert ours_result.error is not None  # ours: reported, not retried
    assert "a bug of ours" in ours_result.error
    assert "measured once more" in "\n".join(workload_markdown(result))


@pytest.mark.timeout(120)
def test_in_process_runs_every_workload_in_the_parent_and_says_so(tmp_path: Path) -> None:
    pin = ["--affinity", "0"] if hasattr(os, "sched_setaffinity") else []
    # The result this run replaces: its CPU speed is what the new one is compared with.
    previous = {
        "started_at": "2026-01-01T00:00:00+00:00",
        "calibration": {
            "start": {"median_us": 0.5, "low_us": 0.4, "high_us": 0.6, "rounds": 7, "tasks": 2000}
        },
    }
    (tmp_path / "latest.json").write_text(json.dumps(previous), encoding="utf-8")
    result = _quick_run(tmp_path, "W6", "--in-process", *pin, timeout=110)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    assert document["isolation"] == "in-process"
    assert document["calibration"]["compared_with"]["median_us"] == 0.5
    markdown = (tmp_path / "latest.md").read_text(encoding="utf-8")
    assert "--in-process" in markdown
    assert "× slower than the previous result here (0.5 µs, run 2026-01-01T00:00:00" in markdown
    if hasattr(os, "sched_setaffinity"):
        assert document["affinity"] == [0]
        assert document["machine"]["usable_cores"] == 1
        assert "pinned to CPU [0] (--affinity)" in markdown


@pytest.mark.parametrize(
    ("value", "expected"),
    [("x", "is not a list of CPU numbers"), ("0,99999", "not available here")],
)
def test_a_bad_affinity_is_a_usage_error_that_names_the_fix(value: str, expected: str) -> None:
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    result = _bench("run.py", "--affinity", value, timeout=60)
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_a_workload_result_round_trips_through_json_without_loss() -> None:
    """What a child writes, the parent reads back into a result that reports the same."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from harness.core import Metric, Settings, Target, Unavailable, Variant, Workload
        from harness.report import workload_json, workload_markdown
        from harness.runner import RecordedWorkload, WorkloadResult, run_workload
    finally:
        sys.path.remove(str(ROOT / "bench"))
    calls = {"peer": 0}

    def peer() -> dict[str, float]:
        calls["peer"] += 1
        if calls["peer"] == 2:
            raise RuntimeError("a flake | with a pipe")
        return {"rate": 1.0 / 3.0, "p99_ms": 0.1 + 0.2}

    def broken() -> dict[str, float]:
        raise ValueError("a bug of ours")

    def missing() -> dict[str, float]:
        raise Unavailable("not landed")

    class Sample(Workload):
        key = "WX"
        title = "round trip"
        description = "Every field the report reads."
        metrics = (Metric("rate", "1/s", True, "rate"), Metric("p99_ms", "ms", False))
        targets = (
            Target("rate >= 2x peer", "ours", "rate", ">=", baseline="peer", factor=2.0),
            Target("p99 <= 1 ms", "ours", "p99_ms", "<=", threshold=1.0),
        )
        ratio_metrics = ("rate",)

        def __init__(self) -> None:
            self.notes: dict[str, object] = {}

        def variants(self, settings: Settings) -> list[Variant]:
            self.notes["journal"] = ("wal", 2)
            return [
                Variant("ours", "ours", lambda: {"rate": 2.0 / 3.0, "p99_ms": 0.7}),
                Variant("broken", "ours, broken", broken),
                Variant("missing", "ours, missing", missing),
                Variant("later", "ours, later", broken, unavailable="not yet"),
                Variant("peer", "peer", peer, baseline=True, notes="a peer"),
            ]

        def settings_notes(self) -> dict[str, object]:
            return self.notes

    original = run_workload(Sample(), Settings(rounds=3, warmup=1), log=lambda message: None)
    ours = original.by_key("ours")
    assert ours is not None
    ours.cut = "2 of 3 rounds: budget"  # a field the runner fills only on slow machines

    text = json.dumps(original.to_json())
    copy = WorkloadResult.from_json(json.loads(text))

    assert isinstance(copy.workload, RecordedWorkload)
    assert copy.variants == original.variants  # every field, raw samples bit for bit
    assert copy.comparisons == original.comparisons
    assert (copy.rounds, copy.warmup, copy.seconds, copy.quick, copy.unavailable, copy.error) == (
        original.rounds,
        original.warmup,
        original.seconds,
        original.quick,
        original.unavailable,
        original.error,
    )
    assert list(copy.workload.targets) == list(original.workload.targets)
    assert list(copy.workload.metrics) == list(original.workload.metrics)
    # The report: JSON through text, as latest.json is written (tuples become lists).
    assert json.loads(json.dumps(workload_json(copy))) == json.loads(
        json.dumps(workload_json(original))
    )
    assert workload_markdown(copy) == workload_markdown(original)
    assert copy.to_json() == original.to_json()


@pytest.mark.timeout(120)
def test_a_child_that_fails_is_reported_and_the_other_workloads_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """W3's child exits 3 (a stand-in for any crash); W6 runs in its own child regardless."""
    run = _load_bench_run()
    real_child_command = run.child_command

    def child_command(key: str, result_file: Path, args: Any) -> list[str]:
        if key == "W3":
            crash = "import sys; print('W3 child: about to crash', file=sys.stderr); sys.exit(3)"
            return [sys.executable, "-c", crash]
        command: list[str] = real_child_command(key, result_file, args)
        return command

    monkeypatch.setattr(run, "child_command", child_command)
    argv = ["--quick", "--only", "W3,W6", "--rounds", "1", "--postgres", "off"]
    code = run.main([*argv, "--out", str(tmp_path)])

    assert code == 0  # the report says what failed, as for a variant that fails
    captured = capsys.readouterr()
    assert "W3 child: about to crash" in captured.err  # streamed while it ran
    document = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    w3, w6 = document["workloads"]
    assert w3["key"] == "W3"
    assert "the child process exited with code 3" in w3["error"]
    assert "W3 child: about to crash" in w3["error"]  # the tail of its stderr
    assert w3["variants"] == []
    assert {t["status"] for t in w3["targets"]} == {"n/a"}  # its targets still listed
    assert w6["key"] == "W6"
    assert w6["error"] is None
    assert {v["status"] for v in w6["variants"]} == {"ok"}
    markdown = (tmp_path / "latest.md").read_text(encoding="utf-8")
    assert "**FAILED**: the child process exited with code 3" in markdown
    assert "W3 child: about to crash" in markdown


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "was killed by SIGKILL"),
        ("print('done, but no file')", "exited 0 but its result"),
    ],
)
def test_a_child_killed_or_silent_is_a_failed_workload(
    tmp_path: Path, script: str, expected: str
) -> None:
    if expected.startswith("was killed") and not hasattr(signal, "SIGKILL"):
        pytest.skip("no SIGKILL here")
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from harness.isolation import run_in_child
        from harness.runner import WorkloadResult
        from workloads.w6_overhead import Overhead
    finally:
        sys.path.remove(str(ROOT / "bench"))
    placeholder = WorkloadResult(Overhead(), [], [], 1, 0, 0.0)
    messages: list[str] = []
    result = run_in_child(
        [sys.executable, "-c", script], tmp_path / "W6.json", placeholder, messages.append
    )
    assert result.error is not None
    assert expected in result.error
    assert result.workload.key == "W6"
    assert messages
    assert messages[0].startswith("W6: FAILED: ")


def test_the_cpu_speed_comparison_reads_the_previous_result_or_says_there_is_none(
    tmp_path: Path,
) -> None:
    """A missing, foreign or damaged previous file never fails a run: it is not compared."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from harness import calibration
    finally:
        sys.path.remove(str(ROOT / "bench"))
    now = calibration.Calibration(median_us=20.0, low_us=19.0, high_us=22.0, rounds=3, tasks=10)
    path = tmp_path / "latest.json"
    assert calibration.previous_calibration(path) is None  # no file
    for damaged in ("{", '{"started_at": "x"}', '{"started_at": "x", "calibration": []}', "[]"):
        path.write_text(damaged, encoding="utf-8")
        assert calibration.previous_calibration(path) is None, damaged
    zero = {"started_at": "x", "calibration": {"start": {**now.to_json(), "median_us": 0}}}
    path.write_text(json.dumps(zero), encoding="utf-8")
    assert calibration.previous_calibration(path) is None  # no ratio to a zero
    assert calibration.compare(now, None).startswith("no earlier calibrated result")

    def against(median_us: float) -> str:
        before = {
            "started_at": "then",
            "calibration": {"start": {**now.to_json(), "median_us": median_us}},
        }
        path.write_text(json.dumps(before), encoding="utf-8")
        previous = calibration.previous_calibration(path)
        assert previous == ("then", calibration.Calibration(median_us, 19.0, 22.0, 3, 10))
        return calibration.compare(now, previous)

    assert against(10.0) == "2.00× slower than the previous result here (10.0 µs, run then)"
    assert against(40.0) == "2.00× faster than the previous result here (40.0 µs, run then)"
    assert against(19.5).startswith("about as fast as the previous result here (19.5 µs")
    other_sizes = {**now.to_json(), "tasks": 2000, "rounds": 7}
    path.write_text(json.dumps({"started_at": "then", "calibration": {"start": other_sizes}}))
    assert calibration.compare(now, calibration.previous_calibration(path)).endswith(
        "; measured with 10 tasks × 3 rounds against 2,000 × 7 (a --quick run and a full one)"
    )
    measured = calibration.measure(tasks=50, rounds=2)
    assert measured.rounds == 2
    assert measured.tasks == 50
    assert 0 < measured.low_us <= measured.median_us <= measured.high_us
    with pytest.raises(ValueError, match="must be positive"):
        calibration.measure(tasks=0)


def test_an_instants_steps_run_from_each_start_to_the_next_stop_after_it() -> None:
    """Under load another commit of the same second can land before the release: it is
    not the release's commit, so the step skips it instead of going negative."""
    anatomy = _load_bench_script("anatomy")
    events = [
        ("commit_in", 0.0001),  # a commit that is not the release's
        ("commit_out", 0.0002),
        ("release", 0.0003),
        ("commit_in", 0.0005),
        ("commit_out", 0.0007),
        ("launch", 0.0008),
        ("carrier", 0.0011),
        ("body", 0.0012),
    ]
    steps = anatomy.instant_steps(events)
    assert steps == pytest.approx(
        {
            "release -> commit begins": 0.2,
            "commit": 0.1,  # the first commit_in to the first commit_out after it
            "commit -> first launch": 0.6,
            "first launch -> its carrier runs": 0.3,
            "first carrier -> its body": 0.1,
        }
    )
    assert all(ms >= 0 for ms in steps.values())
    # A step whose stop never came after its start is left out, not made up.
    assert "first carrier -> its body" not in anatomy.instant_steps(
        [("carrier", 0.001), ("body", 0.0005)]
    )


def test_the_anatomy_script_measures_each_section_and_refuses_bad_flags(tmp_path: Path) -> None:
    """``bench/anatomy.py`` runs its three sections on tiny sizes and writes every figure;
    a bad ``--only`` or size is a usage error (exit 2) that names the allowed values."""
    out = tmp_path / "anatomy.json"
    done = _bench(
        "anatomy.py",
        *("--tasks", "40", "--rounds", "1", "--w3-seconds", "2", "--json", str(out)),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert figures["tasks"] == 40
    for kind in ("memory", "sqlite"):
        (row,) = figures["w1"][kind]
        assert row["tasks_per_s"] > 0
        assert row["user_us"] >= 0
        assert row["sys_us"] >= 0
        if sys.platform == "linux":
            assert row["voluntary"]["submitter"] >= 0
    if sys.platform == "linux":  # switches are read from /proc
        assert figures["w1"]["sqlite"][0]["voluntary"].get("carriers", 0) > 0  # hand-offs
    # A create and up to three saves a task (a run's end and the next start may share one).
    assert 3 <= figures["store"]["writes_per_task"] <= 4
    assert figures["store"]["wall_us"] > 0
    w3 = figures["w3"]
    assert w3["instants"] == 2  # two firings at each of the two instants
    assert set(w3["steps_ms"]) == {
        "release -> commit begins",
        "commit",
        "commit -> first launch",
        "first launch -> its carrier runs",
        "first carrier -> its body",
    }
    assert all(ms >= 0 for ms in w3["steps_ms"].values())
    assert 0 <= w3["lateness_p50_ms"] <= w3["lateness_max_ms"]
    assert "## w3: one SQLite instant" in done.stdout

    for flags, expected in (
        (["--only", "w1,w9"], "--only takes w1, store and w3"),
        (["--only", ","], "--only takes w1, store and w3"),
        (["--w3-seconds", "1"], "--w3-seconds at least 2"),
    ):
        refused = _bench("anatomy.py", *flags, timeout=60)
        assert refused.returncode == 2, flags
        assert expected in refused.stderr
        assert "Traceback" not in refused.stderr


@pytest.mark.timeout(240)
def test_the_ab_script_runs_both_sides_and_prints_the_gate_table(tmp_path: Path) -> None:
    """``bench/ab.py`` against HEAD: a worktree of it and this checkout, one round each."""
    result = _bench(
        "ab.py",
        *("--base", "HEAD", "--quick", "--only", "W2", "--rounds", "1"),
        *("--postgres", "off", "--out", str(tmp_path)),
        timeout=230,
    )
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert "| figure | base | head | ratio | gate | verdict |" in result.stdout
    assert "| W2 SQLite p50 | " in result.stdout
    assert ("**Gate holds**" in result.stdout) == (result.returncode == 0)
    assert (tmp_path / "ab.md").read_text(encoding="utf-8") == result.stdout
    record = json.loads((tmp_path / "ab.json").read_text(encoding="utf-8"))
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert record["base"]["commit"] == head
    assert [(r["round"], r["side"], r["returncode"]) for r in record["runs"]] == [
        (1, "base", 0),
        (1, "head", 0),
    ]
    assert record["runs"][0]["commit"] == head  # the base measured its own checkout
    for side in ("base", "head"):
        assert (tmp_path / side / "1" / "latest.json").is_file()
    assert not Path(record["worktree"]).exists()  # removed at the end
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert record["worktree"] not in listed


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--base", "no-such-revision-ab"), "'no-such-revision-ab' is not a commit"),
        (("--base", "HEAD", "--only", "W1,W9"), "unknown workload(s) ['W9']"),
        (("--base", "HEAD", "--rounds", "0"), "expected at least 1, got 0"),
        ((), "--base REV is required"),
    ],
)
def test_the_ab_script_refuses_a_bad_revision_or_workload(
    flags: tuple[str, ...], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHONGMING_BENCH_BASE", raising=False)
    result = _bench("ab.py", *flags, timeout=60)
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def _ab_document(
    w1_sqlite: float, w1_postgres: float | None, w2_p50: float, w4_p50: float
) -> dict[str, Any]:
    """A latest.json of W1, W2 and W4 as bench/run.py writes it, reduced to what ab reads."""

    def variant(key: str, metric: str, value: float | None) -> dict[str, Any]:
        if value is None:
            return {"key": key, "status": "not available yet", "reason": "PostgreSQL off"}
        return {"key": key, "status": "ok", "metrics": {metric: {"median": value}}}

    w4_target = {
        "target": "W4 thread p50 <= 6 ms",
        "status": "met",
        "definition": {
            "variant": "ours-thread",
            "metric": "p50_ms",
            "op": "<=",
            "threshold": 6.0,
            "baseline": None,
            "factor": 1.0,
        },
    }
    return {
        "calibration": {"start": {"median_us": 30.0}},
        "workloads": [
            {
                "key": "W1",
                "metrics": [{"name": "tasks_per_s", "unit": "tasks/s"}],
                "variants": [
                    variant("ours-sqlite", "tasks_per_s", w1_sqlite),
                    variant("ours-postgres", "tasks_per_s", w1_postgres),
                ],
            },
            {
                "key": "W2",
                "metrics": [{"name": "p50_ms", "unit": "ms"}],
                "variants": [variant("ours-sqlite", "p50_ms", w2_p50)],
            },
            {
                "key": "W4",
                "metrics": [{"name": "p50_ms", "unit": "ms"}],
                "variants": [variant("ours-thread", "p50_ms", w4_p50)],
                "targets": [w4_target],
            },
        ],
    }


def test_the_ab_gate_reads_medians_over_rounds_and_fails_what_it_did_not_measure() -> None:
    ab = _load_bench_script("ab")
    assert [ab.order(n) for n in (1, 2, 3)] == [
        ("base", "head"),
        ("head", "base"),
        ("base", "head"),
    ]
    keys = ["W1", "W2", "W4"]
    base = [_ab_document(1000, 500, 0.5, 5.0) for _ in range(3)]
    # One wild round on the head does not decide: the median of the three does.
    head = [
        _ab_document(800, 450, 0.625, 5.5),
        _ab_document(10, 1, 9.0, 60.0),
        _ab_document(900, 460, 0.6, 5.9),
    ]
    rows = {r.figure: r for r in ab.figures(keys, {"base": base, "head": head}, [])}
    assert rows["W1 SQLite throughput"].ratio == pytest.approx(0.8)
    assert rows["W1 SQLite throughput"].verdict == "pass"  # exactly 0.8x holds
    assert rows["W1 PostgreSQL throughput"].ratio == pytest.approx(0.9)
    assert rows["W2 SQLite p50"].ratio == pytest.approx(1.25)
    assert rows["W2 SQLite p50"].verdict == "pass"
    assert rows["W4 thread p50 <= 6 ms"].head_median == pytest.approx(5.9)
    assert rows["W4 thread p50 <= 6 ms"].verdict == "pass"
    assert not rows["CPU speed (bench/floor.py one_thread; lower is faster)"].gated
    assert ab.gate_holds(list(rows.values()))

    slower = [_ab_document(790, 450, 0.63, 6.1)]
    rows = {r.figure: r for r in ab.figures(keys, {"base": base[:1], "head": slower}, [])}
    assert rows["W1 SQLite throughput"].verdict == "FAIL"
    assert rows["W2 SQLite p50"].verdict == "FAIL"
    assert rows["W4 thread p50 <= 6 ms"].verdict == "FAIL"
    assert not ab.gate_holds(list(rows.values()))

    # PostgreSQL not measured on the head, W4 missing on the base: the first does not
    # pass; W4's targets are the head's own and still count.
    no_pg = [_ab_document(1000, None, 0.5, 5.0)]
    rows = {r.figure: r for r in ab.figures(keys, {"base": base[:1], "head": no_pg}, ["W4"])}
    assert rows["W1 PostgreSQL throughput"].verdict == "not measured"
    assert "PostgreSQL off" in rows["W1 PostgreSQL throughput"].note
    assert rows["W4 thread p50 <= 6 ms"].verdict == "pass"
    assert not ab.gate_holds(list(rows.values()))
    table = ab.markdown(list(rows.values()), {}, 1, ["W4"], [])
    assert "| W1 PostgreSQL throughput | 500.0 tasks/s | - | - | head/base >= 0.8 | " in table
    assert "| W4 thread p50 <= 6 ms | " in table
    assert "**Gate does not hold**: 0 of 4 gated figures failed, 1 not measured" in table


def test_the_ab_script_reads_workload_keys_from_source_without_importing_it() -> None:
    ab = _load_bench_script("ab")
    source = (ROOT / "bench" / "workloads" / "__init__.py").read_text(encoding="utf-8")
    assert ab.workload_keys(source) == ["W1", "W2", "W3", "W4", "W5", "W6"]
    assert ab.workload_keys('WORKLOADS = {"W1": A, "W2": B}') == ["W1", "W2"]
    assert ab.workload_keys("OTHER = {}") is None
    assert ab.workload_keys("def (") is None
