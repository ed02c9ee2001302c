"""The execution layer: task context, supervision and executors.

Task authors need two names from here, both also exported at the top level:
``TaskContext`` (what a body receives) and ``TaskSkipped`` (raise it to end a run as
``skipped``).
"""

from chongming_task.runtime._context import RuntimeContext, TaskContext, TaskSkipped

__all__ = ["RuntimeContext", "TaskContext", "TaskSkipped"]
