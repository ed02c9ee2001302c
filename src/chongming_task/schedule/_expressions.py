"""Validating cron expression text before croniter iterates it.

croniter accepts more than a multi-node scheduler can use (hashed ``H`` and random
``R`` fields differ per process; seven fields add a year; six fields mean seconds
*last* by default), so the text is checked here and every refusal names the forms
that are allowed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from chongming_task.errors import ConfigurationError

__all__ = ["ALLOWED_FORMS", "DESCRIPTORS", "split_cron_tz", "validate_fields"]

#: Descriptors, expanded to five fields so the DST rule can read their hour field.
DESCRIPTORS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

ALLOWED_FORMS: Final = (
    "5 fields (minute hour day-of-month month day-of-week), 6 fields with seconds first "
    "(second minute hour day-of-month month day-of-week), a descriptor (@hourly, @daily, "
    "@midnight, @weekly, @monthly, @yearly, @annually) or @every <duration> "
    "(e.g. @every 30s, @every 1m30s)"
)

#: A fixed instant to probe that an expression matches some real date.
_PROBE: Final = datetime(2000, 1, 1)


def split_cron_tz(text: str, timezone: str) -> tuple[str, str]:
    """Accept the Go ``CRON_TZ=Zone`` / ``TZ=Zone`` prefix, refusing a conflicting zone.

    Raises:
        ConfigurationError: the prefix names a zone other than an explicit ``timezone``.
    """
    head, _, rest = text.partition(" ")
    for prefix in ("CRON_TZ=", "TZ="):
        if head.startswith(prefix):
            zone = head[len(prefix) :]
            if timezone not in ("UTC", zone):
                raise ConfigurationError(
                    f"cron expression {text!r} names timezone {zone!r} but timezone="
                    f"{timezone!r} was given; give the zone once"
                )
            return rest.strip(), zone
    return text, timezone


def validate_fields(text: str) -> tuple[str, ...]:
    """The cron fields of ``text`` (descriptors expanded), checked by croniter.

    Raises:
        ConfigurationError: wrong field count, an unknown descriptor, hashed/random
            fields, a value out of range, or an expression that never matches a date.
    """
    from croniter import CroniterBadCronError, CroniterBadDateError, croniter

    expanded = DESCRIPTORS.get(text.lower(), text)
    if expanded.startswith("@"):
        raise ConfigurationError(f"cron expression {text!r} is not valid; use {ALLOWED_FORMS}")
    fields = tuple(expanded.split())
    if len(fields) not in (5, 6):
        raise ConfigurationError(
            f"cron expression {text!r} has {len(fields)} fields; use {ALLOWED_FORMS}"
        )
    for value in fields:
        for token in value.replace("/", ",").replace("-", ",").split(","):
            # No month or weekday name starts with H or R, so these are croniter's
            # hashed (H) and random (R) extensions.
            if token.upper().startswith(("H", "R")):
                raise ConfigurationError(
                    f"cron expression {text!r} uses a hashed/random field ({value!r}); "
                    "schedulers on several nodes must compute the same times, so write "
                    f"explicit values; use {ALLOWED_FORMS}"
                )
    try:
        croniter(" ".join(fields), _PROBE, second_at_beginning=len(fields) == 6).get_next(datetime)
    except CroniterBadDateError as exc:
        raise ConfigurationError(
            f"cron expression {text!r} never matches a real date (such as 30 February)"
        ) from exc
    except (CroniterBadCronError, ValueError, KeyError) as exc:
        raise ConfigurationError(
            f"cron expression {text!r} is not valid ({exc}); use {ALLOWED_FORMS}"
        ) from exc
    return fields
