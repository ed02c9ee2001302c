"""The join-mode table shared by the pure and the end-to-end tests.

One row per combination of settled upstream outcomes (order does not matter, so each
multiset appears once); the three columns are the verdicts for ALL_SUCCEEDED,
ALL_SETTLED and ANY_SUCCEEDED.
"""

from __future__ import annotations

from chongming_task.policies import JoinMode
from chongming_task.states import TaskStatus

S = TaskStatus

#: The five upstream outcomes of issue 6 (lost behaves as failed, tested separately).
OUTCOMES = (S.SUCCEEDED, S.FAILED, S.SKIPPED, S.CANCELLED, S.STOPPED)
SHORT = {
    S.SUCCEEDED: "ok",
    S.FAILED: "fail",
    S.SKIPPED: "skip",
    S.CANCELLED: "cancel",
    S.STOPPED: "stop",
}

MODES = (JoinMode.ALL_SUCCEEDED, JoinMode.ALL_SETTLED, JoinMode.ANY_SUCCEEDED)

R, K = "release", "skip"

#: upstream outcomes -> (ALL_SUCCEEDED, ALL_SETTLED, ANY_SUCCEEDED)
JOIN_TABLE: dict[tuple[TaskStatus, ...], tuple[str, str, str]] = {
    # one upstream
    (S.SUCCEEDED,): (R, R, R),
    (S.FAILED,): (K, R, K),
    (S.SKIPPED,): (K, R, K),
    (S.CANCELLED,): (K, R, K),
    (S.STOPPED,): (K, R, K),
    # two upstreams
    (S.SUCCEEDED, S.SUCCEEDED): (R, R, R),
    (S.SUCCEEDED, S.FAILED): (K, R, R),
    (S.SUCCEEDED, S.SKIPPED): (K, R, R),
    (S.SUCCEEDED, S.CANCELLED): (K, R, R),
    (S.SUCCEEDED, S.STOPPED): (K, R, R),
    (S.FAILED, S.FAILED): (K, R, K),
    (S.FAILED, S.SKIPPED): (K, R, K),
    (S.FAILED, S.CANCELLED): (K, R, K),
    (S.FAILED, S.STOPPED): (K, R, K),
    (S.SKIPPED, S.SKIPPED): (K, R, K),
    (S.SKIPPED, S.CANCELLED): (K, R, K),
    (S.SKIPPED, S.STOPPED): (K, R, K),
    (S.CANCELLED, S.CANCELLED): (K, R, K),
    (S.CANCELLED, S.STOPPED): (K, R, K),
    (S.STOPPED, S.STOPPED): (K, R, K),
}


def expected(mode: JoinMode, outcomes: tuple[TaskStatus, ...]) -> str:
    """The table's verdict for ``outcomes`` in any order."""
    key = tuple(sorted(outcomes, key=OUTCOMES.index))
    return JOIN_TABLE[key][MODES.index(mode)]
