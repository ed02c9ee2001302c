"""Parts of :class:`chongming_task.testing.store_contract.StoreContract`, one file per topic."""

from __future__ import annotations

from chongming_task.testing._store_contract._support import WatchedClock, assert_same_json

__all__ = ["WatchedClock", "assert_same_json"]
