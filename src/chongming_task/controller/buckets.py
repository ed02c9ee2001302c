"""Bucket rules of a node: which buckets it owns, and where a submission may go (§8.8, §8.14).

Both checks fail loudly because the alternative is silent: a task written into a
bucket no node owns (or into no bucket, on a partitioned deployment) is claimed by
nobody and waits in ``queued`` forever without a single error.
"""

from __future__ import annotations

from collections.abc import Iterable

from chongming_task.errors import ConfigurationError
from chongming_task.policies import BucketPolicy

__all__ = ["bucket_for_submit", "format_buckets", "owned", "owns_all", "policy"]

DEFAULT_NUM_BUCKETS = 64


def policy(num_buckets: int | None, bucket_policy: BucketPolicy | None) -> BucketPolicy:
    """The node's bucket policy from either ``num_buckets`` or ``bucket_policy``."""
    if bucket_policy is None:
        return BucketPolicy(num_buckets=DEFAULT_NUM_BUCKETS if num_buckets is None else num_buckets)
    if not isinstance(bucket_policy, BucketPolicy):
        raise ConfigurationError(f"bucket_policy must be a BucketPolicy, got {bucket_policy!r}")
    if num_buckets is not None and num_buckets != bucket_policy.num_buckets:
        raise ConfigurationError(
            f"num_buckets={num_buckets} contradicts bucket_policy.num_buckets="
            f"{bucket_policy.num_buckets}; give it in one place"
        )
    return bucket_policy


def owned(bucket_policy: BucketPolicy, buckets: Iterable[int] | None) -> frozenset[int] | None:
    """Validate ``owned_buckets`` against the policy's range at construction."""
    if buckets is None:
        return None
    if isinstance(buckets, str | bytes):
        raise ConfigurationError(
            f"owned_buckets must be integers such as range(0, 16), got {buckets!r}"
        )
    result = bucket_policy.validate_buckets(buckets)
    if not result:
        raise ConfigurationError(
            "owned_buckets is empty: this node would run no task at all; "
            "pass None to own every bucket"
        )
    return result


def owns_all(bucket_policy: BucketPolicy, buckets: frozenset[int] | None) -> bool:
    """No partition: nothing declared, or every bucket declared (§8.14)."""
    return buckets is None or len(buckets) == bucket_policy.num_buckets


def format_buckets(buckets: Iterable[int]) -> str:
    """``[0, 1, ..., 15, 32, 33, ..., 47]``: runs of four or more are elided."""
    ordered = sorted(buckets)
    parts: list[str] = []
    index = 0
    while index < len(ordered):
        end = index
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        run = ordered[index : end + 1]
        if len(run) >= 4:
            parts.extend([str(run[0]), str(run[1]), "...", str(run[-1])])
        else:
            parts.extend(str(value) for value in run)
        index = end + 1
    return "[" + ", ".join(parts) + "]"


def bucket_for_submit(
    bucket_policy: BucketPolicy, buckets: frozenset[int] | None, bucket_key: str | None
) -> int | None:
    """The bucket of a new task, refusing one this node would never run."""
    partitioned = not owns_all(bucket_policy, buckets)
    if bucket_key is None:
        if partitioned:
            assert buckets is not None
            raise ConfigurationError(
                f"this node owns only buckets {format_buckets(buckets)} of "
                f"{bucket_policy.num_buckets}, so every task needs a bucket_key: a task in "
                "no bucket would be claimed by no node. Pass bucket_key=..."
            )
        return None
    bucket = bucket_policy.bucket_for(bucket_key)
    if partitioned and buckets is not None and bucket not in buckets:
        raise ConfigurationError(
            f"bucket {bucket} (from bucket_key={bucket_key!r}) is not owned by this node; "
            f"this node owns {format_buckets(buckets)}. A task written into another node's "
            "bucket would never be run by any node."
        )
    return bucket
