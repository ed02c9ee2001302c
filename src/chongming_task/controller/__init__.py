"""The management layer: ``Controller``, restart recovery reports and ``render_table`` (guide §8).

``from chongming_task.controller import Controller, render_table`` is the import the
guide uses; the names are also re-exported from ``chongming_task``. They resolve on
first access, so importing a leaf module (``controller.table`` for a CLI that only
renders) does not pull in the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports

if TYPE_CHECKING:
    from chongming_task.controller._controller import Controller
    from chongming_task.controller._reconcile import ReconcileReport
    from chongming_task.controller._registry import TaskDefinition, TaskRegistry
    from chongming_task.controller._stats import ControllerStats
    from chongming_task.controller._table import render_table
    from chongming_task.controller._writethrough import PersistFailure

_LAZY = {
    "Controller": "chongming_task.controller._controller",
    "ControllerStats": "chongming_task.controller._stats",
    "PersistFailure": "chongming_task.controller._writethrough",
    "ReconcileReport": "chongming_task.controller._reconcile",
    "TaskDefinition": "chongming_task.controller._registry",
    "TaskRegistry": "chongming_task.controller._registry",
    "render_table": "chongming_task.controller._table",
}


__getattr__, __dir__ = lazy_exports("chongming_task.controller", globals(), _LAZY)


__all__ = [
    "Controller",
    "ControllerStats",
    "PersistFailure",
    "ReconcileReport",
    "TaskDefinition",
    "TaskRegistry",
    "render_table",
]
