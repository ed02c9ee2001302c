"""The dashboard's ASGI app served from a Django view: one event loop thread per process.

Django calls views from WSGI threads (or, under ASGI, from its thread for sync
views); the dashboard is a Starlette app whose live view keeps state on the loop it
runs on. So the app runs on one loop in a thread of its own, for the life of the
process, and each request crosses to it: :meth:`Bridge.respond` submits the ASGI call
there and reads the response messages from a queue. A complete body becomes an
``HttpResponse``; a body that keeps coming (the ``/events`` stream of Server-Sent
Events) becomes a ``StreamingHttpResponse`` that reads the queue as the browser reads
(an async iterator under ASGI, so the server never buffers the endless stream), and
closing it (the browser left) cancels the call on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
from collections.abc import AsyncIterator, Iterator, MutableMapping
from typing import Any, Final
from urllib.parse import quote

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase

from chongming_task._service import FINISHED, BackgroundService, StepResult
from chongming_task.core import SystemClock
from chongming_task.web import HOST_IDENTITY, Identity

__all__ = ["Bridge"]

log = logging.getLogger("chongming_task.contrib.django")

Message = MutableMapping[str, Any]

#: Request headers the dashboard never sees: Django's session cookie and credentials
#: belong to Django, which already decided who asks.
_PRIVATE_HEADERS: Final = frozenset({"cookie", "authorization"})
#: Response headers Django sets itself (or that a proxied cookie would misuse).
_DROPPED_HEADERS: Final = frozenset({"set-cookie", "content-length", "transfer-encoding"})


class _Body:
    """The body of a streamed response, read from the queue the app sends to."""

    def __init__(
        self,
        first: list[bytes],
        messages: queue.Queue[Message | None],
        call: concurrent.futures.Future[None],
    ) -> None:
        self._first = first
        self._messages = messages
        self._call = call

    def _next(self) -> bytes | None:
        """The next chunk (blocking), or ``None`` at the end of the body."""
        message = self._messages.get()
        if message is None or message.get("type") != "http.response.body":
            return None
        body: bytes = message.get("body", b"")
        if not message.get("more_body", False):
            self._messages.put(None)  # the next read ends the body
        return body

    def close(self) -> None:
        """The client left (or the body ended): end the call on the loop."""
        self._call.cancel()


class _SyncBody(_Body):
    def __iter__(self) -> Iterator[bytes]:
        yield from self._first
        while (chunk := self._next()) is not None:
            yield chunk


class _AsyncBody(_Body):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._first:
            yield chunk
        while (more := await asyncio.to_thread(self._next)) is not None:
            yield more


class Bridge:
    """``app`` on an event loop thread of its own; :meth:`respond` serves one request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._loop = asyncio.new_event_loop()
        self._service = BackgroundService("chongming-dashboard", self._serve, clock=SystemClock())
        self._service.start()

    def _serve(self) -> StepResult:
        """The bridge's thread: its event loop, for the life of the process."""
        self._loop.run_forever()
        return FINISHED

    def respond(self, request: HttpRequest, path: str, identity: Identity) -> HttpResponseBase:
        """The app's response to ``request`` for its page ``path`` (after the mount)."""
        messages: queue.Queue[Message | None] = queue.Queue()
        call = asyncio.run_coroutine_threadsafe(
            self._call(_scope(request, path, identity), request.body, messages), self._loop
        )
        start = messages.get()
        if start is None or start.get("type") != "http.response.start":
            call.result()  # the app's error, raised for Django to report
            return HttpResponse("the dashboard sent no response", status=502)
        chunks: list[bytes] = []
        while (message := messages.get()) is not None:
            if message.get("type") != "http.response.body":
                continue
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return self._streaming(start, chunks, messages, call, request)
            break
        response = HttpResponse(b"".join(chunks), status=start["status"])
        _copy_headers(start, response)
        return response

    def _streaming(
        self,
        start: Message,
        chunks: list[bytes],
        messages: queue.Queue[Message | None],
        call: concurrent.futures.Future[None],
        request: HttpRequest,
    ) -> StreamingHttpResponse:
        kind = _AsyncBody if isinstance(request, ASGIRequest) else _SyncBody
        response = StreamingHttpResponse(kind(chunks, messages, call), status=start["status"])
        _copy_headers(start, response)
        return response

    async def _call(
        self, scope: dict[str, Any], body: bytes, messages: queue.Queue[Message | None]
    ) -> None:
        received = False

        async def receive() -> Message:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # until the call is cancelled (the client left)
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            messages.put(message)

        try:
            await self.app(scope, receive, send)
        except Exception:
            log.exception("the dashboard failed on %s", scope["path"])
            raise
        finally:
            messages.put(None)

    def close(self) -> None:
        """Cancel what runs on the loop (open event streams), stop it and close it."""
        if self._loop.is_closed():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._service.alive:
            asyncio.run_coroutine_threadsafe(cancel_all(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._service.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()


def _latin1(text: str) -> bytes:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def _scope(request: HttpRequest, path: str, identity: Identity) -> dict[str, Any]:
    """The ASGI scope of ``request`` for the app mounted where ``path`` starts."""
    full = request.path
    root = (full[: len(full) - len(path)] if path and full.endswith(path) else full).rstrip("/")
    here = f"{root}/{path}"
    headers = [
        (name.lower().encode("latin-1"), _latin1(value))
        for name, value in request.headers.items()
        if name.lower() not in _PRIVATE_HEADERS
    ]
    port = str(request.META.get("SERVER_PORT") or "80")
    server = (
        str(request.META.get("SERVER_NAME") or "localhost"),
        int(port) if port.isdigit() else 80,
    )
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method or "GET",
        "scheme": request.scheme or "http",
        "root_path": root,
        "path": here,
        "raw_path": quote(here).encode("ascii"),
        "query_string": _latin1(str(request.META.get("QUERY_STRING", ""))),
        "headers": headers,
        "client": (str(request.META.get("REMOTE_ADDR") or ""), 0),
        "server": server,
        "state": {},
        HOST_IDENTITY: identity,
    }


def _copy_headers(start: Message, response: HttpResponseBase) -> None:
    seen: dict[str, str] = {}
    for raw_name, raw_value in start.get("headers", []):
        name = bytes(raw_name).decode("latin-1").lower()
        if name in _DROPPED_HEADERS:
            continue
        value = bytes(raw_value).decode("latin-1")
        seen[name] = f"{seen[name]}, {value}" if name in seen else value
    for name, value in seen.items():
        response[name] = value
