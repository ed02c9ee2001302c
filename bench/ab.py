"""A/B the benchmark figures of this checkout against a base revision, in one run.

``python bench/ab.py --base REV [--only W1,W2,W4,W5] [--rounds 3] [--quick]
[--postgres DSN|off] [--out bench/results/ab] [--keep-worktree]``

Why one run: on a shared VM one build reads up to twice as slow from one hour to the
next (docs/benchmarks.md, "The machine's speed"), so a figure of today's checkout set
against one committed last week says as much about the hour as about the code. The
issue's A/B gate is therefore measured here in one run, rounds interleaved: REV is
checked out (detached) into a temporary ``git worktree`` outside the repository, and
every round runs each side's *own* ``bench/run.py --rounds 1`` in a fresh process,
with that side's ``src`` first on PYTHONPATH (each side measures its own library with
its own harness; both use this interpreter). The order alternates, base then head,
head then base, ..., so neither side always runs first after a pause or last after a
burst, and machine drift hits both alike.

Each figure is the median over the rounds of each round's suite median. The gate:

- W1 SQLite and W1 PostgreSQL throughput: head / base at least 0.8;
- W2 SQLite p50: head / base at most 1.25;
- W4 and W5: every target of the suite met by the head (re-checked on the medians
  over the rounds, with the target's definition from the head's latest.json).

A gated figure that was not measured (PostgreSQL off or unreachable, a workload the
base does not have, a failed run) does not pass: the gate holds only when every gated
figure of the selected workloads was measured and passed. The table (figure, base,
head, ratio, gate, verdict) is printed and written to OUT/ab.md, everything to
OUT/ab.json, and every side's round to OUT/<side>/<round>/latest.{json,md}.

Exit status: 0 the gate holds, 1 it does not (or is incomplete), 2 a usage error
(bad revision, not a git repository, unknown workload key).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
#: Where --base comes from when it is not given.
BASE_ENV = "CHONGMING_BENCH_BASE"
DEFAULT_ONLY = "W1,W2,W4,W5"
DEFAULT_OUT = BENCH / "results" / "ab"
SIDES = ("base", "head")
WORKLOADS_FILE = "bench/workloads/__init__.py"


@dataclass(frozen=True)
class RatioGate:
    """A figure of both sides whose ratio head / base must satisfy ``op factor``."""

    figure: str
    workload: str
    variant: str
    metric: str
    op: Literal["<=", ">="]
    factor: float


RATIO_GATES = (
    RatioGate("W1 SQLite throughput", "W1", "ours-sqlite", "tasks_per_s", ">=", 0.8),
    RatioGate("W1 PostgreSQL throughput", "W1", "ours-postgres", "tasks_per_s", ">=", 0.8),
    RatioGate("W2 SQLite p50", "W2", "ours-sqlite", "p50_ms", "<=", 1.25),
)
#: Workloads whose own targets, met by the head, are the gate.
TARGET_GATES = ("W4", "W5")

PASS, FAIL, NOT_MEASURED, INFO = "pass", "FAIL", "not measured", "info"


class UsageError(Exception):
    """A mistake on the command line or in where the script runs: exit 2, no traceback."""


@dataclass
class Row:
    """One line of the table: a figure of both sides and its verdict."""

    figure: str
    workload: str
    unit: str
    base: list[float]
    head: list[float]
    gate: str
    verdict: str
    note: str = ""
    ok: bool = False
    gated: bool = True

    @property
    def base_median(self) -> float | None:
        return statistics.median(self.base) if self.base else None

    @property
    def head_median(self) -> float | None:
        return statistics.median(self.head) if self.head else None

    @property
    def ratio(self) -> float | None:
        base, head = self.base_median, self.head_median
        return None if base is None or head is None or base == 0 else head / base

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(base_median=self.base_median, head_median=self.head_median)
        data["ratio"] = self.ratio
        return data


@dataclass
class SideRun:
    """One side's ``bench/run.py`` of one round."""

    round: int
    side: str
    out: Path
    returncode: int | None = None
    seconds: float = 0.0
    skipped: str | None = None
    document: dict[str, Any] | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "side": self.side,
            "out": str(self.out),
            "returncode": self.returncode,
            "seconds": round(self.seconds, 1),
            "skipped": self.skipped,
            "commit": None if self.document is None else _commit_of(self.document),
        }


# -- command line ------------------------------------------------------------------


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options; argparse exits 2 on a malformed one."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--base",
        default=os.environ.get(BASE_ENV) or None,
        help=f"the revision to compare with (a commit, tag or branch; default ${BASE_ENV})",
    )
    parser.add_argument(
        "--only", default=DEFAULT_ONLY, help=f"comma-separated workload keys ({DEFAULT_ONLY})"
    )
    parser.add_argument(
        "--rounds", type=_positive, default=3, help="A/B rounds, one suite round per side each"
    )
    parser.add_argument("--quick", action="store_true", help="smoke sizes (figures indicative)")
    parser.add_argument("--postgres", help="passed to both sides' bench/run.py (DSN or 'off')")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"results directory ({DEFAULT_OUT})"
    )
    parser.add_argument(
        "--keep-worktree", action="store_true", help="leave the base's worktree in place"
    )
    args = parser.parse_args(argv)
    if not args.base:
        parser.error(f"--base REV is required (or set ${BASE_ENV})")
    named = (key.strip().upper() for key in args.only.split(","))
    args.keys = list(dict.fromkeys(key for key in named if key))
    if not args.keys:
        parser.error("--only names no workload; write e.g. W1,W2")
    args.out = args.out.resolve()
    return args


# -- git -----------------------------------------------------------------------------


def _git(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
        )
    except OSError as exc:
        raise UsageError(f"cannot run git ({exc})") from None


def resolve_base(rev: str) -> str:
    """The commit ``rev`` names in this checkout's repository, or a UsageError."""
    if _git("rev-parse", "--show-toplevel").returncode != 0:
        raise UsageError(f"{ROOT} is not in a git repository; bench/ab.py compares commits")
    done = _git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if done.returncode != 0:
        raise UsageError(f"{rev!r} is not a commit of the repository at {ROOT}")
    return done.stdout.strip()


def head_commit() -> tuple[str | None, bool]:
    """This checkout's commit and whether it has uncommitted changes (they are measured)."""
    commit = _git("rev-parse", "HEAD").stdout.strip() or None
    status = _git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return commit, bool(status)


def workload_keys(source: str) -> list[str] | None:
    """The keys of ``WORKLOADS`` in the text of a bench/workloads/__init__.py, if found.

    Read from the source, not imported: the base's modules import its library.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    target: ast.expr
    value: ast.expr | None
    for node in tree.body:
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "WORKLOADS":
            if not isinstance(value, ast.Dict):
                return None
            return [
                k.value
                for k in value.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
    return None


def base_workload_keys(commit: str) -> list[str] | None:
    """The base's workload keys (None: unknown, its run.py will say); UsageError if no suite."""
    if _git("cat-file", "-e", f"{commit}:bench/run.py").returncode != 0:
        raise UsageError(f"{commit[:10]} has no bench/run.py to measure it with")
    shown = _git("show", f"{commit}:{WORKLOADS_FILE}")
    return workload_keys(shown.stdout) if shown.returncode == 0 else None


def add_worktree(commit: str) -> Path:
    """A detached worktree of ``commit`` in a new temporary directory outside the repo."""
    path = Path(tempfile.mkdtemp(prefix="chongming-ab-")) / "base"
    done = _git("worktree", "add", "--detach", str(path), commit)
    if done.returncode != 0:
        shutil.rmtree(path.parent, ignore_errors=True)
        raise UsageError(f"git worktree add failed: {done.stderr.strip()}")
    return path


def remove_worktree(path: Path) -> None:
    """Undo ``add_worktree``: the worktree, its directory and git's record of it."""
    done = _git("worktree", "remove", "--force", str(path))
    if done.returncode != 0:
        log(f"git worktree remove {path} failed: {done.stderr.strip()}")
    shutil.rmtree(path.parent, ignore_errors=True)
    _git("worktree", "prune")


# -- running -------------------------------------------------------------------------


def log(message: str) -> None:
    """Progress goes to stderr, as bench/run.py's does; stdout is the table."""
    print(f"ab: {message}", file=sys.stderr, flush=True)


def order(round_no: int) -> tuple[str, ...]:
    """Sides in the order round ``round_no`` (from 1) runs them: base head, head base, ..."""
    return SIDES if round_no % 2 == 1 else SIDES[::-1]


def side_command(root: Path, keys: Sequence[str], out: Path, args: argparse.Namespace) -> list[str]:
    """One suite round of ``keys`` by the ``bench/run.py`` of the tree at ``root``."""
    command = [sys.executable, str(root / "bench" / "run.py"), "--only", ",".join(keys)]
    command += ["--rounds", "1", "--out", str(out)]
    if args.quick:
        command.append("--quick")
    if args.postgres is not None:
        command += ["--postgres", args.postgres]
    return command


def side_env(root: Path) -> dict[str, str]:
    """Our environment with ``root/src`` first on PYTHONPATH: that side's library wins."""
    env = dict(os.environ)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(root / "src") + (os.pathsep + rest if rest else "")
    return env


def run_side(run: SideRun, root: Path, keys: Sequence[str], args: argparse.Namespace) -> None:
    """Run one side's round, filling ``run``; its progress streams to our stderr."""
    shutil.rmtree(run.out, ignore_errors=True)
    run.out.mkdir(parents=True)
    t0 = time.perf_counter()
    done = subprocess.run(
        side_command(root, keys, run.out, args),
        cwd=root,
        env=side_env(root),
        stdout=subprocess.DEVNULL,  # the same table is in its latest.md
        check=False,
    )
    run.seconds = time.perf_counter() - t0
    run.returncode = done.returncode
    run.document = read_document(run.out / "latest.json")
    if done.returncode != 0 or run.document is None:
        log(f"round {run.round}, {run.side}: bench/run.py exited {done.returncode}")


def read_document(path: Path) -> dict[str, Any] | None:
    """A latest.json, or None when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def clear_stale_rounds(out: Path) -> None:
    """Remove the round directories an earlier A/B left in ``out``: none outlive their run."""
    for side in SIDES:
        folder = out / side
        if folder.is_dir():
            for child in folder.iterdir():
                if child.is_dir() and child.name.isdigit():
                    shutil.rmtree(child)


# -- reading the figures -------------------------------------------------------------


def _workload(document: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    if document is None:
        return None
    for workload in document.get("workloads", []):
        if workload.get("key") == key:
            return workload  # type: ignore[no-any-return]
    return None


def value_of(
    document: Mapping[str, Any] | None, workload_key: str, variant_key: str, metric: str
) -> float | None:
    """One round's median of ``metric`` for ``variant_key``, if that round measured it."""
    workload = _workload(document, workload_key)
    if workload is None or workload.get("error"):
        return None
    for variant in workload.get("variants", []):
        if variant.get("key") == variant_key and variant.get("status") == "ok":
            summary = variant.get("metrics", {}).get(metric)
            return None if summary is None else float(summary["median"])
    return None


def unit_of(documents: Sequence[Mapping[str, Any] | None], workload_key: str, metric: str) -> str:
    """The unit the suite gives ``metric`` (its name when no document says)."""
    for document in documents:
        workload = _workload(document, workload_key)
        for entry in [] if workload is None else workload.get("metrics", []):
            if entry.get("name") == metric:
                return str(entry.get("unit") or metric)
    return metric


def values(
    documents: Sequence[Mapping[str, Any] | None], workload: str, variant: str, metric: str
) -> list[float]:
    """The rounds' medians of one figure (rounds that did not measure it left out)."""
    found = (value_of(d, workload, variant, metric) for d in documents)
    return [v for v in found if v is not None]


def why_missing(
    documents: Sequence[Mapping[str, Any] | None], workload_key: str, variant: str
) -> str:
    """Why the rounds gave no value of ``variant``, in the suite's words, for the table."""
    for document in documents:
        workload = _workload(document, workload_key)
        if workload is None:
            continue
        if workload.get("error"):
            return f"{workload_key} FAILED: {str(workload['error']).splitlines()[0]}"
        for entry in workload.get("variants", []):
            if entry.get("key") == variant:
                reason = entry.get("reason")
                return f"{variant}: {entry.get('status')}" + (f": {reason}" if reason else "")
        return f"{variant} not in its {workload_key}"
    return f"no round reported {workload_key}"


def _holds(value: float, op: str, bound: float) -> bool:
    return value >= bound if op == ">=" else value <= bound


def ratio_row(
    gate: RatioGate, docs: Mapping[str, Sequence[Mapping[str, Any] | None]], missing: Sequence[str]
) -> Row:
    """The row of a head / base ratio gate."""
    unit = unit_of([*docs["head"], *docs["base"]], gate.workload, gate.metric)
    row = Row(
        figure=gate.figure,
        workload=gate.workload,
        unit=unit,
        base=values(docs["base"], gate.workload, gate.variant, gate.metric),
        head=values(docs["head"], gate.workload, gate.variant, gate.metric),
        gate=f"head/base {gate.op} {gate.factor:g}",
        verdict=NOT_MEASURED,
    )
    ratio = row.ratio
    if ratio is None:
        if gate.workload in missing:
            row.note = f"the base has no {gate.workload}"
        else:
            row.note = "; ".join(
                f"{side}: {why_missing(docs[side], gate.workload, gate.variant)}"
                for side in SIDES
                if not getattr(row, side)
            )
        return row
    row.ok = _holds(ratio, gate.op, gate.factor)
    row.verdict = PASS if row.ok else FAIL
    return row


def target_rows(key: str, docs: Mapping[str, Sequence[Mapping[str, Any] | None]]) -> list[Row]:
    """One row per target of workload ``key``, checked on the head's medians of all rounds.

    The targets and their definitions are the head's (from its latest.json); the base's
    figure of the same variant and metric is shown beside it, for the ratio only.
    """
    targets: list[Mapping[str, Any]] = []
    for document in docs["head"]:
        workload = _workload(document, key)
        if workload is not None and workload.get("targets"):
            targets = workload["targets"]
            break
    if not targets:
        return [
            Row(
                figure=f"{key} targets",
                workload=key,
                unit="",
                base=[],
                head=[],
                gate="met on head",
                verdict=NOT_MEASURED,
                note=f"no head round reported {key}",
            )
        ]
    return [_target_row(key, target, docs) for target in targets]


def _target_row(
    key: str, target: Mapping[str, Any], docs: Mapping[str, Sequence[Mapping[str, Any] | None]]
) -> Row:
    text = str(target.get("target"))
    definition = target.get("definition")
    if not isinstance(definition, Mapping):
        # A head whose report does not define its targets: the rounds' own verdicts decide.
        statuses = [_status_of(d, key, text) for d in docs["head"]]
        met = sum(1 for s in statuses if s.startswith("met"))
        judged = sum(1 for s in statuses if s.startswith(("met", "missed")))
        row = Row(text, key, "", [], [], f"{target.get('wanted')} on head", NOT_MEASURED)
        if judged:
            row.ok = met * 2 > judged
            row.verdict = PASS if row.ok else FAIL
            row.note = f"met in {met} of {judged} rounds"
        return row
    variant, metric, op = definition["variant"], definition["metric"], definition["op"]
    unit = unit_of([*docs["head"], *docs["base"]], key, metric)
    row = Row(
        figure=text,
        workload=key,
        unit=unit,
        base=values(docs["base"], key, variant, metric),
        head=values(docs["head"], key, variant, metric),
        gate="",
        verdict=NOT_MEASURED,
    )
    head = row.head_median
    baseline = definition.get("baseline")
    if baseline is not None:
        factor = float(definition.get("factor", 1.0))
        row.gate = f"head {op} {factor:g}x {baseline}"
        peer = values(docs["head"], key, str(baseline), metric)
        if head is None or not peer or statistics.median(peer) == 0:
            lacking = variant if head is None else str(baseline)
            row.note = f"head: {why_missing(docs['head'], key, lacking)}"
            return row
        measured = head / statistics.median(peer)
        row.ok = _holds(measured, op, factor)
        row.note = f"{measured:.2f}x {baseline} on head"
    else:
        threshold = float(definition["threshold"])
        row.gate = f"head {op} {fmt(threshold)} {unit}"
        if head is None:
            row.note = f"head: {why_missing(docs['head'], key, variant)}"
            return row
        row.ok = _holds(head, op, threshold)
    row.verdict = PASS if row.ok else FAIL
    return row


def _status_of(document: Mapping[str, Any] | None, key: str, text: str) -> str:
    """The status one round's report gave the target named ``text`` ('' if none)."""
    workload = _workload(document, key)
    for target in [] if workload is None else workload.get("targets", []):
        if target.get("target") == text:
            return str(target.get("status", ""))
    return ""


def calibration_row(docs: Mapping[str, Sequence[Mapping[str, Any] | None]]) -> Row:
    """The CPU speed each side's runs measured (not gated: it says how even the rounds were)."""

    def speeds(side: str) -> list[float]:
        out = []
        for document in docs[side]:
            try:
                out.append(float(document["calibration"]["start"]["median_us"]))  # type: ignore[index]
            except (KeyError, TypeError, ValueError):
                continue
        return out

    return Row(
        figure="CPU speed (bench/floor.py one_thread; lower is faster)",
        workload="",
        unit="µs/task",
        base=speeds("base"),
        head=speeds("head"),
        gate="-",
        verdict=INFO,
        gated=False,
    )


def figures(
    keys: Sequence[str],
    docs: Mapping[str, Sequence[Mapping[str, Any] | None]],
    missing: Sequence[str],
) -> list[Row]:
    """Every row for the selected workloads: ratio gates, target gates, then CPU speed."""
    rows = [ratio_row(g, docs, missing) for g in RATIO_GATES if g.workload in keys]
    for key in TARGET_GATES:
        if key in keys:
            rows += target_rows(key, docs)
    rows.append(calibration_row(docs))
    return rows


# -- the report ----------------------------------------------------------------------


def fmt(value: float | None) -> str:
    """A figure with about three significant digits, as the suite's tables show them."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _cell(row: Row, side: str, rounds: int, missing: Sequence[str]) -> str:
    vals: list[float] = getattr(row, side)
    if not vals:
        return "missing on base" if side == "base" and row.workload in missing else "-"
    text = f"{fmt(statistics.median(vals))} {row.unit}".strip()
    return text if len(vals) == rounds else f"{text} ({len(vals)} of {rounds} rounds)"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_escape(c) for c in cells) + " |"


def gate_holds(rows: Sequence[Row]) -> bool:
    """True when every gated row was measured and passed."""
    gated = [r for r in rows if r.gated]
    return bool(gated) and all(r.ok for r in gated)


def markdown(
    rows: Sequence[Row],
    header: Mapping[str, str],
    rounds: int,
    missing: Sequence[str],
    notes: Sequence[str],
) -> str:
    """ab.md: the context, the table, the verdict."""
    lines = ["# A/B: this checkout against a base revision", ""]
    if header:
        lines += [*(f"- **{key}**: {value}" for key, value in header.items()), ""]
    lines.append(_line(["figure", "base", "head", "ratio", "gate", "verdict"]))
    lines.append(_line(["---"] * 6))
    for row in rows:
        ratio = row.ratio
        verdict = f"**{row.verdict}**" if row.verdict == FAIL else row.verdict
        if row.note:
            verdict += f" ({row.note})"
        lines.append(
            _line(
                [
                    row.figure,
                    _cell(row, "base", rounds, missing),
                    _cell(row, "head", rounds, missing),
                    "-" if ratio is None else f"{ratio:.2f}x",
                    row.gate,
                    verdict,
                ]
            )
        )
    gated = [r for r in rows if r.gated]
    failed = sum(1 for r in gated if r.verdict == FAIL)
    unmeasured = sum(1 for r in gated if r.verdict == NOT_MEASURED)
    lines.append("")
    if gate_holds(rows):
        lines.append(f"**Gate holds**: all {len(gated)} gated figures measured and passed.")
    elif not gated:
        lines.append("**Gate not checked**: the selected workloads have no gated figure.")
    else:
        lines.append(
            f"**Gate does not hold**: {failed} of {len(gated)} gated figures failed, "
            f"{unmeasured} not measured (a figure not measured does not pass)."
        )
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def _commit_of(document: Mapping[str, Any]) -> str | None:
    versions = document.get("versions")
    return versions.get("git_commit") if isinstance(versions, dict) else None


# -- main ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B and report it; see the module docstring for the exit status."""
    args = parse_args(argv)
    try:
        return _main(args)
    except UsageError as exc:
        print(f"ab.py: error: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    commit = resolve_base(args.base)
    head_keys = workload_keys((ROOT / WORKLOADS_FILE).read_text(encoding="utf-8"))
    if head_keys is not None:
        unknown = [k for k in args.keys if k not in head_keys]
        if unknown:
            raise UsageError(f"unknown workload(s) {unknown}; choose from {head_keys}")
    base_keys = base_workload_keys(commit)
    missing = [] if base_keys is None else [k for k in args.keys if k not in base_keys]
    base_run_keys = [k for k in args.keys if k not in missing]
    if missing:
        log(f"the base {commit[:10]} has no {', '.join(missing)}: reported as missing")
    head, dirty = head_commit()

    clear_stale_rounds(args.out)
    runs: list[SideRun] = []
    worktree = add_worktree(commit)
    log(f"base {args.base} = {commit[:10]} checked out in {worktree}")
    try:
        roots = {"base": worktree, "head": ROOT}
        for round_no in range(1, args.rounds + 1):
            for side in order(round_no):
                run = SideRun(round_no, side, args.out / side / str(round_no))
                runs.append(run)
                keys = base_run_keys if side == "base" else args.keys
                if not keys:
                    run.skipped = "no selected workload exists on the base"
                    continue
                log(f"round {round_no}/{args.rounds}: {side} ({', '.join(keys)})")
                run_side(run, roots[side], keys, args)
    finally:
        if args.keep_worktree:
            log(f"kept the base's worktree: {worktree} (git worktree remove --force it)")
        else:
            remove_worktree(worktree)

    docs = {
        side: [r.document for r in sorted(runs, key=lambda r: r.round) if r.side == side]
        for side in SIDES
    }
    rows = figures(args.keys, docs, missing)
    notes = [
        f"round {r.round}, {r.side}: bench/run.py exited {r.returncode}"
        + ("" if r.document else ", no latest.json")
        for r in runs
        if r.skipped is None and (r.returncode != 0 or r.document is None)
    ]
    if missing:
        notes.append(f"the base has no workload {', '.join(missing)}")
    ungated = [
        k for k in args.keys if k not in TARGET_GATES + tuple(g.workload for g in RATIO_GATES)
    ]
    if ungated:
        notes.append(f"{', '.join(ungated)}: measured, not gated (see the rounds' latest.md)")
    header = {
        "base": f"{args.base} = {commit[:10]} (a temporary worktree of that commit)",
        "head": f"this checkout, {(head or '?')[:10]}"
        + (" with uncommitted changes (measured)" if dirty else ""),
        "rounds": f"{args.rounds}, order "
        + ", ".join(" then ".join(order(n)) for n in range(1, args.rounds + 1))
        + "; each side one bench/run.py --rounds 1 a round, its own src first on PYTHONPATH",
        "figures": "median over the rounds of each round's median; ratio = head / base"
        + ("; --quick (smoke sizes: indicative only)" if args.quick else ""),
        "rounds' results": f"{args.out}/<base|head>/<round>/latest.md",
    }
    text = markdown(rows, header, args.rounds, missing, notes)
    holds = gate_holds(rows)
    record = {
        "schema": 1,
        "base": {"rev": args.base, "commit": commit},
        "head": {"commit": head, "dirty": dirty},
        "only": args.keys,
        "rounds": args.rounds,
        "quick": args.quick,
        "missing_on_base": missing,
        "worktree": str(worktree),
        "worktree_kept": args.keep_worktree,
        "runs": [r.to_json() for r in runs],
        "figures": [r.to_json() for r in rows],
        "gate_holds": holds,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ab.md").write_text(text, encoding="utf-8")
    (args.out / "ab.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(text, end="")
    log(f"wrote {args.out / 'ab.md'} and ab.json")
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
