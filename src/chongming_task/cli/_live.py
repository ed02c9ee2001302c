"""What ``run`` shows while a task runs in the foreground.

On a terminal: a rich progress bar (status, done/total, elapsed) with each transition
printed above it. Otherwise: one plain line per transition and at most one progress
line per second, so a log file stays readable and a pipe sees events as they happen.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from chongming_task._redact import printable, redact
from chongming_task.cli._render import Output

if TYPE_CHECKING:
    from chongming_task._model import TaskSnapshot, Transition

__all__ = ["Display", "make_display", "transition_line"]

#: Seconds between two plain progress lines.
PROGRESS_EVERY = 1.0


class _Observed(Protocol):
    """The part of ``TaskRun`` a display reads."""

    @property
    def snapshot(self) -> TaskSnapshot: ...

    @property
    def transitions(self) -> tuple[Transition, ...]: ...


def transition_line(transition: Transition) -> str:
    """``12:00:01.250  t1  queued -> starting  (controller:admitted)``, plus who and why."""
    source = transition.from_status.value if transition.from_status else "-"
    line = (
        f"{transition.at.strftime('%H:%M:%S.%f')[:-3]}  {transition.task_id}  "
        f"{source} -> {transition.to_status.value}  ({transition.trigger}"
    )
    if transition.actor:
        line += f", by {transition.actor}"
    line += ")"
    if transition.reason:
        line += f"  {redact(transition.reason)}"
    return printable(line)


class Display:
    """Plain-text display: transitions as lines, progress throttled."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self._shown = 0
        self._last_progress: tuple[Any, ...] | None = None
        self._last_progress_at = 0.0

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, run: _Observed) -> None:
        transitions = run.transitions
        for transition in transitions[self._shown :]:
            self.transition(transition)
        self._shown = len(transitions)
        progress = run.snapshot.progress
        if progress is None:
            return
        key = (progress.done, progress.total, progress.message)
        now = time.monotonic()
        if key != self._last_progress and now - self._last_progress_at >= PROGRESS_EVERY:
            self._last_progress, self._last_progress_at = key, now
            self.progress(run.snapshot)

    def transition(self, transition: Transition) -> None:
        self.output.print(transition_line(transition))

    def progress(self, snapshot: TaskSnapshot) -> None:
        assert snapshot.progress is not None
        text = f"{' ' * 14}{snapshot.task_id}  progress {redact(snapshot.progress.render())}"
        if snapshot.progress.message:
            text += f"  {redact(snapshot.progress.message)}"
        self.output.print(printable(text))

    def close(self) -> None:
        """Stop any live rendering (nothing to do for plain text)."""


class RichDisplay(Display):
    """A live progress bar; transitions are printed above it as they happen."""

    def __init__(self, output: Output) -> None:
        super().__init__(output)
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[message]}"),
            TimeElapsedColumn(),
            console=output.console,
            transient=True,
        )
        self._bar_task: Any = None

    def update(self, run: _Observed) -> None:
        from rich.markup import escape

        transitions = run.transitions
        for transition in transitions[self._shown :]:
            self.transition(transition)
        self._shown = len(transitions)
        snapshot = run.snapshot
        if self._bar_task is None:
            self._bar.start()
            self._bar_task = self._bar.add_task("", total=None, message="")
        progress = snapshot.progress
        self._bar.update(
            self._bar_task,
            description=escape(printable(f"{snapshot.task_id} {snapshot.status.value}")),
            total=progress.total if progress is not None else None,
            completed=progress.done if progress is not None else 0,
            message=escape(printable(redact(progress.message) or "")) if progress else "",
        )

    def transition(self, transition: Transition) -> None:
        from rich.text import Text

        from chongming_task.cli._render import STATUS_STYLES

        line = transition_line(transition)
        status = transition.to_status.value
        start = line.index(f"-> {status}") + 3
        text = Text(line)
        if self.output.color:
            text.stylize(STATUS_STYLES.get(status, ""), start, start + len(status))
        self.output.console.print(text)

    def close(self) -> None:
        if self._bar_task is not None:
            self._bar.stop()


def make_display(output: Output) -> Display:
    """A rich display on a terminal, plain lines otherwise."""
    return RichDisplay(output) if output.rich else Display(output)
