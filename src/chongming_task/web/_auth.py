"""Who is asking: bearer tokens, the login cookie and CSRF tokens.

A dashboard is a door, so every request but the login page and the static files must
carry a token: ``Authorization: Bearer <token>`` (scripts, the JSON API), or the session
cookie that ``POST /login`` sets (browsers). Tokens are compared with
:func:`hmac.compare_digest` against every configured token, so timing says nothing.

The session cookie is stateless: ``<label>.<nonce>.<mac>``, where ``mac`` is an HMAC of
the label and nonce keyed by that user's token. Rotating a token therefore logs its
sessions out, and a restart keeps them. The CSRF token of a session is another HMAC of
its nonce under the same key: a state-changing request authenticated by the cookie must
send it (form field ``csrf`` or header ``X-CSRF-Token``); a bearer request needs none,
since no browser attaches a bearer header by itself.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from chongming_task.errors import ConfigurationError

__all__ = [
    "COOKIE_NAME",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "DEFAULT_USER",
    "Identity",
    "TokenRing",
    "generate_token",
    "read_token_file",
]

COOKIE_NAME = "chongming_dashboard"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
#: The label of a token given without one (``--token-file`` with a bare token).
DEFAULT_USER = "dashboard"
#: Shortest token accepted: a guessable door is no door.
MIN_TOKEN_LENGTH = 16


@dataclass(frozen=True, slots=True)
class Identity:
    """An authenticated request: who, and how."""

    user: str
    """The label actions are recorded under (``actor``)."""
    via: str
    """``"bearer"`` or ``"cookie"``."""
    csrf: str | None = None
    """The CSRF token a cookie session must send back (``None`` for bearer)."""

    @property
    def needs_csrf(self) -> bool:
        return self.via == "cookie"


def generate_token() -> str:
    """A fresh random token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def _check_label(label: str) -> str:
    if not label or not label.isprintable() or any(c in label for c in " .\t"):
        raise ConfigurationError(
            f"dashboard user label {label!r} must be non-empty printable text "
            "without spaces or dots"
        )
    return label


def read_token_file(path: str | Path) -> dict[str, str]:
    """``label -> token`` from a token file.

    One token per line, either bare (label ``dashboard``) or ``label token`` separated
    by whitespace; blank lines and lines starting with ``#`` are ignored.

    Raises:
        ConfigurationError: unreadable, empty, or a malformed or repeated entry.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read token file {str(path)!r}: {exc}") from exc
    tokens: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) == 1:
            label, token = DEFAULT_USER, parts[0]
        elif len(parts) == 2:
            label, token = parts
        else:
            raise ConfigurationError(
                f"token file {str(path)!r} line {number}: expected 'TOKEN' or 'LABEL TOKEN'"
            )
        if label in tokens:
            raise ConfigurationError(
                f"token file {str(path)!r} line {number}: user {label!r} appears twice"
            )
        tokens[label] = token
    if not tokens:
        raise ConfigurationError(f"token file {str(path)!r} holds no token")
    return tokens


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _unb64(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()


class TokenRing:
    """The configured tokens and the cookie/CSRF arithmetic built on them.

    Args:
        tokens: ``user label -> token``; at least one.

    Raises:
        ConfigurationError: no token, a token shorter than 16 characters, a bad
            label, or two users sharing one token.
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise ConfigurationError("the dashboard needs at least one token")
        checked: dict[str, bytes] = {}
        for label, token in tokens.items():
            _check_label(label)
            if not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
                raise ConfigurationError(
                    f"the token of dashboard user {label!r} must be at least "
                    f"{MIN_TOKEN_LENGTH} characters"
                )
            checked[label] = token.encode()
        if len(set(checked.values())) != len(checked):
            raise ConfigurationError("two dashboard users share one token")
        self._tokens = checked

    @property
    def users(self) -> list[str]:
        return sorted(self._tokens)

    def user_of(self, token: str) -> str | None:
        """The label whose token is ``token`` (constant time per token), or ``None``."""
        given = token.encode()
        found: str | None = None
        for label, expected in self._tokens.items():
            if hmac.compare_digest(given, expected):
                found = label
        return found

    def _mac(self, label: str, purpose: str, nonce: str) -> str:
        key = self._tokens[label]
        message = f"{purpose}|{label}|{nonce}".encode()
        return hmac.new(key, message, hashlib.sha256).hexdigest()

    def new_session(self, label: str) -> str:
        """The cookie value of a fresh session of ``label``."""
        nonce = secrets.token_urlsafe(16)
        return f"{_b64(label)}.{nonce}.{self._mac(label, 'session', nonce)}"

    def session(self, cookie: str) -> Identity | None:
        """The identity of a session cookie, or ``None`` when it is forged or stale."""
        parts = cookie.split(".")
        if len(parts) != 3:
            return None
        encoded, nonce, mac = parts
        try:
            label = _unb64(encoded)
        except (ValueError, UnicodeDecodeError):
            return None
        if label not in self._tokens:
            return None
        if not hmac.compare_digest(mac.encode(), self._mac(label, "session", nonce).encode()):
            return None
        return Identity(user=label, via="cookie", csrf=self._mac(label, "csrf", nonce))

    def bearer(self, header: str | None) -> Identity | None:
        """The identity of an ``Authorization`` header value, or ``None``."""
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        label = self.user_of(token.strip())
        return Identity(user=label, via="bearer") if label is not None else None

    @staticmethod
    def csrf_ok(identity: Identity, sent: str | None) -> bool:
        """Whether a state-changing request of ``identity`` may proceed."""
        if not identity.needs_csrf:
            return True
        if not sent or identity.csrf is None:
            return False
        return hmac.compare_digest(sent.encode(), identity.csrf.encode())
