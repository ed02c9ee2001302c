"""Text crossing into the store (issue 34: findings 1, 8 and the input side of 4).

What a caller passes (a label, metadata, a task name, a skip or blocked reason, a
progress unit or message) is one rule (``_validation.check_line``): valid UTF-8, no
control characters, at most its documented length, else a ``ConfigurationError``
naming the field and the limit, before anything is stored. What a task body produces
(its outcome, a failure, a skip reason, a progress message) may hold a lone surrogate
-- a file name from ``os.listdir`` -- and is stored with it written as its backslash
escape. In every case the store says what the run says: never a task that succeeded
and stays ``running`` because the store could not encode its text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chongming_task import Controller
from chongming_task._model import FailureKind, TaskSnapshot
from chongming_task._validation import (
    LABEL_MAX_LENGTH,
    LINE_MAX_LENGTH,
    METADATA_MAX_BYTES,
    UNIT_MAX_LENGTH,
    escape_surrogates,
)
from chongming_task.errors import ConfigurationError, TaskSkipped
from chongming_task.runtime._context import TaskContext
from chongming_task.stores._base import TaskStore

from ._helpers import S

#: What os.fsdecode(b"report-\xff.csv") gives on a UTF-8 system.
FILE_NAME = "report-\udcff.csv"
STORED_NAME = "report-\\xff.csv"


@pytest.fixture
def controller(store: TaskStore) -> Iterator[Controller]:
    controller = Controller(store=store)
    controller.register("job", lambda ctx: 1)
    yield controller
    controller.close()


def _stored(controller: Controller, task_id: str) -> TaskSnapshot:
    snapshot = controller.store.get(task_id)
    assert snapshot is not None, f"{task_id} never reached the store"
    return snapshot


def _run(controller: Controller, fn: Callable[[TaskContext], Any]) -> TaskSnapshot:
    """Run ``fn`` as task ``t``; the run and the store must agree on how it ended."""
    controller.register("body", fn)
    outcome = controller.submit("body", task_id="t").wait(10)
    stored = _stored(controller, "t")
    assert stored.status is outcome.status
    assert stored.status_version == outcome.snapshot.status_version
    assert stored.outcome == outcome.value
    assert list(controller.persist_failures) == []
    assert controller.pending_writes == []
    return stored


# ------------------------------------------------------------ finding 1: body text


def test_the_escape_rule() -> None:
    assert escape_surrogates(FILE_NAME) == STORED_NAME  # the byte os.fsdecode stood in for
    assert escape_surrogates("a\ud800b") == "a\\ud800b"  # any other lone surrogate
    assert escape_surrogates("plain 文字") == "plain 文字"


def test_an_outcome_with_an_undecodable_file_name_is_stored_succeeded(
    controller: Controller,
) -> None:
    stored = _run(controller, lambda ctx: {"files": [FILE_NAME], FILE_NAME: 1})
    assert stored.status is S.SUCCEEDED  # was: running in the store, later lost
    assert stored.outcome == {"files": [STORED_NAME], STORED_NAME: 1}


def test_a_progress_message_with_an_undecodable_file_name_is_stored(
    controller: Controller,
) -> None:
    def body(ctx: TaskContext) -> str:
        ctx.progress(1, total=2, unit="files", message=f"copying {FILE_NAME}")
        return FILE_NAME

    stored = _run(controller, body)
    assert stored.status is S.SUCCEEDED
    assert stored.outcome == STORED_NAME
    assert stored.progress is not None
    assert stored.progress.message == f"copying {STORED_NAME}"


def test_a_failure_about_an_undecodable_file_name_is_stored_failed(
    controller: Controller,
) -> None:
    def body(ctx: TaskContext) -> None:
        raise FileNotFoundError(f"no such file: {FILE_NAME}")

    stored = _run(controller, body)
    assert stored.status is S.FAILED  # was: running in the store
    assert stored.failure is not None
    assert stored.failure.message == f"FileNotFoundError: no such file: {STORED_NAME}"
    assert stored.failure.traceback is not None
    assert STORED_NAME in stored.failure.traceback
    assert controller.store.history("t")[-1].reason == stored.failure.message


def test_a_skip_reason_from_the_body_is_stored_escaped_and_capped(
    controller: Controller,
) -> None:
    def body(ctx: TaskContext) -> None:
        raise TaskSkipped(f"nothing new in {FILE_NAME} " + "x" * 100_000)

    stored = _run(controller, body)
    assert stored.status is S.SKIPPED
    assert stored.failure is not None
    assert stored.failure.message.startswith(f"nothing new in {STORED_NAME} x")
    assert len(stored.failure.message) <= LINE_MAX_LENGTH + 3  # one line, with "..."
    assert controller.store.history("t")[-1].reason == stored.failure.message


# ------------------------------------------------------------ caller text refused

# Each: the call (on a controller with task "job"), and what the error must name.
REFUSED: dict[str, tuple[Callable[[Any], Any], str]] = {
    "label surrogate": (lambda c: c.submit("job", label=FILE_NAME), "label .*UTF-8"),
    "label too long": (
        lambda c: c.submit("job", label="x" * (LABEL_MAX_LENGTH + 1)),
        f"label must be at most {LABEL_MAX_LENGTH} characters",
    ),
    "label ESC[2J": (lambda c: c.submit("job", label="a\x1b[2J"), "label .*control"),
    "label OSC 52": (
        lambda c: c.submit("job", label="\x1b]52;c;aGVsbG8=\x07"),
        "label .*control",
    ),
    "label newline": (lambda c: c.submit("job", label="a\nb"), "label .*control"),
    "label tab": (lambda c: c.submit("job", label="a\tb"), "label .*control"),
    "label C1 CSI": (lambda c: c.submit("job", label="a\x9b2J"), "label .*control"),
    "submit_many label": (
        lambda c: c.submit_many("job", [()], label="a\x1bb"),
        "label .*control",
    ),
    "metadata value surrogate": (
        lambda c: c.submit("job", metadata={"file": FILE_NAME}),
        r"metadata\['file'\] is not valid UTF-8",
    ),
    "metadata nested surrogate": (
        lambda c: c.submit("job", metadata={"files": [{"name": FILE_NAME}]}),
        r"metadata\['files'\]\[0\]\['name'\]",
    ),
    "metadata key surrogate": (
        lambda c: c.submit("job", metadata={FILE_NAME: 1}),
        "metadata key .*UTF-8",
    ),
    "metadata key control": (lambda c: c.submit("job", metadata={"a\nb": 1}), "control"),
    "metadata too big": (
        lambda c: c.submit("job", metadata={"blob": "x" * METADATA_MAX_BYTES}),
        f"over the cap of {METADATA_MAX_BYTES} bytes",
    ),
    "skip_reason surrogate": (
        lambda c: c.submit("job", skip_reason=FILE_NAME),
        "skip_reason .*UTF-8",
    ),
    "skip_reason too long": (
        lambda c: c.submit("job", skip_reason="x" * (LINE_MAX_LENGTH + 1)),
        f"skip_reason must be at most {LINE_MAX_LENGTH}",
    ),
    "blocked reason control": (
        lambda c: c.submit("job", blocked="wait\x1b[2J"),
        "blocked .*control",
    ),
    "bucket_key surrogate": (lambda c: c.submit("job", bucket_key=FILE_NAME), "bucket_key"),
    "register name 100k + control": (
        lambda c: c.register("n\x1b" * 50_000, lambda ctx: 1),
        "task name must be at most 256 characters",
    ),
    "register name control": (lambda c: c.register("a\nb", lambda ctx: 1), "task name .*control"),
    "register name surrogate": (lambda c: c.register(FILE_NAME, lambda ctx: 1), "task name"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_caller_text_the_store_cannot_keep_is_refused_where_it_is_passed(
    controller: Controller, case: str
) -> None:
    call, named = REFUSED[case]
    with pytest.raises(ConfigurationError, match=named):
        call(controller)
    assert controller.list_tasks() == []  # nothing was stored, nothing runs
    assert controller.store.query() == []
    assert list(controller.persist_failures) == []


def test_text_at_its_limits_is_stored_as_given(controller: Controller) -> None:
    label = "标" * LABEL_MAX_LENGTH
    metadata = {"k" * 256: "v" * (METADATA_MAX_BYTES - 300)}
    run = controller.submit("job", task_id="edge", label=label, metadata=metadata)
    assert run.wait(10).ok
    stored = _stored(controller, "edge")
    assert stored.status is S.SUCCEEDED
    assert stored.label == label
    assert stored.metadata == metadata

    def body(ctx: TaskContext) -> int:
        ctx.progress(1, unit="u" * UNIT_MAX_LENGTH, message="m" * LINE_MAX_LENGTH)
        return 1

    stored = _run(controller, body)
    assert stored.status is S.SUCCEEDED
    assert stored.progress is not None
    assert stored.progress.unit == "u" * UNIT_MAX_LENGTH
    assert stored.progress.message == "m" * LINE_MAX_LENGTH


# ------------------------------------------------------------ ctx.progress


PROGRESS: dict[str, tuple[dict[str, Any], str]] = {
    "20 MB message": (
        {"message": "x" * 20_000_000},
        f"progress message must be at most {LINE_MAX_LENGTH} characters",
    ),
    "OSC 52 message": ({"message": "\x1b]52;c;aGVsbG8=\x07"}, "progress message .*control"),
    "ESC[2J message": ({"message": "\x1b[2J done"}, "progress message .*control"),
    "newline message": ({"message": "a\nb"}, "progress message .*control"),
    "unit too long": (
        {"unit": "u" * (UNIT_MAX_LENGTH + 1)},
        f"progress unit must be at most {UNIT_MAX_LENGTH}",
    ),
    "unit control": ({"unit": "rows\x1b[31m"}, "progress unit .*control"),
    "unit surrogate": ({"unit": FILE_NAME}, "progress unit .*UTF-8"),
}


@pytest.mark.parametrize("case", list(PROGRESS))
def test_progress_text_the_store_cannot_keep_fails_the_attempt_clearly(
    controller: Controller, case: str
) -> None:
    keywords, named = PROGRESS[case]

    def body(ctx: TaskContext) -> int:
        ctx.progress(1, total=2, **keywords)
        return 1

    stored = _run(controller, body)
    assert stored.status is S.FAILED  # the body's mistake, stored as such
    assert stored.progress is None  # the text never reached the store
    assert stored.failure is not None
    assert stored.failure.kind is FailureKind.EXCEPTION
    assert stored.failure.exception_type == "chongming_task.errors.ConfigurationError"
    assert len(stored.failure.message) <= LINE_MAX_LENGTH + 3
    assert re.search(named, stored.failure.message), stored.failure.message


def test_a_body_that_catches_a_refused_progress_carries_on(controller: Controller) -> None:
    def body(ctx: TaskContext) -> str:
        try:
            ctx.progress(1, message="line one\nline two")
        except ConfigurationError:
            ctx.progress(1, message="line one / line two")
        return "done"

    stored = _run(controller, body)
    assert stored.status is S.SUCCEEDED
    assert stored.progress is not None
    assert stored.progress.message == "line one / line two"
