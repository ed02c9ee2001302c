"""``@public``: a name of the curated top-level namespace reports the package as its home.

``chongming_task.Controller.__module__ == "chongming_task"`` wherever the class was
imported from: the name a user reads in a repr, a pickle and a reference page is the
one they import, and the module that defines it stays free to move.

A class's string annotations (``from __future__ import annotations``) are resolved by
``typing.get_type_hints`` -- what FastAPI and pydantic call on a response model -- in
``sys.modules[cls.__module__]``, and the package namespace holds no ``datetime`` or
``Mapping``. So each string annotation becomes a ``typing.ForwardRef`` that names the
defining module, which ``get_type_hints`` evaluates there.
"""

from __future__ import annotations

import typing
from typing import Any, TypeVar

__all__ = ["PACKAGE", "public"]

#: The home every public name reports.
PACKAGE = "chongming_task"

_T = TypeVar("_T")


def public(obj: _T) -> _T:
    """Mark a class or function defined in a submodule as ``chongming_task.<name>``.

    Apply it outermost (above ``@dataclass``); ``chongming_task.__all__`` must list the
    name, which ``tests/test_public_api.py`` checks.
    """
    home: str = getattr(obj, "__module__", "")
    if isinstance(obj, type):
        annotations: dict[str, Any] | None = vars(obj).get("__annotations__")
        if annotations:
            resolved = {
                name: (
                    typing.ForwardRef(value, is_argument=False, module=home, is_class=True)
                    if isinstance(value, str)
                    else value
                )
                for name, value in annotations.items()
            }
            type.__setattr__(obj, "__annotations__", resolved)
    obj.__module__ = PACKAGE
    return obj
