"""Exhaustive tests of the pure pipeline decisions (join modes, fail_fast, settling)."""

from __future__ import annotations

import itertools

import pytest

from chongming_task._joins import (
    FAIL_FAST_TRIGGERS,
    Verdict,
    decide_join,
    fail_fast_plan,
    settle_status,
    skip_failure,
    slot_free_first,
    triggers_fail_fast,
)
from chongming_task._model import FailureKind
from chongming_task.policies import JoinMode
from chongming_task.states import TERMINAL, TaskStatus

from .join_table import JOIN_TABLE, MODES, OUTCOMES, SHORT, expected

S = TaskStatus
NON_TERMINAL = sorted(set(TaskStatus) - TERMINAL, key=list(TaskStatus).index)


def _upstream(outcomes: tuple[TaskStatus, ...]) -> dict[str, TaskStatus]:
    return {f"u{index}": status for index, status in enumerate(outcomes)}


def test_the_table_covers_every_multiset_of_one_and_two_outcomes() -> None:
    wanted = {
        tuple(sorted(combo, key=OUTCOMES.index))
        for size in (1, 2)
        for combo in itertools.product(OUTCOMES, repeat=size)
    }
    assert set(JOIN_TABLE) == wanted


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
@pytest.mark.parametrize(
    "outcomes",
    [combo for size in (1, 2) for combo in itertools.product(OUTCOMES, repeat=size)],
    ids=lambda combo: "+".join(SHORT[status] for status in combo),
)
def test_join_table(mode: JoinMode, outcomes: tuple[TaskStatus, ...]) -> None:
    decision = decide_join(mode, _upstream(outcomes))
    assert decision.verdict.value == expected(mode, outcomes)
    if decision.verdict is Verdict.SKIP:
        # The culprits are exactly the upstream nodes that did not succeed, in order.
        assert decision.culprits == tuple(
            node_id for node_id, status in _upstream(outcomes).items() if status is not S.SUCCEEDED
        )
        for node_id in decision.culprits:
            assert repr(node_id) in decision.reason
    else:
        assert decision.culprits == ()


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_three_upstreams_agree_with_the_rule(mode: JoinMode) -> None:
    """Every ordered triple of outcomes (125 per mode) against the rule stated plainly."""
    for outcomes in itertools.product(OUTCOMES, repeat=3):
        verdict = decide_join(mode, _upstream(outcomes)).verdict
        successes = outcomes.count(S.SUCCEEDED)
        if mode is JoinMode.ALL_SUCCEEDED:
            want = Verdict.RELEASE if successes == 3 else Verdict.SKIP
        elif mode is JoinMode.ALL_SETTLED:
            want = Verdict.RELEASE
        else:
            want = Verdict.RELEASE if successes else Verdict.SKIP
        assert verdict is want, (mode, outcomes)


@pytest.mark.parametrize("pending", NON_TERMINAL, ids=str)
@pytest.mark.parametrize("settled", OUTCOMES, ids=str)
@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_an_unsettled_upstream(mode: JoinMode, settled: TaskStatus, pending: TaskStatus) -> None:
    """One upstream settled, one still in any non-terminal state."""
    decision = decide_join(mode, {"a": settled, "b": pending})
    if mode is JoinMode.ALL_SUCCEEDED:
        # A settled failure already decides it; a success must wait for the other.
        want = Verdict.WAIT if settled is S.SUCCEEDED else Verdict.SKIP
    elif mode is JoinMode.ALL_SETTLED:
        want = Verdict.WAIT
    else:
        # First come, first served: one success releases at once.
        want = Verdict.RELEASE if settled is S.SUCCEEDED else Verdict.WAIT
    assert decision.verdict is want


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_roots_are_released_whatever_the_join_mode(mode: JoinMode) -> None:
    assert decide_join(mode, {}).verdict is Verdict.RELEASE


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_lost_upstream_counts_as_not_succeeded(mode: JoinMode) -> None:
    verdict = decide_join(mode, {"a": S.LOST}).verdict
    assert verdict is (Verdict.RELEASE if mode is JoinMode.ALL_SETTLED else Verdict.SKIP)


def test_skip_reason_names_the_cause() -> None:
    decision = decide_join(JoinMode.ALL_SUCCEEDED, {"fetch": S.FAILED, "other": S.RUNNING})
    assert decision.verdict is Verdict.SKIP
    assert decision.reason == "upstream 'fetch' (failed) did not succeed (join all_succeeded)"
    decision = decide_join(JoinMode.ANY_SUCCEEDED, {"a": S.STOPPED, "b": S.SKIPPED})
    assert decision.reason == (
        "no upstream node succeeded: 'a' (stopped), 'b' (skipped) (join any_succeeded)"
    )
    failure = skip_failure(decision.reason)
    assert failure.kind is FailureKind.DEPENDENCY_FAILED
    assert failure.message == decision.reason
    assert not failure.retryable


@pytest.mark.parametrize("status", list(TaskStatus), ids=str)
def test_only_failed_and_lost_trigger_fail_fast(status: TaskStatus) -> None:
    assert triggers_fail_fast(status) is (status in {S.FAILED, S.LOST})
    assert {S.FAILED, S.LOST} == FAIL_FAST_TRIGGERS


def test_fail_fast_cancels_released_and_skips_the_rest() -> None:
    statuses = {
        "done": S.SUCCEEDED,
        "boom": S.FAILED,
        "running": S.RUNNING,
        "queued": S.QUEUED,
        "paused": S.PAUSED,
        "retrying": S.RETRY_WAIT,
        "blocked": S.BLOCKED,
        "pending": S.PENDING,
        "skipped": S.SKIPPED,
    }
    released = {"done", "boom", "running", "queued", "paused", "retrying"}
    cancel, skip = fail_fast_plan(statuses, released)
    # Slot-free nodes first, so that cancelling "running" cannot start "queued".
    assert cancel == ["queued", "paused", "retrying", "running"]
    assert skip == ["blocked", "pending"]


def test_stop_order_puts_slot_free_nodes_first() -> None:
    statuses = {
        "a": S.RUNNING,
        "b": S.BLOCKED,
        "c": S.SUCCEEDED,
        "d": S.STOPPING,
        "e": S.QUEUED,
    }
    assert slot_free_first(statuses) == ["b", "e", "a", "d"]


@pytest.mark.parametrize(
    ("statuses", "failed", "stop_requested", "want"),
    [
        ({"a": S.SUCCEEDED, "b": S.SUCCEEDED}, False, False, S.SUCCEEDED),
        ({"a": S.SUCCEEDED, "b": S.SKIPPED}, False, False, S.SUCCEEDED),
        ({"a": S.FAILED, "b": S.SKIPPED}, True, False, S.FAILED),
        ({"a": S.FAILED, "b": S.CANCELLED}, True, False, S.FAILED),
        ({"a": S.LOST, "b": S.SUCCEEDED}, True, False, S.FAILED),
        ({"a": S.STOPPED, "b": S.STOPPED}, False, True, S.STOPPED),
        ({"a": S.FAILED, "b": S.STOPPED}, False, True, S.STOPPED),
        ({"a": S.FAILED, "b": S.STOPPED}, True, True, S.FAILED),
        ({"a": S.STOPPED, "b": S.SKIPPED}, False, False, S.STOPPED),
        ({"a": S.CANCELLED, "b": S.SKIPPED}, False, False, S.CANCELLED),
        ({"a": S.FAILED}, False, False, S.FAILED),
        ({"a": S.SUCCEEDED, "b": S.RUNNING}, False, False, None),
        ({"a": S.FAILED, "b": S.BLOCKED}, True, False, None),
    ],
)
def test_settle_status(
    statuses: dict[str, TaskStatus], failed: bool, stop_requested: bool, want: TaskStatus | None
) -> None:
    assert settle_status(statuses, failed=failed, stop_requested=stop_requested) is want
