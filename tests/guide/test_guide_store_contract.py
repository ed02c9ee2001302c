"""Guide §8.7 "write your own backend": the contract suite sample, as written.

``MyStore`` is the sample's undefined backend; here it is a subclass of the in-memory
reference store, so the whole shipped suite runs against it under pytest.
"""

from __future__ import annotations

from chongming_task.stores._memory import InMemoryTaskStore


class MyStore(InMemoryTaskStore):
    """A third-party backend, for the sample's ``MyStore(...)``."""


from chongming_task.testing.store_contract import StoreContract  # noqa: E402 - the sample's order


class TestMyStore(StoreContract):
    def make_store(self):  # type: ignore[no-untyped-def]
        return MyStore()


def test_s8_7_the_suite_does_not_depend_on_pytest() -> None:
    import re
    from pathlib import Path

    import chongming_task.testing._store_contract as package
    from chongming_task.testing import store_contract

    sources = [
        Path(store_contract.__file__ or ""),
        *Path(package.__file__ or "").parent.glob("*.py"),
    ]
    for source in sources:
        text = source.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from)\s+pytest\b", text, re.M), source
