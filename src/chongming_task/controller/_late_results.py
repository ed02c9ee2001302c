"""Late results: a lost attempt's body that finished anyway, kept as an audit record.

A process that was only partitioned from the store (its lease ran out, another
process's reconcile called the task ``lost``) may still see the body finish. Its
terminal write then conflicts: the store holds a version this process did not
write. The store's record stands -- the status stays what reconcile decided, the
history gains nothing, ``status_version`` does not move -- and the late result is
appended to the task's ``metadata["late_results"]`` (at most
:data:`MAX_LATE_RESULTS`, newest last): what the body reached, when, where, its
failure or a small outcome. ``chongming-task status`` and ``snapshot.metadata`` show
it, so an operator can tell "lost, but it did finish" from "lost mid-way".

The record is written only where no holder can overwrite it: on a terminal task
(plain guarded ``save`` at the same version, as the log tail does) or on a queued
unheld one (``save_unheld``, which a racing claim beats). A task some other
controller holds again (revived and claimed) only gets the warning in the log and in
``persist_failures``: that holder's next write would drop a record written beside it.
"""

from __future__ import annotations

import json
import logging
from typing import Final

from chongming_task._model import JSONValue, TaskSnapshot
from chongming_task.core import Clock
from chongming_task.errors import ConcurrencyConflict, TaskError
from chongming_task.stores._base import TaskStore
from chongming_task.stores._capabilities import save_unheld

__all__ = ["LATE_RESULTS_KEY", "MAX_LATE_RESULTS", "late_result", "record_late_result"]

log = logging.getLogger("chongming_task.controller")

#: Where late results live in a task's metadata.
LATE_RESULTS_KEY: Final = "late_results"
#: Late results kept per task (a task is revived and lost a bounded number of times).
MAX_LATE_RESULTS: Final = 10
#: An outcome larger than this (compact JSON) is recorded by its size only.
OUTCOME_SHOWN_BYTES: Final = 4096
#: Guarded writes tried before giving up (each conflict re-reads the task).
_ATTEMPTS: Final = 3


def late_result(
    snapshot: TaskSnapshot, stored: TaskSnapshot, *, owner: str, clock: Clock
) -> dict[str, JSONValue]:
    """The audit record of ``snapshot`` (our terminal state) over ``stored`` (the store's)."""
    failure = snapshot.failure
    record: dict[str, JSONValue] = {
        "status": snapshot.status.value,
        "attempt": snapshot.attempt,
        "finished_at": None if snapshot.finished_at is None else snapshot.finished_at.isoformat(),
        "recorded_at": clock.now().isoformat(),
        "by": owner,
        "stored_status": stored.status.value,
        "stored_version": stored.status_version,
        "failure": None if failure is None else f"{failure.kind.value}: {failure.message}",
    }
    if snapshot.outcome is not None:
        text = json.dumps(snapshot.outcome, separators=(",", ":"), ensure_ascii=False)
        if len(text.encode("utf-8", "surrogatepass")) <= OUTCOME_SHOWN_BYTES:
            record["outcome"] = snapshot.outcome
        else:
            record["outcome_bytes"] = len(text.encode("utf-8", "surrogatepass"))
    return record


def record_late_result(
    store: TaskStore, snapshot: TaskSnapshot, *, owner: str, clock: Clock
) -> bool:
    """Append the late terminal ``snapshot`` to the stored task's audit; whether it was.

    Never changes the stored status, history or version. ``False`` when the task is
    gone, is this very state after all, or is held by another controller.
    """
    for _ in range(_ATTEMPTS):
        try:
            stored = store.get(snapshot.task_id)
        except TaskError:
            return False
        if stored is None or (
            stored.status_version == snapshot.status_version and stored.status is snapshot.status
        ):
            return False
        unheld = not stored.status.is_terminal
        if unheld and stored.owner is not None:
            log.warning(
                "task %s: a late %s of attempt %d is not recorded: the task is held again (by %s)",
                snapshot.task_id,
                snapshot.status.value,
                snapshot.attempt,
                stored.owner,
                extra={"task_id": snapshot.task_id},
            )
            return False
        kept = stored.metadata.get(LATE_RESULTS_KEY)
        records = list(kept) if isinstance(kept, list) else []
        records = [
            *records[-(MAX_LATE_RESULTS - 1) :],
            late_result(snapshot, stored, owner=owner, clock=clock),
        ]
        audited = stored.replace(metadata={**stored.metadata, LATE_RESULTS_KEY: records})
        try:
            if unheld:
                save_unheld(store, audited, expect_version=stored.status_version)
            else:
                store.save(audited, expect_version=stored.status_version)
        except ConcurrencyConflict:
            continue  # moved on meanwhile: read it again
        except TaskError as exc:
            log.warning("task %s: could not record its late result: %s", snapshot.task_id, exc)
            return False
        log.warning(
            "task %s: attempt %d finished %s after the store called it %s; recorded as a "
            "late result, the status stays %s",
            snapshot.task_id,
            snapshot.attempt,
            snapshot.status.value,
            stored.status.value,
            stored.status.value,
            extra={"task_id": snapshot.task_id},
        )
        return True
    return False
