"""Secret redaction for failure text, after the Go scheduler's ``sanitizeTaskError``.

Failure messages and tracebacks end up in stores, logs, metrics labels and the CLI,
where far more people can read them than could read the task's configuration. An
exception such as ``ConnectionError("login failed: password=hunter2")`` must not carry
the password along. Every layer that stores failure text passes it through
:func:`redact` (one-line messages) or :func:`redact_traceback` (multi-line text).

What is redacted, exactly as the Go scheduler does it:

- ``key=value`` and ``key: value`` pairs, the value bare or quoted with ``"`` or ``'``,
  whose key (case-insensitive) is one of ``password``, ``passwd``, ``pwd``, ``secret``,
  ``token``, ``api_key``/``api-key``/``apikey``, ``access_token``, ``refresh_token``,
  ``authorization``, ``credential``. The whole pair becomes ``key=[REDACTED]``.
- ``Bearer <token>`` becomes ``Bearer [REDACTED]``.

Beyond what the Go patterns know (none of it can occur in the text they were written
for, so the Go behaviour on that text is unchanged):

- More keys: ``passphrase``, ``private_key``, ``secret_key``, ``secret_access_key``
  (so ``AWS_SECRET_ACCESS_KEY=...``), each with the prefixes below.
- A value may carry an HTTP auth scheme: ``Authorization: Basic dXNlcjpwdw==`` becomes
  ``Authorization=[REDACTED]`` (Go keeps the credential and redacts the word
  ``Basic``). ``Bearer`` keeps the Go form ``Authorization=[REDACTED] [REDACTED]``.
- URL credentials: the password of ``scheme://user:password@host`` becomes
  ``[REDACTED]`` (``postgresql://app:[REDACTED]@db/x``, ``redis://:[REDACTED]@h``).
  A user without a password (``postgresql://postgres@db``) and URLs without user
  info are kept. A password already masked as ``***`` (:func:`mask_dsn`) is kept.
- PEM private keys: everything from ``-----BEGIN ... PRIVATE KEY-----`` to the
  matching ``-----END ... PRIVATE KEY-----`` (or to the end of the text, when the
  end line was cut off) becomes ``[REDACTED]``, across lines in tracebacks too.

:func:`mask_dsn` is the display form of a connection string: the password becomes
``***`` and nothing else changes, for banners, ``--json`` output and errors that name
the database.

Hardening beyond the Go version (a strict superset: every input the Go code redacts
is redacted here to the same text):

- Control characters are removed *before* matching, so ``pass\\x00word=x`` cannot
  slip past the pattern and reassemble afterwards. C1 controls (U+0080..U+009F, which
  include the terminal's CSI) are removed too; Go keeps them.
  Terminal escape sequences (``ESC[31m``, ``ESC]52;...BEL``) are removed whole, so
  what is left is the text, not the junk of half a sequence.
- A key is any identifier that *ends* in one of the words above: with a snake/kebab
  prefix (``db_password``, ``client_secret``, ``x-api-key``, ``--password``) or glued
  to one (``PGPASSWORD``, ``clientsecret``, ``githubtoken``, ``AUTHTOKEN``). Keys may
  be quoted (``"password": "x"`` in JSON, ``{'token': 'x'}`` in a Python repr); a
  quoted value ends at its unescaped closing quote (``"ab\\"cd"`` is one value). The
  full-width ``：`` and ``＝`` of Chinese text separate like ``:`` and ``=``, any
  Unicode space (``str.isspace()``: no-break, ideographic...) or zero-width character
  may surround the separator, and ``credentials`` counts as well as ``credential``.
- ``Authorization: <scheme> <credential>`` with *any* scheme (``ApiKey``, ``OAuth``,
  ``SSWS``, ``Token``, ...) becomes ``Authorization=[REDACTED]``.
- Well-known token shapes anywhere in the text become ``[REDACTED]``: GitHub
  (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), GitLab
  (``glpat-``), Slack (``xoxb-``, ``xoxp-``, ``xoxa-``, ``xoxr-``, ``xoxs-``,
  ``xapp-``), Stripe (``sk_live_``, ``sk_test_``, ``rk_live_``, ``rk_test_``), AWS
  access key ids (``AKIA``/``ASIA`` and 16 more), Google API keys (``AIza``), npm
  (``npm_``), ``sk-`` API keys and JWTs (``eyJ...eyJ...signature``).

:func:`redact_json` applies the rule to a JSON-ready value (metadata, an outcome, a
task's arguments): every string is redacted, and every value under a key that ends in
a secret word is replaced whole. :func:`printable` is the one sanitiser for text shown
on a terminal: escape sequences (CSI such as ``ESC[2J``, OSC such as the clipboard
write ``ESC]52;...``), other control characters and lone surrogates never reach it.

Over-redaction (``token: 5`` in an innocent message) is accepted; a leak is not.
Every function is idempotent: redacting redacted text changes nothing (the property
test in ``tests/faults/test_redaction_property.py`` checks both, Unicode included).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Final, TypeVar, cast

from chongming_task._validation import escape_surrogates
from chongming_task.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from chongming_task._model import Failure

__all__ = [
    "MESSAGE_MAX_LENGTH",
    "REDACTED",
    "TRACEBACK_MAX_LENGTH",
    "mask_dsn",
    "printable",
    "redact",
    "redact_failure",
    "redact_json",
    "redact_reason",
    "redact_secrets",
    "redact_text_fields",
    "redact_traceback",
    "scrub_dsn",
]

_T = TypeVar("_T")

#: What a secret is replaced with.
REDACTED: Final = "[REDACTED]"

#: Cap of :func:`redact` in characters (code points), then ``"..."``. Same as the Go
#: scheduler's ``taskErrorMaxLength``: long enough for any useful message, short
#: enough for a table cell and a log line.
MESSAGE_MAX_LENGTH: Final = 512

#: Cap of :func:`redact_traceback`, marker included. A deep traceback with its
#: chained causes is a few kilobytes; more than this is a runaway repr, not context.
TRACEBACK_MAX_LENGTH: Final = 8192

_ELLIPSIS: Final = "..."

_KEYS: Final = (
    r"(?:password|passwd|pwd|passphrase|secret[_-]?access[_-]?key|secret[_-]?key|secret"
    r"|private[_-]?key|token|api[_-]?key|access[_-]?token"
    r"|refresh[_-]?token|authorization|credentials?)"
)

#: What may surround a separator: every character ``str.isspace()`` knows (the no-break
#: and ideographic spaces too: a Unicode space must not let a secret through) and the
#: zero-width characters that render as nothing.
_SPACE: Final = (
    "["
    + "".join(f"\\u{code:04x}" for code in range(0x3001) if chr(code).isspace())
    + "\\u200b-\\u200d\\u2060\\ufeff]"
)

#: HTTP auth schemes whose credential follows after a space (``Basic dXNlcjpwdw==``):
#: the value is the scheme and the credential. ``Bearer`` is not here: its credential
#: is redacted on its own first (``_BEARER_PATTERN``), as the Go code does.
_AUTH_SCHEMES: Final = r"(?:basic|digest|negotiate|ntlm|token|aws4-hmac-sha256)"

# A value that already reads [REDACTED] stops there, so a second pass over
# "f(password=[REDACTED])" keeps the ")" (the bare form would swallow it): redaction
# is applied by several layers and must be idempotent.
# ASCII mode on purpose: Go's RE2 treats \b as ASCII, so "用户token=x" is still a key
# at a word boundary. The lookbehind starts a match only at the beginning of an
# identifier run, which keeps matching linear; the prefix then reaches keys inside runs
# like "db_password", "--password" or "PGPASSWORD". A quoted value may hold escaped
# quotes ("ab\\"cd"); a bare one runs to the next ASCII space, "," or ";".
_PAIR_PATTERN: Final = re.compile(
    r"(?<![A-Za-z0-9_-])"
    r"(?P<key>[A-Za-z0-9_-]*?" + _KEYS + r")\b"
    r"(?P<quote>\\?[\"']?)"
    + _SPACE
    + r"*[:=\uff1a\uff1d]"
    + _SPACE
    + r"*(?P<value>\[REDACTED\]|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'"
    r"|" + _AUTH_SCHEMES + _SPACE + r"+(?!\[REDACTED\])[^\s,;]+|[^\s,;]+)",
    re.IGNORECASE | re.ASCII | re.DOTALL,
)

# "Authorization: <any scheme> <credential>": the scheme and the credential go, whatever
# the scheme is called (ApiKey, OAuth, SSWS, Token...). A credential already redacted
# ("Bearer [REDACTED]", from _BEARER_PATTERN) is left to _PAIR_PATTERN, which gives the
# Go form "Authorization=[REDACTED] [REDACTED]".
_AUTH_HEADER_PATTERN: Final = re.compile(
    r"(?<![A-Za-z0-9_-])"
    r"(?P<key>[A-Za-z0-9_-]*?authorization)\b"
    r"(?P<quote>\\?[\"']?)"
    + _SPACE
    + r"*[:=\uff1a\uff1d]"
    + _SPACE
    + r"*[A-Za-z][A-Za-z0-9._~+/-]*"
    + _SPACE
    + r"+(?!\[REDACTED\])[^\s,;]+",
    re.IGNORECASE | re.ASCII,
)

# Token shapes that are secrets wherever they stand, key or not.
_TOKEN_PATTERN: Final = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|xapp-[A-Za-z0-9-]{10,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|AIza[A-Za-z0-9_-]{35}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|sk-[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"
    r")",
)

# scheme://user:password@ -- the scheme starts at the beginning of a run of scheme
# characters (the lookbehind keeps matching linear on long runs); the user stops at
# the first ":", the password runs to the last "@" before the host part ends
# (Python's urlsplit takes the last "@" too, so a raw "@" in a password is covered).
_URL_CREDENTIALS_PATTERN: Final = re.compile(
    r"(?<![A-Za-z0-9+.-])"
    r"(?P<prefix>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@\[\]\"'<>]*:)"
    r"(?P<password>[^\s/?#\"'<>]*)@",
    re.ASCII,
)

# A PEM private key, up to its end line, or to the end of the text if that was cut off.
_PEM_PATTERN: Final = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----"
    r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----|.*)",
    re.IGNORECASE | re.ASCII | re.DOTALL,
)

_DSN_PASSWORD_PATTERN: Final = re.compile(
    r"(?<![A-Za-z0-9_])(?P<key>password\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|[^\s'&][^\s&]*)",
    re.IGNORECASE | re.ASCII,
)

#: What :func:`mask_dsn` shows instead of a password.
MASK: Final = "***"

_BEARER_PATTERN: Final = re.compile(
    r"\bbearer" + _SPACE + r"+[A-Za-z0-9._~+/\-=]+", re.IGNORECASE | re.ASCII
)


def _control_table(*, keep_newlines: bool) -> dict[int, str | None]:
    """``str.translate`` table: whitespace controls -> space (LF/NEL kept in tracebacks),
    other controls -> gone (so ``pass\\x00word`` reassembles before matching)."""
    table: dict[int, str | None] = dict.fromkeys([*range(0x20), 0x7F, *range(0x80, 0xA0)])
    for code in table:
        if chr(code).isspace():
            table[code] = " "
    if keep_newlines:
        table[ord("\n")] = "\n"
        table[0x85] = "\n"
    else:
        table[ord("\n")] = " "
        table[ord("\r")] = " "
        table[ord("\t")] = " "
        table[0x85] = " "
    return table


_MESSAGE_CONTROLS: Final = _control_table(keep_newlines=False)
_TRACEBACK_CONTROLS: Final = _control_table(keep_newlines=True)

#: The controls escape sequences are made of (ESC, BEL, the 8-bit introducers and ST).
_ESCAPE_CHARS: Final = "\x07\x1b\x90\x98\x9b\x9c\x9d\x9e\x9f"
_ESCAPE_CHARS_PATTERN: Final = re.compile(f"[{_ESCAPE_CHARS}]")


def _keeping_escapes(table: dict[int, str | None]) -> dict[int, str | None]:
    return {**table, **{ord(char): char for char in _ESCAPE_CHARS}}


_MESSAGE_CONTROLS_KEEPING_ESCAPES: Final = _keeping_escapes(_MESSAGE_CONTROLS)
_TRACEBACK_CONTROLS_KEEPING_ESCAPES: Final = _keeping_escapes(_TRACEBACK_CONTROLS)


def _without_controls(
    text: str, table: dict[int, str | None], redact_text: Callable[[str], str]
) -> str:
    """``text`` without control characters, escape sequences removed whole.

    Removing a sequence can join what stood around it, and a sequence's final byte is
    a letter that may belong to the text (``CSI b`` eats the ``b`` of ``bearer``), so
    with escape sequences present the text is redacted once as written (escapes kept)
    before they go; the caller redacts the result again.
    """
    if _ESCAPE_CHARS_PATTERN.search(text) is None:
        return text.translate(table)
    keep = (
        _MESSAGE_CONTROLS_KEEPING_ESCAPES
        if table is _MESSAGE_CONTROLS
        else _TRACEBACK_CONTROLS_KEEPING_ESCAPES
    )
    return _strip_escapes(redact_text(text.translate(keep))).translate(table)


def _replace_pair(match: re.Match[str]) -> str:
    if match.group("value") == MASK:  # already masked for display (mask_dsn)
        return match.group(0)
    return f"{match.group('key')}{match.group('quote')}={REDACTED}"


def _replace_auth(match: re.Match[str]) -> str:
    return f"{match.group('key')}{match.group('quote')}={REDACTED}"


def _url_replacer(mask: str) -> Callable[[re.Match[str]], str]:
    def replace_password(match: re.Match[str]) -> str:
        password = match.group("password")
        if not password or password in (MASK, REDACTED):
            return match.group(0)
        return f"{match.group('prefix')}{mask}@"

    return replace_password


_REDACT_URL: Final = _url_replacer(REDACTED)
_MASK_URL: Final = _url_replacer(MASK)


def _redact_line(text: str) -> str:
    # URLs first: "password=postgresql://u:pw@h" is then one value either way.
    if "://" in text:
        text = _URL_CREDENTIALS_PATTERN.sub(_REDACT_URL, text)
    text = _TOKEN_PATTERN.sub(REDACTED, text)
    text = _BEARER_PATTERN.sub(f"Bearer {REDACTED}", text)
    text = _AUTH_HEADER_PATTERN.sub(_replace_auth, text)
    return _PAIR_PATTERN.sub(_replace_pair, text)


def _redact_lines(text: str) -> str:
    return "\n".join(_redact_line(line) for line in _redact_pem(text).split("\n"))


def _redact_pem(text: str) -> str:
    if "-----" not in text:
        return text
    return _PEM_PATTERN.sub(REDACTED, text)


def redact_secrets(text: str) -> str:
    """Replace secrets in ``text`` and nothing else (no control or length handling).

    The building block of :func:`redact` and :func:`redact_traceback`; useful alone
    for text whose layout must survive untouched, such as a log record's message.
    """
    return _redact_line(_redact_pem(text))


def _mask_dsn_password(match: re.Match[str]) -> str:
    if match.group("value").startswith(REDACTED):  # already redacted: as good as masked
        return match.group(0)
    return f"{match.group('key')}{MASK}"


def mask_dsn(dsn: str) -> str:
    """``dsn`` for display: its password replaced by ``***``, nothing else changed.

    Handles URLs (``postgresql://app:pw@db/x`` -> ``postgresql://app:***@db/x``) and
    libpq keyword strings (``host=db password=pw`` -> ``host=db password=***``). A
    SQLite path, or a URL without a password, comes back as it is.
    """
    text = str(dsn)
    if "://" in text:
        text = _URL_CREDENTIALS_PATTERN.sub(_MASK_URL, text)
    if "=" in text:
        text = _DSN_PASSWORD_PATTERN.sub(_mask_dsn_password, text)
    return text


#: Passwords shorter than this are not searched for as bare text by :func:`scrub_dsn`:
#: replacing every "a" of a message would destroy it and hide almost nothing.
_SCRUB_MIN_LENGTH: Final = 4


def scrub_dsn(text: str, dsn: str) -> str:
    """``text`` (an error or log message about ``dsn``) without ``dsn``'s password.

    Drivers quote connection strings in their errors, sometimes malformed ones that no
    pattern recognises (psycopg: ``missing "=" after "postgresql//u:pw@h"``). This
    replaces the whole ``dsn`` with :func:`mask_dsn`'s form, then any bare occurrence
    of its password with ``***``, then masks whatever URL credentials remain.
    """
    text = str(text)
    masked = mask_dsn(dsn)
    if masked != dsn:
        text = text.replace(dsn, masked)
    passwords = [m.group("password") for m in _URL_CREDENTIALS_PATTERN.finditer(dsn)]
    for match in _DSN_PASSWORD_PATTERN.finditer(dsn):
        value = match.group("value")
        passwords.append(value)
        if value.startswith("'") and value.endswith("'") and len(value) >= 2:
            passwords.append(value[1:-1].replace("\\'", "'").replace("\\\\", "\\"))
    # The form drivers often quote: the DSN without "://" (a typo), as a user@host run.
    if "//" in dsn and "://" not in dsn:
        typo = dsn.replace("//", "://", 1)
        passwords += [m.group("password") for m in _URL_CREDENTIALS_PATTERN.finditer(typo)]
    for password in sorted(set(passwords), key=len, reverse=True):
        if len(password) >= _SCRUB_MIN_LENGTH and password not in (MASK, REDACTED):
            text = text.replace(password, MASK)
    return mask_dsn(text)


def redact(text: str | None) -> str | None:
    """One clean line of at most 512 characters, secrets replaced by ``[REDACTED]``.

    A lone surrogate is written as its backslash escape (an undecodable file name's
    ``\\udcff`` as ``\\xff``, ``_validation.escape_surrogates``). Terminal escape
    sequences (``ESC[2J``, ``ESC]52;...BEL``) are removed whole and other control
    characters removed, runs of whitespace (line breaks and every Unicode space
    included) become one space, and text longer than :data:`MESSAGE_MAX_LENGTH` is cut
    there with ``"..."`` appended. ``None`` stays ``None`` so optional fields pass
    straight through. Idempotent: ``redact(redact(x)) == redact(x)``.

    Args:
        text: A failure message, a stop reason, any text about to be stored.

    Returns:
        The redacted text, ``""`` for blank input, or ``None`` for ``None``.
    """
    if text is None:
        return None
    cleaned = " ".join(
        _without_controls(escape_surrogates(str(text)), _MESSAGE_CONTROLS, redact_secrets).split()
    )
    cleaned = " ".join(redact_secrets(cleaned).split())
    # A cut can end in the middle of a pair ("token=[REDAC..."), which a second pass
    # would redact again; redacting the cut text until nothing changes makes the result
    # a fixed point, so redacting it once more changes nothing. Each round only turns
    # text into [REDACTED], so this ends within a few rounds.
    for _ in range(8):
        if len(cleaned) <= MESSAGE_MAX_LENGTH:
            return cleaned
        cut = cleaned[:MESSAGE_MAX_LENGTH] + _ELLIPSIS
        again = redact_secrets(cut)
        if again == cut:
            return cut
        cleaned = again
    return cleaned[:MESSAGE_MAX_LENGTH] + _ELLIPSIS


def _is_secret_key(key: str) -> bool:
    return _SECRET_KEY_PATTERN.search(key) is not None


#: A mapping key naming a secret: it ends in one of the secret words.
_SECRET_KEY_PATTERN: Final = re.compile(_KEYS + _SPACE + r"*\Z", re.IGNORECASE | re.ASCII)


def redact_json(value: object, key: str | None = None) -> object:
    """A JSON-ready ``value`` (metadata, an outcome, arguments) with its secrets redacted.

    Every string is redacted (:func:`redact_secrets`, so its layout is kept); every
    value under a key that ends in a secret word (``password``, ``PGPASSWORD``,
    ``api_key``...) becomes ``[REDACTED]`` whole, whatever its type; ``None`` stays.
    Mappings and lists are copied; other values come back as they are.
    """
    if isinstance(value, Mapping):
        return {str(k): redact_json(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(item, key) for item in value]
    if key is not None and value is not None and _is_secret_key(key):
        return REDACTED
    if isinstance(value, str):
        return redact_secrets(value)
    return value


@functools.lru_cache(maxsize=4096)
def _redact_reason(text: str) -> str | None:
    return redact(text) or None


def redact_reason(text: str | None) -> str | None:
    """:func:`redact` for a reason about to be recorded; ``None`` if nothing is left.

    Every transition's reason, every operator's stop/pause reason and every schedule
    pause reason passes through here where it is recorded, like the Go scheduler's
    cancel reasons through ``sanitizeTaskError`` (and, like there, a reason that is
    blank after cleaning counts as none: the caller's default applies). Memoised:
    reasons repeat (``executor=thread`` on every start, one failure for many tasks).
    """
    if text is None:
        return None
    if type(text) is not str:
        return redact(str(text)) or None
    return _redact_reason(text)


#: Keys of a command's payload or result whose text is redacted (:func:`redact_text_fields`).
_TEXT_FIELDS: Final = ("reason", "error")


def redact_text_fields(value: _T) -> _T:
    """A mapping's ``reason``/``error`` strings redacted (a copy); anything else as it is.

    For what stores keep of commands: the payload of a stop, pause or manual run and
    the result a claimant writes back (``{"applied": False, "error": "..."}``).
    """
    if not isinstance(value, dict) or not any(
        isinstance(value.get(key), str) for key in _TEXT_FIELDS
    ):
        return value
    clean = dict(value)
    for key in _TEXT_FIELDS:
        text = clean.get(key)
        if isinstance(text, str):
            clean[key] = redact(text)
    return cast("_T", clean)


def redact_traceback(text: str | None, *, max_length: int = TRACEBACK_MAX_LENGTH) -> str | None:
    """Like :func:`redact` but keeps the line structure of a traceback.

    Line endings become ``\\n``, tabs become spaces, other control characters are
    removed and trailing spaces are stripped; indentation is kept. Pairs are matched
    line by line. Text longer than ``max_length`` keeps its first quarter and its
    end (where the exception itself is), cut at line breaks where possible, joined
    by a line saying how much was dropped; the result never exceeds ``max_length``.

    Args:
        text: Traceback text, e.g. ``"".join(traceback.format_exception(exc))``.
        max_length: Cap in characters; at least 256 so the marker and some context fit.

    Returns:
        The redacted text, ``""`` for blank input, or ``None`` for ``None``.
    """
    if text is None:
        return None
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 256:
        raise ConfigurationError(f"max_length must be an integer >= 256, got {max_length!r}")
    normalised = (
        escape_surrogates(str(text)).replace("\r\n", "\n").replace("\r", "\n").expandtabs(4)
    )
    normalised = _redact_pem(_without_controls(normalised, _TRACEBACK_CONTROLS, _redact_lines))
    lines = [_redact_line(line).rstrip() for line in normalised.split("\n")]
    cleaned = "\n".join(lines).strip("\n")
    if len(cleaned) <= max_length:
        return cleaned
    return _truncate_middle(cleaned, max_length)


def _truncate_middle(text: str, max_length: int) -> str:
    # Reserve room for the marker with the widest count it could print.
    reserve = len(_marker(len(text)))
    budget = max_length - reserve
    head_budget = budget // 4
    head = text[:head_budget]
    cut = head.rfind("\n")
    if cut > 0:
        head = head[:cut]
    head = head.rstrip()
    tail = text[len(text) - (budget - head_budget) :]
    cut = tail.find("\n")
    if 0 <= cut < len(tail) - 1:
        tail = tail[cut + 1 :]
    removed = len(text) - len(head) - len(tail)
    return head + _marker(removed) + tail


def _marker(removed: int) -> str:
    return f"\n... [{removed} characters truncated] ...\n"


def redact_failure(failure: Failure) -> Failure:
    """A copy of ``failure`` with its message and traceback redacted.

    What every store and runtime path should call before a failure leaves the
    process that raised it.
    """
    message = redact(failure.message) or ""
    traceback = redact_traceback(failure.traceback)
    if message == failure.message and traceback == failure.traceback:
        return failure
    return replace(failure, message=message, traceback=traceback)


# ---------------------------------------------------------------- terminal output

# An escape sequence, whole: CSI (ESC [ or the 8-bit CSI, parameters, intermediates,
# a final byte: "ESC[2J"), OSC/DCS/SOS/PM/APC strings with their terminator (BEL,
# ESC \ or the 8-bit ST: "ESC]52;c;...BEL" writes the clipboard), any other ESC with
# the character after it, and a lone 8-bit introducer. An unterminated string loses
# its introducer only: what follows is text, kept.
_ESCAPE_PATTERN: Final = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)"
    r"|\x1b.?|[\x90\x98\x9c-\x9f]",
    re.DOTALL,
)


def _printable_char(char: str, keep_newlines: bool) -> str:
    category = unicodedata.category(char)
    if category == "Cs":  # a lone surrogate: no terminal encoding can write it
        return "\ufffd"
    if char == "\n" and keep_newlines:
        return char
    if category == "Cc" or char in "\u2028\u2029":
        return " "
    if category == "Cf" and char not in "\u200c\u200d":  # keep joiners (emoji, scripts)
        return ""
    return char


def _strip_escapes(text: str) -> str:
    """``text`` without terminal escape sequences (removed whole, not left as junk)."""
    if _ESCAPE_CHARS_PATTERN.search(text) is None:
        return text
    return _ESCAPE_PATTERN.sub("", text)


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` safe to write to a terminal: the one sanitiser of the CLI's output.

    Escape sequences are removed whole (``ESC[2J`` clears no screen, ``ESC]52;...``
    writes no clipboard); other control characters (C0, DEL, C1, tab, carriage
    return, line and paragraph separators) become a space; invisible format characters
    (bidirectional overrides, zero-width spaces) are removed, the zero-width joiners
    kept; a lone surrogate becomes ``U+FFFD``. Line feeds are kept with
    ``keep_newlines`` (a block of lines), else they become a space (one field).
    Idempotent, and text without any of these comes back unchanged.
    """
    text = str(text)
    if text.isprintable() and "\x1b" not in text:
        return text
    text = _strip_escapes(text)
    return "".join(
        char if char.isprintable() else _printable_char(char, keep_newlines) for char in text
    )
