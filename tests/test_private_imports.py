"""No module imports another package's private module except through that package's face.

A module is private when a component of its name starts with an underscore
(``chongming_task.stores._sqlite``); only its parent package and what is inside it may
import it (``stores/`` may import ``stores._sqlite``, ``cli/`` imports
``chongming_task.stores``). That is import-linter's ``private_modules`` rule; the
contract of that type in ``pyproject.toml`` enforces it for the packages already clean.
This test counts what is left across the whole package and fails if it grows:
``BOUND`` only ever goes down, to 0, when the contract can cover every package.
"""

from __future__ import annotations

import grimp

#: The violations left (importer -> imported pairs, TYPE_CHECKING imports excluded).
BOUND = 141


def _owner(module: str) -> str | None:
    """The package whose private module ``module`` is, or ``None`` if it is public: the
    parent of its last underscored component (``testing._store_contract._support``
    belongs to ``testing._store_contract``)."""
    parts = module.split(".")
    private = [
        index
        for index, part in enumerate(parts)
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
    ]
    return ".".join(parts[: private[-1]]) if private else None


def private_imports() -> list[str]:
    graph = grimp.build_graph("chongming_task", exclude_type_checking_imports=True)
    assert len(graph.modules) > 100, "the package's graph was not built"
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            owner = _owner(imported)
            if owner is None or importer == owner or importer.startswith(owner + "."):
                continue
            found.append(f"{importer} -> {imported}")
    return found


def test_imports_of_other_packages_private_modules_do_not_grow() -> None:
    found = private_imports()
    assert len(found) <= BOUND, "\n".join(found)


def test_what_is_private() -> None:
    assert _owner("chongming_task.stores._sqlite") == "chongming_task.stores"
    assert _owner("chongming_task.testing._store_contract.queue") == "chongming_task.testing"
    assert (
        _owner("chongming_task.testing._store_contract._support")
        == "chongming_task.testing._store_contract"
    )
    assert _owner("chongming_task.stores") is None
    assert _owner("chongming_task.cli.__main__") is None
