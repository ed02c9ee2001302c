"""Rehearsing a release-and-start moments before it happens, so its code is warm.

Why: on the test machine (W3 of ``bench/``, docs/performance.md "Fourth pass") the
first pass through a code path after a second of sleep costs four to six times the
next pass -- instruction and data caches, TLB and branch predictors of a core that
other processes used meanwhile. At a scheduled instant that is the first armed run's
release: 0.13-0.34 ms for its ``blocked -> queued`` against 0.03 ms for the second
run's, the same for its ``-> starting`` and its row encoding. Spinning on the clock
until the instant warms nothing; running the same code does (a 30-object allocation
loop: 48-73 us after a 0.3 s sleep, with or without a clock spin, 12 us when the
spin ran that loop).

What: a :class:`ReleaseRehearsal` plays, on *throwaway* runs that no controller,
ledger or store knows, the transitions a release makes (``blocked -> queued ->
starting -> running -> succeeded`` of a no-op body on the
:class:`~chongming_task.runtime.executors.inline.InlineExecutor`), hands each of
their transitions to a listener that builds the stored form and, where the store
offers it (``rehearse_write``), encodes the row exactly as a write would, and reads
the real armed runs' snapshots the same way. Nothing of it is stored, announced or
visible: the throwaway runs have no id in any store and are dropped when the
rehearsal is. The scheduler's loop plays it while it waits for the instant, in the
time it would otherwise spend spinning (see
:meth:`chongming_task.schedule.loop.FiringLoop._await`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from chongming_task.core.clock import Clock
from chongming_task.model import TaskSnapshot, Transition
from chongming_task.run import TaskRun
from chongming_task.runtime.executors.inline import InlineExecutor

__all__ = ["REHEARSALS", "ReleaseRehearsal", "StoredForm", "WriteRehearsal"]

log = logging.getLogger("chongming_task.controller")

#: Throwaway runs one rehearsal prepares: one to prime at arming (a process's first
#: play pays first-call costs, several milliseconds), then a cold one and warm ones
#: in the last moments before the instant; more would not fit there.
REHEARSALS: Final = 4
#: The id every throwaway run carries; it never reaches a store.
REHEARSAL_ID: Final = "chongming-rehearsal"

#: The controller's ``stored_form``: a snapshot as it would be written.
StoredForm = Callable[[TaskSnapshot], TaskSnapshot]
#: A store's optional ``rehearse_write(snapshot, transitions)``: encode, write nothing.
WriteRehearsal = Callable[[TaskSnapshot, Sequence[Transition]], object]

_INLINE: Final = InlineExecutor()


def _no_op(ctx: Any) -> None:
    """The throwaway runs' body."""


class ReleaseRehearsal:
    """Throwaway runs to play the release path on, and the armed runs to read.

    Built when firings are armed (well before the instant: making a run is not part
    of the path at the instant), played in the last moments before it. Never raises:
    a rehearsal that fails is logged once and stops playing (the release works
    without it, only colder).
    """

    def __init__(
        self,
        runs: Iterable[TaskRun],
        *,
        stored_form: StoredForm,
        rehearse_write: WriteRehearsal | None,
        clock: Clock,
        count: int = REHEARSALS,
    ) -> None:
        self._runs = list(runs)
        self._stored_form = stored_form
        self._rehearse_write = rehearse_write
        self._props: list[TaskRun] = []
        try:
            for _ in range(count if self._runs else 0):
                self._props.append(self._prop(clock))
        except Exception:
            log.warning("preparing a release rehearsal failed", exc_info=True)
            self._props = []

    @property
    def left(self) -> int:
        """Plays left."""
        return len(self._props)

    def play(self) -> bool:
        """Rehearse once; False when nothing is left to play (or it failed)."""
        if not self._props:
            return False
        prop = self._props.pop()
        try:
            for run in self._runs:
                self._encode(None, run.snapshot)
            prop.release(reason="rehearsal", trigger="rehearsal")
            prop.start()
        except Exception:
            log.warning("a release rehearsal failed; not rehearsing further", exc_info=True)
            self._props = []
            return False
        return True

    def _prop(self, clock: Clock) -> TaskRun:
        """A throwaway run, ``blocked`` like an armed firing, listened to like one."""
        prop = TaskRun(_no_op, task_id=REHEARSAL_ID, executor=_INLINE, clock=clock)
        prop.block(reason="rehearsal")
        prop.add_listener(self._encode)
        return prop

    def _encode(self, transition: Transition | None, snapshot: TaskSnapshot) -> None:
        """What the write-through does with a transition, short of writing it."""
        stored = self._stored_form(snapshot)
        if self._rehearse_write is not None:
            self._rehearse_write(stored, () if transition is None else (transition,))
