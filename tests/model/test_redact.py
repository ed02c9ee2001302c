"""Secret redaction: the Go scheduler's sanitizeTaskError, plus a traceback variant."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chongming_task._model import Failure, FailureKind
from chongming_task._redact import (
    MESSAGE_MAX_LENGTH,
    TRACEBACK_MAX_LENGTH,
    mask_dsn,
    printable,
    redact,
    redact_failure,
    redact_json,
    redact_reason,
    redact_secrets,
    redact_text_fields,
    redact_traceback,
    scrub_dsn,
)
from chongming_task.errors import ConfigurationError

# A literal port of the Go code (go-scheduler.go.diff, sanitizeTaskError), the reference
# that redact() must match on every input the Go patterns were written for.
_GO_PAIR = re.compile(
    r"\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?token|refresh[_-]?token"
    r"|authorization|credential)\b\s*[:=]\s*(\"[^\"]*\"|'[^']*'|[^\s,;]+)",
    re.IGNORECASE | re.ASCII,
)
_GO_BEARER = re.compile(r"\bbearer\s+[A-Za-z0-9._~+/\-=]+", re.IGNORECASE | re.ASCII)


def go_sanitize(message: str) -> str:
    message = message.strip()
    if not message:
        return ""
    text = _GO_BEARER.sub("Bearer [REDACTED]", message)
    text = _GO_PAIR.sub(r"\1=[REDACTED]", text)
    text = "".join(
        " " if ch in "\n\r\t" else "" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch for ch in text
    )
    text = " ".join(text.split())
    return text[:512] + "..." if len(text) > 512 else text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("login failed: password=hunter2", "login failed: password=[REDACTED]"),
        ("PASSWORD: hunter2", "PASSWORD=[REDACTED]"),
        ("passwd = 'two words'", "passwd=[REDACTED]"),
        ('pwd="two words" then', "pwd=[REDACTED] then"),
        ("secret:abc,next", "secret=[REDACTED],next"),
        ("token=abc;rest", "token=[REDACTED];rest"),
        ("api_key=k api-key=k apikey=k", "api_key=[REDACTED] api-key=[REDACTED] apikey=[REDACTED]"),
        ("access_token=a refresh-token=b", "access_token=[REDACTED] refresh-token=[REDACTED]"),
        ("credential: c", "credential=[REDACTED]"),
        ("Authorization: Bearer x", "Authorization=[REDACTED] [REDACTED]"),
        ("GET /api failed, bearer abc.def-ghi", "GET /api failed, Bearer [REDACTED]"),
        (
            "connect(user=bob, password=s3cr3t, token='t t') failed; api_key: \"k k\"",
            "connect(user=bob, password=[REDACTED], token=[REDACTED]) failed; api_key=[REDACTED]",
        ),
        # A key glued to a prefix ends in a secret word: it is a key (issue 34).
        ("tokenizer=ok mytoken=x token_count=5", "tokenizer=ok mytoken=[REDACTED] token_count=5"),
        ("PGPASSWORD=hunter2 psql", "PGPASSWORD=[REDACTED] psql"),
        (
            "clientsecret=a githubtoken=b AUTHTOKEN=c",
            "clientsecret=[REDACTED] githubtoken=[REDACTED] AUTHTOKEN=[REDACTED]",
        ),
        # Unicode spaces around the separator (no-break, ideographic, thin, zero-width).
        ("password\u00a0=\u00a0hunter2 ok", "password=[REDACTED] ok"),
        ("token\u3000:\u3000abc ok", "token=[REDACTED] ok"),
        ("secret\u2009=\u200bxyz ok", "secret=[REDACTED] ok"),
        # Any HTTP auth scheme.
        ("Authorization: ApiKey k1 ok", "Authorization=[REDACTED] ok"),
        ("authorization: OAuth k2, ok", "authorization=[REDACTED], ok"),
        ("Authorization: SSWS k3 ok", "Authorization=[REDACTED] ok"),
        ("Proxy-Authorization: Token k4 ok", "Proxy-Authorization=[REDACTED] ok"),
        # A JSON string value with escaped quotes is one value.
        ('{"password": "ab\\"cd", "n": 1}', '{"password"=[REDACTED], "n": 1}'),
        # Well-known token shapes, with or without a key.
        ("push ghp_" + "A1" * 18 + " failed", "push [REDACTED] failed"),
        ("github_pat_11ABCDEFG0123456789_abcdefghij ok", "[REDACTED] ok"),
        ("slack xoxb-1234567890-abcdefghij ok", "slack [REDACTED] ok"),
        ("stripe sk_live_abcdefghij1234 ok", "stripe [REDACTED] ok"),
        ("aws AKIAIOSFODNN7EXAMPLE ok", "aws [REDACTED] ok"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl ok", "jwt [REDACTED] ok"),
        ("密码错误: password=密码123 用户=张三", "密码错误: password=[REDACTED] 用户=张三"),
        ("用户token=值 ok", "用户token=[REDACTED] ok"),
        ("line one\n\tline two\r\n  password =\n x", "line one line two password=[REDACTED]"),
        ("bell\x07 null\x00 del\x7f esc\x1b[31m", "bell null del esc"),
        ("   ", ""),
        ("", ""),
    ],
)
def test_redact_cases(raw: str, expected: str) -> None:
    assert redact(raw) == expected


def test_none_passes_through() -> None:
    assert redact(None) is None
    assert redact_traceback(None) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"password": "hunter2", "user": "bob"}', '{"password"=[REDACTED], "user": "bob"}'),
        ("{'token': 'abc'}", "{'token'=[REDACTED]}"),
        ("db_password=x client_secret=y", "db_password=[REDACTED] client_secret=[REDACTED]"),
        ("--password=x -p", "--password=[REDACTED] -p"),
        ("X-Api-Key: k", "X-Api-Key=[REDACTED]"),
        ("credentials=c", "credentials=[REDACTED]"),
        ("pass\x00word=hunter2", "password=[REDACTED]"),
        ("password\x01=hunter2", "password=[REDACTED]"),
        ("password：hunter2 token＝abc", "password=[REDACTED] token=[REDACTED]"),
        ("csi\x9b31m nel\x85end", "csi nel end"),  # an escape sequence goes whole
    ],
)
def test_hardening_beyond_go(raw: str, expected: str) -> None:
    """Cases the Go patterns leak or keep; redact() is a strict superset."""
    assert redact(raw) == expected


def test_several_secrets_on_one_line_leave_nothing_behind() -> None:
    secrets = ["hunter2", "s3cr3t", "tok-123", "k3y", "Zm9vYmFy"]
    raw = (
        f"password={secrets[0]} secret: '{secrets[1]}' token=\"{secrets[2]}\", "
        f"api_key={secrets[3]}; Authorization: Bearer {secrets[4]}"
    )
    result = redact(raw)
    assert result is not None
    for secret in secrets:
        assert secret not in result
    assert result.count("[REDACTED]") == 6


def test_length_cap_is_512_code_points_plus_ellipsis() -> None:
    assert redact("界" * 512) == "界" * 512
    assert redact("界" * 513) == "界" * 512 + "..."
    long = redact("word " * 500)
    assert long is not None
    assert len(long) == MESSAGE_MAX_LENGTH + 3
    assert long.endswith("...")


TRACEBACK = (
    "Traceback (most recent call last):\r\n"
    '  File "/app/jobs/sync.py", line 42, in run\r\n'
    '    client.login(user="bob", password="hunter2")\r\n'
    '  File "/app/client.py", line 7, in login\n'
    "\traise AuthError(f'token={token} rejected')\n"
    "AuthError: token=abc123 rejected; Authorization: Bearer eyJhbGciOi.x.y   \n"
    "\n"
)


def test_traceback_keeps_lines_and_indentation() -> None:
    assert redact_traceback(TRACEBACK) == (
        "Traceback (most recent call last):\n"
        '  File "/app/jobs/sync.py", line 42, in run\n'
        '    client.login(user="bob", password=[REDACTED])\n'
        '  File "/app/client.py", line 7, in login\n'
        "    raise AuthError(f'token=[REDACTED] rejected')\n"
        "AuthError: token=[REDACTED] rejected; Authorization=[REDACTED] [REDACTED]"
    )


def test_message_form_of_a_traceback_is_one_line() -> None:
    result = redact(TRACEBACK)
    assert result is not None
    assert "\n" not in result
    assert "hunter2" not in result
    assert "abc123" not in result
    assert "eyJhbGciOi" not in result


def test_long_traceback_keeps_head_and_tail_within_the_cap() -> None:
    frames = "".join(
        f'  File "/app/m{i}.py", line {i}, in f{i}\n    f{i + 1}()\n' for i in range(900)
    )
    text = "Traceback (most recent call last):\n" + frames + "ValueError: token=abc final\n"
    result = redact_traceback(text)
    assert result is not None
    assert len(result) <= TRACEBACK_MAX_LENGTH
    assert result.startswith("Traceback (most recent call last):\n")
    assert result.endswith("ValueError: token=[REDACTED] final")
    marker = re.search(r"\n\.\.\. \[(\d+) characters truncated\] \.\.\.\n", result)
    assert marker is not None
    head, tail = result[: marker.start()], result[marker.end() :]
    full = redact_traceback(text, max_length=10**9)
    assert full is not None
    assert int(marker.group(1)) == len(full) - len(head) - len(tail)
    assert full.startswith(head)
    assert full.endswith(tail)
    assert tail.startswith("  File") or tail.startswith("    f")


def test_long_single_line_traceback_is_cut_hard() -> None:
    result = redact_traceback("x" * 20_000, max_length=1000)
    assert result is not None
    assert len(result) <= 1000
    assert "characters truncated" in result


def test_traceback_cap_is_validated() -> None:
    with pytest.raises(ConfigurationError, match="max_length"):
        redact_traceback("x", max_length=10)


def test_redact_failure_touches_only_text() -> None:
    failure = Failure(
        kind=FailureKind.EXCEPTION,
        message="login failed:\npassword=hunter2",
        retryable=True,
        exception_type="app.AuthError",
        traceback=TRACEBACK,
    )
    clean = redact_failure(failure)
    assert clean.message == "login failed: password=[REDACTED]"
    assert clean.traceback is not None
    assert "hunter2" not in clean.traceback
    assert (clean.kind, clean.retryable, clean.exception_type) == (
        FailureKind.EXCEPTION,
        True,
        "app.AuthError",
    )
    assert redact_failure(clean) is clean


def test_redact_secrets_keeps_layout() -> None:
    assert redact_secrets("a\n  token: x\n") == "a\n  token=[REDACTED]\n"


def test_pathological_input_is_linear() -> None:
    """No catastrophic backtracking on long identifier runs or unclosed quotes."""
    for text in ("a-" * 50_000, "a_" * 50_000 + "=", 'password="' + "x " * 50_000, "=" * 100_000):
        started = time.perf_counter()
        redact(text)
        redact_traceback(text)
        assert time.perf_counter() - started < 2.0


# ----------------------------------------------------------------- properties

_KEYS = ["password", "PassWord", "passwd", "pwd", "secret", "token", "api_key", "api-key"]
_KEYS += ["apikey", "access_token", "refresh-token", "authorization", "credential"]
_words = st.text(alphabet="abcxyz0123.-/", min_size=1, max_size=8)
_values = (
    st.text(alphabet="abcXYZ019-+/=._~", min_size=1, max_size=10)
    | st.text(alphabet="ab 12,;:=", max_size=8).map(lambda v: f'"{v}"')
    | st.text(alphabet="ab 12,;:=", max_size=8).map(lambda v: f"'{v}'")
)
_pairs = st.tuples(st.sampled_from(_KEYS), st.sampled_from(["=", ": ", " = ", ":"]), _values).map(
    "".join
)
_bearer = _values.map(lambda v: f"Bearer {v}")
_fragments = st.lists(
    _words | _pairs | _bearer | st.sampled_from([",", ";", ":", "=", "界", "\n", "\t", "é"]),
    max_size=12,
)


@given(_fragments, st.sampled_from([" ", "  ", "\n"]))
def test_matches_the_go_reference(fragments: list[str], sep: str) -> None:
    text = sep.join(fragments)
    assert redact(text) == go_sanitize(text)


@given(st.text(max_size=600) | _fragments.map(" ".join))
def test_redact_is_idempotent_and_clean(text: str) -> None:
    once = redact(text)
    assert once is not None
    assert redact(once) == once
    assert len(once) <= MESSAGE_MAX_LENGTH + 3
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in once)
    assert once == once.strip()
    assert "  " not in once


@given(st.text(max_size=300) | _fragments.map("\n".join), st.integers(256, 400))
def test_redact_traceback_is_idempotent_and_capped(text: str, cap: int) -> None:
    once = redact_traceback(text, max_length=cap)
    assert once is not None
    assert len(once) <= cap
    assert redact_traceback(once, max_length=cap) == once
    assert not any(ord(ch) < 0x20 and ch != "\n" for ch in once)


@given(st.sampled_from(_KEYS), st.text(alphabet="abcdefghXYZ0123456789", min_size=6, max_size=12))
def test_secret_value_never_survives(key: str, secret: str) -> None:
    for template in ("{k}={s}", "{k}: {s}", "x {k} = '{s}' y", '{{"{k}": "{s}"}}', "a,{k}={s};b"):
        text = template.format(k=key, s=secret)
        for result in (redact(text), redact_traceback(text)):
            assert result is not None
            assert secret not in result, (text, result)


# ----------------------------------------------------------------- beyond the Go keys

# The table of what redact() does with the forms the Go patterns do not know, and with
# look-alikes that must be left alone. One row per case: input -> expected output.
_BEYOND_GO_CASES = [
    # URL credentials
    ("connect postgresql://app:pw@db/x failed", "connect postgresql://app:[REDACTED]@db/x failed"),
    ("redis://:pw@h:6379/0", "redis://:[REDACTED]@h:6379/0"),
    ("mysql+pymysql://u:p%40ss@h/db", "mysql+pymysql://u:[REDACTED]@h/db"),
    ("raw @ in it: postgresql://u:p@ss@host/db", "raw @ in it: postgresql://u:[REDACTED]@host/db"),
    ("dsn='postgresql://u:pw@h/db'", "dsn='postgresql://u:[REDACTED]@h/db'"),
    ('{"url": "https://bot:tok3n@api.example"}', '{"url": "https://bot:[REDACTED]@api.example"}'),
    ("masked postgresql://u:***@h stays", "masked postgresql://u:***@h stays"),
    # AWS and other keys
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "AWS_SECRET_ACCESS_KEY=[REDACTED]"),
    ("aws_secret_access_key: abc def", "aws_secret_access_key=[REDACTED] def"),
    ("AWS_SESSION_TOKEN=FwoG", "AWS_SESSION_TOKEN=[REDACTED]"),
    ("SECRET_KEY=django-insecure", "SECRET_KEY=[REDACTED]"),
    ("private_key=abc, next", "private_key=[REDACTED], next"),
    ("private-key: 'x y'", "private-key=[REDACTED]"),
    ("ssh passphrase=open sesame", "ssh passphrase=[REDACTED] sesame"),
    ('{"passphrase": "open sesame"}', '{"passphrase"=[REDACTED]}'),
    # Authorization schemes: the credential goes with the scheme
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization=[REDACTED]"),
    ("authorization=basic dXNlcjpwYXNz rest", "authorization=[REDACTED] rest"),
    ("Authorization: Digest username=bob", "Authorization=[REDACTED]"),
    ("Authorization: Token abc123", "Authorization=[REDACTED]"),
    ("Authorization: Bearer x", "Authorization=[REDACTED] [REDACTED]"),
    # PEM private keys, whole, or to the end when the end line was cut off
    (
        "key=-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\nAAKCAQEA\n-----END RSA PRIVATE KEY----- ok",
        "key=[REDACTED] ok",
    ),
    (
        "bad key '-----BEGIN PRIVATE KEY-----\\nMIIB\\n-----END PRIVATE KEY-----\\n' given",
        "bad key '[REDACTED]\\n' given",
    ),
    ("-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1r", "[REDACTED]"),
    ("-----BEGIN ENCRYPTED PRIVATE KEY-----x-----END ENCRYPTED PRIVATE KEY-----", "[REDACTED]"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK----- x -----END PGP PRIVATE KEY BLOCK-----", "[REDACTED]"),
    # must NOT be redacted
    (
        "fetch https://example.com:8080/a@b?x=1 failed",
        "fetch https://example.com:8080/a@b?x=1 failed",
    ),
    ("see https://docs.example.com/path", "see https://docs.example.com/path"),
    ("postgresql://postgres@127.0.0.1:5432/test", "postgresql://postgres@127.0.0.1:5432/test"),
    ("mail bob@example.com: done", "mail bob@example.com: done"),
    ("the password was wrong, try again", "the password was wrong, try again"),
    ("reset your password", "reset your password"),
    ("password reset failed: user not found", "password reset failed: user not found"),
    ("basic usage: run it", "basic usage: run it"),
    ("keyring has a public key", "keyring has a public key"),
    (
        "-----BEGIN CERTIFICATE----- MIIB -----END CERTIFICATE-----",
        "-----BEGIN CERTIFICATE----- MIIB -----END CERTIFICATE-----",
    ),
    ("-----BEGIN PUBLIC KEY----- MIIB", "-----BEGIN PUBLIC KEY----- MIIB"),
    ("key_count=3 secretary=bob tokens_used=7", "key_count=3 secretary=bob tokens_used=7"),
]


@pytest.mark.parametrize(("raw", "expected"), _BEYOND_GO_CASES)
def test_redact_beyond_go_cases(raw: str, expected: str) -> None:
    assert redact(raw) == expected
    assert redact(expected) == expected


def test_pem_block_spanning_traceback_lines_is_removed_whole() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/app/sign.py", line 3, in sign\n'
        '    load(key="""-----BEGIN EC PRIVATE KEY-----\n'
        "MHcCAQEEIBkg\n"
        '-----END EC PRIVATE KEY-----""")\n'
        "ValueError: postgresql://app:pw@db/x refused"
    )
    assert redact_traceback(text) == (
        "Traceback (most recent call last):\n"
        '  File "/app/sign.py", line 3, in sign\n'
        '    load(key="""[REDACTED]""")\n'
        "ValueError: postgresql://app:[REDACTED]@db/x refused"
    )


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        (
            "postgresql://postgres:S3cretPw@127.0.0.1:5432/test",
            "postgresql://postgres:***@127.0.0.1:5432/test",
        ),
        ("postgres://:pw@h/db", "postgres://:***@h/db"),
        ("postgresql://postgres@127.0.0.1/test", "postgresql://postgres@127.0.0.1/test"),
        (
            "postgresql://h/db?password=pw&sslmode=require",
            "postgresql://h/db?password=***&sslmode=require",
        ),
        ("host=db user=app password=pw dbname=x", "host=db user=app password=*** dbname=x"),
        ("host=db password='a \\' b' dbname=x", "host=db password=*** dbname=x"),
        ("host=db password = pw", "host=db password = ***"),
        ("chongming.db", "chongming.db"),
        ("/var/lib/app/tasks.db", "/var/lib/app/tasks.db"),
    ],
)
def test_mask_dsn(dsn: str, shown: str) -> None:
    assert mask_dsn(dsn) == shown
    assert mask_dsn(shown) == shown


_secret_values = st.text(alphabet="abcdefghXYZ0123456789", min_size=6, max_size=16).map(
    lambda v: "Q" + v
)
_FORMS = [
    "password={s}",
    "PASSWORD: {s}",
    "db_password='{s}'",
    '"password": "{s}"',
    "token={s}",
    "api_key={s}",
    "Bearer {s}",
    "Authorization: Bearer {s}",
    "Authorization: Basic {s}",
    "AWS_SECRET_ACCESS_KEY={s}",
    "aws_secret_access_key: {s}",
    "private_key={s}",
    "passphrase={s}",
    "postgresql://app:{s}@db/x",
    "redis://:{s}@h:6379",
    "https://user:{s}@example.com/path",
    "-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----{s}",
]


@given(
    st.sampled_from(_FORMS),
    _secret_values,
    st.text(max_size=80),
    st.text(max_size=80),
    st.sampled_from([" ", "\n", "\t", ", ", "; ", " (", "'", '"', "\x00 "]),
)
def test_planted_secret_never_survives(
    form: str, secret: str, before: str, after: str, sep: str
) -> None:
    """A secret in any supported form, anywhere in arbitrary text, is always removed.

    The planted secret is set off from the text around it by a separator (a space,
    punctuation, a quote): a key glued to a word (``xpassword=``) is another key.
    """
    text = before + sep + form.format(s=secret) + sep.rstrip("\x00") + " " + after
    for result in (redact(text), redact_traceback(text, max_length=10**6), redact_secrets(text)):
        assert result is not None
        assert secret not in result, (text, result)


def test_scrub_dsn_removes_the_password_drivers_quote_back() -> None:
    dsn = "postgresql//app:S3cretPw@db/x"  # a typo no URL pattern recognises
    quoted = f'missing "=" after "{dsn}" in connection info string'
    assert (
        scrub_dsn(quoted, dsn)
        == 'missing "=" after "postgresql//app:***@db/x" in connection info string'
    )
    keywords = "host=db password=S3cretPw sslmode"
    assert "S3cretPw" not in scrub_dsn(f'missing "=" after "sslmode": {keywords}', keywords)
    assert scrub_dsn("no password here", "postgresql://app@db/x") == "no password here"
    # a short password is not searched for as bare text (it would mangle the message)
    assert scrub_dsn("a b c", "postgresql://u:a@h") == "a b c"


@pytest.mark.parametrize(
    ("reason", "recorded"),
    [
        (None, None),
        ("", None),
        ("  \x00 ", None),
        ("ops says so", "ops says so"),
        ("rotate\npassword=x", "rotate password=[REDACTED]"),
        ("x" * 600, "x" * 512 + "..."),
    ],
)
def test_redact_reason_is_redact_with_blank_as_none(
    reason: str | None, recorded: str | None
) -> None:
    assert redact_reason(reason) == recorded


def test_redact_text_fields_touches_only_reason_and_error() -> None:
    payload = {"reason": "token=abc", "error": "password=x", "args": ["password=kept"], "n": 1}
    assert redact_text_fields(payload) == {
        "reason": "token=[REDACTED]",
        "error": "password=[REDACTED]",
        "args": ["password=kept"],
        "n": 1,
    }
    assert payload["reason"] == "token=abc"  # a copy
    same = {"applied": True}
    assert redact_text_fields(same) is same
    assert redact_text_fields("token=abc") == "token=abc"
    assert redact_text_fields(None) is None


def test_every_transition_reason_is_redacted_where_it_is_made() -> None:
    from datetime import UTC, datetime

    from chongming_task._model import Transition
    from chongming_task.core.state_machine import StateMachine
    from chongming_task.states import TaskStatus

    at = datetime(2026, 3, 1, tzinfo=UTC)
    made = Transition(
        task_id="t",
        from_status=None,
        to_status=TaskStatus.PENDING,
        trigger="t:x",
        version=0,
        at=at,
        reason="redis://:pw@h",
    )
    assert made.reason == "redis://:[REDACTED]@h"
    assert Transition.from_dict({**made.to_dict(), "reason": "token=x"}).reason == (
        "token=[REDACTED]"
    )
    lost = StateMachine.create("l", "job")
    lost.mark_queued()
    lost.mark_starting()
    lost.mark_lost(reason="passphrase=x")
    assert lost.transitions[-1].reason == "passphrase=[REDACTED]"

    machine = StateMachine.create("t", "job")
    machine.request_stop(actor="ops", reason="\x00 \n")  # blank once cleaned: the default
    assert machine.transitions[-1].reason is None
    assert machine.snapshot.failure is not None
    assert machine.snapshot.failure.message == "stopped"
    skipped = StateMachine.create("s", "job")
    skipped.mark_skipped(reason="Authorization: Basic dXNlcjpwdw==")
    assert skipped.transitions[-1].reason == "Authorization=[REDACTED]"
    assert skipped.snapshot.failure is not None
    assert skipped.snapshot.failure.message == "Authorization=[REDACTED]"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("copy \x1b]52;c;aGVsbG8=\x07me", "copy me"),  # OSC 52: the clipboard write
        ("a\x1b[2Jb\x1b[31;1mc", "abc"),  # CSI: clear screen, colour
        ("t\x1b]0;title\x1b\\itle", "title"),  # OSC ended by ST
        ("8-bit \x9b2J csi", "8-bit  csi"),
        ("unterminated \x1b]52;c;text stays", "unterminated 52;c;text stays"),
        ("lone \ud800 surrogate", "lone \ufffd surrogate"),
        ("bidi \u202eevil\u202c end", "bidi evil end"),
        ("tab\tcr\rnul\x00", "tab cr nul "),
        ("emoji \U0001f468\u200d\U0001f469 kept", "emoji \U0001f468\u200d\U0001f469 kept"),
        ("plain text 中文", "plain text 中文"),
    ],
)
def test_printable_removes_what_drives_a_terminal(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable(shown) == shown


def test_printable_keeps_line_feeds_when_asked() -> None:
    assert printable("a\nb\x1b[2J", keep_newlines=True) == "a\nb"
    assert printable("a\nb") == "a b"


def test_redact_json_redacts_values_under_secret_keys_whatever_their_type() -> None:
    value = {
        "PGPASSWORD": 1234,
        "clientSecret": ["a", {"x": 1}],
        "args": {"note": "token=abc", "api_key": None, "n": 5},
        "tokens": "kept",
    }
    assert redact_json(value) == {
        "PGPASSWORD": "[REDACTED]",
        "clientSecret": ["[REDACTED]", {"x": 1}],
        "args": {"note": "token=[REDACTED]", "api_key": None, "n": 5},
        "tokens": "kept",
    }
    assert redact_json(redact_json(value)) == redact_json(value)
