"""``examples/07_custom_store.py``, the third-party example backend, loaded as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "07_custom_store.py"


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("custom_store_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = _load_example()
