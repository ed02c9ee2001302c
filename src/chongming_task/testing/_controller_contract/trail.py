"""History and order: once a call returned, the stored trail is the run's own.

``controller.history(id)`` (and the second store's ``history``) must equal
``run.transitions`` record for record (version, from, to, trigger), with versions
consecutive, each record leaving the status the previous one reached, and the
snapshot's ``status_version`` that of the last record.
"""

from __future__ import annotations

from chongming_task.testing._controller_contract._harness import (
    DEADLINE,
    ControllerHarness,
    S,
    trail_of,
)

__all__ = ["TrailCases"]


class TrailCases(ControllerHarness):
    def test_trail_of_a_success(self) -> None:
        controller = self.controller()
        run = controller.submit("hold", task_id="job")
        self.gate.set()
        controller.wait("job", timeout=DEADLINE)
        self.assert_trail(controller, run, "wait('job') of a success")

    def test_trail_of_a_failure(self) -> None:
        controller = self.controller()
        run = controller.submit("boom", task_id="job")
        controller.wait("job", timeout=DEADLINE)
        self.assert_trail(controller, run, "wait('job') of a failure")

    def test_trail_of_a_retry(self) -> None:
        controller = self.controller()
        run = controller.submit("flaky", task_id="job")
        outcome = controller.wait("job", timeout=DEADLINE)
        assert outcome.status is S.SUCCEEDED, f"the run ended {outcome.status.value}"
        statuses = [to for _, _, to, _ in trail_of(run.transitions)]
        assert S.RETRY_WAIT in statuses, f"no retry in the run's own trail: {statuses}"
        self.assert_trail(controller, run, "wait('job') of a retried success")

    def test_trail_of_a_stop(self) -> None:
        controller = self.controller()
        run = controller.submit("hold", task_id="job")
        self.wait_entered("job")
        controller.stop("job", reason="contract")
        outcome = controller.wait("job", timeout=DEADLINE)
        assert outcome.status is S.STOPPED, f"the run ended {outcome.status.value}"
        self.assert_trail(controller, run, "wait('job') of a stopped run")

    def test_trail_of_a_pause_and_resume_in_place(self) -> None:
        controller = self.controller()
        run = controller.submit("hold", task_id="job")
        self.wait_entered("job")
        self.pause_confirmed(controller, "job")
        self.assert_trail(controller, run, "pause('job') returned True")
        assert controller.resume("job") is True
        self.assert_trail(controller, run, "resume('job') returned True")
        self.gate.set()
        controller.wait("job", timeout=DEADLINE)
        self.assert_trail(controller, run, "wait('job') after a pause in place")

    def test_trail_of_a_pause_while_queued(self) -> None:
        controller = self.controller(max_parallel=1)
        controller.submit("hold", task_id="blocker")
        run = controller.submit("hold", task_id="waiting")
        self.assert_trail(controller, run, "submit('waiting') returned (queued)")
        self.pause_confirmed(controller, "waiting")
        self.assert_trail(controller, run, "pause('waiting') of a queued task returned True")
        assert controller.resume("waiting") is True
        self.assert_trail(controller, run, "resume('waiting') returned True")
        self.gate.set()
        controller.wait("waiting", timeout=DEADLINE)
        self.assert_trail(controller, run, "wait('waiting') after a pause while queued")
