"""Compatibility alias of :mod:`chongming_task.decorator`; import from ``chongming_task``.

Importing this submodule makes Python bind it as the package attribute ``task``, which
shadows the ``task`` decorator for a later ``from chongming_task import task``. The
implementation therefore lives in ``chongming_task.decorator``; this alias only keeps
old imports working until they move.
"""

from chongming_task.decorator import (
    RESERVED_OPTIONS,
    TaskSpec,
    reserved_collisions,
    spec_of,
    task,
)

__all__ = ["RESERVED_OPTIONS", "TaskSpec", "reserved_collisions", "spec_of", "task"]
