"""The controller contract suite: read-your-writes and ordering through a ``Controller``.

The store contract (``store_contract.StoreContract``) checks a ``TaskStore`` method by
method; this suite checks what a ``Controller(store)`` on that store promises its
callers (guide §8.3, §8.9, §8.11), whatever the store batches or defers:

* **Read-your-writes.** Right after ``submit()``, ``pause()`` (returned True, running
  or queued), ``resume()`` (returned True), ``stop()`` and ``wait()``, with no polling,
  ``get``, ``list_tasks``, ``stats`` and a second store on the same database show the
  call's effect.
* **The stored trail is the run's.** ``history(id)`` equals ``run.transitions``
  (version, from, to, trigger) once the call returned, for runs that succeed, fail and
  retry, are stopped, paused and resumed in place, or paused while queued.
* **Per-task order.** The creation record (``None -> pending``, version 0), then
  versions consecutive from 1, each record leaving the status the previous one
  reached; the snapshot's ``status_version`` is the last record's.
* **A crash keeps a confirmed effect.** A child process pauses a task (in place, and
  while queued), and is killed with SIGKILL on the line after ``pause()`` returned
  True; the store still says ``paused`` and ``reconcile()`` neither marks it lost nor
  sees it as anything but paused. These cases need ``store_factory()`` and skip
  without it (the in-memory store and SQLite ``:memory:`` cannot be seen from another
  process).

Subclass :class:`ControllerContract` and implement ``make_store()``::

    from chongming_task.testing.controller_contract import ControllerContract


    class TestMyStoreUnderAController(ControllerContract):
        def make_store(self):
            return MyStore(...)

Like the store contract it is a plain class with ``assert`` statements and no pytest
import: it runs under pytest (``setup_method``/``teardown_method``) and unittest (mix in
``TestCase``; ``setUp``/``tearDown`` are provided). Task bodies hold on
``threading.Event`` gates, never on sleeps; 10 s deadlines only bound a failing case.

Hooks (all optional except ``make_store``):

``make_store()``
    A store on the database under test, empty at the first call of a case. Called
    again by the crash cases for the restarted process: it must open the same data.
    The controller runs on the real clock; the store keeps its own.
``make_second_store()``
    Another instance/connection on the same database; every visibility and trail
    check also reads through it. ``None`` (the default) reads the main store again.
``store_factory()``
    A picklable callable opening the same database in another process; enables the
    crash cases.
"""

from __future__ import annotations

from chongming_task.testing._controller_contract.crash import CrashCases
from chongming_task.testing._controller_contract.trail import TrailCases
from chongming_task.testing._controller_contract.visibility import VisibilityCases

__all__ = ["ControllerContract"]


class ControllerContract(VisibilityCases, TrailCases, CrashCases):
    """Every controller contract case; subclass it and implement ``make_store()``."""
