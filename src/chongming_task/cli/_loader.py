"""Loading a task module named by ``--tasks`` and registering its definitions.

The CLI never takes code from its arguments, only names (guide §8.5): the module a
deployment names with ``--tasks`` decides which definitions exist, either through a
``register(controller)`` function or through its ``@task`` functions
(``controller.register_module``). ``--tasks`` takes a dotted module path
(``myapp.tasks``, imported with the current directory on ``sys.path`` as
``python -m`` would) or a file path (``examples/demo_tasks.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from chongming_task.cli._errors import CommandFailed, UsageError, one_line
from chongming_task.errors import ConfigurationError

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = ["load_task_module", "module_schedules", "register_tasks"]

#: Where ``@task`` keeps its spec; a ``register`` attribute carrying it is a task.
_SPEC_ATTRIBUTE = "__chongming_task__"


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def _load_file(spec: str) -> ModuleType:
    path = Path(spec).expanduser().resolve()
    if not path.is_file():
        raise CommandFailed(f"task module file {spec!r} does not exist")
    name = path.stem
    if not name.isidentifier():
        raise UsageError(f"task module file {spec!r}: {name!r} is not a valid module name")
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) == str(path):
        return existing
    # The file's directory goes on sys.path so its sibling imports work and so that
    # a ProcessExecutor child (which re-imports the function by module name) finds it.
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise CommandFailed(f"task module file {spec!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except SystemExit as exc:
        del sys.modules[name]
        raise _exited(spec, exc) from None
    except Exception as exc:
        del sys.modules[name]
        raise CommandFailed(
            f"task module {spec!r} failed to import: {type(exc).__name__}: {one_line(str(exc))}"
        ) from exc
    return module


def _exited(spec: str, exc: SystemExit) -> CommandFailed:
    """A module that calls ``sys.exit()`` at import is broken, whatever code it passes:
    a worker that exited 0 there would look like a clean run that did nothing."""
    return CommandFailed(
        f"task module {spec!r} called sys.exit({exc.code!r}) while being imported; "
        "a task module must only define tasks (move the exit under "
        '`if __name__ == "__main__":`)'
    )


def _import(spec: str) -> ModuleType:
    # A console script's sys.path starts at its own bin/ directory; users expect
    # `--tasks myapp.tasks` to find the package in the directory they are in.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(spec)
    except SystemExit as exc:
        sys.modules.pop(spec, None)
        raise _exited(spec, exc) from None
    except ModuleNotFoundError as exc:
        missing = exc.name or spec
        if spec == missing or spec.startswith(missing + "."):
            raise CommandFailed(
                f"cannot import task module {spec!r}: no module named {missing!r} "
                "(run from the project directory, set PYTHONPATH, or pass a file path)"
            ) from exc
        raise CommandFailed(f"task module {spec!r} failed to import: {one_line(str(exc))}") from exc
    except Exception as exc:
        raise CommandFailed(
            f"task module {spec!r} failed to import: {type(exc).__name__}: {one_line(str(exc))}"
        ) from exc


def load_task_module(spec: str | None) -> ModuleType:
    """Import the module named by ``--tasks`` (dotted path or ``.py`` file).

    Raises:
        UsageError: No module was named.
        CommandFailed: It does not exist or raised while importing.
    """
    if not spec:
        raise UsageError("--tasks MODULE is required (or set CHONGMING_TASKS)")
    if _looks_like_path(spec):
        return _load_file(spec)
    if not all(part.isidentifier() for part in spec.split(".")):
        raise UsageError(f"--tasks {spec!r} is neither a dotted module path nor a .py file")
    return _import(spec)


def register_tasks(controller: Controller, module: ModuleType, spec: str) -> list[str]:
    """Register ``module``'s definitions on ``controller``; return the registered names.

    A ``register(controller)`` function wins when present (it may register plain
    functions, choose names and tags); otherwise every ``@task`` function is taken.

    Raises:
        CommandFailed: ``register`` raised, or the module defines no task at all.
    """
    register = getattr(module, "register", None)
    if callable(register) and not hasattr(register, _SPEC_ATTRIBUTE):
        try:
            register(controller)
        except Exception as exc:
            raise CommandFailed(
                f"task module {spec!r}: register(controller) raised "
                f"{type(exc).__name__}: {one_line(str(exc))}"
            ) from exc
    else:
        if not any(callable(v) and hasattr(v, _SPEC_ATTRIBUTE) for v in vars(module).values()):
            raise CommandFailed(
                f"task module {spec!r} defines no tasks: add a register(controller) "
                "function or decorate task functions with @task"
            )
        try:
            controller.register_module(module)
        except ConfigurationError as exc:
            raise CommandFailed(f"task module {spec!r}: {one_line(str(exc))}") from exc
    names = controller.registry.names()
    if not names:
        raise CommandFailed(
            f"task module {spec!r} defines no tasks: its register(controller) registered nothing"
        )
    return names


def module_schedules(module: ModuleType) -> Any:
    """How ``module`` declares schedules: ``register_schedules(scheduler)`` or ``SCHEDULES``.

    Returns a callable ``(scheduler) -> list[str]`` that registers them, or ``None``
    when the module declares none (a worker then runs no scheduler).
    """
    hook = getattr(module, "register_schedules", None)
    declared = getattr(module, "SCHEDULES", None)
    if not callable(hook) and declared is None:
        return None

    def apply(scheduler: Any) -> list[str]:
        # Two schedules of one name would silently leave the last one: refuse the module.
        original = scheduler.add
        seen: set[object] = set()

        def add(schedule: Any, **options: Any) -> Any:
            name = getattr(schedule, "name", None)
            if name in seen:
                raise ConfigurationError(
                    f"two schedules are named {name!r}; schedule names must be unique"
                )
            seen.add(name)
            return original(schedule, **options)

        scheduler.add = add  # cron()/every() call self.add, so they are checked too
        try:
            if callable(hook):
                hook(scheduler)
            else:
                for schedule in declared or ():
                    scheduler.add(schedule)
        finally:
            del scheduler.add
        names: list[str] = scheduler.names
        return names

    return apply
