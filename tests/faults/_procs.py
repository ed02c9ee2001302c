"""Starting and killing the fault suite's processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from _workers import start_ready

WORKER = Path(__file__).with_name("fault_worker.py")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


class Worker:
    """A ``fault_worker.py work`` process, started and READY."""

    def __init__(self, store: str, owner: str, *args: str) -> None:
        self.owner = owner
        argv = [sys.executable, str(WORKER), "work", store, owner, *args]
        self.process = start_ready(argv, f"worker {owner}", ready="READY", env=_env())

    def sigkill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.communicate(timeout=30)
        assert self.process.returncode == -signal.SIGKILL

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def reconcile_from_a_fresh_process(store: str, owner: str = "reconciler") -> dict[str, list[str]]:
    import json

    done = subprocess.run(
        [sys.executable, str(WORKER), "reconcile", store, owner],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
