"""Run the benchmark suite: ``python bench/run.py [--only W1,W3] [--quick]``.

Every workload measures chongming-task and its baselines in the same run, interleaved
round by round, and writes ``bench/results/latest.json`` (machine readable, with
versions, machine facts and the durability settings used) and ``latest.md`` (the
table quoted in docs/benchmarks.md). Targets are printed as met / missed; nothing
here asserts a timing, so a slow machine produces a truthful report, not a failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from harness import env, pg, report  # noqa: E402
from harness.core import Settings  # noqa: E402
from harness.runner import WorkloadResult, run_workload, stderr_log  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


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
    return parser.parse_args(argv)


def make_settings(args: argparse.Namespace) -> Settings:
    """Settings from the options (``--quick`` shrinks every size)."""
    dsn = None if args.postgres == "off" else (args.postgres or pg.base_dsn())
    settings = Settings.quick_settings(dsn) if args.quick else Settings(postgres_dsn=dsn)
    if args.rounds:
        settings = dataclasses.replace(settings, rounds=args.rounds)
    return settings


def main(argv: list[str] | None = None) -> int:
    """Run the selected workloads and write the results; exit 0 unless misused."""
    args = parse_args(argv)
    settings = make_settings(args)
    selected = [w.strip().upper() for w in args.only.split(",")] if args.only else None
    unknown = [k for k in selected or [] if k not in WORKLOADS]
    if unknown:
        print(f"unknown workload(s) {unknown}; choose from {sorted(WORKLOADS)}", file=sys.stderr)
        return 2
    load_before = env.machine()["load_average"]
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    results: list[WorkloadResult] = []
    for key, factory in WORKLOADS.items():
        if selected is None or key in selected:
            stderr_log(f"== {key}")
            results.append(run_workload(factory(), settings, stderr_log))
    seconds = time.perf_counter() - t0

    record = {
        "schema": 1,
        "started_at": started.isoformat(),
        "seconds": round(seconds, 1),
        "command": ["python", "bench/run.py", *(argv if argv is not None else sys.argv[1:])],
        "quick": settings.quick,
        "settings": {k: v for k, v in settings.__dict__.items() if k != "postgres_dsn"},
        "versions": env.versions(settings.postgres_dsn),
        "machine": {**env.machine(), "load_average_at_start": load_before},
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
        "chongming-task": f"{versions.get('chongming_task')} @ {commit}{dirty}",
        "machine": f"{machine.get('cpu_model')}, {machine.get('usable_cores')} cores, "
        f"{machine.get('memory_gb')} GB",
        "load average (1/5/15 min)": f"{machine.get('load_average_at_start')} at start, "
        f"{machine.get('load_average')} at end",
        "python / sqlite / postgres": f"{versions.get('python')} / "
        f"{versions.get('sqlite_library')} / {versions.get('postgresql_server')}",
        "peers": f"huey {versions.get('huey')}, apscheduler {versions.get('apscheduler')}",
    }


if __name__ == "__main__":
    sys.exit(main())
