"""The controller's plumbing: what the library's own layers call, and users should not.

``Controller._internal`` returns an object of this protocol. What is here is part of
how the library's pieces fit together (the work queue's worker runs the tasks it
claimed through it), not of the controller's documented surface (guide §8): it may
change without notice, and a user who needs it has found a gap in the public API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot
    from chongming_task.run import TaskRun

__all__ = ["ControllerInternals"]


class ControllerInternals(Protocol):
    """The plumbing of one controller (``Controller._internal``)."""

    def run_claimed(self, stored: TaskSnapshot) -> TaskRun:
        """Run a task this controller claimed from the work queue, as a local submit would.

        ``stored`` is the ``queued`` snapshot ``TaskStore.claim_queued`` returned (held
        by this controller); it waits for a slot like any submission.

        Raises:
            ConfigurationError: No recipe, an unregistered name, arguments that do not
                fit the signature, or a closed controller (nothing is written then).
        """
        ...
