"""Run one workload in a fresh child process and read its result back.

One workload's leftovers can change the next one's figures when they share a process:
in session 5's runs W3's scheduler lateness (SQLite p99) read ~0.9 ms alone but 1.2-1.3
ms after W1 and W2 had grown the heap, filled the GC generations and the allocator's
arenas and imported their modules (session 6's noisier machine neither confirmed nor
ruled that out). So, as pyperf does with its worker processes, every workload gets a
process of its own by default; inside it, our side and the baselines still alternate
round by round.

The child writes its ``WorkloadResult`` as JSON to a file; its stderr (the progress
log) is streamed through to ours line by line while the last lines are kept, so a child
that crashes is reported with what it said last instead of taking the run down with it.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from harness.runner import Log, WorkloadResult

#: Lines of a failed child's stderr quoted in the report.
TAIL_LINES = 15
#: How long to wait for the stderr pipe to drain once the child has exited; a process
#: the child spawned and left behind may hold the pipe open, which must not hang us.
DRAIN_TIMEOUT_S = 5.0


def write_result(result: WorkloadResult, path: Path) -> None:
    """Write ``result`` as JSON to ``path`` in the child, atomically.

    The file appears under its final name only when complete, so a child killed while
    writing leaves no file rather than half a document for the parent to misread.
    """
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)


def run_in_child(
    command: Sequence[str],
    result_file: Path,
    on_failure: WorkloadResult,
    log: Log,
) -> WorkloadResult:
    """Run ``command`` (a child that writes a result to ``result_file``) and read it back.

    ``on_failure`` is what the report shows for this workload when the child fails:
    the caller builds it from a local instance of the workload (its title, metrics and
    targets), and its ``error`` and ``seconds`` are filled in here. A child fails when
    it exits non-zero (or is killed by a signal) or exits 0 without a readable result.
    """
    result_file.unlink(missing_ok=True)
    t0 = time.perf_counter()
    child = subprocess.Popen(list(command), stderr=subprocess.PIPE)
    assert child.stderr is not None
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    pump = threading.Thread(
        target=_stream, args=(child.stderr, tail), name="child-stderr", daemon=True
    )
    pump.start()
    try:
        returncode = child.wait()
    except BaseException:
        # Ctrl-C reaches the child too (same process group); do not leave it behind.
        child.kill()
        child.wait()
        raise
    pump.join(DRAIN_TIMEOUT_S)
    seconds = time.perf_counter() - t0
    if returncode != 0:
        reason = f"the child process {_exit_text(returncode)}"
    else:
        try:
            return WorkloadResult.from_json(json.loads(result_file.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            reason = (
                f"the child process exited 0 but its result {result_file} could not be read "
                f"({type(exc).__name__}: {exc})"
            )
    # Not the command line: it may carry a PostgreSQL DSN with a password.
    message = reason
    if tail:
        message += f"\nlast {len(tail)} line(s) of its stderr:\n" + "".join(tail)
    log(f"{on_failure.workload.key}: FAILED: {reason}")
    on_failure.error = message
    on_failure.seconds = seconds
    return on_failure


def _stream(source: IO[bytes], tail: collections.deque[str]) -> None:
    """Copy the child's stderr to ours as it comes, keeping the last lines."""
    out = sys.stderr
    with source:
        for raw in iter(source.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            tail.append(line if line.endswith("\n") else line + "\n")
            out.write(line)
            out.flush()


def _exit_text(returncode: int) -> str:
    """'exited with code 3' or 'was killed by SIGKILL (exit code -9)'."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name} (exit code {returncode})"
    return f"exited with code {returncode}"
