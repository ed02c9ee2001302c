"""An instant as an operator types it: an age ("2h": that long ago) or an ISO 8601 time.

``chongming-task ps --since/--until`` and the dashboard's time-range filter read the
same text the same way, so one rule applies wherever a person bounds a window:

- an age in the form of ``prune --older-than`` (``90s``, ``30m``, ``2h``, ``7d``,
  ``2w``) is *now minus that age*;
- an ISO 8601 time must carry its UTC offset (``2026-03-01T08:00:00+08:00`` or
  ``...Z``): a time without one could be anyone's local time, so it is refused
  rather than guessed.
"""

from __future__ import annotations

from datetime import datetime

from chongming_task._retention import parse_age
from chongming_task.errors import ConfigurationError

__all__ = ["parse_instant"]

_FORMS = "an age such as 30m, 2h or 7d, or an ISO time with its offset (2026-03-01T08:00:00Z)"


def parse_instant(text: str, *, now: datetime, name: str = "time") -> datetime:
    """The instant ``text`` names, ages counted back from ``now``.

    Raises:
        ConfigurationError: ``text`` is neither form, or an ISO time has no offset.
    """
    source = text.strip() if isinstance(text, str) else ""
    if not source:
        raise ConfigurationError(f"{name} is empty; give {_FORMS}")
    if source[0].isdigit() and not any(c in source for c in "-:T"):
        try:
            return now - parse_age(source)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{name} {text!r}: {exc}") from None
        except OverflowError:
            raise ConfigurationError(f"{name} {text!r} reaches before year 1") from None
    try:
        instant = datetime.fromisoformat(source)
    except ValueError:
        raise ConfigurationError(f"{name} {text!r} is not a time; give {_FORMS}") from None
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ConfigurationError(
            f"{name} {text!r} has no UTC offset; add one (Z, +00:00, +08:00) so it names "
            "one instant"
        )
    return instant
