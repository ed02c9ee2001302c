"""The optional packages behind metrics and tracing, imported only when first needed."""

from __future__ import annotations

import importlib
from typing import Any

from chongming_task.errors import ConfigurationError

__all__ = ["require_extra"]


def require_extra(package: str, module: str, missing: str) -> Any:
    """``from package import module``, or a ``ConfigurationError`` saying ``missing``."""
    try:
        importlib.import_module(package)
        return importlib.import_module(f"{package}.{module}")
    except ImportError as exc:
        raise ConfigurationError(missing) from exc
