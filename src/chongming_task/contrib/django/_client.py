"""``DjangoClient``: a :class:`~chongming_task.Client` that writes in Django's transaction.

Inside ``transaction.atomic()`` (of the store's database alias), ``enqueue`` and
``enqueue_many`` write the task with Django's own connection, in its open
transaction: a rollback leaves no task and wakes no worker, the commit makes the task
visible and wakes them (PostgreSQL's ``NOTIFY`` is sent on commit; SQLite's workers
poll a counter committed with the task). Outside an atomic block Django autocommits,
and so does ``enqueue``: the store's own connection writes and commits at once.

``enqueue_on_commit`` checks everything now and writes after the commit
(``transaction.on_commit``), with the store's own connection: nothing is written if
the transaction rolls back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Unpack, overload

from django.db import connections, transaction

from chongming_task._decorator import refuse_option_keywords
from chongming_task._validation import check_unique, refuse_unknown_keywords
from chongming_task.controller import TaskRegistry
from chongming_task.errors import ConfigurationError
from chongming_task.queue import Client, EnqueueOptions, EnqueueWithOptions
from chongming_task.runtime import TaskContext
from chongming_task.stores import TaskStore

__all__ = ["DjangoClient", "DjangoEnqueueWithOptions"]

P = ParamSpec("P")

_OPTIONS = EnqueueOptions.__optional_keys__


class DjangoClient(Client):
    """The project's client (``get_client()``): the store on Django's database ``alias``."""

    def __init__(
        self,
        store: TaskStore,
        *,
        alias: str,
        tasks: TaskRegistry | None,
        num_buckets: int,
    ) -> None:
        self.alias = alias
        super().__init__(
            store,
            tasks=tasks,
            num_buckets=num_buckets,
            current_connection=self._atomic_connection,
        )

    def _atomic_connection(self) -> object | None:
        """Django's connection while an atomic block of ``alias`` is open, else ``None``.

        Raises:
            TransactionManagementError: The atomic block already failed (Django's own
                error: a query there is refused until the block ends).
        """
        connection = connections[self.alias]
        if not connection.in_atomic_block:
            return None
        connection.validate_no_broken_transaction()
        connection.ensure_connection()
        driver: object = connection.connection
        return driver

    def with_options(self, **options: Unpack[EnqueueOptions]) -> DjangoEnqueueWithOptions:
        """:meth:`~chongming_task.Client.with_options`, with :meth:`enqueue_on_commit` too:
        ``client.with_options(task_id=...).enqueue_on_commit(send, order.pk)``."""
        refuse_unknown_keywords("with_options", options, _OPTIONS)
        return DjangoEnqueueWithOptions(self, options)

    @overload
    def enqueue_on_commit(
        self,
        task: Callable[Concatenate[TaskContext, P], object],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> None: ...

    @overload
    def enqueue_on_commit(self, task: str, /, *args: Any, **kwargs: Any) -> None: ...

    def enqueue_on_commit(
        self, task: str | Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> None:
        """:meth:`enqueue` once the current transaction of ``alias`` commits.

        Everything ``enqueue`` checks is checked now (the name, the arguments against
        the task's signature, the options), so a mistake raises here, before the
        commit. After the commit the task is written with the store's own connection;
        after a rollback nothing is written. Outside an atomic block it is written at
        once (Django runs the callback at once). Returns nothing: the task is not
        written yet (pass ``task_id=`` to know its id). Given the ``@task`` function,
        options go through :meth:`with_options`, as for :meth:`enqueue`.

        Raises:
            ConfigurationError: As :meth:`enqueue`; or ``connection=`` (this call
                writes after the commit, with the store's own connection).
        """
        options = {key: kwargs.pop(key) for key in list(kwargs) if key in _OPTIONS}
        if options.pop("connection", None) is not None:
            raise ConfigurationError(
                "enqueue_on_commit() writes after the commit with the store's own connection; "
                "to write in the transaction itself, call enqueue() inside atomic()"
            )
        name = self._name_for(task)
        key, _ = check_unique(options.get("unique_key"), options.get("unique_for"))
        self._prepare(  # the checks of enqueue(), writing nothing
            name,
            args,
            kwargs,
            task_id=options.get("task_id"),
            bucket_key=options.get("bucket_key"),
            priority=options.get("priority", 0),
            tags=options.get("tags"),
            label=options.get("label"),
            delay=options.get("delay"),
            not_before=options.get("not_before"),
            metadata=options.get("metadata"),
            unique_key=key,
            concurrency_key=options.get("concurrency_key"),
        )

        def write() -> None:
            self.enqueue(name, *args, **options, **kwargs)

        transaction.on_commit(write, using=self.alias)


class DjangoEnqueueWithOptions(EnqueueWithOptions):
    """``enqueue`` and ``enqueue_on_commit`` with the options given to ``with_options``."""

    __slots__ = ()

    @overload
    def enqueue_on_commit(
        self,
        task: Callable[Concatenate[TaskContext, P], object],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> None: ...

    @overload
    def enqueue_on_commit(self, task: str, /, *args: Any, **kwargs: Any) -> None: ...

    def enqueue_on_commit(
        self, task: str | Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> None:
        """As :meth:`DjangoClient.enqueue_on_commit` with the options of ``with_options``."""
        refuse_option_keywords("enqueue_on_commit", kwargs, _OPTIONS)
        client = self._client
        assert isinstance(client, DjangoClient)
        client.enqueue_on_commit(client._name_for(task), *args, **self._options, **kwargs)
