"""A static check: loops in task bodies that never reach a checkpoint.

A stop or a pause lands only at ``ctx.checkpoint()`` / ``await ctx.acheckpoint()``
(cleanup code may also poll ``ctx.is_stop_requested``). A loop in a task body with
none of them inside can run for as long as it likes with a stop pending: the stop
misses its graceful window and the run ends ``lost``, or ``idle`` fires. This module
reads the body's source (``ast``, nothing is executed) and reports every such loop
with its line and why.

What counts as reaching a checkpoint inside a loop (anywhere in its body, nested
blocks included, nested function definitions excluded):

- a call ``<ctx>.checkpoint()`` or ``<ctx>.acheckpoint()``, where ``<ctx>`` is the
  body's first parameter;
- reading ``<ctx>.is_stop_requested``;
- a call that passes ``<ctx>`` itself on (``step(ctx, item)``): the callee may
  checkpoint, and the check does not follow calls, so it gives it the benefit of the
  doubt rather than report a loop that is fine.

``heartbeat.beat()`` does not count: it keeps ``idle`` quiet but is no stop point.
A loop known to be short (``for i in range(3)``) is silenced by a
``# chongming: short-loop`` comment on its first line.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from chongming_task._public import public

__all__ = ["PRAGMA", "LintFinding", "lint_function"]

_CHECKPOINTS = frozenset({"checkpoint", "acheckpoint"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
#: The comment that marks a loop as short on purpose.
PRAGMA = "chongming: short-loop"


@dataclass(frozen=True, slots=True, kw_only=True)
class LintFinding:
    """One loop of a task body with no checkpoint reachable in it."""

    task: str
    """The registered task name."""
    file: str
    line: int
    loop: str
    """``for``, ``async for`` or ``while``."""

    @property
    def why(self) -> str:
        return (
            f"this {self.loop} loop has no checkpoint(), acheckpoint() or is_stop_requested "
            "in it: a stop or pause requested while it runs waits until the loop ends, so "
            "the stop can miss its graceful window (the run ends lost) and idle can fire; "
            "call ctx.checkpoint() once per iteration"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "file": self.file,
            "line": self.line,
            "loop": self.loop,
            "why": self.why,
        }


@public
def lint_function(name: str, fn: Callable[..., Any]) -> list[LintFinding]:
    """The loops of task body ``fn`` (registered as ``name``) that reach no checkpoint.

    A body whose source cannot be read (a builtin, a lambda in a REPL) yields nothing.
    """
    target = inspect.unwrap(fn)
    try:
        lines, first = inspect.getsourcelines(target)
        file = inspect.getsourcefile(target) or "<unknown>"
    except (OSError, TypeError):
        return []
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return []
    node = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)),
        None,
    )
    if node is None or (not node.args.args and not node.args.posonlyargs):
        return []
    params = [*node.args.posonlyargs, *node.args.args]
    ctx = params[0].arg
    findings = []
    for loop in _loops(node.body):
        header = lines[loop.lineno - 1] if loop.lineno <= len(lines) else ""
        if PRAGMA in header:
            continue
        if not _reaches_checkpoint(loop, ctx):
            kind = "async for" if isinstance(loop, ast.AsyncFor) else type(loop).__name__.lower()
            findings.append(
                LintFinding(task=name, file=file, line=first + loop.lineno - 1, loop=kind)
            )
    return findings


def _own_nodes(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node under ``nodes``, not descending into nested functions or classes."""
    nested = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
    stack: list[ast.AST] = [node for node in nodes if not isinstance(node, nested)]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, nested))


def _loops(body: list[ast.stmt]) -> list[ast.For | ast.AsyncFor | ast.While]:
    found = [node for node in _own_nodes(body) if isinstance(node, _LOOPS)]
    return sorted(found, key=lambda node: node.lineno)


def _reaches_checkpoint(loop: ast.For | ast.AsyncFor | ast.While, ctx: str) -> bool:
    body: list[ast.stmt] = [*loop.body, *loop.orelse]
    if isinstance(loop, ast.While):
        # ``while not ctx.is_stop_requested:`` polls in its condition.
        body.append(ast.Expr(loop.test))
    for node in _own_nodes(body):
        if (
            isinstance(node, ast.Attribute)
            and _is_ctx(node.value, ctx)
            and (node.attr in _CHECKPOINTS or node.attr == "is_stop_requested")
        ):
            return True
        if isinstance(node, ast.Call):
            arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
            if any(_is_ctx(argument, ctx) for argument in arguments):
                return True
    return False


def _is_ctx(node: ast.AST, ctx: str) -> bool:
    return isinstance(node, ast.Name) and node.id == ctx
