"""Worker processes for the cross-process tests.

The queue, global-limit and bucket-handoff tests run real ``chongming-task worker``
processes on one store: spawned from this checkout's ``src`` without the test run's
``CHONGMING_*`` settings, their output in one log file each (a pipe nobody reads
would fill and block the child), stopped with SIGTERM and killed only if they do not
exit, their logs' tails shown on stderr so that a failure says what the workers did.

The fault, scheduling and recovery tests run scripts of their own instead, which
print one line when they are ready: :func:`start_ready` waits for it. The CLI,
operations and metrics tests read a worker's output while it runs: a :class:`Pump`
per pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
CLI = (sys.executable, "-m", "chongming_task.cli")
#: What a ``chongming-task worker`` prints once it polls (``ready; stop with ...``).
READY = "ready; stop with"


def cli_env(*paths: Path) -> dict[str, str]:
    """A child's environment: this checkout's ``src`` (then ``paths``) first on
    ``PYTHONPATH``, none of the test run's ``CHONGMING_*`` variables, no colour."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *map(str, paths), env.get("PYTHONPATH", "")])
    env["NO_COLOR"] = "1"
    return env


def cli(db: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``chongming-task --db DB ARGS...`` run to its end (``env``: :func:`cli_env`),
    its output captured."""
    return subprocess.run(
        [*CLI, "--db", db, *args],
        check=False,
        capture_output=True,
        text=True,
        env=env or cli_env(),
        timeout=60,
    )


def spawn_worker(
    db: str,
    log: Path,
    *,
    options: Sequence[str],
    worker: Sequence[str],
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``chongming-task --db DB OPTIONS... worker WORKER...`` in the background
    (``env``: :func:`cli_env`), stdout and stderr into ``log``."""
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [*CLI, "--db", db, *options, "worker", *worker],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env or cli_env(),
        )


def stop_workers(procs: Iterable[subprocess.Popen[bytes]], logs: Path) -> None:
    """SIGTERM to every live worker, a kill for any still running 15 s later; then the
    tail of every log in ``logs`` on stderr (pytest shows it for a failed test)."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    for log in sorted(logs.glob("*.log")):
        sys.stderr.write(f"--- {log.name}\n{log.read_text()[-3000:]}\n")


def start_ready(
    argv: Sequence[str], name: str, *, ready: str = "ready", env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``argv`` started with its stdout and stderr piped, once its first line is
    ``ready``; otherwise it is killed and the test fails with its stderr."""
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if line != ready:
        process.kill()
        pytest.fail(f"{name} did not start: {line!r}\n{process.communicate(timeout=30)[1]}")
    return process


class Pump:
    """One pipe of a running child, read to its end by a thread of its own.

    One reader per pipe and nobody else reading it: ``communicate()`` would read it
    too and take lines away from :attr:`lines`; a pipe nobody reads fills and blocks
    the child.
    """

    def __init__(self, pipe: IO[str] | None, *, keepends: bool = False) -> None:
        assert pipe is not None
        self.lines: list[str] = []
        """What it printed so far, one entry a line (without its newline unless
        ``keepends``)."""
        self.ready = threading.Event()
        """Set at the first line that says the worker is ready (:data:`READY`)."""
        self._pipe = pipe
        self._keepends = keepends
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._pipe:
            self.lines.append(line if self._keepends else line.rstrip("\n"))
            if READY in line:
                self.ready.set()

    def close(self, timeout: float = 10) -> None:
        """Once the child has exited: the rest of its output read, the pipe closed."""
        self._thread.join(timeout)  # EOF follows the exit
        self._pipe.close()


@contextmanager
def on_path(directory: Path) -> Iterator[None]:
    """``directory`` first on ``sys.path`` meanwhile: the tests import the task modules
    they hand the workers by name, as the workers do."""
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path.remove(str(directory))
