"""What a scheduler keeps per schedule registered in this process, and the checks at ``add``.

A schedule is checked against the controller when it is added, not when it first
fires: a task name the controller does not know, or a schedule without a business
key on a node that owns only some buckets, would otherwise fail at 02:00 with
nobody watching.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from chongming_task.errors import ConfigurationError
from chongming_task.schedule._definition import Schedule

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = ["INPUT_PARAMETER", "Registered", "check_schedule", "takes_input"]

#: The parameter that receives a manual dispatch's input payload, when a task has it.
INPUT_PARAMETER = "input"


def takes_input(controller: Controller, task: str) -> bool:
    """Whether task ``task`` has a parameter ``input`` that a keyword can fill.

    The rule for a manual dispatch's payload: it always reaches the run as
    ``metadata["input"]``; it is also passed as ``input=<payload>`` exactly when the
    task function declares a parameter named ``input`` (positional-or-keyword or
    keyword-only; ``**kwargs`` does not count), replacing a schedule kwarg of that
    name for this one run. A task that does not declare it is called as usual.
    """
    try:
        fn = controller.registry.require(task).fn
        parameter = inspect.signature(fn).parameters.get(INPUT_PARAMETER)
    except (TypeError, ValueError, ConfigurationError):
        return False
    return parameter is not None and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


@dataclass(slots=True)
class Registered:
    """A schedule registered with this scheduler (mutable, guarded by its lock)."""

    schedule: Schedule
    owned: bool
    """This node owns the schedule's bucket, so it fires it (``owned_buckets``)."""
    revision: int = 0
    """The control record's ``definition_revision`` last acted on (0: none yet)."""
    checked_until: datetime | None = None
    """Every firing up to here was decided by this scheduler."""
    next_at: datetime | None = None
    """The next firing this scheduler expects (how long the loop may sleep)."""


def check_schedule(controller: Controller, schedule: Schedule) -> Registered:
    """Validate ``schedule`` against ``controller``; returns its registration.

    Raises:
        ConfigurationError: the task is unknown to the controller, or the node owns
            only some buckets and the schedule has no ``bucket_key``.
    """
    if not isinstance(schedule, Schedule):
        raise ConfigurationError(f"expected a Schedule, got {schedule!r}")
    names = controller.task_names()
    if schedule.task not in names:
        raise ConfigurationError(
            f"schedule {schedule.name!r} runs task {schedule.task!r}, which is not registered "
            f"with the controller; register it first (registered: {', '.join(names) or 'none'})"
        )
    _check_arguments(controller, schedule)
    if schedule.bucket_key is None:
        if not controller.owns_all_buckets:
            raise ConfigurationError(
                f"schedule {schedule.name!r} has no bucket_key, but this node owns only some "
                "buckets; give it a bucket_key so exactly the owning node fires it"
            )
        return Registered(schedule, owned=True)
    bucket = controller.bucket_policy.bucket_for(schedule.bucket_key)
    return Registered(schedule, owned=controller.owns_bucket(bucket))


def _check_arguments(controller: Controller, schedule: Schedule) -> None:
    """The schedule's args/kwargs must bind to the task (after its context parameter)."""
    fn = controller.registry.require(schedule.task).fn
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: nothing to check
        return
    try:
        signature.bind(None, *schedule.args, **dict(schedule.kwargs))
    except TypeError as exc:
        raise ConfigurationError(
            f"schedule {schedule.name!r}: its args/kwargs do not fit task "
            f"{schedule.task!r}{signature}: {exc} (the first parameter receives the "
            "TaskContext)"
        ) from exc
