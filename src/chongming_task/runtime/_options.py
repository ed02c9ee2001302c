"""Validation of what a run is created with: arguments, options, the call itself.

Everything here raises ``ConfigurationError`` at submission, with a message that says
what is wrong and what to do, so a mistake surfaces where it is made rather than
inside a worker thread minutes later.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from chongming_task.errors import ConfigurationError
from chongming_task.policies import RetryPolicy, Timeout
from chongming_task.runtime._attempt import TaskCall

__all__ = [
    "NO_KWARGS",
    "as_args",
    "as_kwargs",
    "as_mapping",
    "as_upstream",
    "callable_name",
    "check_executor",
    "check_options",
    "check_signature",
    "seconds",
    "signature_of",
]


_SIGNATURES: weakref.WeakKeyDictionary[Callable[..., Any], inspect.Signature | None] = (
    weakref.WeakKeyDictionary()
)
_SIGNATURES_LOCK = threading.Lock()


def signature_of(fn: Callable[..., Any]) -> inspect.Signature | None:
    """``inspect.signature(fn)``, cached per function (it costs tens of microseconds).

    ``None`` for callables without one (some builtins). The cache holds functions
    weakly, so a closure made per call is not kept alive by it.
    """
    with _SIGNATURES_LOCK:
        try:
            return _SIGNATURES[fn]
        except (KeyError, TypeError):
            pass
    try:
        signature: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    with _SIGNATURES_LOCK, contextlib.suppress(TypeError):  # not weak-referenceable
        _SIGNATURES[fn] = signature
    return signature


def as_args(args: Iterable[Any]) -> tuple[Any, ...]:
    if type(args) is tuple:  # the usual case; an ABC check of Mapping costs more than it
        return args
    if isinstance(args, str | bytes | Mapping):
        raise ConfigurationError(
            f"args must be a tuple or list of positional arguments, got {args!r}"
        )
    try:
        return tuple(args)
    except TypeError as exc:
        raise ConfigurationError(f"args must be iterable, got {args!r}") from exc


def as_mapping(value: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{what} must be a mapping, got {value!r}")
    return dict(value)


def as_kwargs(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The keyword arguments of a call: a private copy, or one shared read-only empty
    mapping (most tasks take none, and a controller may hold 100,000 queued runs)."""
    if not value:
        if value is not None and not isinstance(value, Mapping):
            raise ConfigurationError(f"kwargs must be a mapping, got {value!r}")
        return NO_KWARGS
    return as_mapping(value, "kwargs")


NO_KWARGS: Mapping[str, Any] = MappingProxyType({})


def as_upstream(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """Upstream results of a call: a private copy, or the shared read-only empty mapping
    (only pipeline nodes have any)."""
    if value is None:
        return NO_KWARGS
    return as_mapping(value, "upstream")


def seconds(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigurationError(f"{what} must be a number of seconds, got {value!r}")
    if value < 0 or math.isinf(value):
        raise ConfigurationError(f"{what} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_options(
    retry: object, timeout: object, graceful_stop: object, pause_timeout: object
) -> None:
    if not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
    if timeout is not None and not isinstance(timeout, Timeout):
        raise ConfigurationError(f"timeout must be a Timeout, got {timeout!r}")
    seconds(graceful_stop, "graceful_stop")
    seconds(pause_timeout, "pause_timeout")


def callable_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", None)
    if isinstance(name, str) and name:
        return name
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None:
        return callable_name(inner)
    return type(fn).__name__


#: Per function, the call shapes (positional count, keyword names) that bound before.
#: Whether arguments bind depends only on that shape, never on the values, so a shape
#: seen once needs no ``Signature.bind`` again (a third of a no-op submission's checks).
_FITTING_SHAPES: weakref.WeakKeyDictionary[Callable[..., Any], set[tuple[int, frozenset[str]]]] = (
    weakref.WeakKeyDictionary()
)
_SHAPES_LOCK = threading.Lock()
_NO_KEYWORDS: frozenset[str] = frozenset()


def check_signature(fn: Callable[..., Any], call: TaskCall, name: str) -> None:
    shape = (len(call.args), frozenset(call.kwargs) if call.kwargs else _NO_KEYWORDS)
    try:
        # A lookup needs no lock: a dict read and a set membership are atomic, and a
        # shape added meanwhile by another thread is only checked once more.
        if shape in _FITTING_SHAPES[fn]:
            return
    except (KeyError, TypeError):
        pass
    signature = signature_of(fn)
    if signature is None:
        return  # builtins and some C callables: nothing to check against
    try:
        signature.bind(None, *call.args, **call.kwargs)
    except TypeError as exc:
        raise ConfigurationError(
            f"arguments do not fit task {name!r}{signature}: {exc}; the first parameter "
            "receives the TaskContext, so do not pass it yourself"
        ) from exc
    # A callable that is not weak-referenceable is simply checked every time.
    with _SHAPES_LOCK, contextlib.suppress(TypeError):
        _FITTING_SHAPES.setdefault(fn, set()).add(shape)


def check_executor(executor: object) -> None:
    """A duck-typed check: ``isinstance`` on a runtime Protocol is slow per submission."""
    for method in ("check", "launch", "run_attempt", "terminate", "kill"):
        if not callable(getattr(executor, method, None)):
            raise ConfigurationError(
                f"executor must be an Executor (InlineExecutor, ThreadExecutor, "
                f"ProcessExecutor), got {executor!r}: it has no {method}()"
            )
