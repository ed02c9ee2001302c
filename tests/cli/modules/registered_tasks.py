"""A task module that registers plain functions through ``register(controller)``."""

from __future__ import annotations

from typing import Any


def double(ctx: Any, n: int) -> int:
    return 2 * n


def register(controller: Any) -> None:
    controller.register("double", double, tags={"math"}, description="Twice n.")
