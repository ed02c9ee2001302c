"""Policies validate on construction and decide as pure functions of their inputs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chongming_task.errors import ConfigurationError, TaskCancelled, TaskTimeout
from chongming_task.policies import (
    AggregationPolicy,
    BucketPolicy,
    ConcurrencyPolicy,
    ExponentialBackoff,
    FixedBackoff,
    Jitter,
    JoinMode,
    RetryPolicy,
    Timeout,
)

NAN = float("nan")
INF = float("inf")


def make(cls: Any, *args: Any, **kwargs: Any) -> Callable[[], object]:
    """A deferred, deliberately ill-typed construction."""
    return lambda: cls(*args, **kwargs)


# ----------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (make(FixedBackoff, -1), "FixedBackoff.delay"),
        (make(FixedBackoff, NAN), "FixedBackoff.delay"),
        (make(FixedBackoff, INF), "FixedBackoff.delay"),
        (make(FixedBackoff, "1"), "FixedBackoff.delay"),
        (make(FixedBackoff, True), "FixedBackoff.delay"),
        (make(FixedBackoff, 1, jitter="some"), "FixedBackoff.jitter"),
        (make(ExponentialBackoff, base=-1), "ExponentialBackoff.base"),
        (make(ExponentialBackoff, factor=0.5), "ExponentialBackoff.factor"),
        (make(ExponentialBackoff, factor=NAN), "ExponentialBackoff.factor"),
        (make(ExponentialBackoff, max_delay=INF), "ExponentialBackoff.max_delay"),
        (make(ExponentialBackoff, base=10, max_delay=5), "ExponentialBackoff.max_delay"),
        (make(ExponentialBackoff, jitter=0.5), "ExponentialBackoff.jitter"),
        (make(RetryPolicy, max_attempts=0), "RetryPolicy.max_attempts"),
        (make(RetryPolicy, max_attempts=2.0), "RetryPolicy.max_attempts"),
        (make(RetryPolicy, max_attempts=True), "RetryPolicy.max_attempts"),
        (make(RetryPolicy, backoff=5), "RetryPolicy.backoff"),
        (make(RetryPolicy, retry_on=("ValueError",)), "RetryPolicy.retry_on"),
        (make(RetryPolicy, give_up_on=(int,)), "RetryPolicy.give_up_on"),
        (make(RetryPolicy, retry_timeouts="yes"), "RetryPolicy.retry_timeouts"),
        (make(Timeout, start=0), "Timeout.start"),
        (make(Timeout, per_attempt=-5), "Timeout.per_attempt"),
        (make(Timeout, idle=NAN), "Timeout.idle"),
        (make(Timeout, total="1h"), "Timeout.total"),
        (make(ConcurrencyPolicy, max_parallel=0), "ConcurrencyPolicy.max_parallel"),
        (make(ConcurrencyPolicy, limits={"db": 0}), "ConcurrencyPolicy.limits"),
        (make(ConcurrencyPolicy, limits=[("db", 1)]), "ConcurrencyPolicy.limits"),
        (make(ConcurrencyPolicy, limits={"": 1}), "limit tags"),
        (make(ConcurrencyPolicy, priority="high"), "ConcurrencyPolicy.priority"),
        (make(BucketPolicy, num_buckets=0), "BucketPolicy.num_buckets"),
        (make(AggregationPolicy, "majority"), "AggregationPolicy.mode"),
        (make(AggregationPolicy, "quorum"), "quorum"),
    ],
)
def test_constructors_reject_bad_input_naming_the_field(
    build: Callable[[], object], field: str
) -> None:
    with pytest.raises(ConfigurationError, match=field.replace(".", r"\.")):
        build()


def test_configuration_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


def test_guide_section_5_example() -> None:
    policy = RetryPolicy(
        max_attempts=5,  # 总尝试次数（含首次）
        backoff=ExponentialBackoff(base=1, factor=2, max_delay=300),
        retry_on=(Exception,),  # 哪些异常值得重试
        give_up_on=(ValueError, KeyError),  # 哪些立刻放弃
    )
    assert policy.backoff.jitter is Jitter.FULL  # jitter by default
    assert Timeout(start=30, per_attempt=600, idle=60).total is None


def test_single_exception_class_is_accepted_and_jitter_by_name() -> None:
    assert RetryPolicy(retry_on=OSError).retry_on == (OSError,)  # type: ignore[arg-type]
    assert FixedBackoff(1, jitter="equal").jitter is Jitter.EQUAL  # type: ignore[arg-type]
    assert FixedBackoff(0).delay == 0.0


def test_policies_are_frozen() -> None:
    policy = RetryPolicy()
    with pytest.raises(AttributeError):
        policy.max_attempts = 3  # type: ignore[misc]
    limits = {"db": 2}
    concurrency = ConcurrencyPolicy(limits=limits)
    limits["db"] = 99
    assert concurrency.limits["db"] == 2
    with pytest.raises(TypeError):
        concurrency.limits["db"] = 3  # type: ignore[index]


# ----------------------------------------------------------------- retry decisions


def never(_: float = 0) -> float:
    raise AssertionError("no delay may be drawn for a decision not to retry")


def half() -> float:
    return 0.5


def test_attempts_are_exact() -> None:
    policy = RetryPolicy(max_attempts=3, backoff=FixedBackoff(2))
    assert policy.decide(RuntimeError(), 1).retry
    assert policy.decide(RuntimeError(), 2).retry
    last = policy.decide(RuntimeError(), 3, rng=never)
    assert not last.retry
    assert last.reason == "attempt 3 of 3 used"
    assert not RetryPolicy().decide(RuntimeError(), 1, rng=never).retry  # 1 = no retry


def test_give_up_on_beats_retry_on() -> None:
    policy = RetryPolicy(max_attempts=5, retry_on=(Exception,), give_up_on=(ValueError, KeyError))
    decision = policy.decide(ValueError("bad row"), 1, rng=never)
    assert not decision.retry
    assert "give_up_on" in decision.reason
    assert not policy.decide(KeyError("k"), 1, rng=never).retry
    assert policy.decide(OSError("flaky"), 1, rng=half).retry


def test_only_retry_on_is_retried() -> None:
    policy = RetryPolicy(max_attempts=5, retry_on=(OSError,))
    decision = policy.decide(RuntimeError(), 1, rng=never)
    assert not decision.retry
    assert "not in retry_on" in decision.reason
    assert policy.decide(ConnectionError(), 1, rng=half).retry  # subclass of OSError


def test_cancellation_is_never_retried() -> None:
    policy = RetryPolicy(max_attempts=5, retry_on=(BaseException,))
    decision = policy.decide(TaskCancelled("stop requested"), 1, rng=never)
    assert not decision.retry
    assert decision.reason == "cancellation is never retried"
    # The default retry_on=(Exception,) cannot match it anyway (guide §5.1).
    assert not isinstance(TaskCancelled(), Exception)


@pytest.mark.parametrize("scope", ["start", "attempt", "idle"])
def test_timeouts_are_retried_by_default(scope: str) -> None:
    policy = RetryPolicy(max_attempts=3, backoff=FixedBackoff(1))
    assert policy.decide(None, 1, timeout_scope=scope).retry
    assert policy.decide(TaskTimeout(scope, 5), 1).retry
    strict = RetryPolicy(max_attempts=3, retry_timeouts=False)
    assert not strict.decide(None, 1, timeout_scope=scope, rng=never).retry
    assert not strict.decide(TaskTimeout(scope, 5), 1, rng=never).retry


def test_total_timeout_is_never_retried() -> None:
    policy = RetryPolicy(max_attempts=9, retry_on=(BaseException,))
    decision = policy.decide(None, 1, timeout_scope="total", rng=never)
    assert not decision.retry
    assert decision.reason == "the total timeout is never retried"
    assert not policy.decide(TaskTimeout("total", 60), 1, rng=never).retry


def test_failures_without_exception_are_retried() -> None:
    """A crashed process or a non-zero exit has no exception object."""
    assert RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)).decide(None, 1).retry


def test_decide_validates_its_inputs() -> None:
    policy = RetryPolicy(max_attempts=3)
    for bad in (0, -1, True, 1.0):
        with pytest.raises(ConfigurationError, match="attempt"):
            policy.decide(RuntimeError(), bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="timeout_scope"):
        policy.decide(None, 1, timeout_scope="forever")


def test_delay_comes_from_the_backoff() -> None:
    policy = RetryPolicy(
        max_attempts=10,
        backoff=ExponentialBackoff(base=1, factor=2, max_delay=5, jitter=Jitter.NONE),
    )
    delays = [policy.decide(RuntimeError(), n).delay for n in range(1, 6)]
    assert delays == [1, 2, 4, 5, 5]


# ----------------------------------------------------------------- backoff and jitter


@given(
    base=st.floats(0, 100),
    factor=st.floats(1, 10),
    extra=st.floats(0, 1000),
    attempt=st.integers(1, 100_000),
    draw=st.floats(0, 1, exclude_max=True),
)
def test_exponential_backoff_bounds(
    base: float, factor: float, extra: float, attempt: int, draw: float
) -> None:
    cap = base + extra
    raw = ExponentialBackoff(base=base, factor=factor, max_delay=cap, jitter=Jitter.NONE)
    exact = raw.delay_for(attempt)
    assert base <= exact <= cap or exact == cap
    full = ExponentialBackoff(base=base, factor=factor, max_delay=cap, jitter=Jitter.FULL)
    assert 0 <= full.delay_for(attempt, lambda: draw) <= exact
    equal = ExponentialBackoff(base=base, factor=factor, max_delay=cap, jitter=Jitter.EQUAL)
    assert exact / 2 <= equal.delay_for(attempt, lambda: draw) <= exact


def test_exponential_growth_and_cap() -> None:
    backoff = ExponentialBackoff(base=1, factor=2, max_delay=300, jitter=Jitter.NONE)
    assert [backoff.delay_for(n) for n in (1, 2, 3, 9, 10, 5000)] == [1, 2, 4, 256, 300, 300]


@pytest.mark.parametrize(
    ("jitter", "draw", "expected"),
    [
        (Jitter.NONE, 0.9, 10.0),
        (Jitter.FULL, 0.0, 0.0),
        (Jitter.FULL, 0.25, 2.5),
        (Jitter.EQUAL, 0.0, 5.0),
        (Jitter.EQUAL, 0.5, 7.5),
    ],
)
def test_jitter_modes(jitter: Jitter, draw: float, expected: float) -> None:
    assert jitter.apply(10.0, lambda: draw) == expected
    assert FixedBackoff(10, jitter=jitter).delay_for(1, lambda: draw) == expected


def test_full_jitter_spreads_real_random_draws() -> None:
    backoff = ExponentialBackoff(base=8, max_delay=8)
    delays = {backoff.delay_for(1) for _ in range(50)}
    assert all(0 <= delay < 8 for delay in delays)
    assert len(delays) > 40


# ----------------------------------------------------------------- timeouts


def deadline(timeout: Timeout, **kwargs: Any) -> tuple[float, str] | None:
    args: dict[str, Any] = {"submitted_at": 100.0, "attempt_started_at": None, "last_beat_at": None}
    args.update(kwargs)
    return timeout.next_deadline(**args)


def test_earliest_scope_wins() -> None:
    timeout = Timeout(start=30, per_attempt=600, idle=60, total=1000)
    assert deadline(timeout) == (130.0, "start")
    assert deadline(timeout, attempt_started_at=110.0) == (170.0, "idle")
    assert deadline(timeout, attempt_started_at=110.0, last_beat_at=650.0) == (710.0, "attempt")
    assert deadline(timeout, attempt_started_at=600.0, last_beat_at=1080.0) == (1100.0, "total")
    assert deadline(Timeout()) is None
    assert Timeout().is_unlimited
    assert not timeout.is_unlimited


def test_start_is_void_once_an_attempt_started() -> None:
    timeout = Timeout(start=30)
    assert deadline(timeout) == (130.0, "start")
    assert deadline(timeout, attempt_started_at=120.0) is None
    # Between attempts (retry_wait) the first start already happened.
    assert deadline(timeout, started_before=True) is None


def test_idle_only_inside_a_started_attempt() -> None:
    timeout = Timeout(idle=60)
    assert deadline(timeout) is None  # queued time is not silence
    assert deadline(timeout, attempt_started_at=200.0) == (260.0, "idle")
    assert deadline(timeout, attempt_started_at=200.0, last_beat_at=250.0) == (310.0, "idle")
    # A beat from before this attempt does not count.
    assert deadline(timeout, attempt_started_at=200.0, last_beat_at=150.0) == (260.0, "idle")
    # FakeClock's monotonic time starts at 0.0; a beat at 0.0 is a real beat.
    assert timeout.next_deadline(submitted_at=0.0, attempt_started_at=0.0, last_beat_at=0.0) == (
        60.0,
        "idle",
    )


def test_nothing_but_total_while_paused() -> None:
    timeout = Timeout(start=10, per_attempt=20, idle=5, total=1000)
    paused = {"attempt_started_at": 200.0, "last_beat_at": 200.0, "paused": True}
    assert deadline(timeout, **paused) == (1100.0, "total")
    assert deadline(Timeout(start=10, per_attempt=20, idle=5), **paused) is None
    assert deadline(Timeout(start=10), paused=True) is None  # paused before start


def test_paused_time_does_not_count_toward_the_attempt() -> None:
    timeout = Timeout(per_attempt=60)
    assert deadline(timeout, attempt_started_at=200.0, paused_seconds=30.0) == (290.0, "attempt")


def test_expired_reports_the_scope_at_the_deadline() -> None:
    timeout = Timeout(per_attempt=60, idle=30)
    common: dict[str, Any] = {"submitted_at": 0.0, "attempt_started_at": 10.0, "last_beat_at": 35.0}
    assert timeout.expired(now=64.9, **common) is None
    assert timeout.expired(now=65.0, **common) == "idle"
    assert timeout.expired(now=65.0, paused=True, **common) is None
    assert Timeout(total=5).expired(now=5.0, **common) == "total"


# ----------------------------------------------------------------- buckets


KEYS = ["tenant-1", "tenant-2", "订单-42", "", "x" * 1000]


def expected_bucket(key: str, num_buckets: int) -> int:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % num_buckets


def test_bucket_is_blake2b_of_the_key() -> None:
    policy = BucketPolicy(num_buckets=64)
    for key in KEYS[:3] + KEYS[4:]:
        assert policy.bucket_for(key) == expected_bucket(key, 64)
    # Golden values: a change here moves every stored task to another bucket.
    assert [policy.bucket_for(k) for k in ("tenant-1", "tenant-2", "订单-42")] == [
        expected_bucket("tenant-1", 64),
        expected_bucket("tenant-2", 64),
        expected_bucket("订单-42", 64),
    ]
    with pytest.raises(ConfigurationError, match="bucket_key"):
        policy.bucket_for("")


def test_bucket_is_identical_across_processes_whatever_the_hash_seed() -> None:
    keys = ["tenant-1", "tenant-2", "订单-42", "x" * 1000]
    script = (
        "import json, sys\n"
        "from chongming_task.policies import BucketPolicy\n"
        "keys = json.loads(sys.argv[1])\n"
        "print(json.dumps([hash(k) for k in keys]))\n"
        "print(json.dumps([BucketPolicy(num_buckets=1024).bucket_for(k) for k in keys]))\n"
    )
    results = []
    salts = []
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(keys)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.splitlines()
        salts.append(out[0])
        results.append(json.loads(out[1]))
    assert len(set(salts)) == 3, "the seeds must really change hash(); else the test proves nothing"
    local = [BucketPolicy(num_buckets=1024).bucket_for(k) for k in keys]
    assert results == [local, local, local]


def test_validate_buckets() -> None:
    policy = BucketPolicy(num_buckets=4)
    assert policy.validate_buckets([0, 3, 3]) == frozenset({0, 3})
    with pytest.raises(ConfigurationError, match=r"outside 0\.\.3"):
        policy.validate_buckets([4])
    with pytest.raises(ConfigurationError, match="integers"):
        policy.validate_buckets(["1"])  # type: ignore[list-item]


# ----------------------------------------------------------------- pipelines


def test_aggregation_modes() -> None:
    assert AggregationPolicy.fail_fast().is_fail_fast
    assert AggregationPolicy() == AggregationPolicy.fail_fast()
    assert not AggregationPolicy.all_settled().is_fail_fast


def test_quorum_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigurationError) as info:
        AggregationPolicy.quorum(2)
    message = str(info.value)
    assert "not supported" in message
    assert "fan-out" in message
    assert "ANY_SUCCEEDED" in message


def test_join_modes() -> None:
    assert [mode.value for mode in JoinMode] == ["all_succeeded", "all_settled", "any_succeeded"]
