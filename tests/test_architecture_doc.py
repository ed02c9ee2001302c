"""docs/architecture.md draws the layers that import-linter enforces, exactly."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_documented_layers_are_the_enforced_ones() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- layers -->\n```\n(.*?)```\n<!-- /layers -->", doc, re.S)
    assert block is not None, "docs/architecture.md lost its layers block"
    documented = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    [layers] = [c["layers"] for c in contracts if c["type"] == "layers"]
    assert documented == layers


def test_every_package_is_in_a_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    [layers] = [
        c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
    ]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    package = ROOT / "src" / "chongming_task"
    present = {
        f"chongming_task.{path.stem if path.is_file() else path.name}"
        for path in package.iterdir()
        if (path.is_dir() and (path / "__init__.py").exists())
        or (path.suffix == ".py" and path.name != "__init__.py")
    }
    # Internal helpers every layer may use, and the package's own namespace.
    free = {"chongming_task._lazy", "chongming_task.__main__"}
    assert present - free - named == set(), "a new module needs a layer in pyproject.toml"
