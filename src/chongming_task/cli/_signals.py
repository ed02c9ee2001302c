"""SIGTERM/SIGINT handling for the foreground commands (``run``, ``worker``).

systemd, Docker and Kubernetes stop a service with SIGTERM, people with Ctrl-C
(SIGINT); both must lead to the same clean shutdown. The handlers only record the
signal and the command's own loop acts on it, so a signal never cuts a submission or
a write in half the way Python's default ``KeyboardInterrupt`` can. Handlers can only
be installed from the main thread, so in-process callers on other threads (tests)
simply keep the default behaviour.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["on_shutdown_signals"]


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


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
