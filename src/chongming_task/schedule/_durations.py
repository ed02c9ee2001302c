"""Go duration text (``1m30s``) to seconds and back, for ``@every`` schedules.

The Go scheduler writes intervals as ``@every <time.Duration>``; operators copy those
patterns, so we read the same syntax instead of inventing our own. Only whole seconds
are accepted: a firing's identity is its scheduled time, and sub-second grids would
make that identity depend on float rounding.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Final

from chongming_task._validation import check_duration_text
from chongming_task.errors import ConfigurationError

__all__ = ["format_duration", "parse_duration"]

#: Seconds per unit suffix of Go's ``time.ParseDuration``.
_UNITS: Final = {
    "h": Decimal(3600),
    "m": Decimal(60),
    "s": Decimal(1),
    "ms": Decimal("0.001"),
    "us": Decimal("0.000001"),
    "µs": Decimal("0.000001"),
    "μs": Decimal("0.000001"),
    "ns": Decimal("0.000000001"),
}

_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|μs|ns|m|s)")

_HELP: Final = "use a Go duration of whole seconds such as 30s, 1m30s, 2h or 1h15m"


def parse_duration(text: str) -> int:
    """Whole seconds of a Go duration string (``"1m30s"`` -> 90).

    Raises:
        ConfigurationError: the text is not a duration, is under one second or over
            100 years (``MAX_SECONDS``), or has a sub-second remainder.
    """
    source = text.strip()
    if not source:
        raise ConfigurationError(f"interval duration is empty; {_HELP}")
    position = 0
    total = Decimal(0)
    while position < len(source):
        match = _PART.match(source, position)
        if match is None:
            raise ConfigurationError(f"interval duration {text!r} is not valid; {_HELP}")
        try:
            total += Decimal(match.group(1)) * _UNITS[match.group(2)]
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
            raise ConfigurationError(f"interval duration {text!r} is not valid; {_HELP}") from exc
        position = match.end()
    check_duration_text(total, source, "interval duration")
    if total < 1:
        raise ConfigurationError(
            f"interval duration {text!r} is shorter than one second; the minimum is 1s"
        )
    if total != total.to_integral_value():
        raise ConfigurationError(
            f"interval duration {text!r} is not a whole number of seconds; {_HELP}"
        )
    return int(total)


def format_duration(seconds: int) -> str:
    """Compact Go-style text for whole seconds: 90 -> ``1m30s``, 3600 -> ``1h``."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = ""
    if hours:
        text += f"{hours}h"
    if minutes:
        text += f"{minutes}m"
    if secs or not text:
        text += f"{secs}s"
    return text
