"""docs/architecture.md is drawn from the code: the layers import-linter enforces, a
paragraph per package saying what it may import (below it, as the layers say), and
names of files, modules and classes that exist."""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "chongming_task"
DOC = ROOT / "docs" / "architecture.md"

#: Internal helpers every layer may use, and the package's own namespace.
FREE = {
    "chongming_task._lazy",
    "chongming_task._public",
    "chongming_task.__main__",
    "chongming_task.__init__",
}
#: Names the doc uses that are Python's or SQL's, not ours.
NOT_OURS = {"TYPE_CHECKING", "COMMIT"}


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    [layers] = [c["layers"] for c in contracts if c["type"] == "layers"]
    return list(layers)


def _rank() -> dict[str, int]:
    """Module -> its layer's position, from the top (0) down."""
    return {
        name.strip(): position
        for position, layer in enumerate(_layers())
        for name in re.split(r"[|:]", layer)
    }


def _open_layers() -> set[int]:
    """The positions of the layers whose packages may import each other (``:``)."""
    return {position for position, layer in enumerate(_layers()) if ":" in layer}


def _top_level() -> set[str]:
    """Every package and module directly under src/chongming_task, as the doc names
    them: ``stores/``, ``states.py``."""
    return {
        f"{path.name}/" if path.is_dir() else path.name
        for path in PACKAGE.iterdir()
        if (path.is_dir() and (path / "__init__.py").exists()) or path.suffix == ".py"
    }


def _sections() -> dict[str, str]:
    """The package paragraphs: heading (the names in it) -> text."""
    doc = _doc()
    start = doc.index("## The packages")
    part = doc[start : doc.index("\n## ", start + 1)]
    pieces = re.split(r"^### (.+)$", part, flags=re.M)
    return {pieces[i].strip(): pieces[i + 1] for i in range(1, len(pieces), 2)}


def _module(unit: str) -> str:
    return "chongming_task." + unit.removesuffix("/").removesuffix(".py")


def test_the_documented_layers_are_the_enforced_ones() -> None:
    block = re.search(r"<!-- layers -->\n```\n(.*?)```\n<!-- /layers -->", _doc(), re.S)
    assert block is not None, "docs/architecture.md lost its layers block"
    documented = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    assert documented == _layers()


def test_every_package_is_in_a_layer() -> None:
    present = {_module(unit) for unit in _top_level()}
    assert present - FREE - set(_rank()) == set(), "a new module needs a layer in pyproject.toml"


def test_every_package_and_top_level_module_has_its_paragraph() -> None:
    headed: list[str] = []
    for heading, text in _sections().items():
        names = re.findall(r"`([^`]+)`", heading)
        assert names, f"heading {heading!r} names no package in backticks"
        headed += names
        flat = " ".join(text.split())
        assert "Start reading at" in flat, f"{heading}: where to start reading?"
        assert "May import:" in flat, f"{heading}: what may it import?"
    assert sorted(headed) == sorted(set(headed)), "a package has two paragraphs"
    assert set(headed) == _top_level()


def test_every_nested_package_is_named_in_its_parents_paragraph() -> None:
    text = "\n".join(_sections().values())
    nested = {
        path.parent.relative_to(PACKAGE).as_posix() + "/"
        for path in PACKAGE.glob("*/*/__init__.py")
    }
    assert nested
    for package in sorted(nested):
        assert f"`{package}`" in text, f"{package} is not named in the package paragraphs"


def test_what_a_package_may_import_is_below_it() -> None:
    """Below it, or beside it in a layer whose packages may import each other."""
    rank = _rank()
    open_layers = _open_layers()
    for heading, text in _sections().items():
        units = [u for u in re.findall(r"`([^`]+)`", heading) if _module(u) in rank]
        clause = re.search(r"May import:(.*?)(?:\.\s|\.$|$)", " ".join(text.split()), re.S)
        assert clause is not None, heading
        for name in re.findall(r"`([^`]+)`", clause.group(1)):
            assert _module(name) in rank, f"{heading}: `{name}` is no layer"
            for unit in units:
                below = rank[_module(name)] > rank[_module(unit)]
                beside = rank[_module(name)] == rank[_module(unit)] in open_layers
                assert below or (beside and name != unit), (
                    f"{heading}: {unit} may not import {name} (not below it in the layers)"
                )


@cache
def _sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")}


@cache
def _stems() -> dict[str, list[Path]]:
    """Module or package name -> the files that define its names."""
    stems: dict[str, list[Path]] = {}
    for path in _sources():
        if path.name == "__init__.py":
            stems.setdefault(path.parent.name, []).extend(path.parent.rglob("*.py"))
        else:
            stems.setdefault(path.stem, []).append(path)
    return stems


@cache
def _defines(name: str, paths: tuple[Path, ...] | None = None, *, lazy: bool = False) -> bool:
    """Whether ``name`` is a class, function, attribute or assigned name there (``lazy``:
    or a name a namespace re-exports lazily, spelled as a string)."""
    word = re.escape(name)
    forms = [
        rf"^\s*(?:class|def|async def)\s+{word}\b",
        rf"^\s*(?:self\.)?{word}\s*(?::[^=\n]*)?=[^=]",
        rf"^\s*{word}\s*:",
    ]
    if lazy:
        forms.append(rf"[\"']{word}[\"']")
    pattern = re.compile("|".join(forms), re.M)
    sources = _sources()
    return any(pattern.search(sources[p]) for p in (paths if paths is not None else sources))


def _resolves(path: str) -> bool:
    if "*" in path:
        return any(PACKAGE.glob(path)) or any(ROOT.glob(path))
    if "/" not in path:
        return any(PACKAGE.rglob(path))
    return (PACKAGE / path).exists() or (ROOT / path).exists()


def _unresolved(token: str) -> str | None:
    """Why ``token`` names nothing that exists, or ``None``."""
    token = token.removesuffix("()")
    if re.fullmatch(r"[\w./*-]+", token) is None:
        return None  # code, a command line, a value
    if token.endswith((".py", "/")) or ("/" in token and not token.startswith("/")):
        return None if _resolves(token) else "no such file or directory"
    parts = token.split(".")
    if not all(re.fullmatch(r"[A-Za-z_]\w*", part) for part in parts):
        return None
    head, rest = parts[0], parts[1:]
    if head == "chongming_task":
        *modules, last = parts[1:] or [""]
        here = PACKAGE
        for part in modules:
            here = here / part
        candidates = [here / f"{last}.py", here / last / "__init__.py"]
        if not last or any(c.exists() for c in candidates):
            return None
        init = here / "__init__.py" if here.is_dir() else here.with_suffix(".py")
        return (
            None
            if init.exists() and _defines(last, (init,), lazy=True)
            else "no such module or name"
        )
    if head[0].isupper() and any(c.islower() for c in head):
        if not _defines(head):
            return "no such class"
        return None if all(_defines(part) for part in rest) else "no such attribute"
    if re.fullmatch(r"[A-Z][A-Z0-9_]{3,}", head) and not rest and head not in NOT_OURS:
        return None if _defines(head) else "no such constant"
    stems = _stems()
    if rest and head in stems:
        return None if _defines(rest[0], tuple(stems[head])) else f"{head} defines no {rest[0]}"
    if rest and f"_{head}" in stems:
        return f"the module is _{head}"
    return None


def test_every_file_module_and_class_named_in_backticks_exists() -> None:
    tokens = set(re.findall(r"`([^`\n]+)`", _doc()))
    wrong = {token: why for token in sorted(tokens) if (why := _unresolved(token))}
    assert wrong == {}
