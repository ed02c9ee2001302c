"""Live updates: one store poller per app, fanned out to every browser as Server-Sent Events.

However many pages are open, the store is read once per interval: a shared poller
computes :meth:`Dashboard.fingerprint` (counts per status, the most recently written
task head, the schedule revisions) and, when it changed, wakes every open stream,
which sends ``event: change``. Pages then re-fetch the fragments they show. Between
changes a stream sends ``event: tick`` every ``tick`` seconds (a keep-alive that also
lets a task page refresh progress, which moves without a transition). The poller
runs only while at least one stream is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import anyio.to_thread

__all__ = ["Broadcaster"]

log = logging.getLogger("chongming_task.web")


class Broadcaster:
    """Polls ``fingerprint`` every ``interval`` seconds while someone listens."""

    def __init__(self, fingerprint: Callable[[], str], *, interval: float = 1.0) -> None:
        self._fingerprint = fingerprint
        self.interval = interval
        self.version = 0
        self.subscribers = 0
        self.polls = 0
        self._last: str | None = None
        self._event: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _ensure_running(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (a new server, a new test client)
            self._loop = loop
            self._event = asyncio.Event()
            self._task = None
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name="chongming-dashboard-live")

    async def poll_once(self) -> bool:
        """Read the fingerprint once; ``True`` if it changed since the last read."""
        try:
            value = await anyio.to_thread.run_sync(self._fingerprint)
        except Exception:
            log.exception("dashboard live poll failed")
            return False
        self.polls += 1
        changed = self._last is not None and value != self._last
        self._last = value
        if changed:
            self.version += 1
            event, self._event = self._event, asyncio.Event()
            if event is not None:
                event.set()
        return changed

    async def _run(self) -> None:
        while self.subscribers > 0:
            await self.poll_once()
            await asyncio.sleep(self.interval)  # the poll interval, not a race workaround

    async def _wait(self, seen: int, timeout: float) -> bool:
        if self.version != seen:
            return True
        event = self._event
        if event is None:
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
        return self.version != seen

    async def stream(
        self, *, tick: float = 15.0, max_events: int | None = None
    ) -> AsyncIterator[str]:
        """The text of one ``text/event-stream`` response.

        Args:
            tick: Seconds between keep-alive ``tick`` events when nothing changes.
            max_events: End after this many events (``None``: until the client leaves).
        """
        self.subscribers += 1
        try:
            self._ensure_running()
            seen = self.version
            yield f"retry: 3000\nevent: hello\ndata: {seen}\n\n"
            sent = 0
            while max_events is None or sent < max_events:
                if await self._wait(seen, tick):
                    seen = self.version
                    yield f"event: change\ndata: {seen}\n\n"
                else:
                    yield f"event: tick\ndata: {seen}\n\n"
                sent += 1
        finally:
            self.subscribers -= 1
