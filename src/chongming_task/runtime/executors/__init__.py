"""Executors: where a task body runs (``inline``, ``thread``, ``process``)."""
