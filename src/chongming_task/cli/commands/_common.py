"""Pieces shared by several commands: parser helpers, controllers, task look-up.

Every command builds its controller here, so the rules live in one place: a console
(query or control) controller never declares owned buckets, because a node that
declares buckets polls commands from construction (§8.14) and a console must never
take commands meant for a worker.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chongming_task._validation import check_task_id
from chongming_task.cli._errors import CommandFailed, UsageError
from chongming_task.cli._loader import load_task_module, register_tasks
from chongming_task.cli._parsing import env, integer, parse_task_kwargs
from chongming_task.errors import ConfigurationError
from chongming_task.policies import BucketPolicy

if TYPE_CHECKING:
    from types import ModuleType

    from chongming_task._model import TaskSnapshot
    from chongming_task.cli._session import Session
    from chongming_task.controller import Controller
    from chongming_task.stores._base import TaskStore

__all__ = [
    "SubmissionRequest",
    "add_global_options",
    "add_json_flag",
    "add_submission_options",
    "console_controller",
    "new_parser",
    "node_controller",
    "require_task",
    "scratch_controller",
    "task_parser",
]


#: ``(flag, metavar, help)`` of each global option.
_GLOBAL_OPTIONS: Final = (
    (
        "--db",
        "PATH|URL",
        "SQLite file, or a postgresql:// URL (env CHONGMING_DB; default ./chongming.db)",
    ),
    ("--dsn", "URL", "PostgreSQL URL; an alternative to --db URL (env CHONGMING_DSN)"),
    (
        "--num-buckets",
        "N",
        "number of buckets keys hash into (env CHONGMING_NUM_BUCKETS; default 64)",
    ),
    (
        "--owned-buckets",
        "RANGES",
        "buckets this node owns, e.g. 0-15,32,40-47 (env CHONGMING_OWNED_BUCKETS)",
    ),
    (
        "--owner",
        "ID",
        "this process's identity, not a filter (env CHONGMING_OWNER; default hostname:pid)",
    ),
)


def add_global_options(
    parser: argparse.ArgumentParser, *, but: frozenset[str] = frozenset()
) -> None:
    """The options every command accepts, before or after the subcommand name.

    Defaults are suppressed so a value given before the subcommand is not overwritten
    by the subparser's default; fallbacks to ``CHONGMING_*`` happen in ``Session``.
    ``but``: flags a command gives a meaning of its own after its name (``ps --owner``
    filters by holder; the identity is still given before the command).
    """
    group = parser.add_argument_group("global options")
    for flag, metavar, text in _GLOBAL_OPTIONS:
        if flag not in but:
            group.add_argument(flag, default=argparse.SUPPRESS, metavar=metavar, help=text)


def new_parser(
    subparsers: argparse._SubParsersAction[Any],
    name: str,
    *,
    help: str,
    description: str | None = None,
    handler: Callable[[argparse.Namespace, Session], int],
    json: bool = True,
    own_globals: frozenset[str] = frozenset(),
) -> argparse.ArgumentParser:
    """A subparser with the global options (but ``own_globals``), ``--json`` and its
    handler attached."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=description or help
    )
    add_global_options(parser, but=own_globals)
    if json:
        add_json_flag(parser)
    parser.set_defaults(handler=handler)
    return parser


def task_parser(
    subparsers: argparse._SubParsersAction[Any],
    name: str,
    *,
    help: str,
    handler: Callable[[argparse.Namespace, Session], int],
) -> argparse.ArgumentParser:
    """A :func:`new_parser` for a command on one task: its ``TASK_ID`` argument added."""
    parser = new_parser(subparsers, name, help=help, handler=handler)
    parser.add_argument("task_id", metavar="TASK_ID")
    return parser


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print a JSON document (schema in docs/cli.md) instead of text",
    )


def add_tasks_option(parser: argparse.ArgumentParser, more: str = "") -> None:
    parser.add_argument(
        "--tasks",
        metavar="MODULE",
        help="module (myapp.tasks) or file (tasks.py) that defines the tasks "
        f"(env CHONGMING_TASKS){more}",
    )


def add_create_schema_option(parser: argparse.ArgumentParser) -> None:
    """``--create-schema`` of the commands that create the store (``run``, ``submit``,
    ``worker``): consent to add the tables to a SQLite file that holds other tables."""
    parser.add_argument(
        "--create-schema",
        action="store_true",
        help="add the chongming-task tables to a SQLite file that already holds other "
        "tables (refused without it: such a file is usually another application's)",
    )


def add_submission_options(parser: argparse.ArgumentParser, *, tasks_help: str = "") -> None:
    """``TASK --tasks MODULE [--arg k=v ...] [--args-json OBJ] [--task-id] ...``."""
    parser.add_argument("task", metavar="TASK", help="registered task name")
    add_tasks_option(parser, tasks_help)
    add_create_schema_option(parser)
    parser.add_argument(
        "--arg",
        action="append",
        metavar="KEY=VALUE",
        help="a keyword argument; VALUE is parsed as JSON when valid (n=5 is 5), "
        "else taken as a string (repeatable)",
    )
    parser.add_argument(
        "--args-json", metavar="OBJECT", help="all keyword arguments as one JSON object"
    )
    parser.add_argument("--task-id", help="the task id (default: generated)")
    parser.add_argument("--label", help="a display name for ps")
    parser.add_argument(
        "--bucket-key",
        help="business key that picks the bucket; required when --owned-buckets partitions",
    )
    parser.add_argument("--priority", type=integer, help="higher runs first (default 0)")
    parser.add_argument("--tag", action="append", metavar="TAG", help="extra tag (repeatable)")


@dataclass(frozen=True, slots=True, kw_only=True)
class SubmissionRequest:
    """What ``run`` and ``submit`` were asked to submit, parsed and checked."""

    name: str
    kwargs: dict[str, Any]
    task_id: str | None
    label: str | None
    bucket_key: str | None
    priority: int | None
    tags: tuple[str, ...]

    @classmethod
    def from_args(cls, args: argparse.Namespace, session: Session) -> SubmissionRequest:
        """Parse the options and check the bucket rules of §4.5 / §8.14.

        Raises:
            UsageError: Bad ``--arg``/``--args-json`` or an empty tag: the command
                line cannot be right as written (exit 2).
            CommandFailed: A missing ``--bucket-key`` while ``--owned-buckets``
                partitions, or a key whose bucket this node does not own: a
                well-formed command this node cannot carry out (exit 1, guide §8.10).
        """
        kwargs = parse_task_kwargs(args.arg, args.args_json)
        tags = tuple(args.tag or ())
        if any(not tag.strip() for tag in tags):
            raise UsageError("--tag must not be empty")
        if args.task_id is not None:
            if not args.task_id.strip():
                raise UsageError("--task-id must not be empty")
            try:
                check_task_id(args.task_id, "--task-id")
            except ConfigurationError as exc:
                raise UsageError(str(exc)) from None
        options = session.options
        if args.bucket_key is not None and not args.bucket_key:
            raise UsageError("--bucket-key must not be empty")
        if options.partitions:
            owned = options.owned_buckets or frozenset()
            if args.bucket_key is None:
                raise CommandFailed(
                    "--bucket-key is required when --owned-buckets covers only some buckets: "
                    "a task without a bucket would never be claimed by any node"
                )
            bucket = BucketPolicy(num_buckets=options.num_buckets).bucket_for(args.bucket_key)
            if bucket not in owned:
                from chongming_task.cli._parsing import format_buckets

                raise CommandFailed(
                    f"bucket {bucket} (from --bucket-key {args.bucket_key!r}) is not owned by "
                    f"this node (--owned-buckets {format_buckets(owned)}); a task written into "
                    "another node's bucket would never be run by this node"
                )
        return cls(
            name=args.task,
            kwargs=kwargs,
            task_id=args.task_id,
            label=args.label,
            bucket_key=args.bucket_key,
            priority=args.priority,
            tags=tags,
        )


def _controller(session: Session, store: TaskStore | None, **options: Any) -> Controller:
    from chongming_task.controller import Controller

    controller = Controller(
        store=store,
        bucket_policy=BucketPolicy(num_buckets=session.options.num_buckets),
        **options,
    )
    return session.track(controller)


def scratch_controller(
    args: argparse.Namespace, session: Session
) -> tuple[Controller, ModuleType, str]:
    """A store-less controller with the ``--tasks`` module's definitions registered on it.

    Returns it, the module and the module's spec (``--tasks`` or ``CHONGMING_TASKS``).

    Raises:
        UsageError: No module was named.
        CommandFailed: It failed to import, or registers no task.
    """
    from chongming_task.controller import Controller

    spec = args.tasks or env("TASKS") or ""
    module = load_task_module(spec)
    controller = session.track(Controller())
    register_tasks(controller, module, spec)
    return controller, module, spec


def console_controller(session: Session, store: TaskStore) -> Controller:
    """A query/control controller: never owns buckets, so it never takes commands."""
    return _controller(session, store, owner=session.issuer)


def node_controller(
    session: Session,
    store: TaskStore | None,
    *,
    max_parallel: int = 1,
    lease_ttl: float | None = None,
    keep_finished: int | None = None,
    executor: Any = None,
) -> Controller:
    """A controller that runs tasks, with this node's owner and owned buckets."""
    options: dict[str, Any] = {"max_parallel": max_parallel, "keep_finished": keep_finished}
    if executor is not None:
        options["executor"] = executor
    if lease_ttl is not None:
        options["lease_ttl"] = lease_ttl
    if session.options.owner:
        options["owner"] = session.options.owner
    if session.options.owned_buckets is not None:
        options["owned_buckets"] = sorted(session.options.owned_buckets)
    return _controller(session, store, **options)


def require_task(controller: Controller, task_id: str) -> TaskSnapshot:
    """The task's snapshot.

    Raises:
        CommandFailed: No such task.
    """
    snapshot = controller.get(task_id)
    if snapshot is not None:
        return snapshot
    raise CommandFailed(f"unknown task id {task_id!r} (see `chongming-task ps`)")


def check_arguments(controller: Controller, name: str, kwargs: dict[str, Any]) -> None:
    """Refuse a submission whose arguments cannot bind to the task's parameters.

    Checked before anything is written, so a typo in ``--arg`` is refused at once
    instead of a task that fails with ``TypeError`` after it was queued. Both are
    well-formed commands that fail against the loaded module: exit 1 (guide §8.10:
    ``1`` is "command failed"; ``2`` is kept for what the parser rejects).

    Raises:
        CommandFailed: ``name`` is not registered, or the arguments do not fit.
    """
    definition = controller.registry.get(name)
    if definition is None:
        known = ", ".join(controller.registry.names())
        raise CommandFailed(f"unknown task {name!r}; this module registers: {known}")
    try:
        signature = inspect.signature(definition.fn)
    except (TypeError, ValueError):
        return
    parameters = list(signature.parameters.values())
    if parameters and _is_context(parameters[0]):
        signature = signature.replace(parameters=parameters[1:])
    try:
        signature.bind(**kwargs)
    except TypeError as exc:
        shown = ", ".join(format_parameter(p) for p in signature.parameters.values())
        raise CommandFailed(f"arguments do not fit task {name!r} ({shown}): {exc}") from None
    check_annotations(definition.fn, signature, name, kwargs)


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(fn)
    except Exception:  # an annotation that does not resolve: nothing to check against
        return {}


def _fits(value: Any, annotation: Any) -> bool | None:
    """Whether a JSON value fits a simple annotation; ``None`` when it cannot be judged."""
    import math
    import types
    import typing

    if annotation is Any or annotation is inspect.Parameter.empty:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        verdicts = [_fits(value, option) for option in typing.get_args(annotation)]
        if any(verdict is True for verdict in verdicts):
            return True
        return None if any(verdict is None for verdict in verdicts) else False
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if annotation is str:
        return isinstance(value, str)
    if (origin or annotation) in (list, tuple, set, frozenset):
        return isinstance(value, list)
    if (origin or annotation) is dict:
        return isinstance(value, dict)
    return None


def _kind(value: Any) -> str:
    import math

    if value is None:
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        return "a non-finite number"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(value), f"a JSON {type(value).__name__}"
    )


def check_annotations(
    fn: Callable[..., Any], signature: inspect.Signature, name: str, kwargs: dict[str, Any]
) -> None:
    """Refuse ``--arg`` values that cannot be what the task's annotations say.

    ``int``, ``float`` (finite), ``str``, ``bool``, ``list``/``tuple``, ``dict``, ``None``
    and unions of them are checked; any other annotation is left to the task. A value
    that cannot fit is a usage error (exit 2): the command line is wrong as written.

    Raises:
        UsageError: A value does not fit its parameter's annotation.
    """
    hints = _hints(fn)
    for key, value in kwargs.items():
        parameter = signature.parameters.get(key)
        if parameter is None or key not in hints:
            continue
        if _fits(value, hints[key]) is False:
            raise UsageError(
                f"--arg {key}={json_text(value)}: task {name!r} takes "
                f"{format_parameter(parameter)}, and {_kind(value)} is not that"
            )


def json_text(value: Any) -> str:
    import json

    try:
        return json.dumps(value)
    except ValueError:
        return repr(value)


def _is_context(parameter: Any) -> bool:
    annotation = parameter.annotation
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return parameter.name in ("ctx", "context") or text in ("TaskContext", "RuntimeContext")


def format_parameter(parameter: inspect.Parameter) -> str:
    """``name: type = default`` with string annotations unquoted (PEP 563 modules)."""
    prefixes: dict[inspect._ParameterKind, str] = {
        inspect.Parameter.VAR_POSITIONAL: "*",
        inspect.Parameter.VAR_KEYWORD: "**",
    }
    text: str = prefixes.get(parameter.kind, "") + parameter.name
    annotation = parameter.annotation
    if annotation is not inspect.Parameter.empty:
        shown = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
        text += f": {shown}"
    if parameter.default is not inspect.Parameter.empty:
        text += f" = {parameter.default!r}"
    return text
