"""Guide behaviours users reported as wrong, each pinned by the section it comes from.

§4.3 (resume after a pause in ``retry_wait``), §9.2 (``can()`` is the table), §9.3
(``mark_running()``'s guard, ``force_transition()``'s guard), §10 (guard failures are
``InvalidTransition``), §8.10 (CLI exit codes), §8.12 (task parameters named like
submit options), §7.2 (no InlineExecutor under a Controller), §8.13
(``hasattr(ctx, "artifact_dir")``).
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Controller
from chongming_task._model import Failure, FailureKind, Transition
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import InvalidTransition
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.run import TaskRun
from chongming_task.states import GUIDE_ADDITIONS, TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock

from .conftest import PATIENCE, S, path

FAILURE = Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=True)

# ---------------------------------------------------------------- §4.3
# (``store``: each backend in turn, tests/conftest.py)

#: A run whose first attempt fails, paused in retry_wait, resumed, second attempt ok.
PAUSED_IN_RETRY_WAIT = [
    S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.RETRY_WAIT,
    S.PAUSED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED,
]  # fmt: skip


class Flaky:
    """Fails its first attempt, returns the attempt number afterwards."""

    def __init__(self) -> None:
        self.attempts: list[int] = []

    def __call__(self, ctx: Any) -> int:
        self.attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise OSError("transient")
        return int(ctx.attempt)


class PauseResumeInRetryWait:
    """A listener that pauses and resumes the run as soon as it enters ``retry_wait``.

    It runs in the delivering thread, normally the carrier that just recorded
    ``retry_wait``, before that carrier goes back to wait for the backoff: the window
    in which the controller used to find the run "already running" and leave it
    queued forever. ``done`` tells the test both calls returned.
    """

    def __init__(self, pause: Any, resume: Any) -> None:
        self._pause = pause
        self._resume = resume
        self.results: list[bool] = []
        self.done = threading.Event()

    def __call__(self, transition: Transition, _snapshot: Any) -> None:
        if transition.to_status is S.RETRY_WAIT and not self.done.is_set():
            try:
                self.results.append(bool(self._pause()))
                self.results.append(bool(self._resume()))
            finally:
                self.done.set()


def test_s4_3_bare_task_run_paused_in_retry_wait_runs_its_next_attempt() -> None:
    clock = FakeClock()
    body = Flaky()
    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(10)))
    hook = PauseResumeInRetryWait(run.pause, run.resume)
    run.add_listener(hook)
    run.start()
    assert hook.done.wait(PATIENCE)
    assert hook.results == [True, True]
    outcome = run.wait(PATIENCE)  # the backoff is not waited again: it was resumed
    assert outcome.ok
    assert outcome.value == 2
    assert body.attempts == [1, 2]
    assert path(run) == PAUSED_IN_RETRY_WAIT
    resumed = run.transitions[6]
    assert (resumed.from_status, resumed.to_status) == (S.PAUSED, S.QUEUED)


def test_s4_3_controller_paused_in_retry_wait_runs_its_next_attempt(store: TaskStore) -> None:
    clock = FakeClock()
    controller = Controller(store, clock=clock)
    try:
        body = Flaky()
        controller.register(
            "flaky", body, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(10))
        )
        run = controller.submit("flaky", task_id="flaky-1", blocked=True)
        hook = PauseResumeInRetryWait(
            lambda: controller.pause("flaky-1"), lambda: controller.resume("flaky-1")
        )
        run.add_listener(hook)
        run.release()
        assert hook.done.wait(PATIENCE)
        assert hook.results == [True, True]
        outcome = run.wait(PATIENCE)  # used to time out: "could not be started"
        assert outcome.ok
        assert outcome.value == 2
        assert body.attempts == [1, 2]
        assert path(run) == [S.PENDING, S.BLOCKED, *PAUSED_IN_RETRY_WAIT[1:]]
    finally:
        controller.close(timeout=PATIENCE)  # every deferred write is out after this
    stored = store.get("flaky-1")
    assert stored is not None
    assert stored.status is S.SUCCEEDED
    assert stored.attempt == 2
    assert [record.to_status for record in store.history("flaky-1")] == path(run)


# ---------------------------------------------------------------- §9.2

GUIDE_9_2 = {
    S.PENDING: {S.BLOCKED, S.QUEUED, S.SKIPPED, S.CANCELLED, S.STOPPED},
    S.BLOCKED: {S.QUEUED, S.SKIPPED, S.CANCELLED, S.STOPPED},
    S.QUEUED: {S.STARTING, S.PAUSED, S.SKIPPED, S.STOPPED, S.CANCELLED},
    S.STARTING: {S.RUNNING, S.RETRY_WAIT, S.PAUSING, S.STOPPING, S.FAILED, S.CANCELLED, S.LOST},
    S.RUNNING: {S.SUCCEEDED, S.FAILED, S.RETRY_WAIT, S.PAUSING, S.STOPPING, S.CANCELLED, S.LOST},
    S.PAUSING: {S.PAUSED, S.RUNNING, S.STOPPING, S.FAILED, S.CANCELLED, S.LOST},
    S.PAUSED: {S.QUEUED, S.RUNNING, S.STOPPED, S.CANCELLED},
    S.RETRY_WAIT: {S.STARTING, S.QUEUED, S.PAUSED, S.STOPPED, S.FAILED, S.CANCELLED},
    S.STOPPING: {S.STOPPED, S.SUCCEEDED, S.FAILED, S.LOST},
    S.SUCCEEDED: set(),
    S.FAILED: set(),
    S.STOPPED: set(),
    S.CANCELLED: set(),
    S.SKIPPED: set(),
    S.LOST: set(),
}


def _machine_in(status: TaskStatus) -> StateMachine:
    machine = StateMachine.create("t", "task", max_attempts=3)
    if status is not S.PENDING:
        machine.force_transition(status, actor="test", reason=f"put in {status.value}")
    return machine


@pytest.mark.parametrize(
    ("source", "target"),
    list(itertools.product(TaskStatus, TaskStatus)),
    ids=lambda status: status.value,
)
def test_s9_2_can_is_exactly_the_guide_table(source: TaskStatus, target: TaskStatus) -> None:
    # The guide's table, plus the documented additions an issue asked for (a worker
    # shutdown hands a task it stopped back to the queue: stopping -> queued);
    # tests/model/test_states.py pins that list.
    machine = _machine_in(source)
    expected = target in GUIDE_9_2[source] or (source, target) in GUIDE_ADDITIONS
    assert machine.can(target) is expected


def test_s9_2_running_has_no_skipped_edge_and_a_skipping_body_still_ends_skipped() -> None:
    from chongming_task.runtime import TaskSkipped

    machine = _machine_in(S.RUNNING)
    assert machine.can(S.SKIPPED) is False
    with pytest.raises(InvalidTransition, match="running -> skipped"):
        machine.mark_skipped(reason="nothing to do")
    assert machine.status is S.RUNNING

    def nothing_new(ctx: Any) -> None:
        raise TaskSkipped("nothing new")

    run = TaskRun(nothing_new)
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.SKIPPED  # the body's own verdict, outside the table
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SKIPPED]
    assert run.transitions[-1].trigger == "runtime:skipped"
    assert run.transitions[-1].reason == "nothing new"


# ---------------------------------------------------------------- §9.3 and §10


def test_s9_3_mark_running_from_an_in_place_pause_follows_the_started_at_guard() -> None:
    clock = FakeClock()
    machine = StateMachine.create("t", "task", clock=clock)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    started_at = machine.snapshot.started_at
    machine.request_pause()
    machine.mark_paused()
    assert machine.snapshot.started_at == started_at  # paused in place
    clock.advance(5)
    machine.mark_running()
    assert machine.status is S.RUNNING
    assert machine.snapshot.started_at == started_at
    assert [(r.from_status, r.to_status) for r in machine.transitions[-3:]] == [
        (S.RUNNING, S.PAUSING),
        (S.PAUSING, S.PAUSED),
        (S.PAUSED, S.RUNNING),
    ]


def test_s9_3_mark_running_from_a_pause_that_never_started_is_refused() -> None:
    for setup in ("queued", "retry_wait"):
        machine = StateMachine.create("t", "task", max_attempts=2)
        machine.mark_queued()
        if setup == "retry_wait":
            machine.mark_starting()
            machine.mark_running()
            machine.mark_retry_wait(FAILURE, delay=1)
        machine.request_pause()
        assert machine.status is S.PAUSED
        assert machine.snapshot.started_at is None
        version = machine.snapshot.status_version
        with pytest.raises(InvalidTransition, match="no started attempt") as info:
            machine.mark_running()
        assert info.value.current is S.PAUSED
        assert info.value.target is S.RUNNING
        assert machine.snapshot.status_version == version


@pytest.mark.parametrize(("actor", "reason", "missing"), [
    ("", "checked by hand", "actor"),
    ("  ", "checked by hand", "actor"),
    ("ops", "", "reason"),
    ("ops", " ", "reason"),
])  # fmt: skip
def test_s9_3_force_transition_without_audit_is_invalid_transition(
    actor: str, reason: str, missing: str
) -> None:
    machine = _machine_in(S.LOST)
    version = machine.snapshot.status_version
    with pytest.raises(InvalidTransition) as info:
        machine.force_transition(S.FAILED, actor=actor, reason=reason)
    error = info.value
    assert (error.current, error.target, error.action) == (S.LOST, S.FAILED, "machine:forced")
    message = str(error)
    assert "lost -> failed" in message
    assert f"non-empty {missing}" in message
    assert "force_transition()" in message
    assert machine.status is S.LOST
    assert machine.snapshot.status_version == version
    machine.force_transition(S.FAILED, actor="ops", reason="checked by hand")
    assert machine.transitions[-1].actor == "ops"


# ---------------------------------------------------------------- §8.10

GUIDE_TASKS = str(Path(__file__).with_name("guide_tasks.py"))


def _cli(*argv: str) -> tuple[int, str, str]:
    import io

    from chongming_task.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("case", "line", "code", "fragment"),
    [
        ("unregistered-task", ["run", "nosuch", "--tasks", GUIDE_TASKS], 1, "unknown task"),
        ("unregistered-submit", ["submit", "nosuch", "--tasks", GUIDE_TASKS], 1, "unknown task"),
        (
            "args-do-not-fit",
            ["run", "worker", "--tasks", GUIDE_TASKS, "--arg", "nope=1"],
            1,
            "arguments do not fit",
        ),
        (
            "owned-buckets-without-bucket-key",
            ["--owned-buckets", "0-15", "run", "worker", "--tasks", GUIDE_TASKS, "--arg", "s=x"],
            1,
            "--bucket-key is required",
        ),
        ("unknown-flag", ["ps", "--no-such-flag"], 2, "unrecognized arguments"),
        ("missing-argument", ["status"], 2, "arguments are required: TASK_ID"),
        ("bad-type", ["ps", "--limit", "many"], 2, "invalid int value"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_s8_10_exit_code_1_is_command_failed_2_is_what_the_parser_rejects(
    backend: Any, case: str, line: list[str], code: int, fragment: str
) -> None:
    result, out, err = _cli("--db", backend.url, *line)
    assert result == code, (case, err)
    assert fragment in err, err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert out == ""
    if Path(backend.url).exists() or backend.dsn is not None:
        assert backend.open().query() == []  # refused before anything was written


# ---------------------------------------------------------------- §8.12


def mark(ctx: Any, label: str) -> str:
    """A task whose parameter is named like a submit option (``label=``)."""
    return f"marked {label}"


def test_s8_12_a_parameter_named_like_a_submit_option_is_set_positionally(
    store: TaskStore,
) -> None:
    from chongming_task import Pipeline

    controller = Controller(store)
    try:
        controller.register("mark", mark)  # used to be refused
        pipeline = Pipeline("marks")
        before = pipeline.node("mark", "before", node_id="before")
        pipeline.node("mark", "after", node_id="after", depends_on=[before])
        run = controller.submit_pipeline(pipeline)
        outcome = run.wait(timeout=PATIENCE)
        assert outcome.ok
        assert outcome.values() == {"before": "marked before", "after": "marked after"}
        direct = controller.submit("mark", "direct", task_id="direct", label="a label")
        assert direct.wait(PATIENCE).value == "marked direct"
        assert path(direct) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
        task_ids = dict(run.task_ids)
    finally:
        controller.close(timeout=PATIENCE)
    stored = store.get("direct")
    assert stored is not None
    assert stored.status is S.SUCCEEDED
    assert stored.label == "a label"  # the option, not the task's parameter
    assert stored.outcome == "marked direct"
    for node_id, task_id in task_ids.items():
        snapshot = store.get(task_id)
        assert snapshot is not None
        assert snapshot.status is S.SUCCEEDED
        assert snapshot.outcome == f"marked {node_id}"
        assert [t.to_status for t in store.history(task_id)][-3:] == [
            S.STARTING, S.RUNNING, S.SUCCEEDED,
        ]  # fmt: skip


def test_s8_12_only_a_keyword_only_parameter_named_like_an_option_is_refused() -> None:
    from chongming_task.errors import ConfigurationError

    def tagged(ctx: Any, *, label: str = "x") -> str:
        return label

    controller = Controller()
    try:
        with pytest.raises(ConfigurationError, match=r"keyword-only.*\['label'\]"):
            controller.register("tagged", tagged)
        assert "tagged" not in controller.task_names()
    finally:
        controller.close(timeout=PATIENCE)


# ---------------------------------------------------------------- §7.2


def test_s7_2_a_controller_refuses_the_inline_executor_and_says_what_to_use() -> None:
    from chongming_task.errors import ConfigurationError
    from chongming_task.runtime.executors.inline import InlineExecutor
    from chongming_task.runtime.executors.thread import ThreadExecutor

    with pytest.raises(ConfigurationError) as info:
        Controller(executor=InlineExecutor())
    message = str(info.value)
    assert "InlineExecutor" in message
    assert "ThreadExecutor" in message  # what to use instead
    assert "run_task" in message  # and where the inline executor does belong
    with Controller(executor=ThreadExecutor()) as controller:  # the default's explicit form
        controller.register("mark", mark)
        run = controller.submit("mark", "x")
        assert run.wait(PATIENCE).value == "marked x"
        assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    outcome = run_task_inline(InlineExecutor())
    assert outcome == "inline ok"  # still fine on its own (§7.2 sample)


def run_task_inline(executor: Any) -> Any:
    from chongming_task.run import run_task

    return run_task(lambda ctx: "inline ok", executor=executor).value


# ---------------------------------------------------------------- §8.13 / §2.4


def test_s8_13_hasattr_artifact_dir_answers_instead_of_raising(tmp_path: Path) -> None:
    from chongming_task.errors import ConfigurationError

    seen: dict[str, Any] = {}

    def probe(ctx: Any) -> str:
        seen["hasattr"] = hasattr(ctx, "artifact_dir")  # used to raise inside the task
        seen["getattr"] = getattr(ctx, "artifact_dir", None)
        try:
            ctx.artifact_dir  # noqa: B018
        except ConfigurationError as exc:  # still the documented configuration error
            seen["message"] = str(exc)
            seen["attribute_error"] = isinstance(exc, AttributeError)
        return "probed"

    run = TaskRun(probe)
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.ok
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert seen["hasattr"] is False
    assert seen["getattr"] is None
    assert "artifact_dir=" in seen["message"]  # the helpful message is kept
    assert seen["attribute_error"] is True

    def write(ctx: Any) -> str:
        assert hasattr(ctx, "artifact_dir")
        target = ctx.artifact_dir / "part-0.txt"
        target.write_text("x")
        return str(target.relative_to(tmp_path))

    enabled = TaskRun(write, task_id="job-1", artifact_dir=tmp_path)
    enabled.start()
    written = enabled.wait(PATIENCE)
    assert written.ok
    assert written.value == "job-1/attempt-1/part-0.txt"
    assert path(enabled) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
