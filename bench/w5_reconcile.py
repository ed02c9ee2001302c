"""Time only W5's ``ours-reconcile`` variant: ``python bench/w5_reconcile.py [--tasks N]``.

``bench/run.py --only W5`` also seeds and queries two million-task stores (minutes), and
``--quick`` shrinks the reconcile to 5,000 tasks. This runs the very same measurement
(``workloads.w5_scale.Reconcile``: a fresh copy of the seeded file per round, the time
of ``Controller.reconcile()`` alone) at full size, and prints one line per round plus
the median, wall and CPU time of the reconciling thread. Compare libraries back to
back with ``PYTHONPATH=/path/to/other/src python bench/w5_reconcile.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ours
from workloads.w5_scale import Reconcile


def main() -> None:
    """Seed once, then reconcile a fresh copy per round."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    library = ours.require("chongming_task").__file__
    reconcile = Reconcile(args.tasks)
    reconcile.setup()
    walls: list[float] = []
    try:
        for _ in range(args.rounds):
            cpu = time.thread_time()
            walls.append(reconcile.measure()["reconcile_s"])
            cpu = time.thread_time() - cpu  # includes copying the file (not in the wall)
            print(f"reconcile {args.tasks:,}: {walls[-1]:.3f} s (thread CPU {cpu:.3f} s)")
    finally:
        reconcile.teardown()
    print(f"median {statistics.median(walls):.3f} s over {len(walls)} rounds; {library}")


if __name__ == "__main__":
    main()
