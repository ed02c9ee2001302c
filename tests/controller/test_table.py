"""render_table: the guide's §8.4 layout, CJK alignment, '-' for tasks that never ran."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chongming_task._model import Failure, FailureKind, Progress, TaskSnapshot
from chongming_task.controller._table import display_width, format_elapsed, render_table
from chongming_task.states import TaskStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def snap(task_id: str, status: TaskStatus, **changes: object) -> TaskSnapshot:
    base = TaskSnapshot(
        task_id=task_id,
        name="transform",
        status=status,
        status_version=1,
        created_at=T0,
        updated_at=T0,
    )
    return base.replace(**changes)


def test_guide_layout_with_cjk_labels() -> None:
    started = {"started_at": T0, "first_started_at": T0, "attempt": 1}
    rows = [
        snap("t0", TaskStatus.RUNNING, label="转换-1", **started),
        snap("t1", TaskStatus.RUNNING, label="转换-2", **started),
        snap("t2", TaskStatus.QUEUED, label="转换-3"),
        snap("t3", TaskStatus.QUEUED, label="转换-4"),
    ]
    table = render_table(rows, now=T0 + timedelta(seconds=0.4))
    assert table.splitlines() == [
        "TASK_ID  NAME    STATUS   ATTEMPT  ELAPSED  PROGRESS  FAILURE  BUCKET",
        "-------  ------  -------  -------  -------  --------  -------  ------",
        "t0       转换-1  running  1/1      0.4s     -         -        -",
        "t1       转换-2  running  1/1      0.4s     -         -        -",
        "t2       转换-3  queued   0/1      -        -         -        -",
        "t3       转换-4  queued   0/1      -        -         -        -",
    ]


def test_every_column_lines_up_by_display_width() -> None:
    rows = [
        snap(
            "任务-一",
            TaskStatus.SUCCEEDED,
            label="同步租户数据",
            bucket=42,
            attempt=1,
            started_at=T0,
            first_started_at=T0,
            finished_at=T0 + timedelta(seconds=125),
            progress=Progress(done=120, total=500, unit="rows"),
        ),
        snap(
            "job-2",
            TaskStatus.FAILED,
            bucket=3,
            attempt=3,
            max_attempts=3,
            started_at=T0,
            first_started_at=T0,
            finished_at=T0 + timedelta(hours=1, minutes=2),
            failure=Failure(kind=FailureKind.TIMEOUT_IDLE, message="idle"),
        ),
    ]
    lines = render_table(rows, now=T0).splitlines()
    header = lines[0]
    starts = [header.index(title) for title in ("NAME", "STATUS", "BUCKET")]
    for line in lines[2:]:
        cells = line.split()
        # The display offset of each later cell equals the header's offset.
        name_at = line.index(cells[1])
        status_at = line.index(cells[2], name_at + len(cells[1]))
        bucket_at = line.rindex(cells[-1])
        for start, offset in zip(starts, (name_at, status_at, bucket_at), strict=True):
            assert display_width(line[:offset]) == start
    assert "2m05s" in lines[2]
    assert "120/500 rows (24%)" in lines[2]
    assert "1h02m" in lines[3]
    assert "timeout_idle" in lines[3]
    assert lines[2].rstrip().endswith("42")


def test_name_column_falls_back_to_the_task_name() -> None:
    table = render_table([snap("x", TaskStatus.PENDING)], now=T0)
    assert "transform" in table.splitlines()[2]


def test_empty_table_still_has_a_header() -> None:
    assert render_table([], now=T0).splitlines()[0].startswith("TASK_ID  NAME  STATUS")


def test_column_subset_and_unknown_column() -> None:
    table = render_table([snap("x", TaskStatus.PENDING)], now=T0, columns=["TASK_ID", "STATUS"])
    assert table.splitlines()[2] == "x        pending"
    with pytest.raises(ValueError, match="unknown columns"):
        render_table([], columns=["NOPE"])


def test_control_characters_cannot_break_rows() -> None:
    table = render_table([snap("x", TaskStatus.PENDING, label="a\nb")], now=T0)
    assert len(table.splitlines()) == 3


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.0, "0.0s"),
        (59.94, "59.9s"),
        (60, "1m00s"),
        (3599, "59m59s"),
        (7322, "2h02m"),
    ],
)
def test_format_elapsed(seconds: float | None, text: str) -> None:
    assert format_elapsed(seconds) == text


def test_display_width() -> None:
    assert display_width("转换-1") == 6
    assert display_width("ｆｕｌｌ") == 8
    assert display_width("e\u0301") == 1
