"""Bucket rules of a node: which buckets it owns, and where a submission may go (§8.8, §8.14).

Both checks fail loudly because the alternative is silent: a task written into a
bucket no node owns (or into no bucket, on a partitioned deployment) is claimed by
nobody and waits in ``queued`` forever without a single error.
"""

from __future__ import annotations

from collections.abc import Iterable

from chongming_task.errors import ConfigurationError
from chongming_task.policies import BucketPolicy, format_buckets

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


def bucket_for_submit(
    bucket_policy: BucketPolicy, buckets: frozenset[int] | None, bucket_key: str | None
) -> int | None:
    """The bucket of a new task, refusing one this node would never run."""
    return bucket_policy.bucket_for_submit(bucket_key, buckets)
