"""``import chongming_task`` stays cheap: no optional dependency, no side effects.

Checked in a fresh interpreter, because this test process has long imported
everything. Optional extras (PostgreSQL, Prometheus, OpenTelemetry, rich) and even
the cron parser load only when the feature that needs them is used.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Third-party modules that must not appear on a plain import.
FORBIDDEN = (
    "psycopg",
    "psycopg_pool",
    "psycopg_binary",
    "prometheus_client",
    "opentelemetry",
    "rich",
    "croniter",
    "dateutil",
    "pytz",
)

#: The model layer and the test kit: what a user imports before anything else.
MODULES = (
    "chongming_task",
    "chongming_task.states",
    "chongming_task.errors",
    "chongming_task._model",
    "chongming_task.policies",
    "chongming_task._redact",
    "chongming_task.core._clock",
    "chongming_task.core.state_machine",
    "chongming_task.testing",
)

_PROBE = """
import json, logging, sys, threading
before = set(sys.modules)
root_handlers = list(logging.getLogger().handlers)
import importlib
importlib.import_module(sys.argv[1])
new = sorted(set(sys.modules) - before)
print(json.dumps({
    "new": new,
    "threads": threading.active_count(),
    "root_handlers_changed": list(logging.getLogger().handlers) != root_handlers,
    "stdlib": sorted(sys.stdlib_module_names),
}))
"""


def _probe(module: str) -> dict[str, object]:
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE, module],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, object] = json.loads(completed.stdout)
    return result


@pytest.mark.parametrize("module", MODULES)
def test_import_pulls_in_nothing_but_the_standard_library(module: str) -> None:
    result = _probe(module)
    new = result["new"]
    stdlib_names = result["stdlib"]
    assert isinstance(new, list)
    assert isinstance(stdlib_names, list)
    stdlib = set(stdlib_names)
    top_level = {name.split(".")[0] for name in new}
    for name in FORBIDDEN:
        assert name not in top_level, f"import {module} pulled in {name}"
    third_party = sorted(top_level - stdlib - {"chongming_task"})
    assert third_party == [], f"import {module} pulled in third-party modules {third_party}"


def test_import_has_no_side_effects() -> None:
    result = _probe("chongming_task")
    assert result["threads"] == 1, "importing the package must not start threads"
    assert result["root_handlers_changed"] is False, "a library must not configure logging"


def test_lazy_names_do_not_load_on_import() -> None:
    result = _probe("chongming_task")
    new = result["new"]
    assert isinstance(new, list)
    for layer in ("runtime", "stores", "controller", "pipeline", "schedule", "cli", "run", "task"):
        loaded = [name for name in new if name.startswith(f"chongming_task.{layer}")]
        assert loaded == [], f"import chongming_task eagerly loaded {loaded}"
