"""Persistence: the :class:`~chongming_task.stores.base.TaskStore` contract and its backends.

The package itself imports nothing heavy: ``stores.base`` holds the contract,
``stores.memory`` the in-process reference, ``stores.sqlite`` the default file backend
and ``stores.postgres`` the shared-server backend (``pip install "chongming-task[postgres]"``).
See ``docs/store-guide.md`` for the semantics every backend must honour.
"""
