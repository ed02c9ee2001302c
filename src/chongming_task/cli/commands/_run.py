"""``run TASK --tasks MODULE``: submit and execute in the foreground until terminal.

``run`` is a foreground process (§4.5): when it exits nobody supervises the task, so
Ctrl-C and SIGTERM do not just kill it -- they go through ``controller.close()``,
which stops the task at its next checkpoint and writes ``stopped`` to the store.
Everything that can be refused (task name, arguments, bucket) is checked before the
store is opened, so a refused ``run`` writes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, ExitCode
from chongming_task.cli._live import make_display
from chongming_task.cli._loader import register_tasks
from chongming_task.cli._logs import library_logging
from chongming_task.cli._schema import document, task_doc, transition_doc
from chongming_task.cli._signals import on_shutdown_signals
from chongming_task.cli.commands._common import (
    SubmissionRequest,
    add_submission_options,
    check_arguments,
    new_parser,
    node_controller,
    scratch_controller,
)
from chongming_task.errors import ConfigurationError
from chongming_task.states import TaskStatus
from chongming_task.worker import LogTail

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot
    from chongming_task.cli._session import Session
    from chongming_task.run import TaskRun
    from chongming_task.stores._base import TaskStore

__all__ = ["add_parsers", "summary", "validate_submission"]

#: Seconds between two looks at the running task.
REFRESH = 0.1
#: Seconds ``close()`` waits for the task to stop after Ctrl-C / SIGTERM.
STOP_TIMEOUT = 30.0


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "run",
        help="submit a task and execute it in the foreground until it ends",
        description="Submit TASK and execute it in this process until it reaches a terminal "
        "state. Exit code 0 if it succeeded, 3 if it did not. Ctrl-C / SIGTERM stop it "
        "cleanly.",
        handler=cmd_run,
    )
    add_submission_options(parser)


def validate_submission(
    args: argparse.Namespace, session: Session
) -> tuple[SubmissionRequest, Any, str]:
    """Parse and check everything about a submission without touching the store.

    Returns the request, the imported task module and its ``--tasks`` spec.
    """
    request = SubmissionRequest.from_args(args, session)
    scratch, module, spec = scratch_controller(args, session)
    check_arguments(scratch, request.name, request.kwargs)
    return request, module, spec


def _submit(controller: Any, request: SubmissionRequest) -> TaskRun:
    options = {
        "task_id": request.task_id,
        "tags": list(request.tags) or None,
        "priority": request.priority,
        "bucket_key": request.bucket_key,
        "label": request.label,
    }
    given = {key: value for key, value in options.items() if value is not None}
    run: TaskRun = controller.submit(request.name, **given, **request.kwargs)
    return run


def cmd_run(args: argparse.Namespace, session: Session) -> int:
    request, module, spec = validate_submission(args, session)
    store = session.open_store(create=True)
    if request.task_id is not None and store.get(request.task_id) is not None:
        raise CommandFailed(f"task id {request.task_id!r} already exists; choose another --task-id")
    controller = node_controller(session, store)
    register_tasks(controller, module, spec)
    output = session.output
    interrupted = False
    tail = LogTail(controller)
    # A signal only records itself; the loop below acts on it. Raising from the handler
    # instead (Python's default for Ctrl-C) would let it land anywhere, for instance
    # inside submit() after the task began, and skip the clean stop below.
    received: list[str] = []
    try:
        with on_shutdown_signals(received.append), library_logging(output):
            try:
                run = _submit(controller, request)
            except ConfigurationError as exc:  # well formed, refused: exit 1 (§8.10)
                raise CommandFailed(str(exc)) from exc
            interrupted = _follow(run, controller, tail, session, received)
    finally:
        controller.close(reason="chongming-task run ended", timeout=STOP_TIMEOUT)
        tail.close()
    snapshot = run.snapshot
    unrecorded = _unrecorded(store, snapshot)
    if session.json:
        output.json(
            document(
                "run",
                task=task_doc(snapshot),
                transitions=[transition_doc(item) for item in run.transitions],
                interrupted=interrupted,
            )
        )
    else:
        output.print(summary(snapshot))
    if unrecorded is not None:
        raise CommandFailed(unrecorded)
    return ExitCode.OK if snapshot.status is TaskStatus.SUCCEEDED else ExitCode.TASK_NOT_SUCCEEDED


def _follow(
    run: TaskRun, controller: Any, tail: LogTail, session: Session, received: list[str]
) -> bool:
    """Show the run until it ends; once a signal is received stop it cleanly.

    Returns True if a signal interrupted the run. Signals that arrive while the stop
    runs are recorded and ignored: the stop is bounded by ``STOP_TIMEOUT``.
    """
    output = session.output
    display = make_display(output) if not session.json else None
    try:
        while not run.done and not received:
            if display is not None:
                display.update(run)
            tail.flush()
            with contextlib.suppress(TimeoutError):
                run.wait(timeout=REFRESH)
    finally:
        if display is not None:
            display.update(run)
            display.close()
    if not received or run.done:
        return bool(received)
    what = "SIGTERM" if received[0] == "SIGTERM" else "interrupted"
    output.notice(f"{what}: stopping {run.task_id} cleanly (up to {STOP_TIMEOUT:g}s)")
    controller.close(reason=f"{what} (chongming-task run)", timeout=STOP_TIMEOUT)
    return True


def _unrecorded(store: TaskStore, snapshot: TaskSnapshot) -> str | None:
    """Why the store does not hold the run's final state, or ``None`` when it does.

    The run ended here whatever the store did; when its writes failed (a damaged file,
    a full disk) the controller logs that and leaves the task to reconcile, and the
    command must not report success for what nobody else can see.
    """
    from chongming_task.errors import StoreError

    try:
        stored = store.get(snapshot.task_id)
    except StoreError as exc:
        reason = str(exc)
    else:
        if stored is not None and stored.status_version >= snapshot.status_version:
            return None
        reason = (
            "it holds no such task"
            if stored is None
            else f"it still holds {stored.status.value} (version {stored.status_version})"
        )
    return (
        f"{snapshot.task_id} ended {snapshot.status.value} here, but the store could not "
        f"record it ({reason}); check the database, then run `reconcile`"
    )


def summary(snapshot: TaskSnapshot) -> str:
    """``id: succeeded, outcome <value as JSON>`` or ``id: failed, <kind>: <message>``.

    The last line of ``run`` and ``submit --wait``; the value and the message redacted
    as ``status`` shows them.
    """
    import json

    from chongming_task._redact import redact, redact_json

    text = f"{snapshot.task_id}: {snapshot.status.value}"
    if snapshot.status is TaskStatus.SUCCEEDED:
        value = json.dumps(redact_json(snapshot.outcome), ensure_ascii=False, sort_keys=True)
        text += f", outcome {value}"
    if snapshot.failure is not None:
        text += f", {snapshot.failure.kind.value}: {redact(snapshot.failure.message)}"
    return text
