"""Lazy re-exports: a package names its public classes without importing their layers.

``import chongming_task`` must stay cheap and must not import optional dependencies
(``PostgresTaskStore`` needs psycopg). Packages therefore map each public name to
the module that defines it and resolve it on first attribute access (PEP 562).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    namespace: dict[str, Any],
    lazy: Mapping[str, str],
    moved: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` for ``package``.

    ``namespace`` is the package's ``globals()``: a resolved name is cached there, so
    each costs one import, once. ``moved`` maps a name the package no longer exports
    to its new home: it still resolves, with a ``DeprecationWarning`` naming that home,
    and is not listed by ``dir()``.
    """

    def getattr_(name: str) -> Any:
        module_name = lazy.get(name)
        if module_name is None:
            home = (moved or {}).get(name)
            if home is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            warnings.warn(
                f"{package}.{name} moved to {home}.{name}: import it from {home}",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(home), name)
        value = getattr(importlib.import_module(module_name), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(lazy))

    return getattr_, dir_
