"""Loop blocks in the checkpoint-gap profile: counted, stored, merged, judged.

An ``async def`` body's step that holds the shared event loop for the blocking
threshold or longer is a loop block (``runtime/executors/_loop.py``). The recorder
counts them beside the gaps, the frozen value carries them through the store (only
when there were some, so a plain task's document is unchanged), merging sums them,
and the forecast warns about them.
"""

from __future__ import annotations

import pytest

from chongming_task._checkpoint_gaps import BOUNDS, CheckpointGaps, GapRecorder, forecast
from chongming_task.errors import ConfigurationError, StoreError

ZEROS = (0,) * (len(BOUNDS) + 1)


def test_the_recorder_counts_loop_blocks_beside_the_gaps() -> None:
    recorder = GapRecorder()
    assert recorder.freeze() is None
    recorder.add_loop_block(0.25)
    recorder.add_loop_block(1.5)
    recorder.add_loop_block(0.5)
    assert recorder.changes == 3  # no gap yet: only the blocks moved
    frozen = recorder.freeze()
    assert frozen is not None  # blocks alone are worth storing
    assert (frozen.loop_blocks, frozen.loop_block_max) == (3, 1.5)
    assert frozen.count == 0
    recorder.add_gap(2.0)
    assert recorder.changes == 4
    both = recorder.freeze()
    assert both is not None
    assert (both.count, both.max, both.loop_blocks) == (1, 2.0, 3)


def test_the_document_carries_blocks_only_when_there_were_some() -> None:
    plain = CheckpointGaps(counts=ZEROS, max=0.0)
    assert plain.to_dict() == {"v": 1, "counts": list(ZEROS), "max": 0.0}
    blocked = CheckpointGaps(counts=ZEROS, max=0.0, loop_blocks=2, loop_block_max=0.75)
    document = blocked.to_dict()
    assert (document["loop_blocks"], document["loop_block_max"]) == (2, 0.75)
    assert CheckpointGaps.from_dict(document) == blocked
    # A document written before loop blocks existed reads as none.
    assert CheckpointGaps.from_dict({"v": 1, "counts": list(ZEROS), "max": 0.0}) == plain
    merged = blocked.merged(CheckpointGaps(counts=ZEROS, max=0.0, loop_blocks=1, loop_block_max=3))
    assert (merged.loop_blocks, merged.loop_block_max) == (3, 3.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [("loop_blocks", -1), ("loop_blocks", True), ("loop_blocks", 1.5), ("loop_block_max", -0.1)],
)
def test_bad_loop_block_values_are_refused(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=rf"CheckpointGaps\.{field}"):
        CheckpointGaps(counts=ZEROS, max=0.0, **{field: value})  # type: ignore[arg-type]
    corrupt = {"v": 1, "counts": list(ZEROS), "max": 0.0, field: value}
    with pytest.raises(StoreError):
        CheckpointGaps.from_dict(corrupt)


def test_the_forecast_warns_about_a_body_that_blocked_the_loop() -> None:
    quiet = forecast(CheckpointGaps(counts=ZEROS, max=0.0), graceful_stop=5.0, idle=None)
    assert quiet.loop_warning is False
    assert quiet.warnings == []
    gaps = CheckpointGaps(counts=ZEROS, max=0.0, loop_blocks=4, loop_block_max=0.3)
    verdict = forecast(gaps, graceful_stop=5.0, idle=None)
    assert verdict.loop_warning is True
    assert verdict.warnings == [
        "the async def body blocked the event loop 4 time(s), the longest 300ms: every "
        "async task of its process waited meanwhile; move blocking calls off the loop "
        "(await asyncio.to_thread(...)) or make the task a plain def"
    ]
    document = verdict.to_dict()
    assert (document["loop_blocks"], document["loop_block_max"]) == (4, 0.3)
