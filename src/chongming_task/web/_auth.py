"""Who is asking: bearer tokens, the login cookie and CSRF tokens.

A dashboard is a door, so every request but the login page and the static files must
carry a token: ``Authorization: Bearer <token>`` (scripts, the JSON API), or the session
cookie that ``POST /login`` sets (browsers). Tokens are compared with
:func:`hmac.compare_digest` against every configured token, so timing says nothing.

The session cookie is ``<label>.<nonce>.<expires>.<mac>``, where ``mac`` is an HMAC of
the label, nonce and expiry (Unix seconds) keyed by that user's token. A session ends
at its expiry (``session_ttl``, 12 hours by default), when its user logs out (the
nonce is revoked in this process until the session would have expired), or when its
token is rotated. The CSRF token of a session is another HMAC of its nonce under the
same key: a state-changing request authenticated by the cookie must send it (form
field ``csrf`` or header ``X-CSRF-Token``); a bearer request needs none, since no
browser attaches a bearer header by itself.

An application that mounts the dashboard behind its own login (the Django integration,
``chongming_task.contrib.django``) authenticates each request itself and puts an
:class:`Identity` with ``via="host"`` in the ASGI scope under :data:`HOST_IDENTITY`;
such a request needs no token, and its state changes need the identity's ``csrf``
value, which the host derives from its own session. Only the host process writes the
scope: no client can set it.

A token must be hard to guess: at least 32 characters, at least 10 distinct ones, of
at least two kinds (lower case, upper case, digits, others). Failed logins are limited
per client address (:class:`LoginThrottle`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import secrets
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from chongming_task.errors import ConfigurationError

__all__ = [
    "COOKIE_NAME",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "DEFAULT_USER",
    "HOST_IDENTITY",
    "Identity",
    "LoginThrottle",
    "TokenRing",
    "generate_token",
    "read_token_file",
]

COOKIE_NAME = "chongming_dashboard"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
#: The ASGI scope key under which a host application that authenticated the request
#: itself passes its :class:`Identity` (``via="host"``).
HOST_IDENTITY = "chongming_task.identity"
#: The label of a token given without one (``--token-file`` with a bare token).
DEFAULT_USER = "dashboard"
#: Shortest token accepted: a guessable door is no door.
MIN_TOKEN_LENGTH: Final = 32
#: Fewest distinct characters a token must have (``aaaa...`` or ``abab...`` is no secret).
MIN_TOKEN_DISTINCT: Final = 10
#: Seconds a login session lasts (``create_app(session_ttl=...)``, ``--session-ttl``).
DEFAULT_SESSION_TTL: Final = 12 * 3600.0
#: Failed logins one client address may make per :data:`LOGIN_WINDOW` seconds.
LOGIN_ATTEMPTS: Final = 5
LOGIN_WINDOW: Final = 60.0
#: Client addresses the login throttle remembers at most (the oldest are forgotten).
_THROTTLE_ADDRESSES: Final = 10_000


@dataclass(frozen=True, slots=True)
class Identity:
    """An authenticated request: who, and how."""

    user: str
    """The label actions are recorded under (``actor``)."""
    via: str
    """``"bearer"``, ``"cookie"`` or ``"host"`` (the host application's own login)."""
    csrf: str | None = None
    """The CSRF token a browser session must send back (``None`` for bearer)."""

    @property
    def needs_csrf(self) -> bool:
        """A browser sends cookies by itself, so its state changes carry a CSRF token."""
        return self.via != "bearer"


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


def _kinds(token: str) -> int:
    return len(
        {
            "lower"
            if c.islower()
            else "upper"
            if c.isupper()
            else "digit"
            if c.isdigit()
            else "other"
            for c in token
        }
    )


def check_token(label: str, token: object) -> str:
    """``token`` if it is strong enough to guard the dashboard.

    Raises:
        ConfigurationError: shorter than 32 characters, fewer than 10 distinct
            characters, or all of one kind (say, only digits).
    """
    fix = "; make one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
    if not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
        size = len(token) if isinstance(token, str) else 0
        raise ConfigurationError(
            f"the token of dashboard user {label!r} must be at least {MIN_TOKEN_LENGTH} "
            f"characters, got {size}{fix}"
        )
    if len(set(token)) < MIN_TOKEN_DISTINCT or _kinds(token) < 2:
        raise ConfigurationError(
            f"the token of dashboard user {label!r} is too easy to guess: it needs at least "
            f"{MIN_TOKEN_DISTINCT} distinct characters of at least two kinds (lower case, "
            f"upper case, digits, others){fix}"
        )
    return token


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
        session_ttl: Seconds a login session lasts.

    Raises:
        ConfigurationError: no token, a weak token (:func:`check_token`), a bad
            label, two users sharing one token, or a session_ttl that is not > 0.
    """

    def __init__(
        self, tokens: Mapping[str, str], *, session_ttl: float = DEFAULT_SESSION_TTL
    ) -> None:
        if not tokens:
            raise ConfigurationError("the dashboard needs at least one token")
        if not (isinstance(session_ttl, int | float) and 0 < session_ttl < math.inf):
            raise ConfigurationError(
                f"session_ttl must be a positive number of seconds, got {session_ttl!r}"
            )
        checked: dict[str, bytes] = {}
        for label, token in tokens.items():
            _check_label(label)
            checked[label] = check_token(label, token).encode()
        if len(set(checked.values())) != len(checked):
            raise ConfigurationError("two dashboard users share one token")
        self._tokens = checked
        self.session_ttl = float(session_ttl)
        self._revoked: dict[str, int] = {}
        """Nonces of sessions logged out -> when they would have expired."""

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

    def new_session(self, label: str, now: datetime) -> str:
        """The cookie value of a fresh session of ``label``, valid ``session_ttl`` from ``now``."""
        nonce = secrets.token_urlsafe(16)
        expires = str(math.ceil(now.timestamp() + self.session_ttl))
        mac = self._mac(label, "session", f"{nonce}|{expires}")
        return f"{_b64(label)}.{nonce}.{expires}.{mac}"

    def _verified(self, cookie: str, now: datetime) -> tuple[str, str, int] | None:
        """``(label, nonce, expires)`` of a genuine, unexpired, not revoked cookie."""
        parts = cookie.split(".")
        if len(parts) != 4 or not parts[2].isdigit():
            return None
        encoded, nonce, expires, mac = parts
        try:
            label = _unb64(encoded)
        except (ValueError, UnicodeDecodeError):
            return None
        if label not in self._tokens:
            return None
        expected = self._mac(label, "session", f"{nonce}|{expires}")
        if not hmac.compare_digest(mac.encode(), expected.encode()):
            return None
        if int(expires) <= now.timestamp() or nonce in self._revoked:
            return None
        return label, nonce, int(expires)

    def session(self, cookie: str, now: datetime) -> Identity | None:
        """The identity of a session cookie, or ``None`` when it is forged, expired or
        logged out."""
        found = self._verified(cookie, now)
        if found is None:
            return None
        label, nonce, _ = found
        return Identity(user=label, via="cookie", csrf=self._mac(label, "csrf", nonce))

    def revoke(self, cookie: str, now: datetime) -> None:
        """End the session of ``cookie`` (logout): it is refused from now on."""
        stamp = now.timestamp()
        for nonce, expires in list(self._revoked.items()):
            if expires <= stamp:  # expired anyway: no need to remember it
                del self._revoked[nonce]
        found = self._verified(cookie, now)
        if found is not None:
            self._revoked[found[1]] = found[2]

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


class LoginThrottle:
    """At most ``attempts`` failed logins per client address in any ``window`` seconds.

    Once an address has failed that often, every login from it (even with the right
    token) is refused with 429 until its oldest failure leaves the window. Behind a
    reverse proxy every client shares the proxy's address, and so its limit.
    """

    def __init__(self, *, attempts: int = LOGIN_ATTEMPTS, window: float = LOGIN_WINDOW) -> None:
        self.attempts = attempts
        self.window = window
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, address: str, stamp: float) -> deque[float]:
        failures = self._failures.get(address)
        if failures is None:
            return deque()
        while failures and failures[0] <= stamp - self.window:
            failures.popleft()
        if not failures:
            del self._failures[address]
        return failures

    def retry_after(self, address: str, now: datetime) -> int | None:
        """Seconds until ``address`` may try again, or ``None`` if it may now."""
        stamp = now.timestamp()
        failures = self._recent(address, stamp)
        if len(failures) < self.attempts:
            return None
        return max(1, math.ceil(failures[0] + self.window - stamp))

    def failed(self, address: str, now: datetime) -> None:
        """Record a failed login of ``address``."""
        stamp = now.timestamp()
        failures = self._recent(address, stamp)
        if address not in self._failures:
            if len(self._failures) >= _THROTTLE_ADDRESSES:
                del self._failures[next(iter(self._failures))]
            self._failures[address] = failures
        failures.append(stamp)
