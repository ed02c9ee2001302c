"""How long a worker's shutdown waits: the defaults of ``--drain-timeout`` and
``--shutdown-timeout`` (``Worker(drain_timeout=)``, ``Worker.shutdown(timeout=)``).

Here, not in ``chongming_task.worker``, so the CLI can show them without loading the
worker. 20 s for running tasks to finish by themselves, then 6 s for what is left to
stop at a checkpoint: 26 s, inside the 30 s Kubernetes gives a pod by default
(``terminationGracePeriodSeconds``) with time left for the last store writes and the
exit. docs/deployment.md says how to size the container's grace period for others.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_DRAIN_TIMEOUT", "DEFAULT_STOP_TIMEOUT", "SHUTDOWN_REASON"]

DEFAULT_DRAIN_TIMEOUT: Final = 20.0
DEFAULT_STOP_TIMEOUT: Final = 6.0

#: The reason recorded on what a shutdown stops or hands back.
SHUTDOWN_REASON: Final = "worker shutdown"
