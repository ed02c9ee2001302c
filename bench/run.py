"""Run the benchmark suite: ``python bench/run.py [--only W1,W3] [--quick]``.

Every workload measures chongming-task and its baselines in the same run, interleaved
round by round, and writes ``bench/results/latest.json`` (machine readable, with
versions, machine facts and the durability settings used) and ``latest.md`` (the
table quoted in docs/benchmarks.md). Targets are printed as met / missed; nothing
here asserts a timing, so a slow machine produces a truthful report, not a failure.

Each workload runs in a fresh child process of this interpreter (``--child KEY``,
hidden), so that no workload measures in a heap, GC state and allocator shaped by the
ones before it; ``--in-process`` runs them all here, one after another, as before.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from harness import calibration, env, isolation, pg, report  # noqa: E402
from harness.core import Settings, Workload  # noqa: E402
from harness.runner import WorkloadResult, run_workload, stderr_log  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

#: Sizes of the CPU-speed calibration measured before and after the workloads.
CALIBRATION_FULL = {"tasks": 2000, "rounds": 7}
CALIBRATION_QUICK = {"tasks": 500, "rounds": 3}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated workload keys, e.g. W1,W3")
    parser.add_argument("--quick", action="store_true", help="smoke run, well under 60 s")
    parser.add_argument("--rounds", type=int, help="measured rounds per workload (default 5)")
    parser.add_argument(
        "--postgres",
        help=f"PostgreSQL DSN (default ${pg.ENV} or {pg.DEFAULT_DSN}); 'off' to skip",
    )
    parser.add_argument(
        "--out", type=Path, default=BENCH / "results", help="directory for latest.json/md"
    )
    parser.add_argument(
        "--update-docs",
        action="store_true",
        help="also copy the table into docs/benchmarks.md (between its latest markers)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run every workload in this process instead of a fresh one each "
        "(for debugging and profiling; figures then depend on the workloads before)",
    )
    parser.add_argument(
        "--affinity",
        type=parse_cpus,
        metavar="CPUS",
        help="pin the run (children included) to these CPUs, e.g. 0 or 0,1; default: "
        "not pinned (see docs/benchmarks.md: where the OS places our threads moves W1/W2)",
    )
    # The parent's call to a child: run one workload, write its result, print nothing.
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def parse_cpus(text: str) -> frozenset[int]:
    """``--affinity``'s value: CPU numbers separated by commas, each one this machine has."""
    try:
        cpus = frozenset(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of CPU numbers; write e.g. 0 or 0,1"
        ) from None
    available = _available_cpus()
    if available is None:
        raise argparse.ArgumentTypeError("CPU affinity is not supported on this platform")
    unknown = sorted(cpus - available)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"CPU(s) {unknown} not available here; choose among {sorted(available)}"
        )
    return cpus


def _available_cpus() -> frozenset[int] | None:
    getter = getattr(os, "sched_getaffinity", None)
    return None if getter is None else frozenset(getter(0))


def make_settings(args: argparse.Namespace) -> Settings:
    """Settings from the options (``--quick`` shrinks every size)."""
    dsn = None if args.postgres == "off" else (args.postgres or pg.base_dsn())
    settings = Settings.quick_settings(dsn) if args.quick else Settings(postgres_dsn=dsn)
    if args.rounds:
        settings = dataclasses.replace(settings, rounds=args.rounds)
    return settings


ISOLATED = "process per workload"
IN_PROCESS = "in-process"


def child_command(key: str, result_file: Path, args: argparse.Namespace) -> list[str]:
    """The command line of the child that runs workload ``key`` alone.

    The child gets the options that make the settings (not the resolved Settings), so
    it derives them exactly as this process did; the PostgreSQL DSN is passed only if
    it was given on our command line, so the child reads the same environment instead
    of a password showing up in a new process listing.
    """
    command = [sys.executable, str(Path(__file__).resolve()), "--child", key]
    command += ["--result-file", str(result_file)]
    if args.quick:
        command.append("--quick")
    if args.rounds:
        command += ["--rounds", str(args.rounds)]
    if args.postgres is not None:
        command += ["--postgres", args.postgres]
    return command


def run_child(args: argparse.Namespace, settings: Settings) -> int:
    """In a child: run the one workload ``args.child`` and write its result file.

    Exits 0 once the file is written; anything that escapes ``run_workload`` ends the
    process with a traceback and a non-zero code, which the parent reports.
    """
    if args.child not in WORKLOADS or args.result_file is None:
        print(f"--child needs a workload key and --result-file ({args.child!r})", file=sys.stderr)
        return 2
    result = run_workload(WORKLOADS[args.child](), settings, stderr_log)
    isolation.write_result(result, args.result_file)
    return 0


def run_isolated(
    key: str, args: argparse.Namespace, settings: Settings, scratch: Path
) -> WorkloadResult:
    """Run workload ``key`` in a fresh child process; a failed child is a failed workload."""
    workload: Workload = WORKLOADS[key]()
    on_failure = WorkloadResult(
        workload=workload,
        variants=[],
        comparisons=[],
        rounds=workload.rounds(settings),
        warmup=workload.warmup(settings),
        seconds=0.0,
        quick=settings.quick,
    )
    result_file = scratch / f"{key}.json"
    command = child_command(key, result_file, args)
    return isolation.run_in_child(command, result_file, on_failure, stderr_log)


def main(argv: list[str] | None = None) -> int:
    """Run the selected workloads and write the results; exit 0 unless misused.

    A workload that fails (a variant raising, or its whole child process crashing) is
    reported as FAILED in latest.md / latest.json and the others still run: the report,
    not the exit code, says what went wrong, as for a slow machine's missed targets.
    """
    args = parse_args(argv)
    settings = make_settings(args)
    if args.affinity is not None:
        os.sched_setaffinity(0, args.affinity)  # children inherit it
    if args.child is not None:
        return run_child(args, settings)
    selected = [w.strip().upper() for w in args.only.split(",")] if args.only else None
    unknown = [k for k in selected or [] if k not in WORKLOADS]
    if unknown:
        print(f"unknown workload(s) {unknown}; choose from {sorted(WORKLOADS)}", file=sys.stderr)
        return 2
    load_before = env.machine()["load_average"]
    previous = calibration.previous_calibration(args.out / "latest.json")
    sizes = CALIBRATION_QUICK if settings.quick else CALIBRATION_FULL
    speed_before = calibration.measure(**sizes)
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    results: list[WorkloadResult] = []
    with tempfile.TemporaryDirectory(prefix="chongming-bench-") as scratch:
        for key, factory in WORKLOADS.items():
            if selected is None or key in selected:
                stderr_log(f"== {key}")
                if args.in_process:
                    results.append(run_workload(factory(), settings, stderr_log))
                else:
                    results.append(run_isolated(key, args, settings, Path(scratch)))
    seconds = time.perf_counter() - t0
    speed_after = calibration.measure(**sizes)

    record = {
        "schema": 1,
        "started_at": started.isoformat(),
        "seconds": round(seconds, 1),
        "command": ["python", "bench/run.py", *(argv if argv is not None else sys.argv[1:])],
        "quick": settings.quick,
        "isolation": IN_PROCESS if args.in_process else ISOLATED,
        "affinity": None if args.affinity is None else sorted(args.affinity),
        "settings": {k: v for k, v in settings.__dict__.items() if k != "postgres_dsn"},
        "versions": env.versions(settings.postgres_dsn),
        "machine": {**env.machine(), "load_average_at_start": load_before},
        "calibration": {
            "unit": calibration.UNIT,
            "start": speed_before.to_json(),
            "end": speed_after.to_json(),
            "compared_with": None
            if previous is None
            else {"started_at": previous[0], **previous[1].to_json()},
            "comparison": calibration.compare(speed_before, previous),
        },
        "postgres": env.postgres_facts(settings.postgres_dsn),
        "workloads": [report.workload_json(r) for r in results],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    markdown = report.document(_header(record), results)
    (args.out / "latest.md").write_text(markdown)
    print(markdown)
    if args.update_docs:
        update_docs(markdown)
    stderr_log(f"wrote {args.out / 'latest.json'} and latest.md in {seconds:.0f} s")
    return 0


DOCS = BENCH.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- latest:begin -->", "<!-- latest:end -->"


def update_docs(markdown: str) -> None:
    """Replace the table between the markers of docs/benchmarks.md with ``markdown``."""
    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        stderr_log(f"{DOCS} has no {BEGIN} / {END} markers; not updated")
        return
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = markdown.replace("# Benchmark results", "#### Benchmark results", 1)
    body = body.replace("\n## All targets", "\n#### All targets")
    body = body.replace("\n### W", "\n#### W")
    DOCS.write_text(f"{head}{BEGIN}\n{body}{END}{tail}")
    stderr_log(f"updated {DOCS}")


def _header(record: dict[str, object]) -> dict[str, object]:
    versions = record["versions"]
    machine = record["machine"]
    assert isinstance(versions, dict)
    assert isinstance(machine, dict)
    commit = str(versions.get("git_commit") or "?")[:10]
    dirty = " (dirty tree)" if versions.get("git_dirty") else ""
    return {
        "run": f"{record['started_at']}, {record['seconds']} s"
        + (", --quick (smoke sizes)" if record["quick"] else ""),
        "isolation": _isolation_note(str(record["isolation"])),
        "CPU affinity": "not pinned (the OS places every thread)"
        if record["affinity"] is None
        else f"pinned to CPU {record['affinity']} (--affinity)",
        "chongming-task": f"{versions.get('chongming_task')} @ {commit}{dirty}",
        "machine": f"{machine.get('cpu_model')}, {machine.get('usable_cores')} cores, "
        f"{machine.get('memory_gb')} GB",
        "load average (1/5/15 min)": f"{machine.get('load_average_at_start')} at start, "
        f"{machine.get('load_average')} at end",
        "CPU speed": _speed_note(record["calibration"]),
        "python / sqlite / postgres": f"{versions.get('python')} / "
        f"{versions.get('sqlite_library')} / {versions.get('postgresql_server')}",
        "peers": f"huey {versions.get('huey')}, apscheduler {versions.get('apscheduler')}",
    }


def _speed_note(recorded: object) -> str:
    """The header line of the calibration: this run's CPU speed, and against the last run."""
    assert isinstance(recorded, dict)
    start = calibration.Calibration.from_json(recorded["start"])
    end = calibration.Calibration.from_json(recorded["end"])
    return (
        f"{start.describe()} at start, {end.median_us:.1f} at end, for W1's bare semantics "
        f"on one thread (bench/floor.py; lower is faster); {recorded['comparison']}"
    )


def _isolation_note(isolation: str) -> str:
    """The header line saying how workloads were kept apart (figures depend on it)."""
    if isolation == ISOLATED:
        return "each workload in a fresh Python process (ours and baselines interleaved in it)"
    return "all workloads in one Python process, one after another (--in-process)"


if __name__ == "__main__":
    sys.exit(main())
