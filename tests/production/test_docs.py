"""Docs stand alone: code blocks run (or say they are fragments), the configuration
reference is current, and help texts cite no section of a document the user lacks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: A block preceded by this line is a fragment on purpose (it needs context to run).
FRAGMENT = "<!-- fragment -->"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
#: Pages written for users (design notes for contributors cite the guide on purpose).
USER_DOCS = [
    "README.md",
    "docs/cli.md",
    "docs/running.md",
    "docs/tasks.md",
    "docs/pipelines.md",
    "docs/observability.md",
    "docs/configuration.md",
    "docs/deployment.md",
    "docs/coming-from-celery.md",
    "docs/coming-from-rq.md",
    "docs/coming-from-apscheduler.md",
    "docs/coming-from-procrastinate.md",
]


def blocks() -> list[tuple[str, int, str, bool]]:
    found = []
    pages = [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "design.md"]
    for path in [ROOT / "README.md", *pages]:  # design.md is generated, for contributors
        text = path.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            before = text[: match.start()].rstrip().splitlines()
            fragment = bool(before) and before[-1].strip() == FRAGMENT
            line = text.count("\n", 0, match.start()) + 1
            found.append((path.relative_to(ROOT).as_posix(), line, match.group(1), fragment))
    return found


BLOCKS = blocks()


def test_there_are_code_blocks_to_check() -> None:
    assert len(BLOCKS) > 10


@pytest.mark.parametrize(
    ("page", "line", "code", "fragment"),
    BLOCKS,
    ids=[f"{page}:{line}" for page, line, _, _ in BLOCKS],
)
def test_every_python_block_runs_or_is_marked_a_fragment(
    page: str, line: int, code: str, fragment: bool, tmp_path: Path
) -> None:
    compile(code, f"{page}:{line}", "exec")  # even a fragment must be valid Python
    if fragment:
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "examples")])}
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, (
        f"{page}:{line} does not run (mark it with {FRAGMENT!r} if it is a fragment "
        f"on purpose):\n{result.stderr[-2000:]}"
    )


#: Pages whose Python blocks, in order, are one program (each page says so): every
#: block is a fragment alone, and together they must run.
PROGRAM_PAGES = ["docs/coming-from-celery.md", "docs/coming-from-procrastinate.md"]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("page", PROGRAM_PAGES)
def test_a_page_of_one_program_runs(page: str, tmp_path: Path) -> None:
    code = "\n".join(block for where, _, block, _ in BLOCKS if where == page)
    assert code, f"{page} has no Python block"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", code],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=140,
    )
    assert result.returncode == 0, f"{page} does not run as one program:\n{result.stderr[-3000:]}"
    assert "ResourceWarning" not in result.stderr, result.stderr[-3000:]


def test_the_configuration_reference_is_current() -> None:
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_config_md
    finally:
        sys.path.remove(str(ROOT / "docs"))
    current = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert current == gen_config_md.render(), "run: python docs/gen_config_md.py"


def test_help_texts_cite_no_guide_sections() -> None:
    import argparse

    from chongming_task.cli._app import build_parser

    parser = build_parser()
    texts = [parser.format_help()]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    texts += [command.format_help() for command in sub.choices.values()]
    cited = [text for text in texts if re.search(r"§\s*\d", text)]
    assert not cited, cited[0]


@pytest.mark.parametrize("page", USER_DOCS)
def test_user_docs_cite_no_sections_of_a_guide_they_do_not_ship(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    cited = re.findall(r".{0,40}§\s*\d[\d.]*.{0,20}", text)
    assert not cited, cited
