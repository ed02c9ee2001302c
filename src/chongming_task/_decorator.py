"""``@task``: a task's defaults, kept on the function itself (guide §8.13).

The decorator records a frozen :class:`TaskSpec` as ``fn.__chongming_task__`` and
returns the very same function, still callable as before. There is no global
registry: importing a module must not register anything, because imports happen
anywhere (test collection included) and implicit registration is very hard to debug.
Whoever runs the task decides where it is registered.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Concatenate, Final, ParamSpec, Protocol, TypeVar, overload

from chongming_task._public import public
from chongming_task.errors import ConfigurationError
from chongming_task.policies import RetryPolicy, Timeout
from chongming_task.runtime import TaskContext, signature_of

__all__ = [
    "RESERVED_OPTIONS",
    "TaskSpec",
    "refuse_option_keywords",
    "reserved_collisions",
    "signature_of",
    "spec_of",
    "task",
    "task_name",
]

P = ParamSpec("P")
R = TypeVar("R")

SPEC_ATTRIBUTE: Final = "__chongming_task__"

#: Option names that ``run_task`` and ``Controller.submit`` take next to the task's own
#: keyword arguments. A task whose parameters use one of them must be called with
#: explicit ``args=`` / ``kwargs=``, so the two namespaces never mix.
RESERVED_OPTIONS: Final = frozenset(
    {
        "task_id",
        "name",
        "label",
        "retry",
        "timeout",
        "executor",
        "graceful_stop",
        "artifact_dir",
        "clock",
        "tags",
        "priority",
        "bucket_key",
    }
)


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    """A task's declared defaults. Options given at submission win over these."""

    name: str
    """Defaults to the function's ``__name__``."""
    description: str | None = None
    """Defaults to the first line of the docstring."""
    tags: frozenset[str] = field(default_factory=frozenset)
    retry: RetryPolicy | None = None
    timeout: Timeout | None = None
    idempotent: bool = False
    """Safe to run again after ``lost``: a worker then revives it from its queued recipe."""


class _Decorator(Protocol):
    def __call__(
        self, fn: Callable[Concatenate[TaskContext, P], R], /
    ) -> Callable[Concatenate[TaskContext, P], R]: ...


@overload
def task(
    fn: Callable[Concatenate[TaskContext, P], R], /
) -> Callable[Concatenate[TaskContext, P], R]: ...


@overload
def task(
    *,
    name: str | None = None,
    tags: Iterable[str] = (),
    description: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
    idempotent: bool = False,
) -> _Decorator: ...


@public
def task(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    tags: Iterable[str] = (),
    description: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
    idempotent: bool = False,
) -> Any:
    """Declare a task: bare ``@task`` or ``@task(name=, tags=, description=, retry=, timeout=)``.

    The first parameter of the function receives the ``TaskContext``; callers never
    pass it.

    ``idempotent=True`` opts in to re-execution after ``lost`` for tasks enqueued through
    the work queue (``chongming_task.Client``): the lost attempt stays in the history
    and a worker revives the task with ``retry()`` from its stored recipe.

    Raises:
        ConfigurationError: A non-string tag or name, a policy of the wrong type, or a
            function without a first parameter for the context.
    """
    if isinstance(tags, str):
        raise ConfigurationError(f"tags must be a collection of strings, not the string {tags!r}")
    tag_set = frozenset(tags)
    for tag in tag_set:
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(f"tags must be non-empty strings, got {tag!r}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
    if timeout is not None and not isinstance(timeout, Timeout):
        raise ConfigurationError(f"timeout must be a Timeout, got {timeout!r}")

    def decorate(target: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(target):
            raise ConfigurationError(f"@task decorates functions, got {target!r}")
        _require_context_parameter(target)
        spec = TaskSpec(
            name=_name(name, target),
            description=description if description is not None else _first_doc_line(target),
            tags=tag_set,
            retry=retry,
            timeout=timeout,
            idempotent=bool(idempotent),
        )
        try:
            setattr(target, SPEC_ATTRIBUTE, spec)
        except (AttributeError, TypeError) as exc:
            raise ConfigurationError(
                f"@task cannot annotate {target!r}: {exc}; decorate a plain function"
            ) from exc
        return target

    if fn is not None:
        return decorate(fn)
    return decorate


def spec_of(fn: object) -> TaskSpec | None:
    """The :class:`TaskSpec` that ``@task`` put on ``fn``, or ``None``."""
    spec = getattr(fn, SPEC_ATTRIBUTE, None)
    return spec if isinstance(spec, TaskSpec) else None


def task_name(task: str | Callable[..., Any]) -> str:
    """The task name a caller means: a name as given, or an ``@task`` function's own.

    What lets ``Client.enqueue`` and ``Controller.submit`` take the task function itself
    (so a type checker sees its parameters) while only its name crosses to the store:
    the code that runs is still the one registered under that name.

    Raises:
        ConfigurationError: A callable that ``@task`` did not decorate.
    """
    if not callable(task):
        return task  # a name: checked where it is looked up
    spec = spec_of(task)
    if spec is None:
        raise ConfigurationError(
            f"{getattr(task, '__name__', task)!r} is not an @task function: only a task's name "
            "crosses to the workers, so decorate the function with @task (its name is then "
            "taken from the definition) or pass the registered name as a string"
        )
    return spec.name


def refuse_option_keywords(call: str, kwargs: Mapping[str, Any], options: Iterable[str]) -> None:
    """Refuse a task keyword argument named like an option in a ``with_options(...)`` call.

    There every keyword goes to the task (the options were given apart), so one named
    like an option would mean something else than in the plain call: the guide's rule
    for such a parameter holds in both spellings -- pass it positionally.
    """
    clash = sorted(set(kwargs) & set(options))
    if clash:
        raise ConfigurationError(
            f"{call}: {clash[0]!r} is the name of an option; give options to with_options() "
            "and pass a task parameter of that name positionally"
        )


def reserved_collisions(
    fn: Callable[..., Any], reserved: Iterable[str] = RESERVED_OPTIONS
) -> tuple[str, ...]:
    """The task parameters (after ``ctx``) that share a name with an option in ``reserved``."""
    signature = signature_of(fn)
    if signature is None:
        return ()
    parameters = list(signature.parameters.values())
    names = set(reserved)
    keywordable = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(
        sorted(p.name for p in parameters[1:] if p.kind in keywordable and p.name in names)
    )


def _name(name: str | None, target: Callable[..., Any]) -> str:
    if name is None:
        name = getattr(target, "__name__", None) or repr(target)
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"task name must be a non-empty string, got {name!r}")
    return name


def _first_doc_line(target: Callable[..., Any]) -> str | None:
    doc = inspect.getdoc(target)
    if not doc:
        return None
    return doc.strip().splitlines()[0].strip() or None


def _require_context_parameter(target: Callable[..., Any]) -> None:
    signature = signature_of(target)
    if signature is None:
        return
    parameters = list(signature.parameters.values())
    if parameters and parameters[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
    ):
        return
    raise ConfigurationError(
        f"task {getattr(target, '__name__', target)!r} needs a first positional parameter "
        "for the TaskContext, e.g. def my_task(ctx, source: str): ..."
    )
