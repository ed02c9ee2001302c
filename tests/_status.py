"""``status_now``: a status read afresh, for asserting a change of status.

After ``assert run.status is S.PAUSED``, mypy keeps ``run.status`` narrowed to
``PAUSED`` across ``run.resume()`` (it assumes a call changes no attribute), so a
following ``assert run.status is S.RUNNING`` reads to it as impossible and the rest of
the test as unreachable, unchecked. The result of a call is never narrowed, so the
assertion after the change reads the status through this function.
"""

from __future__ import annotations

from typing import Protocol

from chongming_task import TaskStatus


class HasStatus(Protocol):
    @property
    def status(self) -> TaskStatus: ...


def status_now(subject: HasStatus) -> TaskStatus:
    """``subject.status``, as it is now."""
    return subject.status
