"""The Starlette application: routes, authentication, CSRF, read-only mode, headers.

``create_app(store, ...)`` returns an ASGI app to serve with uvicorn
(``chongming-task dashboard``) or to mount in an existing Starlette/FastAPI service.
Pages are server-rendered Jinja2 templates (autoescaped); htmx, vendored under
``/static``, re-fetches the live fragments when the ``/events`` stream says something
changed. Every state change is a POST through the library's own control paths: the
one control path for tasks (``control_task``, as ``Controller.stop`` and ``Client.stop``
use: a guarded write for a task no worker holds, else a command for its holder) and
:class:`ScheduleAdmin` for schedules, recorded with the dashboard user's label as the
actor and the typed reason.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chongming_task._model import TaskSnapshot, Transition
from chongming_task._redact import redact, redact_json, redact_reason
from chongming_task._timespec import parse_instant
from chongming_task.controller._control import control_task
from chongming_task.controller._retry import RETRYABLE, retry_task
from chongming_task.core import Clock, SystemClock
from chongming_task.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    StaleScheduleEdit,
    StoreError,
)
from chongming_task.schedule import ScheduleAdmin, ScheduleControl, ScheduleStatistics
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores._activity import DURATION_SAMPLE, SERIES
from chongming_task.stores._base import TaskStore
from chongming_task.stores._limits import LimitUse
from chongming_task.stores._queue_store import fleet_view
from chongming_task.web._auth import (
    COOKIE_NAME,
    CSRF_FIELD,
    CSRF_HEADER,
    DEFAULT_SESSION_TTL,
    DEFAULT_USER,
    HOST_IDENTITY,
    Identity,
    LoginThrottle,
    TokenRing,
    generate_token,
)
from chongming_task.web._charts import (
    RANGES,
    bar_svg,
    chart_range,
    duration_svg,
    queued_svg,
    seconds_text,
)
from chongming_task.web._live import Broadcaster
from chongming_task.web._params import checked_input, int_param, json_object, optional_int
from chongming_task.web._pipelines import PipelineGraph, pipeline_graph
from chongming_task.web._queues import QUEUE_ACTIONS, QueueRequest, paused_queues
from chongming_task.web._urls import install as install_urls
from chongming_task.web._urls import pipeline_url, schedule_url, task_url, worker_url
from chongming_task.web._views import (
    DEFAULT_PAGE_SIZE,
    FAILURE_WINDOW,
    MAX_PAGE_SIZE,
    Dashboard,
    TaskFilters,
    WorkerInfo,
    WorkerSource,
    by_attempt,
    controls_of,
    due_at,
    elapsed,
    task_doc,
    transition_doc,
)

__all__ = ["CONTENT_SECURITY_POLICY", "DashboardConfig", "create_app"]

log = logging.getLogger("chongming_task.web")

HERE = Path(__file__).resolve().parent

#: Scripts and styles from our own origin only: no inline script, no eval, no framing.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_SECURITY_HEADERS: Final = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)

TASK_ACTIONS: Final = ("stop", "pause", "resume", "retry")
#: What a bulk request may do: the task actions, and deleting finished tasks.
BULK_ACTIONS: Final = (*TASK_ACTIONS, "delete")
#: The statuses each bulk action can act on: a filter-wide action reads only these.
_UNFINISHED: Final = frozenset(TaskStatus) - TERMINAL
BULK_STATUSES: Final = {
    "stop": _UNFINISHED,
    "pause": _UNFINISHED,
    "resume": _UNFINISHED,
    "retry": frozenset(RETRYABLE),
    "delete": TERMINAL,
}
#: Tasks one request of a filter-wide bulk action controls; the next page follows.
BULK_PAGE: Final = 200
SCHEDULE_ACTIONS: Final = ("pause", "resume", "run")
STATUSES: Final = tuple(s.value for s in TaskStatus)
MAX_REASON: Final = 500
#: The most tasks one bulk request controls.
MAX_BULK: Final = 500
#: The largest running total a filter-wide bulk request carries from page to page.
_MAX_TOTAL: Final = 10**12
#: The most events ``?max_events=`` asks a live stream for.
MAX_EVENTS: Final = 1_000_000
_FLASH_KEYS: Final = frozenset({"done", "result", "applied", "requested", "refused"})

#: What each accepted task action honestly means, said after the request.
ACCEPTED_MESSAGE: Final = {
    "stop": "stop requested — its holder applies it at the task's next checkpoint; "
    "the state below shows when it did",
    "pause": "pause requested — not confirmed across processes; "
    "the state below shows when it paused",
    "resume": "resume requested — not confirmed across processes; "
    "the state below shows when it resumed",
    "retry": "retried: queued again, with its history, for any worker that may take it",
}
#: What each task action applied at once (no worker held the task) did.
APPLIED_MESSAGE: Final = {
    "stop": "stopped: no worker had taken the task, so it will never run",
    "pause": "paused: no worker had taken the task; none will until it is resumed",
    "resume": "resumed: the task is queued again for a worker to take",
    "retry": "retried: queued again, with its history, for any worker that may take it",
}
SCHEDULE_MESSAGE: Final = {
    "pause": "schedule paused: every firing is recorded as a skipped run until resumed",
    "resume": "schedule resumed",
    "run": "run requested — a scheduler that has this schedule claims the command and runs it",
    "override": "override saved — running schedulers apply the new pattern within one tick",
    "reset": "override dropped — back to the pattern from code; running schedulers apply it "
    "within one tick",
    "stale": "edit refused: the schedule was changed since this page was loaded, and nothing "
    "was changed — the page now shows the current pattern and revision; edit again",
}
#: What ``POST /schedules/{name}/override`` does, by its ``action`` field.
OVERRIDE_ACTIONS: Final = ("set", "reset")


class DashboardConfig:
    """Everything a request handler needs, kept on ``app.state.dashboard``."""

    def __init__(
        self,
        *,
        store: TaskStore,
        ring: TokenRing,
        read_only: bool,
        clock: Clock,
        data: Dashboard,
        live: Broadcaster,
        tick: float,
        generated_token: str | None,
    ) -> None:
        self.store = store
        self.ring = ring
        self.read_only = read_only
        self.clock = clock
        self.data = data
        self.live = live
        self.tick = tick
        self.generated_token = generated_token
        """The token made up because none was given (show it to the operator)."""
        self.throttle = LoginThrottle()
        """Failed logins per client address (429 past the limit)."""


class _SecurityHeaders:
    """Pure ASGI middleware: the security headers on every response, ``no-store`` on pages."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = "/static/" in scope.get("path", "")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(_SECURITY_HEADERS)
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["age"] = _age
    env.filters["redact"] = redact
    env.filters["tojson_pretty"] = lambda value: json.dumps(value, indent=2, default=str)
    env.filters["dt"] = lambda value: value.isoformat(timespec="seconds") if value else "—"
    env.filters["ago"] = _relative
    env.globals.update(due_at=due_at, elapsed=elapsed)
    install_urls(env)
    return env


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _relative(value: datetime | None, now: datetime) -> str:
    """``value`` relative to ``now``: ``3 min ago``, ``in 2.0 h``, ``now``."""
    if value is None:
        return "—"
    seconds = (now - value).total_seconds()
    if abs(seconds) < 1:
        return "now"
    return f"{_age(seconds)} ago" if seconds > 0 else f"in {_age(-seconds)}"


def create_app(
    store: TaskStore,
    *,
    token: str | None = None,
    tokens: Mapping[str, str] | None = None,
    user: str = DEFAULT_USER,
    read_only: bool = False,
    clock: Clock | None = None,
    live_interval: float = 1.0,
    tick: float = 15.0,
    idle_after: float = 60.0,
    stopping_grace: float = 30.0,
    workers: WorkerSource | None = None,
    session_ttl: float = DEFAULT_SESSION_TTL,
) -> Starlette:
    """The dashboard as an ASGI app over ``store``.

    Args:
        store: The shared store the workers write to (not closed by the app).
        token: The token of a single user labelled ``user``.
        tokens: ``label -> token`` for several users (instead of ``token``); each
            user's actions are recorded with its label as the actor.
        user: The label of ``token``.
        read_only: Hide every control and refuse every state change (403).
        clock: Time source (a ``FakeClock`` in tests).
        live_interval: Seconds between the live poller's store reads.
        tick: Seconds between keep-alive events of a live stream.
        idle_after: Seconds without heartbeat after which a running task looks stuck.
        stopping_grace: Seconds in ``stopping`` after which a task looks stuck.
        workers: A worker registry (see :class:`~chongming_task.web._views.WorkerSource`).
        session_ttl: Seconds a login session lasts (default 12 hours); logging out ends
            it at once.

    Without ``token`` or ``tokens`` a random token is generated: read it from
    ``app.state.dashboard.generated_token``. There is no unauthenticated mode; an
    application that authenticates requests itself passes who asks in the ASGI scope
    (``chongming_task.web._auth.HOST_IDENTITY``, as the Django integration does).

    Raises:
        ConfigurationError: both ``token`` and ``tokens``, a token that is too easy to
            guess (shorter than 32 characters, fewer than 10 distinct characters, or
            all of one kind), or a session_ttl that is not > 0.
    """
    if token is not None and tokens is not None:
        raise ConfigurationError("give either token or tokens, not both")
    generated = None
    if tokens is None:
        if token is None:
            token = generated = generate_token()
        tokens = {user: token}
    the_clock = clock or store.clock or SystemClock()
    data = Dashboard(
        store,
        clock=the_clock,
        idle_after=idle_after,
        stopping_grace=stopping_grace,
        workers=workers,
    )
    config = DashboardConfig(
        store=store,
        ring=TokenRing(tokens, session_ttl=session_ttl),
        read_only=read_only,
        clock=the_clock,
        data=data,
        live=Broadcaster(data.fingerprint, interval=live_interval),
        tick=tick,
        generated_token=generated,
    )
    env = _environment()
    handlers = _Handlers(config, env)
    routes = [
        Route("/", handlers.overview, name="overview"),
        Route("/login", handlers.login_form, methods=["GET"], name="login"),
        Route("/login", handlers.login, methods=["POST"]),
        Route("/logout", handlers.logout, methods=["POST"], name="logout"),
        Route("/events", handlers.events, name="events"),
        Route("/tasks", handlers.tasks, name="tasks"),
        Route("/tasks/bulk", handlers.bulk, methods=["POST"], name="bulk"),
        Route("/tasks/{task_id:path}", handlers.task, name="task"),
        Route("/tasks/{task_id:path}/{action}", handlers.task_action, methods=["POST"]),
        Route("/schedules", handlers.schedules, name="schedules"),
        Route("/schedules/{name:path}", handlers.schedule, name="schedule"),
        Route("/schedules/{name:path}/override", handlers.schedule_override, methods=["POST"]),
        Route("/schedules/{name:path}/{action}", handlers.schedule_action, methods=["POST"]),
        Route("/workers", handlers.workers, name="workers"),
        Route("/workers/{worker_id:path}", handlers.worker, name="worker"),
        Route("/buckets", handlers.buckets, name="buckets"),
        Route("/pipelines/{run_id:path}", handlers.pipeline, name="pipeline"),
        Route("/failures", handlers.failures, name="failures"),
        Route("/failures/retry", handlers.retry_failures, methods=["POST"]),
        Route("/api/failures", handlers.api_failures),
        Route("/api/failures/retry", handlers.retry_failures, methods=["POST"]),
        Route("/charts", handlers.charts, name="charts"),
        Route("/api/overview", handlers.api_overview),
        Route("/api/events", handlers.events),
        Route("/api/tasks", handlers.api_tasks),
        Route("/api/tasks/bulk", handlers.bulk, methods=["POST"]),
        Route("/api/tasks/{task_id:path}", handlers.api_task),
        Route("/api/tasks/{task_id:path}/{action}", handlers.task_action, methods=["POST"]),
        Route("/api/schedules", handlers.api_schedules),
        Route("/api/schedules/{name:path}", handlers.api_schedule),
        Route(
            "/api/schedules/{name:path}/override",
            handlers.schedule_override,
            methods=["POST"],
        ),
        Route("/api/schedules/{name:path}/{action}", handlers.schedule_action, methods=["POST"]),
        Route("/api/workers", handlers.api_workers),
        Route("/api/workers/{worker_id:path}", handlers.api_worker),
        Route("/api/limits", handlers.api_limits),
        Route("/api/queues", handlers.api_queues),
        Route("/api/queues/{action}", handlers.queue_action, methods=["POST"]),
        Route("/queues/{action}", handlers.queue_action, methods=["POST"]),
        Route("/api/buckets", handlers.api_buckets),
        Route("/api/pipelines/{run_id:path}", handlers.api_pipeline),
        Route("/api/charts", handlers.api_charts),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={404: handlers.not_found})
    app.state.dashboard = config
    app.add_middleware(_SecurityHeaders)
    return app


# ---------------------------------------------------------------- handlers

Method = Callable[["_Handlers", Request], Awaitable[Response]]


def _base(request: Request) -> str:
    """The path the dashboard is mounted under (``""`` at the root of the server)."""
    base: str = request.scope.get("root_path", "")
    return base


def _here(request: Request) -> str:
    """The path of this request as the client sent it, still percent-encoded.

    ``request.url.path`` is decoded: ``/tasks/job%2541`` reads ``/tasks/job%41``, which
    as a URL names task ``jobA``. Never build a link from it."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes) and raw:
        return raw.decode("latin-1").split("?", 1)[0]
    return quote(request.url.path)


def _see_other(request: Request, path: str) -> RedirectResponse:
    """303 to ``path`` of the dashboard (after a POST, so a reload does not repeat it)."""
    return RedirectResponse(_base(request) + path, status_code=303)


def _wants_json(request: Request) -> bool:
    path = request.url.path[len(_base(request)) :]
    if path.startswith("/api/"):
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def _error(request: Request, status: int, message: str, env: jinja2.Environment) -> Response:
    """The error as JSON or as a page; a signed-in user keeps the navigation."""
    if _wants_json(request):
        return JSONResponse({"error": message}, status_code=status)
    base = _base(request)
    identity: Identity | None = getattr(request.state, "identity", None)
    html = env.get_template("error.html").render(
        base=base,
        status=status,
        message=message,
        identity=identity,
        read_only=True,
        csrf=identity.csrf if identity is not None and identity.csrf else "",
        page="",
        events=False,
    )
    return HTMLResponse(html, status_code=status)


def authenticated(fn: Method) -> Method:
    """Refuse (401) a request that carries no valid bearer token or session cookie."""

    @functools.wraps(fn)
    async def wrapper(self: _Handlers, request: Request) -> Response:
        identity = self.identify(request)
        if identity is None:
            return self.unauthorized(request)
        request.state.identity = identity
        response: Response = await fn(self, request)
        return response

    return wrapper


def state_changing(fn: Method) -> Method:
    """Authenticated, plus: refused in read-only mode and without the CSRF token (403)."""

    @functools.wraps(fn)
    async def wrapper(self: _Handlers, request: Request) -> Response:
        identity: Identity = request.state.identity
        if self.config.read_only:
            return _error(request, 403, "this dashboard is read-only", self.env)
        form = await request.form() if _is_form(request) else None
        sent = request.headers.get(CSRF_HEADER)
        if sent is None and form is not None:
            value = form.get(CSRF_FIELD)
            sent = value if isinstance(value, str) else None
        if not self.config.ring.csrf_ok(identity, sent):
            return _error(request, 403, "missing or invalid CSRF token", self.env)
        request.state.form = form
        response: Response = await fn(self, request)
        return response

    return authenticated(wrapper)


def _is_form(request: Request) -> bool:
    kind = request.headers.get("content-type", "")
    return kind.startswith(("application/x-www-form-urlencoded", "multipart/form-data"))


async def _fields(request: Request) -> dict[str, Any]:
    """Form fields, or the JSON body's object (the JSON API), checked by
    :func:`~chongming_task.web._params.checked_input`."""
    form = getattr(request.state, "form", None)
    if form is not None:
        out: dict[str, Any] = {}
        for key in form:
            values = [v for v in form.getlist(key) if isinstance(v, str)]
            out[key] = values if key == "ids" else (values[-1] if values else "")
        result: dict[str, Any] = checked_input(out)
        return result
    body = await request.body()
    return json_object(body) if body else {}


def _reason(fields: Mapping[str, Any]) -> str:
    raw = fields.get("reason")
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise ConfigurationError("a reason is required: it is recorded in the task's history")
    if len(text) > MAX_REASON:
        raise ConfigurationError(f"the reason is longer than {MAX_REASON} characters")
    return text


def _override_edit(fields: Mapping[str, Any]) -> tuple[str, str, str | None, int]:
    """``(action, pattern, timezone, definition revision)`` of an override request.

    Raises:
        ConfigurationError: a field is missing or malformed (the message names it).
    """
    action = fields.get("action") or "set"
    if action not in OVERRIDE_ACTIONS:
        raise ConfigurationError(f"action must be one of {', '.join(OVERRIDE_ACTIONS)}")
    revision = int_param(
        fields.get("definition_revision"),
        "definition_revision (the revision the edit is based on, as the schedule shows it; "
        "required)",
    )
    pattern = fields.get("pattern")
    pattern = pattern.strip() if isinstance(pattern, str) else ""
    if action == "set" and not pattern:
        raise ConfigurationError("pattern is required: a cron expression or @every <duration>")
    timezone = fields.get("timezone")
    timezone = timezone.strip() if isinstance(timezone, str) and timezone.strip() else None
    return str(action), pattern, timezone, revision


def _safe_next(value: str | None, base: str) -> str:
    """A local path to go back to after login (never another site)."""
    if (
        value
        and value.startswith("/")
        and not value.startswith("//")
        and "\\" not in value
        and value.isprintable()
        and not any(c.isspace() for c in value)
    ):
        return value
    return base + "/"


class _Handlers:
    def __init__(self, config: DashboardConfig, env: jinja2.Environment) -> None:
        self.config = config
        self.env = env

    # -- authentication ---------------------------------------------------------------

    def identify(self, request: Request) -> Identity | None:
        host = request.scope.get(HOST_IDENTITY)
        if isinstance(host, Identity):  # the mounting application's own login
            return host
        ring = self.config.ring
        identity = ring.bearer(request.headers.get("authorization"))
        if identity is not None:
            return identity
        cookie = request.cookies.get(COOKIE_NAME)
        return ring.session(cookie, self.config.clock.now()) if cookie else None

    def unauthorized(self, request: Request) -> Response:
        headers = {"WWW-Authenticate": 'Bearer realm="chongming-task dashboard"'}
        if _wants_json(request):
            return JSONResponse(
                {"error": "authentication required: Authorization: Bearer <token>"},
                status_code=401,
                headers=headers,
            )
        base = _base(request)
        target = _here(request) + (f"?{request.url.query}" if request.url.query else "")
        return self.render(
            request,
            "login.html",
            status=401,
            headers=headers,
            next=target,
            failed=False,
            base=base,
        )

    async def login_form(self, request: Request) -> Response:
        base = _base(request)
        return self.render(
            request,
            "login.html",
            next=request.query_params.get("next") or base + "/",
            failed=False,
        )

    async def login(self, request: Request) -> Response:
        form = await request.form()
        token = form.get("token")
        next_value = form.get("next")
        base = _base(request)
        now = self.config.clock.now()
        address = request.client.host if request.client else "-"
        wait = self.config.throttle.retry_after(address, now)
        if wait is not None:
            message = f"too many failed logins from {address}: try again in {wait} s"
            response = _error(request, 429, message, self.env)
            response.headers["Retry-After"] = str(wait)
            return response
        user = self.config.ring.user_of(token) if isinstance(token, str) and token else None
        if user is None:
            self.config.throttle.failed(address, now)
            return self.render(
                request,
                "login.html",
                status=401,
                next=next_value if isinstance(next_value, str) else base + "/",
                failed=True,
            )
        target = _safe_next(next_value if isinstance(next_value, str) else None, base)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE_NAME,
            self.config.ring.new_session(user, now),
            max_age=int(self.config.ring.session_ttl),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=base + "/",
        )
        return response

    @authenticated
    async def logout(self, request: Request) -> Response:
        identity: Identity = request.state.identity
        form = await request.form()
        sent = form.get(CSRF_FIELD)
        if not self.config.ring.csrf_ok(identity, sent if isinstance(sent, str) else None):
            return _error(request, 403, "missing or invalid CSRF token", self.env)
        cookie = request.cookies.get(COOKIE_NAME)
        if cookie:
            self.config.ring.revoke(cookie, self.config.clock.now())
        response = _see_other(request, "/login")
        response.delete_cookie(COOKIE_NAME, path=_base(request) + "/")
        return response

    # -- rendering ----------------------------------------------------------------------

    def render(
        self,
        request: Request,
        template: str,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        **context: Any,
    ) -> HTMLResponse:
        identity: Identity | None = getattr(request.state, "identity", None)
        context.setdefault("base", _base(request))
        context.setdefault("page", "")
        context.setdefault("events", identity is not None)
        context.setdefault("keeps_schedules", self.config.data.keeps_schedules)
        context.setdefault("now", self.config.clock.now())
        kept = [
            (key, value)
            for key, value in request.query_params.multi_items()
            if key not in _FLASH_KEYS and key != "partial"
        ]
        # The page's own URL, encoded from the raw id (never the decoded request path:
        # the page of task "job%41" must refresh from /tasks/job%2541, not task "jobA").
        here = context.pop("self_url", None) or _here(request)
        context.setdefault("live_url", f"{here}?{urlencode([*kept, ('partial', '1')])}")
        html = self.env.get_template(template).render(
            identity=identity,
            csrf=identity.csrf if identity is not None and identity.csrf else "",
            read_only=self.config.read_only,
            statuses=STATUSES,
            partial=request.query_params.get("partial") == "1",
            **context,
        )
        return HTMLResponse(html, status_code=status, headers=dict(headers or {}))

    async def not_found(self, request: Request, exc: Exception) -> Response:
        request.state.identity = self.identify(request)  # the navigation, if signed in
        return _error(request, 404, "not found", self.env)

    # -- live ---------------------------------------------------------------------------

    @authenticated
    async def events(self, request: Request) -> Response:
        try:
            max_events = optional_int(
                request.query_params.get("max_events"), "max_events", maximum=MAX_EVENTS
            )
        except ConfigurationError as exc:
            return _error(request, 400, str(exc), self.env)
        stream = self.config.live.stream(tick=self.config.tick, max_events=max_events)
        return StreamingResponse(
            stream,
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    # -- pages --------------------------------------------------------------------------

    async def _call(self, request: Request, fn: Callable[[], Response]) -> Response:
        try:
            return await run_in_threadpool(fn)
        except ConfigurationError as exc:
            return _error(request, 400, redact(str(exc)) or "bad request", self.env)
        except StoreError as exc:
            log.exception("dashboard store read failed")
            return _error(request, 503, f"the store failed: {redact(str(exc))}", self.env)

    @authenticated
    async def overview(self, request: Request) -> Response:
        def build() -> Response:
            overview = self.config.data.overview()
            pauses = paused_queues(self.config.store)
            return self.render(request, "overview.html", page="overview", o=overview, pauses=pauses)

        return await self._call(request, build)

    @authenticated
    async def api_overview(self, request: Request) -> Response:
        def build() -> Response:
            o = self.config.data.overview()
            health = o.schedules
            now = o.checked_at
            return JSONResponse(
                {
                    "counts": {s.value: n for s, n in o.counts.items()},
                    "total": o.total,
                    "unfinished": o.unfinished,
                    "queue_depth": o.queue_depth,
                    "oldest_queued": o.oldest_queued.task_id if o.oldest_queued else None,
                    "oldest_queued_age": o.oldest_queued_age,
                    "health": {
                        "status": o.health.status,
                        "healthy": o.health.healthy,
                        "problems": [redact(p) for p in o.health.problems],
                    },
                    "running": [task_doc(s, now, full=False) for s in o.running],
                    "stuck": [
                        {"task": task_doc(s.snapshot, now, full=False), "why": s.why}
                        for s in o.stuck
                    ],
                    "recent_failures": [task_doc(s, now, full=False) for s in o.recent_failures],
                    "schedules": _health_doc(health),
                    "workers": [_worker_doc(w) for w in o.workers],
                    "checked_at": o.checked_at.isoformat(),
                }
            )

        return await self._call(request, build)

    def _page(self, request: Request) -> Any:
        params = request.query_params
        filters = TaskFilters.parse(params, params.getlist("status"), now=self.config.clock.now())
        limit = optional_int(params.get("limit"), "limit", minimum=1, maximum=MAX_PAGE_SIZE)
        return self.config.data.tasks(
            filters, limit=limit or DEFAULT_PAGE_SIZE, cursor=params.get("cursor") or None
        )

    @authenticated
    async def tasks(self, request: Request) -> Response:
        def build() -> Response:
            page = self._page(request)
            query = dict(page.filters.params())
            if page.limit != DEFAULT_PAGE_SIZE:
                query["limit"] = str(page.limit)
            next_url = (
                "?" + urlencode({**query, "cursor": page.next_cursor}) if page.next_cursor else None
            )
            here = urlencode(
                {**query, **({"cursor": c} if (c := request.query_params.get("cursor")) else {})}
            )
            flipped = {k: v for k, v in page.filters.params().items() if k != "sort"}
            if not page.filters.oldest_first:
                flipped["sort"] = "oldest"
            return self.render(
                request,
                "tasks.html",
                page="tasks",
                p=page,
                f=page.filters,
                controls={s.task_id: controls_of(s) for s in page.tasks},
                next_url=next_url,
                flip_url="?" + urlencode(flipped),
                here=here,
                flash=_bulk_flash(request),
            )

        return await self._call(request, build)

    @authenticated
    async def api_tasks(self, request: Request) -> Response:
        def build() -> Response:
            page = self._page(request)
            return JSONResponse(
                {
                    "tasks": [task_doc(s, self.config.clock.now(), full=False) for s in page.tasks],
                    "next_cursor": page.next_cursor,
                    "position": page.position,
                    "total": page.total,
                    "limit": page.limit,
                    "filters": page.filters.params(),
                }
            )

        return await self._call(request, build)

    async def _on_task(
        self, request: Request, respond: Callable[[TaskSnapshot], Response]
    ) -> Response:
        """``respond(snapshot)`` for the task of the path, in the thread pool; 404 if none."""
        task_id = request.path_params["task_id"]

        def build() -> Response:
            snapshot = self.config.data.get(task_id)
            if snapshot is None:
                return _error(request, 404, f"no task {task_id!r} in the store", self.env)
            return respond(snapshot)

        return await self._call(request, build)

    def _timeline(self, snapshot: TaskSnapshot) -> list[tuple[Transition, float | None]]:
        history = self.config.data.history(snapshot.task_id)
        return self.config.data.time_in_states(snapshot, history)

    @authenticated
    async def task(self, request: Request) -> Response:
        def page(snapshot: TaskSnapshot) -> Response:
            return self.render(
                request,
                "task.html",
                page="tasks",
                self_url=task_url(_base(request), snapshot.task_id),
                t=snapshot,
                doc=task_doc(snapshot, self.config.clock.now()),
                attempts=by_attempt(self._timeline(snapshot)),
                controls=controls_of(snapshot),
                why=self.config.data.explain(snapshot),
                children=self.config.data.children(snapshot.task_id),
                flash=_task_flash(request),
            )

        return await self._on_task(request, page)

    @authenticated
    async def api_task(self, request: Request) -> Response:
        def document(snapshot: TaskSnapshot) -> Response:
            return JSONResponse(
                {
                    "task": task_doc(snapshot, self.config.clock.now()),
                    "history": [
                        {**transition_doc(t), "seconds_in_state": seconds}
                        for t, seconds in self._timeline(snapshot)
                    ],
                    "explain": self.config.data.explain(snapshot).to_dict(),
                    "children": [c.task_id for c in self.config.data.children(snapshot.task_id)],
                }
            )

        return await self._on_task(request, document)

    # -- task controls ----------------------------------------------------------------

    async def _action_reason(
        self, request: Request, actions: tuple[str, ...], what: str
    ) -> str | Response:
        """The typed reason of a POST to ``.../{action}``, or the error to answer with.

        404 for an action not in ``actions``, 400 for a missing or oversized reason.
        """
        action = request.path_params["action"]
        if action not in actions:
            return _error(request, 404, f"unknown {what} action {action!r}", self.env)
        try:
            return _reason(await _fields(request))
        except ConfigurationError as exc:
            return _error(request, 400, str(exc), self.env)

    def _control(self, task_id: str, action: str, actor: str, reason: str) -> dict[str, Any]:
        store = self.config.store
        snapshot = store.get(task_id)
        if snapshot is None:
            return {
                "task_id": task_id,
                "action": action,
                "result": "not_found",
                "accepted": False,
                "message": f"no task {task_id!r} in the store",
            }
        if action == "retry":
            return self._retry(snapshot, actor, reason)
        done = None
        if controls_of(snapshot)[action]:
            done = control_task(
                store, task_id, action, actor=actor, clock=self.config.clock, reason=reason
            )
        current = (done.snapshot if done else None) or snapshot
        if done is None or done.outcome in ("refused", "finished", "not_found"):
            return {
                "task_id": task_id,
                "action": action,
                "result": "refused",
                "accepted": False,
                "status": current.status.value,
                "message": f"cannot {action} a task that is {current.status.value}",
            }
        result = {"applied": "applied", "requested": "requested"}.get(done.outcome)
        return {
            "task_id": task_id,
            "action": action,
            "result": result or "not_accepted",
            "accepted": done.accepted,
            "confirmed": done.confirmed,
            "status": current.status.value,
            "actor": actor,
            "reason": redact_reason(reason),
            "message": APPLIED_MESSAGE[action]
            if result == "applied"
            else ACCEPTED_MESSAGE[action]
            if result
            else f"{action} was not accepted: the task's recorded holder is this dashboard",
        }

    def _retry(self, snapshot: TaskSnapshot, actor: str, reason: str) -> dict[str, Any]:
        """Run a finished task again (``Client.retry``): applied, or refused with why."""
        result: dict[str, Any] = {"task_id": snapshot.task_id, "action": "retry"}
        try:
            after = retry_task(
                self.config.store,
                snapshot.task_id,
                actor=actor,
                clock=self.config.clock,
                reason=reason,
            )
        except (ConfigurationError, ConcurrencyConflict) as exc:
            current = self.config.store.get(snapshot.task_id) or snapshot
            return {
                **result,
                "result": "refused",
                "accepted": False,
                "status": current.status.value,
                "message": str(exc),
            }
        return {
            **result,
            "result": "applied",
            "accepted": True,
            "confirmed": True,
            "status": after.status.value,
            "actor": actor,
            "reason": redact_reason(reason),
            "message": APPLIED_MESSAGE["retry"],
        }

    @state_changing
    async def task_action(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        action = request.path_params["action"]
        reason = await self._action_reason(request, TASK_ACTIONS, "task")
        if isinstance(reason, Response):
            return reason
        identity: Identity = request.state.identity

        def act() -> Response:
            result = self._control(task_id, action, identity.user, reason)
            code = {"not_found": 404, "refused": 409, "applied": 200}.get(result["result"], 202)
            if _wants_json(request):
                return JSONResponse(result, status_code=code)
            if code == 404:
                return _error(request, 404, result["message"], self.env)
            query = urlencode({"done": action, "result": result["result"]})
            return _see_other(request, f"{task_url('', task_id)}?{query}")

        return await self._call(request, act)

    def _delete(self, task_id: str) -> dict[str, Any]:
        """Delete a finished task with its history (what retention deletes)."""
        snapshot = self.config.store.get(task_id)
        if snapshot is None:
            return {"task_id": task_id, "action": "delete", "result": "not_found"}
        if not snapshot.is_terminal:
            return {
                "task_id": task_id,
                "action": "delete",
                "result": "refused",
                "status": snapshot.status.value,
                "message": f"cannot delete a task that is {snapshot.status.value}",
            }
        deleted = self.config.store.delete_tasks([task_id])
        return {"task_id": task_id, "action": "delete", "result": "applied" if deleted else "gone"}

    def _act(self, task_id: str, action: str, actor: str, reason: str) -> dict[str, Any]:
        """One task of a bulk request, through the one control path (or a delete)."""
        if action == "delete":
            return self._delete(task_id)
        return self._control(task_id, action, actor, reason)

    @state_changing
    async def bulk(self, request: Request) -> Response:
        """A bulk action on ticked tasks (``ids``), or with ``scope=filter`` on every task
        the filter matches: first a confirmation with the count, then one page of
        ``BULK_PAGE`` tasks per request (ordered by id, keyset ``after``; tasks created
        after the confirmation are left alone) with the running totals."""
        identity: Identity = request.state.identity
        try:
            fields = await _fields(request)
            reason = _reason(fields)
            action = fields.get("action")
            if action not in BULK_ACTIONS:
                raise ConfigurationError(f"action must be one of {', '.join(BULK_ACTIONS)}")
            scope = fields.get("scope") or "selection"
            if scope not in ("selection", "filter"):
                raise ConfigurationError("scope must be selection or filter")
            if scope == "filter":
                step = _FilterStep(fields, now=self.config.clock.now())
        except ConfigurationError as exc:
            return _error(request, 400, str(exc), self.env)
        if scope == "filter":
            return await self._bulk_filter(request, step, str(action), reason)
        ids = fields.get("ids") or []
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or not ids:
            return _error(request, 400, "select at least one task (ids)", self.env)
        if len(ids) > MAX_BULK:
            return _error(request, 400, f"at most {MAX_BULK} tasks per bulk request", self.env)

        def act() -> Response:
            results = [self._act(i, str(action), identity.user, reason) for i in ids]
            if _wants_json(request):
                return JSONResponse({"results": results}, status_code=202)
            applied = sum(1 for r in results if r["result"] == "applied")
            requested = sum(1 for r in results if r["result"] == "requested")
            refused = len(results) - applied - requested
            back = fields.get("back")
            query = urlencode(
                {"done": action, "applied": applied, "requested": requested, "refused": refused}
            )
            here = back if isinstance(back, str) and back and "\n" not in back else ""
            return _see_other(request, f"/tasks?{here}{'&' if here else ''}{query}")

        return await self._call(request, act)

    async def _bulk_filter(
        self, request: Request, step: _FilterStep, action: str, reason: str
    ) -> Response:
        identity: Identity = request.state.identity

        def act() -> Response:
            data = self.config.data
            if step.confirm is None:
                step.total = data.count(step.filters)
                step.eligible = data.count(step.eligible_filters(action))
                return self._bulk_answer(request, step, action, reason, stage="confirm")
            query = replace(
                step.filters.query(limit=BULK_PAGE, order="id", created_before=step.as_of),
                statuses=step.statuses(action),
                id_after=step.after,
            )
            heads = self.config.store.query_heads(query)
            for head in heads:
                outcome = self._act(head.task_id, action, identity.user, reason)["result"]
                step.add(outcome)
            step.after = heads[-1].task_id if heads else step.after
            done = len(heads) < BULK_PAGE
            return self._bulk_answer(
                request, step, action, reason, stage="done" if done else "running"
            )

        return await self._call(request, act)

    def _bulk_answer(
        self, request: Request, step: _FilterStep, action: str, reason: str, *, stage: str
    ) -> Response:
        doc = {"action": action, "scope": "filter", "stage": stage, **step.to_dict()}
        if _wants_json(request):
            return JSONResponse(doc, status_code=200 if stage == "confirm" else 202)
        return self.render(
            request,
            "bulk.html",
            page="tasks",
            action=action,
            reason=reason,
            stage=stage,
            step=step,
            fields=step.fields(),
            back="?" + urlencode(step.filters.params()),
            page_size=BULK_PAGE,
        )

    # -- schedules ----------------------------------------------------------------------

    @authenticated
    async def schedules(self, request: Request) -> Response:
        def build() -> Response:
            admin = self.config.data.admin()
            controls = admin.schedules()
            health = self.config.data.schedule_health()
            return self.render(
                request, "schedules.html", page="schedules", schedules=controls, health=health
            )

        return await self._call(request, build)

    async def _on_schedule(
        self,
        request: Request,
        respond: Callable[[ScheduleAdmin, ScheduleControl], Response],
        *,
        actor: str | None = None,
    ) -> Response:
        """``respond(admin, control)`` for the schedule of the path, in the thread pool;
        404 if none. ``actor``: whom the admin records as making its changes."""
        name = request.path_params["name"]

        def build() -> Response:
            admin = self.config.data.admin(actor)
            control = admin.find(name)
            if control is None:
                return _error(request, 404, f"no schedule named {name!r}", self.env)
            return respond(admin, control)

        return await self._call(request, build)

    @authenticated
    async def schedule(self, request: Request) -> Response:
        def page(admin: ScheduleAdmin, control: ScheduleControl) -> Response:
            return self.render(
                request,
                "schedule.html",
                page="schedules",
                self_url=schedule_url(_base(request), control.name),
                s=control,
                stats=admin.statistics(control.name),
                kwargs=redact_json(dict(control.kwargs)),
                flash=_schedule_flash(request),
            )

        return await self._on_schedule(request, page)

    @authenticated
    async def api_schedules(self, request: Request) -> Response:
        def build() -> Response:
            admin = self.config.data.admin()
            return JSONResponse(
                {
                    "schedules": [_schedule_doc(c) for c in admin.schedules()],
                    "health": _health_doc(self.config.data.schedule_health()),
                }
            )

        return await self._call(request, build)

    @authenticated
    async def api_schedule(self, request: Request) -> Response:
        def document(admin: ScheduleAdmin, control: ScheduleControl) -> Response:
            stats = admin.statistics(control.name)
            return JSONResponse(
                {"schedule": _schedule_doc(control), "statistics": _stats_doc(stats)}
            )

        return await self._on_schedule(request, document)

    @state_changing
    async def schedule_action(self, request: Request) -> Response:
        name = request.path_params["name"]
        action = request.path_params["action"]
        reason = await self._action_reason(request, SCHEDULE_ACTIONS, "schedule")
        if isinstance(reason, Response):
            return reason
        identity: Identity = request.state.identity

        def act(admin: ScheduleAdmin, _: ScheduleControl) -> Response:
            result: dict[str, Any] = {"schedule": name, "action": action, "actor": identity.user}
            if action == "pause":
                control = admin.pause(name, operator=identity.user, reason=reason)
                result["status"] = control.status
            elif action == "resume":
                control = admin.resume(name, operator=identity.user, reason=reason)
                result["status"] = control.status
            else:
                command = admin.request_run(name, operator=identity.user, reason=reason)
                result["command_id"] = command.command_id
            result["message"] = SCHEDULE_MESSAGE[action]
            if _wants_json(request):
                return JSONResponse(result, status_code=202)
            return _see_other(request, f"{schedule_url('', name)}?{urlencode({'done': action})}")

        return await self._on_schedule(request, act, actor=identity.user)

    @state_changing
    async def schedule_override(self, request: Request) -> Response:
        """Set or drop a pattern override, refused if based on a stale revision."""
        name = request.path_params["name"]
        identity: Identity = request.state.identity
        try:
            fields = await _fields(request)
            edit = _override_edit(fields)
        except ConfigurationError as exc:
            return _error(request, 400, str(exc), self.env)

        def act(admin: ScheduleAdmin, _: ScheduleControl) -> Response:
            action, pattern, timezone, revision = edit
            back = schedule_url("", name)
            try:
                if action == "reset":
                    control = admin.reset_pattern(
                        name, operator=identity.user, expect_definition_revision=revision
                    )
                else:
                    control = admin.set_pattern(
                        name,
                        pattern,
                        timezone=timezone,
                        operator=identity.user,
                        expect_definition_revision=revision,
                    )
            except StaleScheduleEdit as exc:
                if _wants_json(request):
                    return JSONResponse(
                        {
                            "error": redact(str(exc)),
                            "schedule": name,
                            "expected_revision": exc.expected,
                            "definition_revision": exc.actual,
                            "changed": False,
                        },
                        status_code=409,
                    )
                return _see_other(request, f"{back}?{urlencode({'done': 'stale'})}")
            done = "reset" if action == "reset" else "override"
            if _wants_json(request):
                return JSONResponse(
                    {
                        "schedule": name,
                        "action": action,
                        "actor": identity.user,
                        "changed": True,
                        "pattern": control.pattern,
                        "timezone": control.timezone,
                        "overridden": control.overridden,
                        "definition_revision": control.definition_revision,
                        "next_run_at": _dt(control.next_run_at),
                        "message": SCHEDULE_MESSAGE[done],
                    }
                )
            return _see_other(request, f"{back}?{urlencode({'done': done})}")

        return await self._on_schedule(request, act, actor=identity.user)

    # -- workers and buckets ------------------------------------------------------------

    @authenticated
    async def workers(self, request: Request) -> Response:
        def build() -> Response:
            data = self.config.data
            workers = data.workers()
            return self.render(
                request,
                "workers.html",
                page="workers",
                workers=workers,
                registry=any(w.source == "registry" for w in workers),
                limits=fleet_view(self.config.store),
            )

        return await self._call(request, build)

    async def _on_worker(
        self,
        request: Request,
        respond: Callable[[WorkerInfo, list[TaskSnapshot]], Response],
    ) -> Response:
        worker_id = request.path_params["worker_id"]

        def build() -> Response:
            found = self.config.data.worker(worker_id)
            if found is None:
                return _error(request, 404, f"no worker {worker_id!r} is known", self.env)
            return respond(*found)

        return await self._call(request, build)

    @authenticated
    async def worker(self, request: Request) -> Response:
        def page(worker: WorkerInfo, tasks: list[TaskSnapshot]) -> Response:
            return self.render(
                request,
                "worker.html",
                page="workers",
                self_url=worker_url(_base(request), worker.name),
                w=worker,
                tasks=tasks,
                now=self.config.clock.now(),
            )

        return await self._on_worker(request, page)

    @authenticated
    async def api_worker(self, request: Request) -> Response:
        def document(worker: WorkerInfo, tasks: list[TaskSnapshot]) -> Response:
            now = self.config.clock.now()
            return JSONResponse(
                {"worker": _worker_doc(worker), "tasks": [task_doc(s, now=now) for s in tasks]}
            )

        return await self._on_worker(request, document)

    @authenticated
    async def api_limits(self, request: Request) -> Response:
        def build() -> Response:
            return JSONResponse(
                {
                    "limits": [
                        {**limit.to_dict(), "in_use": [_limit_use_doc(u) for u in uses]}
                        for limit, uses in fleet_view(self.config.store)
                    ]
                }
            )

        return await self._call(request, build)

    @authenticated
    async def api_queues(self, request: Request) -> Response:
        def build() -> Response:
            pauses = paused_queues(self.config.store)
            return JSONResponse({"paused": [pause.to_dict() for pause in pauses]})

        return await self._call(request, build)

    @state_changing
    async def queue_action(self, request: Request) -> Response:
        """Pause or resume intake of a queue (docs/queue.md, "Pause intake")."""
        action = request.path_params["action"]
        if action not in QUEUE_ACTIONS:
            return _error(request, 404, f"unknown queue action {action!r}", self.env)
        identity: Identity = request.state.identity
        try:
            wanted = QueueRequest(action, await _fields(request))
        except ConfigurationError as exc:
            return _error(request, 400, str(exc), self.env)

        def act() -> Response:
            status, result = wanted.apply(self.config.store, identity.user, self.config.clock.now())
            if status != 200:
                return _error(request, status, result["error"], self.env)
            if _wants_json(request):
                return JSONResponse(result)
            return _see_other(request, "/")

        return await self._call(request, act)

    @authenticated
    async def failures(self, request: Request) -> Response:
        def build() -> Response:
            groups, read = self.config.data.failures()
            return self.render(
                request,
                "failures.html",
                page="failures",
                groups=groups,
                read=read,
                window=FAILURE_WINDOW,
                flash=_bulk_flash(request),
            )

        return await self._call(request, build)

    @authenticated
    async def api_failures(self, request: Request) -> Response:
        def build() -> Response:
            groups, read = self.config.data.failures()
            return JSONResponse(
                {
                    "groups": [g.to_dict() for g in groups],
                    "read": read,
                    "window": FAILURE_WINDOW,
                }
            )

        return await self._call(request, build)

    @state_changing
    async def retry_failures(self, request: Request) -> Response:
        """Retry every task of one failure group (``group``: its key), each through
        ``retry_task``; the group is read again, so what it holds now is retried."""
        identity: Identity = request.state.identity
        try:
            fields = await _fields(request)
            reason = _reason(fields)
            key = fields.get("group")
            if not isinstance(key, str) or not key:
                raise ConfigurationError("group is required: the key of a failure group")
        except ConfigurationError as exc:
            return _error(request, 400, str(exc), self.env)

        def act() -> Response:
            groups, _ = self.config.data.failures()
            group = next((g for g in groups if g.key == key), None)
            if group is None:
                return _error(
                    request, 404, f"no failure group {key!r} (retried already?)", self.env
                )
            results = [self._act(i, "retry", identity.user, reason) for i in group.task_ids]
            applied = sum(1 for r in results if r["result"] == "applied")
            if _wants_json(request):
                return JSONResponse(
                    {"group": group.to_dict(), "retried": applied, "results": results},
                    status_code=202,
                )
            query = {"done": "retry", "applied": applied, "refused": len(results) - applied}
            return _see_other(request, f"/failures?{urlencode(query)}")

        return await self._call(request, act)

    @authenticated
    async def buckets(self, request: Request) -> Response:
        def build() -> Response:
            return self.render(
                request, "buckets.html", page="buckets", buckets=self.config.data.buckets()
            )

        return await self._call(request, build)

    @authenticated
    async def api_workers(self, request: Request) -> Response:
        def build() -> Response:
            data = self.config.data
            workers = data.workers()
            registry = data.worker_source is not None or any(
                w.source == "registry" for w in workers
            )
            return JSONResponse(
                {
                    "source": "registry" if registry else "leases",
                    "workers": [_worker_doc(w) for w in workers],
                }
            )

        return await self._call(request, build)

    # -- pipelines ----------------------------------------------------------------------

    async def _on_pipeline(
        self, request: Request, respond: Callable[[PipelineGraph], Response]
    ) -> Response:
        """``respond(graph)`` for the pipeline run of the path, in the thread pool; 404
        if no node of it is stored."""
        run_id = request.path_params["run_id"]

        def build() -> Response:
            graph = pipeline_graph(self.config.store, run_id)
            if graph is None:
                return _error(request, 404, f"no pipeline run {run_id!r} in the store", self.env)
            return respond(graph)

        return await self._call(request, build)

    @authenticated
    async def pipeline(self, request: Request) -> Response:
        def page(graph: PipelineGraph) -> Response:
            return self.render(
                request,
                "pipeline.html",
                page="tasks",
                self_url=pipeline_url(_base(request), graph.run_id),
                g=graph,
            )

        return await self._on_pipeline(request, page)

    @authenticated
    async def api_pipeline(self, request: Request) -> Response:
        return await self._on_pipeline(request, lambda graph: JSONResponse(graph.to_dict()))

    @authenticated
    async def api_buckets(self, request: Request) -> Response:
        def build() -> Response:
            return JSONResponse({"buckets": self.config.data.buckets()})

        return await self._call(request, build)

    # -- charts ---------------------------------------------------------------------------

    @authenticated
    async def charts(self, request: Request) -> Response:
        def build() -> Response:
            window = chart_range(request.query_params.get("range"))
            activity = window.activity(self.config.store, self.config.clock.now())
            return self.render(
                request,
                "charts.html",
                page="charts",
                a=activity,
                range=window,
                ranges=RANGES,
                series=SERIES,
                totals=activity.totals(),
                sample_limit=DURATION_SAMPLE,
                bars={name: bar_svg(activity, name, label=name.capitalize()) for name in SERIES},
                durations_svg=duration_svg(activity.durations),
                queued_svg=queued_svg(activity.queued),
                seconds=seconds_text,
            )

        return await self._call(request, build)

    @authenticated
    async def api_charts(self, request: Request) -> Response:
        def build() -> Response:
            window = chart_range(request.query_params.get("range"))
            activity = window.activity(self.config.store, self.config.clock.now())
            return JSONResponse({"range": window.key, **activity.to_dict()})

        return await self._call(request, build)


class _FilterStep:
    """One request of a filter-wide bulk action: the filter (``filter``: the ``/tasks``
    query string, or an object of its parameters in JSON), the instant it was confirmed
    at (``as_of``: later tasks are left alone), the count confirmed (``confirm``), the
    last id done (``after``) and the running totals."""

    _TOTALS = ("processed", "applied", "requested", "refused")

    def __init__(self, fields: Mapping[str, Any], *, now: datetime) -> None:
        raw = fields.get("filter", fields.get("back", ""))
        if isinstance(raw, str):
            pairs = [(k, v) for k, v in parse_qsl(raw.lstrip("?")) if k != "cursor"]
        elif isinstance(raw, dict) and all(isinstance(v, str) for v in raw.values()):
            pairs = list(raw.items())
        else:
            raise ConfigurationError("filter must be the /tasks query string or an object of it")
        params = dict(checked_input(dict(pairs)))
        statuses = [v for k, v in pairs if k == "status"]
        self.filters = TaskFilters.parse(params, statuses, now=now)
        as_of = fields.get("as_of")
        # Created before the next microsecond: every task there was at the confirmation.
        self.as_of = (
            parse_instant(as_of, now=now, name="as_of")
            if isinstance(as_of, str) and as_of
            else now + timedelta(microseconds=1)
        )
        self.confirm = optional_int(_text(fields, "confirm"), "confirm", maximum=_MAX_TOTAL)
        after = fields.get("after")
        self.after: str | None = after if isinstance(after, str) and after else None
        self.totals = {
            key: optional_int(_text(fields, key), key, maximum=_MAX_TOTAL) or 0
            for key in self._TOTALS
        }
        self.total = self.eligible = self.confirm or 0

    def statuses(self, action: str) -> frozenset[TaskStatus]:
        """The filter's statuses that ``action`` can act on."""
        allowed = BULK_STATUSES[action]
        return allowed if self.filters.statuses is None else allowed & self.filters.statuses

    def eligible_filters(self, action: str) -> TaskFilters:
        return replace(self.filters, statuses=self.statuses(action))

    def add(self, result: str) -> None:
        self.totals["processed"] += 1
        kind = result if result in ("applied", "requested") else "refused"
        self.totals[kind] += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "filter": self.filters.params(),
            "as_of": self.as_of.isoformat(),
            "matched": self.total,
            "eligible": self.eligible,
            "confirm": self.confirm if self.confirm is not None else self.eligible,
            "after": self.after,
            **self.totals,
        }

    def fields(self) -> list[tuple[str, str]]:
        """The hidden fields of the next request (the confirmation or the next page)."""
        out = [
            ("scope", "filter"),
            ("filter", urlencode(self.filters.params())),
            ("as_of", self.as_of.isoformat()),
            ("confirm", str(self.confirm if self.confirm is not None else self.eligible)),
        ]
        if self.after is not None:
            out.append(("after", self.after))
        return out + [(key, str(value)) for key, value in self.totals.items()]


def _text(fields: Mapping[str, Any], key: str) -> str | None:
    value = fields.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) else None


# ---------------------------------------------------------------- flash messages
# Built from whitelisted codes in the query string, never from free text: a crafted
# link cannot make the dashboard say something it did not.


def _task_flash(request: Request) -> str | None:
    action = request.query_params.get("done")
    result = request.query_params.get("result")
    if action not in TASK_ACTIONS:
        return None
    if result == "applied":
        return APPLIED_MESSAGE[action]
    if result == "requested":
        return ACCEPTED_MESSAGE[action]
    if result == "refused":
        return f"{action} refused: the task is no longer in a state that allows it"
    if result == "not_accepted":
        return f"{action} was not accepted"
    return None


def _bulk_flash(request: Request) -> str | None:
    action = request.query_params.get("done")
    if action not in BULK_ACTIONS:
        return None
    params = request.query_params
    applied, requested, refused = (
        int_param(params.get(key, "0"), key, maximum=_MAX_TOTAL)
        for key in ("applied", "requested", "refused")
    )
    if action == "delete":
        text = f"deleted {applied} finished task(s) with their history"
        return text + (f"; {refused} refused (not finished)" if refused else "")
    if action == "retry":
        text = f"retried {applied} task(s): queued again for any worker"
        if refused:
            text += f"; {refused} refused (not finished, not a failure, or no stored recipe)"
        return text + "; the table shows the real states"
    parts = [f"{action} applied to {applied} task(s) no worker had taken"] if applied else []
    if requested or not applied:
        parts.append(f"{action} requested for {requested} task(s)")
    if refused:
        parts.append(f"{refused} refused (not in a state that allows it)")
    text = "; ".join(parts)
    if requested:
        text += " — requests are not confirmed across processes"
    return text + "; the table shows the real states"


def _schedule_flash(request: Request) -> str | None:
    action = request.query_params.get("done")
    return SCHEDULE_MESSAGE.get(action) if action else None


# ---------------------------------------------------------------- JSON documents


def _dt(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _schedule_doc(control: Any) -> dict[str, Any]:
    return {
        "name": control.name,
        "task": control.task,
        "pattern": control.pattern,
        "default_pattern": control.default_pattern,
        "timezone": control.timezone,
        "overridden": control.overridden,
        "status": control.status,
        "status_reason": redact(control.status_reason),
        "overlap": control.overlap,
        "misfire": control.misfire,
        "manual_run_enabled": control.manual_run_enabled,
        "revision": control.revision,
        "definition_revision": control.definition_revision,
        "updated_by": control.updated_by,
        "updated_at": _dt(control.updated_at),
        "runs": control.runs,
        "errors": control.errors,
        "skips": control.skips,
        "consecutive_failures": control.consecutive_failures,
        "last_run_at": _dt(control.last_run_at),
        "last_status": control.last_status,
        "last_error": redact(control.last_error),
        "next_run_at": _dt(control.next_run_at),
        "tags": list(control.tags),
        "kwargs": redact_json(dict(control.kwargs)),
    }


def _stats_doc(stats: ScheduleStatistics) -> dict[str, Any]:
    return {
        **stats.counts(),
        "last_run_at": _dt(stats.last_run_at),
        "next_run_at": _dt(stats.next_run_at),
        "recent": [
            {
                "task_id": r.task_id,
                "status": r.status.value,
                "trigger_type": r.trigger_type,
                "scheduled_at": _dt(r.scheduled_at),
                "duration": r.duration,
                "error": redact(r.error),
            }
            for r in stats.recent
        ],
    }


def _health_doc(health: Any) -> dict[str, Any] | None:
    if health is None:
        return None
    return {
        "status": health.status,
        "schedules": health.schedules,
        "active": health.active,
        "paused": health.paused,
        "running": health.running,
        "failing": list(health.failing),
        "overdue": list(health.overdue),
        "next_due": _dt(health.next_due),
        "next_due_schedule": health.next_due_schedule,
        "problems": [redact(p) for p in health.problems],
    }


def _limit_use_doc(use: LimitUse) -> dict[str, Any]:
    return {
        "key": use.key,
        "holders": [{"task_id": h.task_id, "owner": h.owner} for h in use.holders],
        "starts": len(use.starts),
        "opens_at": None if use.opens_at is None else use.opens_at.isoformat(),
    }


def _worker_doc(worker: WorkerInfo) -> dict[str, Any]:
    return {
        "name": worker.name,
        "tasks": worker.tasks,
        "live_leases": worker.live_leases,
        "latest_lease": _dt(worker.latest_lease),
        "buckets": None if worker.buckets is None else list(worker.buckets),
        "up": worker.up,
        "source": worker.source,
        "state": worker.state,
        "kind": worker.kind,
        "host": worker.host,
        "pid": worker.pid,
        "version": worker.version,
        "slots": worker.slots,
        "started_at": _dt(worker.started_at),
        "heartbeat_at": _dt(worker.heartbeat_at),
        "heartbeat_age": worker.heartbeat_age,
    }
