"""Claiming only the command actions a claimer handles, from stores old and new.

Two consumers share the task commands of one owner: the controller's poller applies
stop/pause/resume, a worker takes submissions. Each used to claim every task command
and hand back what it did not handle; a submission held for that instant by the
poller let a worker take a later submission first. ``claim_commands(actions=...)``
lets each claim only its own actions, so nobody holds what it would give back.

A third-party store written before ``actions`` existed overrides ``claim_commands``
without it. Such a store is called without the filter and returns every action, and
the callers keep handing back what they do not handle (submissions are then only
roughly in order, as before); one warning per implementation says so.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import weakref
from collections.abc import Callable, Collection
from typing import Any

from chongming_task.stores.base import Command, TaskStore

__all__ = ["claim_actions", "filters_actions"]

log = logging.getLogger("chongming_task.stores")

#: ``claim_commands`` implementation -> whether it takes ``actions`` (signatures are
#: read once per implementation: a poller claims many times a second).
_ACCEPTS: weakref.WeakKeyDictionary[Callable[..., Any], bool] = weakref.WeakKeyDictionary()
_ACCEPTS_LOCK = threading.Lock()


def filters_actions(store: TaskStore) -> bool:
    """Whether ``store.claim_commands`` accepts the ``actions`` filter.

    Read from the signature (an ``actions`` parameter, or ``**kwargs`` as in a proxy
    that forwards to another store), never by calling with it and catching
    ``TypeError``: a ``TypeError`` from inside a claim would look the same, and
    retrying would claim twice.
    """
    method = store.claim_commands
    implementation: Callable[..., Any] = getattr(method, "__func__", method)
    with contextlib.suppress(KeyError, TypeError):  # TypeError: not weak-referenceable
        return _ACCEPTS[implementation]
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # no introspectable signature: assume the old one
        accepts = False
    else:
        accepts = any(
            p.name == "actions" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters
        )
    if not accepts:
        log.warning(
            "%s.claim_commands() takes no 'actions' filter, so command consumers claim and "
            "hand back each other's commands and submissions are only roughly in order; "
            "add 'actions: Collection[str] | None = None' (see docs/store-guide.md)",
            type(store).__qualname__,
        )
    with _ACCEPTS_LOCK, contextlib.suppress(TypeError):  # else: read it every time
        _ACCEPTS[implementation] = accepts
    return accepts


def claim_actions(
    store: TaskStore,
    owner: str,
    *,
    lease: float,
    limit: int,
    kinds: Collection[str],
    actions: Collection[str],
) -> list[Command]:
    """``store.claim_commands`` limited to ``actions`` where the store can filter.

    From a store that cannot, the result may hold commands of other actions: the
    caller must still hand those back (``release_command``).
    """
    if filters_actions(store):
        return store.claim_commands(owner, lease=lease, limit=limit, kinds=kinds, actions=actions)
    return store.claim_commands(owner, lease=lease, limit=limit, kinds=kinds)
