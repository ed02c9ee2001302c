"""Random action sequences keep the state machine's invariants (hypothesis stateful)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from chongming_task._model import TaskSnapshot, Transition
from chongming_task.core.state_machine import RETRYABLE_TERMINALS, StateMachine, Triggers
from chongming_task.errors import AttemptsExhausted, ConfigurationError, InvalidTransition
from chongming_task.states import NON_OCCUPYING, OCCUPYING, TERMINAL, TRANSITIONS, TaskStatus
from chongming_task.testing import FakeClock

from .edges import ACTIONS

S = TaskStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ESCAPE_TRIGGERS = {Triggers.RETRY, Triggers.RESET, Triggers.FORCED}
Outcome = BaseException | None


class StateMachineRules(RuleBasedStateMachine):
    """Drives one StateMachine and checks every call and every state against the model."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(T0)
        self.machine = StateMachine.create("t1", "extract", max_attempts=2, clock=self.clock)

    # ------------------------------------------------------------ helpers

    def _call(self, call: object, *, escape: bool = False) -> tuple[Outcome, TaskSnapshot]:
        """Run ``call``; a refusal changes nothing, a success is one recorded edge."""
        before = self.machine.snapshot
        history = self.machine.transitions
        try:
            call()  # type: ignore[operator]
        except (InvalidTransition, AttemptsExhausted, ConfigurationError) as exc:
            assert self.machine.snapshot is before
            assert self.machine.transitions == history
            return exc, before
        after = self.machine.snapshot
        transitions = self.machine.transitions
        assert transitions[:-1] == history
        record = transitions[-1]
        assert record.from_status is before.status
        assert record.to_status is after.status
        assert record.version == after.status_version == before.status_version + 1
        assert record.at == after.updated_at == self.clock.now()
        if not escape:
            assert after.status in TRANSITIONS[before.status], (before.status, after.status)
            assert not before.status.is_terminal
            assert record.trigger not in ESCAPE_TRIGGERS
        return None, before

    # ------------------------------------------------------------ rules

    @rule(seconds=st.sampled_from([0, 0.5, 1, 60]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(action=st.sampled_from(sorted(ACTIONS)))
    def act(self, action: str) -> None:
        error, before = self._call(lambda: ACTIONS[action](self.machine))
        after = self.machine.snapshot
        if before.status.is_terminal:
            assert isinstance(error, InvalidTransition)
        if action == "mark_running":
            # Guide §9.3: the table's edge plus the one guard, ``started_at``.
            assert (error is None) == (
                S.RUNNING in TRANSITIONS[before.status] and before.started_at is not None
            )
        if action == "abort_pause":
            assert (error is None) == (before.status is S.PAUSING)
        if action == "resume":
            assert (error is None) == (before.status is S.PAUSED)
            if error is None:
                expected = S.RUNNING if before.started_at is not None else S.QUEUED
                assert after.status is expected
        if action == "mark_starting" and before.status in (S.QUEUED, S.RETRY_WAIT):
            if before.attempt >= before.max_attempts:
                assert isinstance(error, AttemptsExhausted)
            else:
                assert error is None
                assert after.attempt == before.attempt + 1
        if action == "mark_retry_wait" and before.status in (S.STARTING, S.RUNNING):
            assert (error is None) == (before.attempt < before.max_attempts)

    @rule(extra=st.integers(min_value=1, max_value=3))
    def retry(self, extra: int) -> None:
        error, before = self._call(lambda: self.machine.retry(extra_attempts=extra), escape=True)
        assert (error is None) == (before.status in RETRYABLE_TERMINALS)
        if error is None:
            after = self.machine.snapshot
            assert after.status is S.QUEUED
            assert after.attempt == before.attempt
            assert after.max_attempts >= before.attempt + extra

    @rule(confirm=st.booleans())
    def reset(self, confirm: bool) -> None:
        error, before = self._call(lambda: self.machine.reset(confirm=confirm), escape=True)
        if not confirm:
            assert isinstance(error, ConfigurationError)
        elif before.status in TERMINAL:
            assert error is None
            assert self.machine.status is S.PENDING
            assert self.machine.snapshot.attempt == 0
        else:
            assert isinstance(error, InvalidTransition)

    @rule(
        # Forcing into an occupying state is tested by hand; here it would void the
        # field invariants below, which only the natural edges guarantee.
        status=st.sampled_from(sorted(TERMINAL | NON_OCCUPYING)),
        actor=st.sampled_from(["", "  ", "ops"]),
        reason=st.sampled_from(["", "checked by hand"]),
    )
    def force(self, status: TaskStatus, actor: str, reason: str) -> None:
        error, _before = self._call(
            lambda: self.machine.force_transition(status, actor=actor, reason=reason),
            escape=True,
        )
        audited = bool(actor.strip()) and bool(reason.strip())
        assert (error is None) == audited
        if not audited:
            assert isinstance(error, InvalidTransition)  # a guard (§9.3, §10)
        if audited:
            assert self.machine.status is status

    @precondition(lambda self: self.machine.status is S.PENDING)
    @rule()
    def create_again(self) -> None:
        """Occasionally start over with a bigger budget, to reach deeper trajectories."""
        self.machine = StateMachine.create("t2", "load", max_attempts=3, clock=self.clock)

    # ------------------------------------------------------------ invariants

    @invariant()
    def history_is_exact(self) -> None:
        transitions: tuple[Transition, ...] = self.machine.transitions
        snap = self.machine.snapshot
        assert [t.version for t in transitions] == list(range(len(transitions)))
        assert transitions[0].from_status is None
        assert transitions[0].to_status is S.PENDING
        for previous, current in itertools.pairwise(transitions):
            assert current.from_status is previous.to_status
            assert current.at >= previous.at
            legal = current.to_status in TRANSITIONS[previous.to_status]
            assert legal or current.trigger in ESCAPE_TRIGGERS
        assert transitions[-1].to_status is snap.status
        assert snap.status_version == transitions[-1].version

    @invariant()
    def fields_agree_with_status(self) -> None:
        snap = self.machine.snapshot
        assert 0 <= snap.attempt <= snap.max_attempts
        assert (snap.finished_at is not None) == snap.status.is_terminal
        if snap.status in OCCUPYING:
            assert snap.started_at is not None
            assert snap.first_started_at is not None
        if snap.status in {S.PENDING, S.BLOCKED, S.QUEUED, S.RETRY_WAIT}:
            assert snap.started_at is None
        if snap.status is S.PENDING and self.machine.transitions[-1].trigger != Triggers.FORCED:
            assert snap.attempt == 0
        if self.machine.transitions[-1].trigger in ESCAPE_TRIGGERS:
            return
        if snap.status is S.SUCCEEDED:
            assert snap.failure is None
        elif snap.status in TERMINAL or snap.status is S.RETRY_WAIT:
            assert snap.failure is not None
            if snap.status in (S.STOPPED, S.CANCELLED):
                assert not snap.failure.retryable


StateMachineRules.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestStateMachineRules = StateMachineRules.TestCase
