"""Pure pipeline decisions: when a node is released, and how the whole run settles.

Like the policies, these functions decide and never act: no controller, no store, no
clock, no threads. Two callers feed them the statuses they observe and carry out what
they return: the in-process orchestrator (:mod:`chongming_task.pipeline._orchestrator`)
and the store itself for pipelines on the fleet (:mod:`chongming_task.stores._dag`,
inside the transaction that settles an upstream node). That lets the tests check every
join mode against every combination of upstream outcomes exhaustively, once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from chongming_task._model import Failure, FailureKind
from chongming_task.policies import JoinMode
from chongming_task.states import TaskStatus

__all__ = [
    "FAIL_FAST_TRIGGERS",
    "JoinDecision",
    "Verdict",
    "decide_join",
    "fail_fast_plan",
    "settle_status",
    "skip_failure",
    "slot_free_first",
    "triggers_fail_fast",
]

S = TaskStatus

#: Terminal states that count as a *real* failure. ``cancelled`` is deliberately
#: absent: a cancellation is a consequence (fail_fast) or a decision, and letting it
#: trigger fail_fast would turn a deliberate cancel into "the pipeline failed" and
#: make every cancelled node cancel the others again (guide §8.12). ``stopped`` is a
#: person's decision and ``skipped`` a consequence, so neither triggers it either.
FAIL_FAST_TRIGGERS: Final = frozenset({S.FAILED, S.LOST})


class Verdict(StrEnum):
    """What to do with a blocked node now."""

    WAIT = "wait"
    """Some upstream node has not settled and the join mode still depends on it."""
    RELEASE = "release"
    """Move the node to ``queued``: it competes for a slot like any task."""
    SKIP = "skip"
    """The node can never be released: end it as ``skipped`` (dependency_failed)."""


@dataclass(frozen=True, slots=True)
class JoinDecision:
    """The verdict of :func:`decide_join`, with the reason a person would read."""

    verdict: Verdict
    reason: str
    culprits: tuple[str, ...] = ()
    """For ``SKIP``: the upstream node ids that did not succeed, in dependency order."""


def _describe(upstream: Mapping[str, TaskStatus], ids: Collection[str]) -> str:
    return ", ".join(f"{node_id!r} ({upstream[node_id].value})" for node_id in ids)


def decide_join(join: JoinMode, upstream: Mapping[str, TaskStatus]) -> JoinDecision:
    """Apply ``join`` to the current statuses of a node's upstream nodes.

    - ``ALL_SUCCEEDED``: release when every upstream succeeded; skip as soon as one
      settles without success (waiting for the others could not change the answer).
    - ``ALL_SETTLED``: release when every upstream is terminal, whatever the result.
    - ``ANY_SUCCEEDED``: release at the first success (first come, first served); skip
      when all have settled and none succeeded.

    A node without upstream nodes is released at once, whatever its join mode.
    """
    if not upstream:
        return JoinDecision(Verdict.RELEASE, "no upstream nodes")
    settled = [node_id for node_id, status in upstream.items() if status.is_terminal]
    succeeded = [node_id for node_id in settled if upstream[node_id] is S.SUCCEEDED]
    unsuccessful = tuple(node_id for node_id in settled if upstream[node_id] is not S.SUCCEEDED)
    everything_settled = len(settled) == len(upstream)

    if join is JoinMode.ALL_SUCCEEDED:
        if unsuccessful:
            return JoinDecision(
                Verdict.SKIP,
                f"upstream {_describe(upstream, unsuccessful)} did not succeed "
                "(join all_succeeded)",
                unsuccessful,
            )
        if everything_settled:
            return JoinDecision(Verdict.RELEASE, "all upstream nodes succeeded")
        return JoinDecision(Verdict.WAIT, "waiting for every upstream node to succeed")

    if join is JoinMode.ALL_SETTLED:
        if everything_settled:
            return JoinDecision(Verdict.RELEASE, "all upstream nodes settled")
        return JoinDecision(Verdict.WAIT, "waiting for every upstream node to settle")

    if join is JoinMode.ANY_SUCCEEDED:
        if succeeded:
            return JoinDecision(Verdict.RELEASE, f"upstream {succeeded[0]!r} succeeded")
        if everything_settled:
            return JoinDecision(
                Verdict.SKIP,
                f"no upstream node succeeded: {_describe(upstream, unsuccessful)} "
                "(join any_succeeded)",
                unsuccessful,
            )
        return JoinDecision(Verdict.WAIT, "waiting for any upstream node to succeed")

    raise AssertionError(f"unhandled join mode {join!r}")  # pragma: no cover


def skip_failure(message: str) -> Failure:
    """The failure recorded on a node skipped because of its upstream or of fail_fast."""
    return Failure(kind=FailureKind.DEPENDENCY_FAILED, message=message, retryable=False)


def triggers_fail_fast(status: TaskStatus) -> bool:
    """Whether a node settling in ``status`` is a real failure (see FAIL_FAST_TRIGGERS)."""
    return status in FAIL_FAST_TRIGGERS


def fail_fast_plan(
    statuses: Mapping[str, TaskStatus], released: Collection[str]
) -> tuple[list[str], list[str]]:
    """Which nodes fail_fast cancels and which it skips, as ``(cancel, skip)``.

    Released nodes that have not settled (queued, running, paused, waiting to retry)
    were meant to run: they are *cancelled*. Nodes never released (blocked) were not
    going to run yet: they are *skipped*. Terminal nodes are left alone.

    Nodes that hold no slot come first in ``cancel``: cancelling a running node frees
    its slot, and a queued node still waiting would otherwise be started into it.
    """
    waiting: list[str] = []
    occupying: list[str] = []
    skip: list[str] = []
    for node_id, status in statuses.items():
        if status.is_terminal:
            continue
        if node_id not in released:
            skip.append(node_id)
        elif status.occupies_slot:
            occupying.append(node_id)
        else:
            waiting.append(node_id)
    return [*waiting, *occupying], skip


def slot_free_first(statuses: Mapping[str, TaskStatus]) -> list[str]:
    """Unsettled node ids, those holding no slot first (the order to stop them in)."""
    unsettled = [node_id for node_id, status in statuses.items() if not status.is_terminal]
    return sorted(unsettled, key=lambda node_id: statuses[node_id].occupies_slot)


def settle_status(
    statuses: Mapping[str, TaskStatus], *, failed: bool, stop_requested: bool
) -> TaskStatus | None:
    """The overall status once every node is terminal, else ``None``.

    Args:
        statuses: Node id -> current status.
        failed: A real failure (FAILED or LOST) happened before any stop request.
        stop_requested: The whole pipeline run was stopped by a person.

    In order: a real failure makes the run ``failed``; otherwise a stop of the run, or
    of any single node, makes it ``stopped``; otherwise a node cancelled from outside
    makes it ``cancelled``; otherwise (every node succeeded, or skipped itself with
    nothing to do) it ``succeeded``.
    """
    if any(not status.is_terminal for status in statuses.values()):
        return None
    values = set(statuses.values())
    if failed:
        return S.FAILED
    if stop_requested or S.STOPPED in values:
        return S.STOPPED
    if S.CANCELLED in values:
        return S.CANCELLED
    if values & FAIL_FAST_TRIGGERS:
        return S.FAILED
    return S.SUCCEEDED
