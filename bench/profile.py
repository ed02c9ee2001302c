"""Profile our side of W1/W2 with py-spy: ``python bench/profile.py W1 --store sqlite``.

cProfile only sees the thread that started it, while our work is spread over the
submitting thread, the dispatcher and one thread per running task; py-spy samples
every thread of the process from outside. The child repeats the workload for a few
seconds; this parent aggregates the raw stacks into *self* time (the frame on top)
and *inclusive* time (every function on the stack), and writes the top entries to
``bench/results/profile-<workload>-<store>.txt``. ``--gil`` keeps only samples of the
thread holding the GIL, which is what bounds throughput on CPython.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))


def child(workload: str, store: str, n: int, seconds: float) -> None:
    """Run our side of ``workload`` repeatedly for ``seconds``."""
    from harness import pg

    dsn = pg.base_dsn()
    deadline = time.monotonic() + seconds
    rounds = 0
    while time.monotonic() < deadline:
        if workload == "W1":
            from workloads.w1_throughput import Throughput

            print(Throughput()._ours(store, n, dsn, None), file=sys.stderr)
        else:
            from workloads.w2_latency import _ours

            print(_ours(store, n, dsn, None), file=sys.stderr)
        rounds += 1
    print(f"{rounds} rounds", file=sys.stderr)


def aggregate(raw: Path, top: int) -> str:
    """Self and inclusive sample counts per function from py-spy's raw output."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for name in set(frames):
            incl[name] += count
    out = [f"total samples: {total}", "", f"top {top} by self time:"]
    out += [f"{c / total:6.1%}  {name}" for name, c in own.most_common(top)]
    out += ["", f"top {top} by inclusive time (chongming_task, sqlite3, psycopg, threading):"]
    keep = ("chongming_task", "sqlite3", "psycopg", "threading", "queue")
    ranked = [(n, c) for n, c in incl.most_common() if any(k in n for k in keep)]
    out += [f"{c / total:6.1%}  {name}" for name, c in ranked[:top]]
    return "\n".join(out) + "\n"


def _short(frame: str) -> str:
    """``func (path/to/mod.py:12)`` -> ``func (chongming_task/mod.py:12)``."""
    if "(" not in frame:
        return frame
    func, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("chongming_task/", "site-packages/", "python3.11/"):
        if marker in where:
            where = where.split(marker, 1)[1]
            if marker == "chongming_task/":
                where = "chongming_task/" + where
            break
    path, _, _line = where.rpartition(":")
    return f"{func} ({path or where})"


def main(argv: list[str] | None = None) -> int:
    """Parent: run the child under py-spy and write the aggregate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["W1", "W2"])
    parser.add_argument("--store", default="sqlite", choices=["memory", "sqlite", "postgres"])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    parser.add_argument("--gil", action="store_true", help="only the GIL-holding thread")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.workload, args.store, args.n, args.seconds)
        return 0
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.path.exists(spy):
        print("py-spy not found: pip install py-spy", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.txt"
        cmd = [spy, "record", "--format", "raw", "-o", str(raw), "-r", str(args.rate)]
        cmd += ["--gil"] if args.gil else []
        cmd += ["--", sys.executable, __file__, args.workload, "--child"]
        cmd += ["--store", args.store, "--n", str(args.n), "--seconds", str(args.seconds)]
        subprocess.run(cmd, check=True)
        text = aggregate(raw, args.top)
    suffix = "-gil" if args.gil else ""
    out = BENCH / "results" / f"profile-{args.workload}-{args.store}{suffix}.txt"
    out.write_text(f"# {' '.join(cmd[cmd.index('--') + 1 :])}\n{text}")
    print(text)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
