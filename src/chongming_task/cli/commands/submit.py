"""``submit TASK --tasks MODULE``: hand a task to a running worker and print its id.

The submission is a command in the store (``chongming_task.worker.submission``) that
any worker owning the task's bucket takes. ``submit`` loads the same task module as
the worker so that an unknown name or arguments that do not fit are refused here,
before anything is written, instead of being discovered by a worker later.
"""

from __future__ import annotations

import argparse
import os
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from chongming_task.cli.commands._common import add_submission_options, new_parser
from chongming_task.cli.commands.run import validate_submission
from chongming_task.cli.errors import CommandFailed, ExitCode, UsageError
from chongming_task.cli.parsing import seconds
from chongming_task.cli.schema import document, task_doc
from chongming_task.errors import ConfigurationError
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task.cli.session import Session
    from chongming_task.model import JSONValue, TaskSnapshot
    from chongming_task.stores.base import TaskStore

__all__ = ["add_parsers", "new_task_id"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "submit",
        help="hand a task to a running worker; prints the task id",
        description="Write TASK as a submission that a running `chongming-task worker` "
        "takes. Prints the task id. With --wait, waits for the task to end (exit code 0 "
        "if it succeeded, 3 if not).",
        handler=cmd_submit,
    )
    add_submission_options(parser)
    parser.add_argument(
        "--traceparent",
        metavar="HEADER",
        help="W3C traceparent of the caller's trace: the task's span becomes its child "
        "(env TRACEPARENT; default: the current OpenTelemetry span, when there is one)",
    )
    parser.add_argument("--wait", action="store_true", help="wait until the task ends")
    parser.add_argument(
        "--timeout", type=seconds, metavar="SECONDS", help="with --wait: give up after SECONDS"
    )


def new_task_id(name: str) -> str:
    """A fresh task id for a submission: the task name plus 12 random hex digits."""
    return f"{name}-{uuid.uuid4().hex[:12]}"


#: ``version-traceid-parentid-flags`` (W3C Trace Context, version 00).
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


def trace_metadata(flag: str | None) -> dict[str, JSONValue]:
    """``{"traceparent": ...}`` from ``--traceparent``, ``TRACEPARENT`` or the current span.

    A given header must be well formed (a usage error otherwise: it was typed or
    passed on by a script, and a silently dropped trace is hard to notice). Without
    one, the current OpenTelemetry span is used when the ``otel`` extra is installed.
    """
    raw = flag if flag is not None else os.environ.get("TRACEPARENT")
    if raw is not None:
        value = raw.strip().lower()
        if not _TRACEPARENT.match(value) or value.split("-")[1] == "0" * 32:
            raise UsageError(
                f"--traceparent must be a W3C traceparent like "
                f"00-<32 hex trace id>-<16 hex span id>-01, got {raw!r}"
            )
        metadata: dict[str, JSONValue] = {"traceparent": value}
        state = os.environ.get("TRACESTATE")
        if state and flag is None:
            metadata["tracestate"] = state
        return metadata
    try:
        from chongming_task.observability.trace_context import inject_trace_context

        return inject_trace_context()
    except ConfigurationError:  # no otel extra: nothing to carry
        return {}


def cmd_submit(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.worker import Submission

    if args.timeout is not None and (args.timeout <= 0 or not args.wait):
        raise UsageError("--timeout needs --wait and a positive number of seconds")
    request, _module, _spec = validate_submission(args, session)
    submission = Submission(
        name=request.name,
        task_id=request.task_id or new_task_id(request.name),
        kwargs=request.kwargs,
        tags=request.tags,
        priority=request.priority,
        bucket_key=request.bucket_key,
        label=request.label,
        metadata=trace_metadata(args.traceparent),
    )
    store = session.open_store(create=True)
    try:
        submission.submit(store, issued_by=session.issuer)
    except ConfigurationError as exc:
        raise CommandFailed(str(exc)) from exc
    output = session.output
    if not args.wait:
        if session.json:
            output.json(document("submit", task_id=submission.task_id, task=None))
        else:
            output.print(submission.task_id)
        return ExitCode.OK
    if not session.json:
        output.print(submission.task_id)
    snapshot = _wait(store, submission.task_id, args.timeout)
    if session.json:
        output.json(document("submit", task_id=submission.task_id, task=task_doc(snapshot)))
    else:
        output.print(f"{snapshot.task_id}: {snapshot.status.value}")
    return ExitCode.OK if snapshot.status is TaskStatus.SUCCEEDED else ExitCode.TASK_NOT_SUCCEEDED


def _wait(store: TaskStore, task_id: str, timeout: float | None) -> TaskSnapshot:
    """Poll the store until ``task_id`` is terminal (a worker holds it meanwhile)."""
    from chongming_task.worker import describe_submission, find_submission

    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        snapshot = store.get(task_id)
        if snapshot is not None and snapshot.is_terminal:
            return snapshot
        if snapshot is None:
            command = find_submission(store, task_id)
            result = command.result if command is not None else None
            if isinstance(result, dict) and result.get("error"):
                assert command is not None
                raise CommandFailed(f"task {task_id!r} {describe_submission(command)}")
        if deadline is not None and time.monotonic() >= deadline:
            state = snapshot.status.value if snapshot else "not taken by a worker yet"
            raise CommandFailed(f"task {task_id!r} is still {state} after {timeout:g}s")
        time.sleep(0.1)
