"""The sdist contains the whole test suite (or it would be a half-runnable package)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tracked(under: str) -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files", under], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return {line for line in listed.stdout.splitlines() if line}


@pytest.mark.slow
def test_the_sdist_carries_every_test_file(tmp_path: Path) -> None:
    try:
        importlib.metadata.version("build")  # not find_spec: ./build/ is a namespace
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the `build` package is not installed (pip install build)")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to compare the sdist with")
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (archive,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    missing = sorted(tracked("tests") - names)
    assert not missing, f"the sdist lacks {len(missing)} test files, e.g. {missing[:5]}"
    assert "LICENSE" in names


def test_manifest_grafts_the_test_suite() -> None:
    """Without ``build`` installed, the configuration that makes the above true."""
    manifest = (ROOT / "MANIFEST.in").read_text()
    assert "graft tests" in manifest.splitlines()
