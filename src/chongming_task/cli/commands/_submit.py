"""``submit TASK [--tasks MODULE]``: enqueue a task for the workers and print its id.

A thin adapter over :class:`chongming_task.Client` (docs/queue.md): the task is
stored ``queued`` at once, with its bucket, priority, due time and recipe, so ``ps``
and ``status`` show it and ``stop`` cancels it before any worker takes it. With
``--tasks`` (or ``CHONGMING_TASKS``) ``submit`` loads the same task module as the
worker, so that an unknown name or arguments that do not fit are refused here, before
anything is written; without it the task is only enqueued, unchecked (the worker
refuses what it does not register). ``--wait`` follows the task to its end and prints
its value or its failure, exit 3 when it did not succeed (as ``run``).
"""

from __future__ import annotations

import argparse
import os
import re
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, ExitCode, UsageError
from chongming_task.cli._loader import register_tasks
from chongming_task.cli._parsing import env, refuse_enqueue_options, seconds
from chongming_task.cli._schema import document, task_doc
from chongming_task.cli.commands._common import (
    SubmissionRequest,
    add_submission_options,
    new_parser,
)
from chongming_task.cli.commands._run import summary, validate_submission
from chongming_task.errors import ConfigurationError
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task._model import JSONValue
    from chongming_task.cli._session import Session

__all__ = ["add_parsers", "new_task_id"]


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = new_parser(
        subparsers,
        "submit",
        help="enqueue a task for the workers; prints the task id",
        description="Store TASK queued for a `chongming-task worker` owning its bucket "
        "(visible in ps, cancellable with stop until a worker takes it). Prints the task id. "
        "With --tasks (or CHONGMING_TASKS) the name and arguments are checked against the "
        "module first; without it they are enqueued unchecked, and a name or arguments the "
        "workers' module does not fit fail the task on the worker. With --wait, waits for "
        "the task to end and prints its value or its failure (exit code 0 if it succeeded, "
        "3 if not).",
        handler=cmd_submit,
    )
    add_submission_options(parser, tasks_help="; optional: without it nothing is checked")
    due = parser.add_mutually_exclusive_group()
    due.add_argument(
        "--delay",
        metavar="SECONDS|DURATION",
        help="not before this long from now: seconds (90) or a duration (30m, 2h, 1d)",
    )
    due.add_argument(
        "--not-before",
        metavar="ISO_TIME",
        help="not before this instant, an ISO time with its offset (2026-03-01T08:00:00+08:00)",
    )
    parser.add_argument(
        "--traceparent",
        metavar="HEADER",
        help="W3C traceparent of the caller's trace: the task's span becomes its child "
        "(env TRACEPARENT; default: the current OpenTelemetry span, when there is one)",
    )
    parser.add_argument(
        "--unique-key",
        metavar="KEY",
        help="create nothing while a task submitted with KEY is unfinished: print that "
        "task's id instead (docs/queue.md, unique work)",
    )
    parser.add_argument(
        "--unique-for",
        metavar="DURATION",
        help="with --unique-key: a task with KEY that finished within DURATION (90s, 30m, "
        "12h, 7d; a bare number is seconds) counts too",
    )
    parser.add_argument(
        "--concurrency-key",
        type=_concurrency_key,
        metavar="KEY",
        help="the key fleet limits count the task under (e.g. tenant:42; see `limits`)",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="wait until the task ends; print its value (JSON) or its failure",
    )
    parser.add_argument(
        "--timeout", type=seconds, metavar="SECONDS", help="with --wait: give up after SECONDS"
    )


def _concurrency_key(value: str) -> str:
    from chongming_task.stores._limits import check_concurrency_key

    try:
        return check_concurrency_key(value)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
        from chongming_task.observability import inject_trace_context

        return inject_trace_context()
    except ConfigurationError:  # no otel extra: nothing to carry
        return {}


def unique_options(args: argparse.Namespace) -> tuple[str | None, float | None]:
    """``--unique-key`` and ``--unique-for`` checked as ``Client.enqueue`` checks them.

    Raises:
        UsageError: A malformed key or duration, or ``--unique-for`` alone (exit 2).
    """
    from chongming_task._retention import parse_age
    from chongming_task._validation import check_unique

    if args.unique_for is not None and args.unique_key is None:
        raise UsageError("--unique-for needs --unique-key (the window of that key)")
    try:
        window = None if args.unique_for is None else parse_age(args.unique_for)
        return check_unique(args.unique_key, window)
    except ConfigurationError as exc:
        raise UsageError(f"--unique-key/--unique-for: {exc}") from None


def due_options(args: argparse.Namespace) -> tuple[float | None, datetime | None]:
    """``--delay`` (seconds) and ``--not-before`` (an aware instant), checked.

    Raises:
        UsageError: A malformed duration, or a time that is not ISO with an offset.
    """
    from chongming_task._retention import parse_age
    from chongming_task._timespec import parse_instant

    delay: float | None = None
    if args.delay is not None:
        try:
            delay = seconds(args.delay)
        except (ValueError, argparse.ArgumentTypeError):
            try:
                delay = parse_age(args.delay).total_seconds()
            except ConfigurationError:
                raise UsageError(
                    f"--delay {args.delay!r} is not a duration; give seconds (90) or a number "
                    f"and a unit (30m, 2h, 1d), at most 100 years"
                ) from None
    not_before: datetime | None = None
    if args.not_before is not None:
        text = args.not_before.strip()
        if text[:1].isdigit() and not any(char in text for char in "-:T"):
            raise UsageError(
                f"--not-before {args.not_before!r} is not a time; give an ISO time with its "
                f"offset (2026-03-01T08:00:00+08:00), or use --delay for a duration"
            )
        try:
            not_before = parse_instant(text, now=datetime.now(UTC), name="--not-before")
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
    return delay, not_before


def cmd_submit(args: argparse.Namespace, session: Session) -> int:
    from chongming_task.controller import Controller
    from chongming_task.policies import BucketPolicy
    from chongming_task.queue import Client

    if args.timeout is not None and (args.timeout <= 0 or not args.wait):
        raise UsageError("--timeout needs --wait and a positive number of seconds")
    unique_key, unique_for = unique_options(args)
    delay, not_before = due_options(args)
    definitions: Controller | None = None
    if args.tasks or env("TASKS"):
        request, module, spec = validate_submission(args, session)
        definitions = session.track(Controller())
        register_tasks(definitions, module, spec)
    else:  # only enqueued: the name and arguments are the workers' to check
        request = SubmissionRequest.from_args(args, session)
    refuse_enqueue_options(request.kwargs)
    store = session.open_store(create=True)
    client = Client(
        store,
        tasks=definitions,
        bucket_policy=BucketPolicy(num_buckets=session.options.num_buckets),
        actor=session.issuer,
    )
    task_id = request.task_id or new_task_id(request.name)
    try:
        handle = client.enqueue(
            request.name,
            task_id=task_id,
            bucket_key=request.bucket_key,
            priority=request.priority or 0,
            tags=request.tags,
            label=request.label,
            delay=delay,
            not_before=not_before,
            metadata=trace_metadata(args.traceparent),
            unique_key=unique_key,
            unique_for=unique_for,
            concurrency_key=args.concurrency_key,
            **request.kwargs,
        )
    except ConfigurationError as exc:
        raise CommandFailed(str(exc)) from exc
    output = session.output
    if not args.wait:
        if session.json:
            output.json(
                document("submit", task_id=handle.task_id, created=handle.created, task=None)
            )
        else:
            output.print(handle.task_id)
        return ExitCode.OK
    if not session.json:
        output.print(handle.task_id)
    try:
        snapshot = client.wait(handle.task_id, args.timeout).snapshot
    except TimeoutError as exc:
        state = store.get(handle.task_id)
        shown = state.status.value if state is not None else "gone"
        raise CommandFailed(
            f"task {handle.task_id!r} is still {shown} after {args.timeout:g}s"
        ) from exc
    if session.json:
        output.json(
            document(
                "submit", task_id=handle.task_id, created=handle.created, task=task_doc(snapshot)
            )
        )
    else:
        output.print(summary(snapshot))
    return ExitCode.OK if snapshot.status is TaskStatus.SUCCEEDED else ExitCode.TASK_NOT_SUCCEEDED
