"""``ps`` on a big store: newest first, 50 by default, "showing 50 of N", ``--all``."""

from __future__ import annotations

import io

from chongming_task.cli import main
from chongming_task.cli._app import join_dash_values

from .conftest import Seed


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def ids(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines()[2:]]


def test_ps_lists_newest_first_50_by_default_and_says_so(seed: Seed) -> None:
    db = seed(60)
    code, out, err = run("--db", db, "ps")
    assert code == 0
    shown = ids(out)
    assert len(shown) == 50
    assert shown[0] == "t0060"  # newest first
    assert shown[-1] == "t0011"
    assert "showing 50 of 60 tasks" in err
    assert "showing" not in out  # the table stays parseable


def test_ps_all_lists_everything_without_a_footer(seed: Seed) -> None:
    db = seed(60)
    code, out, err = run("--db", db, "ps", "--all")
    assert code == 0
    assert len(ids(out)) == 60
    assert "showing" not in err


def test_ps_json_carries_the_total(seed: Seed) -> None:
    import json

    db = seed(60)
    code, out, _ = run("--db", db, "ps", "--json", "--limit", "5")
    document = json.loads(out)
    assert (code, document["count"], document["total"]) == (0, 5, 60)


def test_ps_limit_and_all_together_is_a_usage_error(seed: Seed) -> None:
    code, _, err = run("--db", seed(1), "ps", "--all", "--limit", "3")
    assert code == 2
    assert "--limit N or --all" in err


def test_ps_order_minus_created_as_documented(seed: Seed) -> None:
    db = seed(3)
    code, out, err = run("--db", db, "ps", "--order", "-created")
    assert (code, err) == (0, "")
    assert ids(out) == ["t0003", "t0002", "t0001"]
    code, out, _ = run("--db", db, "ps", "--order", "created")
    assert ids(out) == ["t0001", "t0002", "t0003"]
    code, out, _ = run("--db", db, "ps", "--order", "-updated")
    assert ids(out) == ["t0003", "t0002", "t0001"]


def test_join_dash_values_only_touches_order_values() -> None:
    assert join_dash_values(["ps", "--order", "-created", "--limit", "3"]) == [
        "ps",
        "--order=-created",
        "--limit",
        "3",
    ]
    assert join_dash_values(["ps", "--order", "--json"]) == ["ps", "--order", "--json"]
    assert join_dash_values(["run", "x", "--", "--order", "-a"]) == [
        "run",
        "x",
        "--",
        "--order",
        "-a",
    ]
