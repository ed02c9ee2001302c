"""Hypothesis strategies for the model's value objects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from chongming_task._model import Failure, FailureKind, Progress, TaskSnapshot, Transition
from chongming_task.states import TaskStatus

#: Any fixed UTC offset Python allows, sub-minute and microsecond offsets included.
offsets = st.timedeltas(
    min_value=-timedelta(hours=23, minutes=59, seconds=59),
    max_value=timedelta(hours=23, minutes=59, seconds=59),
).map(timezone)

#: Common real-world offsets, so shrinking lands on readable ones.
named_offsets = st.sampled_from(
    [UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30))]
)

aware_datetimes = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(2200, 1, 1),
    timezones=named_offsets | offsets,
)

#: Unicode text as users write it: CJK, emoji, combining marks, quotes, backslashes.
texts = st.text(max_size=40)
names = st.text(min_size=1, max_size=20)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(texts, json_values, max_size=4)

numbers = st.integers(min_value=-(10**9), max_value=10**9) | st.floats(
    allow_nan=False, allow_infinity=False
)

progresses = st.builds(
    Progress,
    done=numbers,
    total=st.none() | numbers,
    unit=st.none() | texts,
    message=st.none() | texts,
)

failures = st.builds(
    Failure,
    kind=st.sampled_from(FailureKind),
    message=texts,
    retryable=st.booleans(),
    exception_type=st.none() | names,
    traceback=st.none() | st.text(max_size=200),
)

statuses = st.sampled_from(TaskStatus)
versions = st.integers(min_value=0, max_value=2**31)

transitions = st.builds(
    Transition,
    task_id=names,
    from_status=st.none() | statuses,
    to_status=statuses,
    trigger=names,
    version=versions,
    at=aware_datetimes,
    actor=st.none() | texts,
    reason=st.none() | texts,
    attempt=st.integers(min_value=0, max_value=1000),
)

maybe_datetimes = st.none() | aware_datetimes

snapshots = st.builds(
    TaskSnapshot,
    task_id=names,
    name=names,
    status=statuses,
    status_version=versions,
    created_at=aware_datetimes,
    updated_at=aware_datetimes,
    label=st.none() | texts,
    attempt=st.integers(min_value=0, max_value=100),
    max_attempts=st.integers(min_value=1, max_value=100),
    queued_at=maybe_datetimes,
    started_at=maybe_datetimes,
    first_started_at=maybe_datetimes,
    finished_at=maybe_datetimes,
    progress=st.none() | progresses,
    last_heartbeat_at=maybe_datetimes,
    lease_owner=st.none() | texts,
    lease_until=maybe_datetimes,
    failure=st.none() | failures,
    outcome=json_values,
    tags=st.frozensets(texts, max_size=4),
    bucket=st.none() | st.integers(min_value=0, max_value=4095),
    bucket_key=st.none() | texts,
    priority=st.integers(min_value=-100, max_value=100),
    owner=st.none() | texts,
    pid=st.none() | st.integers(min_value=1, max_value=2**22),
    metadata=json_objects,
)
