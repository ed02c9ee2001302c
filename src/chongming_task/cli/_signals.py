"""SIGTERM/SIGINT handling for the foreground commands (``run``, ``worker``).

systemd, Docker and Kubernetes stop a service with SIGTERM, people with Ctrl-C
(SIGINT); both must lead to the same clean shutdown. Handlers can only be installed
from the main thread, so in-process callers on other threads (tests) simply keep
the default behaviour.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["Terminated", "on_shutdown_signals", "terminate_as_interrupt"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so one ``except KeyboardInterrupt`` handles both."""


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread."""
    if not _in_main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def on_shutdown_signals(callback: Callable[[str], None]) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT call ``callback(signal_name)`` instead.

    The callback runs in the main thread between bytecodes: it must only set flags.
    """
    if not _in_main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        callback(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
