"""The whitelist of task definitions: names cross trust boundaries, code never does (§8.5).

``submit("extract", ...)`` only accepts a name registered at start-up; an entry that
could start any callable would be remote code execution the moment a CLI, a command
in the store or a dashboard feeds it. Registering a name twice raises instead of
silently replacing: "I changed the implementation but the old one still runs" is a
bug that takes hours to find.

There is no global registry (§8.13): ``@task`` only attaches a spec to the function
object, and each controller decides what it registers.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypedDict

from chongming_task import _validation
from chongming_task._decorator import task_name
from chongming_task._model import JSONValue
from chongming_task._public import public
from chongming_task.errors import ConfigurationError, UnknownTaskName
from chongming_task.policies import RetryPolicy, Timeout

__all__ = [
    "ENQUEUE_OPTIONS",
    "OPTION_NAMES",
    "SPEC_ATTRIBUTE",
    "SUBMIT_OPTIONS",
    "SubmitOptions",
    "TaskDefinition",
    "TaskRegistry",
]

#: Where ``@task`` stores its spec on the function object.
SPEC_ATTRIBUTE = "__chongming_task__"


class SubmitOptions(TypedDict, total=False):
    """The keyword options of ``Controller.submit`` (as ``Controller.with_options`` takes them)."""

    task_id: str | None
    label: str | None
    tags: Iterable[str] | None
    priority: int | None
    bucket_key: str | None
    metadata: Mapping[str, JSONValue] | None
    blocked: bool | str
    retry: RetryPolicy | None
    timeout: Timeout | None
    skip_reason: str | None


#: Keyword options of ``Controller.submit``. ``submit`` mixes the task's own keyword
#: arguments with these (as the guide's samples do), so a task parameter with one of
#: these names can never be passed *by keyword*. One that can be passed positionally
#: (``submit("mark", "after")``, ``pipeline.node("mark", "after")``) is fine; only a
#: keyword-only one could never be set, and that is refused at registration.
SUBMIT_OPTIONS: frozenset[str] = SubmitOptions.__optional_keys__

#: Keyword options of ``Client.enqueue`` beyond ``submit``'s (the same rule applies:
#: ``enqueue`` mixes them with the task's keyword arguments).
ENQUEUE_OPTIONS: frozenset[str] = frozenset(
    {"delay", "not_before", "unique_key", "unique_for", "concurrency_key", "connection"}
)

#: Every name a task's keyword-only parameter may not have.
OPTION_NAMES: frozenset[str] = SUBMIT_OPTIONS | ENQUEUE_OPTIONS


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskDefinition:
    """One registered task: the name callers use and what runs under it."""

    name: str
    fn: Callable[..., Any]
    tags: frozenset[str] = frozenset()
    """Default tags of every submission (submission tags are added to them)."""
    description: str | None = None
    """From ``description=``, the ``@task`` spec, or the docstring's first line."""
    retry: RetryPolicy | None = None
    timeout: Timeout | None = None


def _first_doc_line(fn: Callable[..., Any]) -> str | None:
    doc = inspect.getdoc(fn)
    if not doc:
        return None
    return doc.strip().splitlines()[0].strip() or None


def _check_tags(tags: Iterable[str] | None, what: str) -> frozenset[str]:
    if tags is None:
        return frozenset()
    if isinstance(tags, str):
        raise ConfigurationError(
            f"{what} must be a collection of strings, not one string {tags!r} (write [{tags!r}])"
        )
    return _validation.check_tags(tags, what)


def _check_parameters(name: str, fn: Callable[..., Any]) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: nothing to check
        return
    # submit(name, *args, ...) and pipeline.node(name, *args, ...) hand positional
    # arguments to the task as they are, so a positional(-or-keyword) parameter named
    # ``label`` is set positionally (guide §8.12: ``p.node("mark", "after")``). Only a
    # keyword-only one can never be set: its one way in is taken by the option.
    clashes = sorted(
        parameter.name
        for parameter in signature.parameters.values()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.name in OPTION_NAMES
    )
    if clashes:
        raise ConfigurationError(
            f"task {name!r} has keyword-only parameter(s) {clashes} with the name of a "
            f"Controller.submit() or Client.enqueue() option ({sorted(OPTION_NAMES)}); "
            "those take such names as their own options, so the parameter could never be "
            "set. Rename it, or make it positional (submit(), enqueue() and pipeline.node() "
            "pass positional arguments to the task unchanged)."
        )


class TaskRegistry:
    """Name -> :class:`TaskDefinition`, per controller."""

    def __init__(self) -> None:
        self._definitions: dict[str, TaskDefinition] = {}

    def register(
        self,
        name: str | Callable[..., Any] | None,
        fn: Callable[..., Any] | None = None,
        *,
        tags: Iterable[str] | None = None,
        description: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
    ) -> TaskDefinition:
        """Register ``fn`` under ``name`` (or a ``@task`` function under its own name).

        Explicit arguments win over the ``@task`` spec, which wins over defaults.

        Raises:
            ConfigurationError: The name is taken, empty, or ``fn`` is not callable, or a
                parameter of ``fn`` collides with a ``submit()`` or ``enqueue()`` option.
        """
        if fn is None and callable(name):
            fn, name = name, None
        if fn is None or not callable(fn):
            raise ConfigurationError(
                f"register() needs a callable task function, got {fn!r}; "
                "write register('name', fn) or register(fn) for an @task function"
            )
        spec = getattr(fn, SPEC_ATTRIBUTE, None)
        if name is None:
            name = getattr(spec, "name", None) or getattr(fn, "__name__", "")
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"task name must be a non-empty string, got {name!r}")
        _validation.check_text(name, "task name")
        existing = self._definitions.get(name)
        if existing is not None:
            raise ConfigurationError(
                f"task name {name!r} is already registered (to {existing.fn!r}); "
                "names are registered once so a changed implementation can never be "
                "shadowed by the old one -- pick another name"
            )
        _check_parameters(name, fn)
        definition = TaskDefinition(
            name=name,
            fn=fn,
            tags=_check_tags(tags, "tags") if tags is not None else _spec_tags(spec),
            description=description
            if description is not None
            else getattr(spec, "description", None) or _first_doc_line(fn),
            retry=retry if retry is not None else getattr(spec, "retry", None),
            timeout=timeout if timeout is not None else getattr(spec, "timeout", None),
        )
        self._definitions[name] = definition
        return definition

    def register_all(self, *fns: Callable[..., Any]) -> list[TaskDefinition]:
        """Register each ``@task`` function (or plain function) under its spec's name."""
        return [self.register(fn) for fn in fns]

    def register_module(self, module: ModuleType) -> list[TaskDefinition]:
        """Register every ``@task`` function found in ``module``, in definition order.

        Raises:
            ConfigurationError: ``module`` is not a module, or holds no ``@task`` function.
        """
        if not isinstance(module, ModuleType):
            raise ConfigurationError(f"register_module() needs a module object, got {module!r}")
        seen: set[int] = set()
        found: list[Callable[..., Any]] = []
        for value in vars(module).values():
            if callable(value) and hasattr(value, SPEC_ATTRIBUTE) and id(value) not in seen:
                seen.add(id(value))
                found.append(value)
        if not found:
            raise ConfigurationError(
                f"module {module.__name__!r} has no @task function; decorate the task "
                "functions with @task or register them one by one with register()"
            )
        return self.register_all(*found)

    def get(self, name: str) -> TaskDefinition | None:
        return self._definitions.get(name)

    def require(self, name: str) -> TaskDefinition:
        """The definition of ``name``, or :class:`UnknownTaskName` naming what is registered."""
        definition = self._definitions.get(_validation.check_lookup(name, "task name"))
        if definition is None:
            raise UnknownTaskName(name, self._definitions)
        return definition

    def name_for(self, task: str | Callable[..., Any]) -> str:
        """The registered name ``task`` stands for: a name as given, or an ``@task``
        function's own name, which must be registered to that very function.

        Raises:
            ConfigurationError: An undecorated function, or a function that is not the
                one registered under its name (:class:`UnknownTaskName` if none is).
        """
        name = task_name(task)
        if callable(task) and self.require(name).fn is not task:
            raise ConfigurationError(
                f"task {name!r} is registered to {self.require(name).fn!r}, not to "
                f"{task!r}; pass the function that was registered (or its name)"
            )
        return name

    def names(self) -> list[str]:
        return sorted(self._definitions)

    def definitions(self) -> list[TaskDefinition]:
        return [self._definitions[name] for name in sorted(self._definitions)]

    def __contains__(self, name: object) -> bool:
        return name in self._definitions

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._definitions)


def _spec_tags(spec: object) -> frozenset[str]:
    return _check_tags(getattr(spec, "tags", None), "@task tags")
