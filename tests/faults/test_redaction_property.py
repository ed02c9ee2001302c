"""The redaction rule as a property: a secret planted in any documented form, with any
Unicode space around its separator and any text around it, never survives, and
redacting redacted text changes nothing.

Each example plants one secret (a distinctive random value) in one of the forms
``chongming_task._redact`` documents -- ``key=value`` and ``key: value`` pairs with
every secret word, glued and snake/kebab prefixes, any case, the four separators,
JSON and Python-repr quoting with escaped quotes, ``Authorization: <scheme> x``,
``Bearer x``, URL passwords, PEM keys and the well-known token shapes -- between random
Unicode text, and checks :func:`redact`, :func:`redact_secrets`,
:func:`redact_traceback`, :func:`redact_json` and the CLI's ``scrub`` (redaction
around the terminal sanitiser). Examples: 3,000 per CI run
(``CHONGMING_FAULT_SCALE`` times that on demand), derandomized so CI is stable.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chongming_task._redact import (
    REDACTED,
    printable,
    redact,
    redact_json,
    redact_secrets,
    redact_traceback,
)
from chongming_task.cli._errors import scrub

from .conftest import SCALE, record

pytestmark = pytest.mark.timeout(900)

#: Examples of the planted-secret property per CI run (the issue asks for >= 3,000).
EXAMPLES = 3000 * SCALE

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)

#: Every character ``str.isspace()`` knows, plus the zero-width ones.
UNICODE_SPACES = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
#: Line breaks: a traceback is redacted line by line, so a pair split over two lines is
#: two lines there (redact() joins them into one and still catches the pair).
LINE_BREAKS = "\n\r\x85"

SECRET_WORDS = (
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "secret_key",
    "secret-access-key",
    "private_key",
    "token",
    "api_key",
    "api-key",
    "apikey",
    "access_token",
    "refresh-token",
    "authorization",
    "credential",
    "credentials",
)
KEY_PREFIXES = ("", "db_", "x-", "--", "PG", "client", "github", "AUTH", "my", "AWS_")
SEPARATORS = (":", "=", "\uff1a", "\uff1d")
AUTH_SCHEMES = ("Basic", "Bearer", "Digest", "ApiKey", "OAuth", "SSWS", "Token", "Negotiate")
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#: What a bare value may hold: it ends at an ASCII space, "," or ";" (documented).
VALUE_CHARS = ALNUM + "._~+/=!*-"

FIGURES: Counter[str] = Counter()


def _cased(draw: st.DrawFn, word: str) -> str:
    return draw(st.sampled_from((word, word.upper(), word.title(), word.lower())))


def _spaces(draw: st.DrawFn, *, at_least: int = 0, breaks: bool = True) -> str:
    alphabet = UNICODE_SPACES + ZERO_WIDTH
    if not breaks:
        alphabet = "".join(c for c in alphabet if c not in LINE_BREAKS)
    return draw(st.text(alphabet=alphabet, min_size=at_least, max_size=3))


@st.composite
def secrets(draw: st.DrawFn, alphabet: str = VALUE_CHARS, size: int = 8) -> str:
    """A distinctive secret: it cannot occur in the surrounding text by chance."""
    return "Zq7" + draw(st.text(alphabet=alphabet, min_size=size, max_size=size + 24))


@st.composite
def planted(draw: st.DrawFn) -> tuple[str, list[str], str]:
    """``(text, the secret parts that must not survive, form)``, one line."""
    form = draw(
        st.sampled_from(("pair", "json", "repr", "authorization", "bearer", "url", "token", "pem"))
    )
    secret = draw(secrets())
    parts = [secret]
    sep = draw(st.sampled_from(SEPARATORS))
    if form == "pair":
        key = draw(st.sampled_from(KEY_PREFIXES)) + _cased(
            draw, draw(st.sampled_from(SECRET_WORDS))
        )
        text = f"{key}{_spaces(draw)}{sep}{_spaces(draw)}{secret}"
    elif form == "json":
        key = draw(st.sampled_from(KEY_PREFIXES)) + draw(st.sampled_from(SECRET_WORDS))
        tail = draw(secrets(alphabet=ALNUM + " ,;'", size=4))
        parts.append(tail)
        text = f'"{key}"{_spaces(draw)}:{_spaces(draw)}"{secret}\\"{tail}"'
    elif form == "repr":
        key = draw(st.sampled_from(SECRET_WORDS))
        tail = draw(secrets(alphabet=ALNUM + ' ,;"', size=4))
        parts.append(tail)
        text = f"{{'{key}':{_spaces(draw)}'{secret}\\'{tail}'}}"
    elif form == "authorization":
        scheme = draw(
            st.one_of(
                st.sampled_from(AUTH_SCHEMES),
                st.text(alphabet=ALNUM, min_size=1, max_size=10).map(lambda s: "S" + s),
            )
        )
        key = draw(st.sampled_from(("Authorization", "authorization", "Proxy-Authorization")))
        text = (
            f"{key}{_spaces(draw)}{sep}{_spaces(draw)}{scheme}{_spaces(draw, at_least=1)}{secret}"
        )
    elif form == "bearer":
        secret = draw(secrets(alphabet=ALNUM + "._~+/=-"))
        parts = [secret]
        text = f"{_cased(draw, 'bearer')}{_spaces(draw, at_least=1)}{secret}"
    elif form == "url":
        secret = draw(secrets(alphabet=ALNUM + "._~+!*$&()=:;,%-"))
        parts = [secret]
        scheme = draw(st.sampled_from(("postgresql", "redis", "https", "amqp", "mysql+pymysql")))
        user = draw(st.text(alphabet=ALNUM + "._-", max_size=8))
        text = f"{scheme}://{user}:{secret}@db.example:5432/app"
    elif form == "token":
        body = draw(st.text(alphabet=ALNUM, min_size=36, max_size=40))
        upper = draw(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16))
        secret = draw(
            st.sampled_from(
                (
                    "ghp_" + body,
                    "gho_" + body,
                    "ghs_" + body,
                    "ghu_" + body,
                    "github_pat_11A" + body,
                    "xoxb-" + body,
                    "xoxp-12345-" + body,
                    "sk_live_" + body,
                    "sk_test_" + body,
                    "rk_live_" + body,
                    "AKIA" + upper,
                    "ASIA" + upper,
                    "eyJ" + body[:12] + ".eyJ" + body[12:30] + "." + body[30:],
                )
            )
        )
        parts = [secret]
        text = secret
    else:
        text = f"-----BEGIN RSA PRIVATE KEY-----{_spaces(draw, at_least=1)}{secret}"
        if draw(st.booleans()):
            text += f"{_spaces(draw, at_least=1)}-----END RSA PRIVATE KEY-----"
    return text, parts, form


#: Text around the planted secret: anything, Unicode spaces, controls and CJK included.
SURROUNDINGS = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_characters="Z"),
        st.sampled_from(UNICODE_SPACES + ZERO_WIDTH + "\x1b\x00\x07\u202e"),
    ),
    max_size=40,
)
#: What stands between the surroundings and the plant (a glued prefix is a key too).
JOINS = st.sampled_from((" ", "\u00a0", "\u3000", "\t", ", ", "; ", "(", "[", "{", " | "))


def _check(text: str, parts: list[str], form: str, *, traceback: bool) -> None:
    FIGURES["examples"] += 1
    FIGURES[f"form_{form}"] += 1
    outputs: dict[str, Any] = {
        "redact": redact(text),
        "redact_secrets": redact_secrets(text),
        "redact_json": redact_json({"message": text, "nested": [text]}),
        "cli_scrub": scrub(text),
    }
    if traceback:
        outputs["redact_traceback"] = redact_traceback(text)
    for name, output in outputs.items():
        shown = repr(output)
        for part in parts:
            if part in str(output) or part in shown:
                FIGURES["leaks"] += 1
                raise AssertionError(f"{name} leaked {part!r} of {text!r}: {output!r}")
    again = {
        "redact": redact(outputs["redact"]),
        "redact_secrets": redact_secrets(outputs["redact_secrets"]),
        "redact_json": redact_json(outputs["redact_json"]),
        "cli_scrub": scrub(outputs["cli_scrub"]),
    }
    if traceback:
        again["redact_traceback"] = redact_traceback(outputs["redact_traceback"])
    for name, output in again.items():
        if output != outputs[name]:
            FIGURES["non_idempotent"] += 1
            raise AssertionError(
                f"{name} is not idempotent on {text!r}: {outputs[name]!r} -> {output!r}"
            )


@SETTINGS
@given(plant=planted(), before=SURROUNDINGS, after=SURROUNDINGS, joins=st.tuples(JOINS, JOINS))
def test_no_planted_secret_survives(
    plant: tuple[str, list[str], str], before: str, after: str, joins: tuple[str, str]
) -> None:
    text, parts, form = plant
    whole = f"{before}{joins[0]}{text}{joins[1]}{after}"
    # A line break inside the plant makes it two lines for redact_traceback.
    _check(whole, parts, form, traceback=not any(c in text for c in LINE_BREAKS))
    # Something was redacted (unless an escape sequence in the surroundings took it).
    assert REDACTED in (redact(whole) or "") or any(
        c in before for c in "\x1b\x90\x98\x9b\x9d\x9e\x9f"
    )


@settings(
    max_examples=EXAMPLES // 3,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@given(
    text=st.text(
        alphabet=st.one_of(
            st.characters(codec="utf-8"),
            st.sampled_from(UNICODE_SPACES + "=:\"'\\[]REDACT@/"),
        ),
        max_size=700,
    ),
    plant=planted(),
)
def test_redaction_is_idempotent_and_printable_is_clean(text: str, plant: tuple[str, ...]) -> None:
    """Any text (long ones cut at 512 characters too) is a fixed point once redacted."""
    for sample in (text, text + str(plant[0]), str(plant[0]) * 40):
        FIGURES["idempotence_examples"] += 1
        functions: tuple[Callable[[str], str | None], ...] = (
            redact,
            redact_secrets,
            redact_traceback,
        )
        for function in functions:
            once = function(sample) or ""
            if function(once) != once:
                FIGURES["non_idempotent"] += 1
                raise AssertionError(f"{function.__name__} not idempotent on {sample!r}")
        shown = printable(sample)
        assert printable(shown) == shown
        assert not any(
            ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF for c in shown
        )


def test_figures() -> None:
    """Report the property's figures (run after the properties, in file order)."""
    record(
        redaction_examples=FIGURES["examples"],
        redaction_idempotence_examples=FIGURES["idempotence_examples"],
        redaction_leaks=FIGURES["leaks"],
        redaction_non_idempotent=FIGURES["non_idempotent"],
    )
    if FIGURES["examples"]:
        assert FIGURES["examples"] >= EXAMPLES
        assert all(FIGURES[f"form_{form}"] for form in ("pair", "json", "token", "url"))
    assert FIGURES["leaks"] == 0
    assert FIGURES["non_idempotent"] == 0
