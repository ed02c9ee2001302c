"""Examples, the README and the docs teach only public import paths.

A user copies what the examples and docs show. If they show an internal module
(``chongming_task.stores._sqlite``, ``chongming_task.controller._controller``), that
path becomes load-bearing for users and can never move. So every ``chongming_task``
import they show must come from :data:`PUBLIC_PATHS`: the package root, the modules
the user guide itself imports from, and the few named below with their reason.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Every import path a user is shown. Adding one is a decision about the public API.
PUBLIC_PATHS = frozenset(
    {
        "chongming_task",
        # The user guide's own imports (grep it for "chongming_task").
        "chongming_task.controller",
        "chongming_task.core.state_machine",
        "chongming_task.policies",
        "chongming_task.run",
        "chongming_task.runtime.executors.inline",
        "chongming_task.runtime.executors.thread",
        "chongming_task.states",
        "chongming_task.testing",
        "chongming_task.testing.store_contract",
        # The store implementer's namespace (TaskStore, records, codec, signal).
        "chongming_task.stores",
        # The console script's module: `python -m chongming_task.cli`, `main(argv)`.
        "chongming_task.cli",
        # The shipped controller contract, the store contract's sibling.
        "chongming_task.testing.controller_contract",
        # The exception tree: its path is in every stored ``Failure.exception_type``.
        "chongming_task.errors",
        # The Django integration: its INSTALLED_APPS entry, get_client, DjangoClient.
        "chongming_task.contrib.django",
        # The dashboard: ``create_app`` to mount it in an ASGI app (the web extra).
        "chongming_task.web",
    }
)

#: ``from chongming_task.x import y`` / ``import chongming_task.x`` in Markdown code.
_MD_IMPORT = re.compile(
    r"^\s*(?:from\s+(chongming_task[\w.]*)\s+import\b|import\s+(chongming_task[\w.]*))", re.M
)
#: ``python -m chongming_task.x`` and ``"-m", "chongming_task.x"`` wherever they appear.
_MODULE_RUN = re.compile(r"""-m["']?,?\s*["']?(chongming_task[\w.]*)""")
#: mkdocstrings' ``::: chongming_task.x.Name`` directives. One naming an object must use
#: its public path; one naming a module renders that module's docstring as a reference
#: page (``docs/api.md``), which is not an import a user copies.
_API_DIRECTIVE = re.compile(r"^:::\s*(chongming_task[\w.]*)", re.M)
#: A prose code span naming an object: ``chongming_task.x.Name`` or ``chongming_task.x.f(``.
#: Lower-case spans without a call are logger names (``chongming_task.worker``).
_OBJECT_SPAN = re.compile(r"`(chongming_task(?:\.\w+)*)\.([A-Z]\w*|\w+(?=\())")


def _documents() -> list[Path]:
    docs = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs").glob("*.md.in"))
    return [ROOT / "README.md", *docs]


def _examples() -> list[Path]:
    return sorted((ROOT / "examples").rglob("*.py"))


def _python_imports(source: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _is_module(path: str) -> bool:
    try:
        return importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:
        return False


def _refusals() -> list[str]:
    refused = []
    for path in _examples():
        source = path.read_text(encoding="utf-8")
        shown = [m for m in _python_imports(source) if m.split(".")[0] == "chongming_task"]
        shown += _MODULE_RUN.findall(source)
        refused += [f"{path.relative_to(ROOT)}: {m}" for m in shown if m not in PUBLIC_PATHS]
    for path in _documents():
        text = path.read_text(encoding="utf-8")
        shown = [a or b for a, b in _MD_IMPORT.findall(text)] + _MODULE_RUN.findall(text)
        refused += [f"{path.relative_to(ROOT)}: {m}" for m in shown if m not in PUBLIC_PATHS]
        for target in _API_DIRECTIVE.findall(text):
            if not _is_module(target) and target.rpartition(".")[0] not in PUBLIC_PATHS:
                refused.append(f"{path.relative_to(ROOT)}: ::: {target}")
        for module, name in _OBJECT_SPAN.findall(text):
            if module not in PUBLIC_PATHS:
                refused.append(f"{path.relative_to(ROOT)}: `{module}.{name}`")
    return refused


def test_examples_and_docs_import_only_public_paths() -> None:
    assert _refusals() == []


@pytest.mark.parametrize(
    ("snippet", "refused"),
    [
        ("from chongming_task.stores._sqlite import SqliteTaskStore\n", True),
        ("import chongming_task.controller._controller\n", True),
        ("see `chongming_task.worker.Submission(...)`\n", True),
        ("python -m chongming_task.worker._daemon\n", True),
        ("::: chongming_task.controller._controller.Controller\n", True),
        ("from chongming_task import Controller\n", False),
        ("from chongming_task.testing.store_contract import StoreContract\n", False),
        ("::: chongming_task.Controller\n", False),
        ("::: chongming_task.observability._server\n", False),
        ("the `chongming_task.worker` logger\n", False),
        ("python -m chongming_task.cli --help\n", False),
    ],
)
def test_the_scan_tells_public_from_internal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snippet: str, refused: bool
) -> None:
    """The scanner itself: it must refuse an internal path in each form it reads."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "examples").mkdir()
    (tmp_path / "README.md").write_text(f"```python\n{snippet}```\n", encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert bool(_refusals()) is refused
