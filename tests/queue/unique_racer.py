"""A process that races others on unique keys (tests/queue/test_unique.py).

    python unique_racer.py STORE

Opens ``STORE`` (``sqlite:PATH`` or ``postgres:DSN``) and a ``Client``, enqueues one
task to warm its connections, prints ``ready``; then for every line it reads (a key)
enqueues ``job`` with that ``unique_key`` and prints ``TASK_ID CREATED`` (1 or 0). The
test writes each key to every racer at once: all of them block in ``readline`` until
then, which makes stdin the barrier.
"""

from __future__ import annotations

import sys
from pathlib import Path

from chongming_task import Client

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _store_spec import open_store


def main() -> int:
    with open_store(sys.argv[1]) as store:
        client = Client(store)
        client.enqueue("job", unique_key=f"warm-up:{id(client)}:{Path('.').resolve()}")
        print("ready", flush=True)
        for line in sys.stdin:
            handle = client.enqueue("job", unique_key=line.strip())
            print(handle.task_id, int(handle.created), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
