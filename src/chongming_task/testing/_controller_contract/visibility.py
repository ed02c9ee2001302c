"""Read-your-writes: once a control call returned, every reader shows its effect.

No case polls or waits before it reads: the read is the very next statement after the
call. Readers are the controller's ``get``/``list_tasks``/``stats``, the stores' own
``get``, and the same through a second store instance on the same database.
"""

from __future__ import annotations

from chongming_task.testing._controller_contract._harness import DEADLINE, ControllerHarness, S

__all__ = ["VisibilityCases"]

ACTIVE = frozenset({S.STARTING, S.RUNNING})


class VisibilityCases(ControllerHarness):
    def test_submit_is_visible_at_once(self) -> None:
        controller = self.controller(max_parallel=1)
        controller.submit("hold", task_id="first")
        self.assert_visible(controller, "submit('first') with a free slot", {"first": ACTIVE})
        controller.submit("hold", task_id="second")
        self.assert_visible(
            controller,
            "submit('second') with the only slot taken",
            {"first": ACTIVE, "second": {S.QUEUED}},
        )

    def test_pause_of_a_running_task_is_visible_at_once(self) -> None:
        controller = self.controller()
        controller.submit("hold", task_id="job")
        self.wait_entered("job")
        self.pause_confirmed(controller, "job")
        self.assert_visible(controller, "pause('job') returned True", {"job": {S.PAUSED}})

    def test_resume_in_place_is_visible_at_once(self) -> None:
        controller = self.controller()
        controller.submit("hold", task_id="job")
        self.wait_entered("job")
        self.pause_confirmed(controller, "job")
        assert controller.resume("job") is True, "resume('job') of a paused run returned False"
        self.assert_visible(controller, "resume('job') returned True", {"job": {S.RUNNING}})

    def test_pause_of_a_queued_task_is_visible_at_once(self) -> None:
        controller = self.controller(max_parallel=1)
        controller.submit("hold", task_id="blocker")
        controller.submit("hold", task_id="waiting")
        self.pause_confirmed(controller, "waiting")
        self.assert_visible(
            controller,
            "pause('waiting') of a queued task returned True",
            {"blocker": ACTIVE, "waiting": {S.PAUSED}},
        )

    def test_resume_of_a_queued_pause_is_visible_at_once(self) -> None:
        controller = self.controller(max_parallel=1)
        controller.submit("hold", task_id="blocker")
        controller.submit("hold", task_id="waiting")
        self.pause_confirmed(controller, "waiting")
        assert controller.resume("waiting") is True, "resume('waiting') returned False"
        self.assert_visible(
            controller,
            "resume('waiting') returned True (the slot is still taken)",
            {"blocker": ACTIVE, "waiting": {S.QUEUED}},
        )

    def test_stop_of_a_running_task_is_visible_at_once(self) -> None:
        controller = self.controller()
        controller.submit("hold", task_id="job")
        self.wait_entered("job")
        assert controller.stop("job", reason="contract") is True, "stop('job') returned False"
        self.assert_visible(controller, "stop('job') returned", {"job": {S.STOPPING, S.STOPPED}})

    def test_stop_of_a_queued_task_is_visible_at_once(self) -> None:
        controller = self.controller(max_parallel=1)
        controller.submit("hold", task_id="blocker")
        controller.submit("hold", task_id="waiting")
        assert controller.stop("waiting", reason="contract") is True
        self.assert_visible(
            controller,
            "stop('waiting') of a queued task returned",
            {"blocker": ACTIVE, "waiting": {S.STOPPED}},
        )

    def test_wait_shows_success_at_once(self) -> None:
        controller = self.controller()
        controller.submit("hold", task_id="job")
        self.gate.set()
        outcome = controller.wait("job", timeout=DEADLINE)
        assert outcome.status is S.SUCCEEDED, f"the run ended {outcome.status.value}"
        self.assert_visible(controller, "wait('job') returned", {"job": {S.SUCCEEDED}})

    def test_wait_shows_failure_at_once(self) -> None:
        controller = self.controller()
        controller.submit("boom", task_id="job")
        outcome = controller.wait("job", timeout=DEADLINE)
        assert outcome.status is S.FAILED, f"the run ended {outcome.status.value}"
        self.assert_visible(controller, "wait('job') returned", {"job": {S.FAILED}})

    def test_wait_shows_a_retried_success_at_once(self) -> None:
        controller = self.controller()
        controller.submit("flaky", task_id="job")
        outcome = controller.wait("job", timeout=DEADLINE)
        assert outcome.status is S.SUCCEEDED, f"the run ended {outcome.status.value}"
        self.assert_visible(controller, "wait('job') returned", {"job": {S.SUCCEEDED}})

    def test_wait_shows_a_stop_at_once(self) -> None:
        controller = self.controller()
        controller.submit("hold", task_id="job")
        self.wait_entered("job")
        controller.stop("job", reason="contract")
        outcome = controller.wait("job", timeout=DEADLINE)
        assert outcome.status is S.STOPPED, f"the run ended {outcome.status.value}"
        self.assert_visible(controller, "wait('job') returned", {"job": {S.STOPPED}})
