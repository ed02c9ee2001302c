"""The whitelist: names in, code never; duplicates refused; @task specs honoured (§8.5, §8.13)."""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from chongming_task.controller._registry import SPEC_ATTRIBUTE, TaskRegistry
from chongming_task.errors import ConfigurationError
from chongming_task.policies import RetryPolicy, Timeout


@dataclass
class FakeSpec:
    name: str
    tags: frozenset[str] = field(default_factory=frozenset)
    description: str | None = None
    retry: RetryPolicy | None = None
    timeout: Timeout | None = None


def extract(ctx: Any, source: str) -> int:
    """Read rows from source.

    More text that is not the description.
    """
    return 1


def transform(ctx: Any, n: int) -> int:
    return n


def test_register_by_name_and_lookup() -> None:
    registry = TaskRegistry()
    definition = registry.register("extract", extract, tags={"io"})
    assert definition.name == "extract"
    assert definition.tags == frozenset({"io"})
    assert definition.description == "Read rows from source."
    assert registry.get("extract") is definition
    assert registry.require("extract") is definition
    assert "extract" in registry
    assert registry.names() == ["extract"]


def test_duplicate_names_raise_instead_of_replacing() -> None:
    registry = TaskRegistry()
    registry.register("extract", extract)
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register("extract", transform)
    assert registry.require("extract").fn is extract


def test_unregistered_name_names_the_registered_ones() -> None:
    registry = TaskRegistry()
    registry.register("extract", extract)
    registry.register("transform", transform)
    with pytest.raises(ConfigurationError, match=r"'load' is not registered.*extract, transform"):
        registry.require("load")


def test_spec_supplies_name_tags_and_policies_explicit_arguments_win() -> None:
    retry = RetryPolicy(max_attempts=3)
    fn = types.FunctionType(transform.__code__, globals(), "renamed")
    setattr(fn, SPEC_ATTRIBUTE, FakeSpec("spec-name", frozenset({"gpu"}), "from spec", retry))
    registry = TaskRegistry()
    definition = registry.register(fn)
    assert (definition.name, definition.tags, definition.description) == (
        "spec-name",
        frozenset({"gpu"}),
        "from spec",
    )
    assert definition.retry is retry
    other = registry.register("other", fn, tags=["db"], description="mine")
    assert other.tags == frozenset({"db"})
    assert other.description == "mine"


def test_register_module_takes_every_task_function_once() -> None:
    module = types.ModuleType("myapp_tasks")
    first = types.FunctionType(extract.__code__, globals(), "first")
    second = types.FunctionType(transform.__code__, globals(), "second")
    setattr(first, SPEC_ATTRIBUTE, FakeSpec("first"))
    setattr(second, SPEC_ATTRIBUTE, FakeSpec("second"))
    module.first = first  # type: ignore[attr-defined]
    module.alias = first  # type: ignore[attr-defined]
    module.second = second  # type: ignore[attr-defined]
    module.plain = transform  # type: ignore[attr-defined]
    registry = TaskRegistry()
    names = [definition.name for definition in registry.register_module(module)]
    assert names == ["first", "second"]
    with pytest.raises(ConfigurationError, match="no @task function"):
        registry.register_module(types.ModuleType("empty"))
    with pytest.raises(ConfigurationError, match="module object"):
        registry.register_module("myapp.tasks")  # type: ignore[arg-type]


def test_register_all_uses_function_names_without_a_spec() -> None:
    registry = TaskRegistry()
    registry.register_all(extract, transform)
    assert registry.names() == ["extract", "transform"]
    assert [d.name for d in registry.definitions()] == ["extract", "transform"]


def test_keyword_only_parameters_colliding_with_submit_options_are_refused() -> None:
    def sync(ctx: Any, tenant: str, *, priority: int = 0) -> None: ...

    def positional_only(ctx: Any, task_id: str, /) -> None: ...

    def positional_or_keyword(ctx: Any, tenant: str, priority: int = 0) -> None: ...

    registry = TaskRegistry()
    with pytest.raises(ConfigurationError, match=r"keyword-only.*\['priority'\].*Rename it"):
        registry.register("sync", sync)
    registry.register("ok", positional_only)  # positional-only cannot collide
    registry.register("ok2", positional_or_keyword)  # set positionally: submit("ok2", "t", 5)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("", extract), {}, "non-empty"),
        (("x", "not callable"), {}, "callable"),
        (("x", extract), {"tags": "io"}, "not one string"),
        (("x", extract), {"tags": [1]}, "non-empty strings"),
    ],
)
def test_bad_registrations(args: tuple[Any, ...], kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        TaskRegistry().register(*args, **kwargs)
